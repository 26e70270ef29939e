//! The commands the canvas calls. Each one translates between IPC and Weft's application layer
//! (`weft-api`): take the arguments, call it, hand back its answer. Nothing here decides how a
//! flow runs or what a person may do to a run: the `weft` command, `weft serve` and the app
//! call the same actions and get the same refusals.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tauri::ipc::Channel;
use tauri::{Manager, State};
use weft_api::versions::{flow_named, record_written};
use weft_api::views::{PendingApproval, RunComparison, RunDetail, RunListing, RunVisits};
use weft_api::{Cancelled, ResumeOptions, RunFrom, StartRequest};
use weft_engine::Continue;
use weft_engine::breakpoints::Breakpoint;
use weft_engine::pins::{Pins, load_pins, pins_path, write_pins};
use weft_event::{EventListener, EventType, RunEvent};
use weft_flow::Flow;
use weft_history::flow_diff::{FlowDiff, diff_flows};
use weft_history::versions::{FileVersions, file_versions};
use weft_nodes::{
    Decision, FieldDescription, KindDescription, Problem, all_kinds, check_for_run, common_fields,
};
use weft_providers::{ConnectionReport, ProviderKind};
use weft_store::VersionUseKind;
use weft_template::SCOPE_NAMES;
use weft_testing::{self as testing, CaseReport, CaseSpec, RecordMode, SuiteReport, TestOptions};

use crate::AppState;
use crate::error::{AppError, ErrorCode};
use crate::settings::{RecentFiles, Setting, provider_settings_of};

/// Everything the canvas draws nodes and inspectors from.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct KindCatalog {
    pub kinds: Vec<KindDescription>,
    /// Fields every kind has (label, description, timeout, retry).
    pub common_fields: Vec<FieldDescription>,
    /// Names every template may use (`PREVIOUS_OUTPUT`, `input`, ...); `nodes.<id>` of each
    /// node and `vars.<name>` of the flow's variables come on top.
    pub template_names: Vec<String>,
}

/// The node kinds as the engine describes them.
#[tauri::command]
#[specta::specta]
pub fn describe_kinds() -> KindCatalog {
    KindCatalog {
        kinds: all_kinds(),
        common_fields: common_fields().to_vec(),
        template_names: SCOPE_NAMES.iter().map(|name| name.to_string()).collect(),
    }
}

/// A flow file as opened: its absolute path and its content in the normalized form.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct OpenedFlow {
    pub path: String,
    pub flow: Flow,
}

/// Opens a flow file (Weft's form, AgentFlow files and the legacy forms) and remembers it
/// among the recent files.
#[tauri::command]
#[specta::specta]
pub async fn open_flow(state: State<'_, AppState>, path: String) -> Result<OpenedFlow, AppError> {
    let path = absolute(&path)?;
    let flow = Flow::load(&path)?;
    let path = path.display().to_string();
    remember(&state, &path)?;
    Ok(OpenedFlow { path, flow })
}

/// Saves `flow` in the normalized form (stable key order, integer positions) and remembers
/// the file among the recent files. Returns the absolute path written.
#[tauri::command]
#[specta::specta]
pub async fn save_flow(
    state: State<'_, AppState>,
    path: String,
    flow: Flow,
) -> Result<String, AppError> {
    state.save_flow_file(&path, &flow).await
}

impl AppState {
    /// What Save does: writes `flow` to `path` in canonical form, remembers the file among the
    /// recent ones and keeps the version saved, with who saved it. Returns the absolute path.
    pub async fn save_flow_file(&self, path: &str, flow: &Flow) -> Result<String, AppError> {
        let path = absolute(path)?;
        if let Some(dir) = path.parent()
            && !dir.is_dir()
        {
            return Err(AppError::new(
                ErrorCode::FlowFile,
                format!("cannot save {}: the folder does not exist", path.display()),
            ));
        }
        flow.save(&path).map_err(|e| {
            AppError::new(
                ErrorCode::FlowFile,
                format!("cannot save {}: {e}", path.display()),
            )
        })?;
        let path = path.display().to_string();
        remember(self, &path)?;
        record_saved_version(self, &path, flow).await;
        Ok(path)
    }
}

/// Keeps the version just saved in the run store, with who saved it (`weft versions` and
/// History → Versions list it). The file is saved whatever the store says: a store that cannot
/// take it now is logged, and the next run of the file keeps the version anyway.
async fn record_saved_version(state: &AppState, path: &str, flow: &Flow) {
    let (weft, written, flow, by) = (
        state.weft(),
        PathBuf::from(path),
        flow.clone(),
        state.user_name(),
    );
    let kept = blocking(move || {
        record_written(weft.store(), &written, &flow, VersionUseKind::Save, by)
            .map_err(|error| AppError::new(ErrorCode::Store, error.to_string()))
    })
    .await;
    if let Err(error) = kept {
        tracing::warn!(
            "the saved version of {path} was not kept: {}",
            error.message
        );
    }
}

/// The versions of the flow file at `path` kept in the run store, newest first.
#[tauri::command]
#[specta::specta]
pub async fn flow_versions(
    state: State<'_, AppState>,
    path: String,
) -> Result<FileVersions, AppError> {
    let weft = state.weft();
    let path = absolute(&path)?;
    blocking(move || Ok(file_versions(weft.store(), &path).map_err(weft_api::Error::from)?)).await
}

/// Another version of the open flow, and what changed from it to the open flow.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct FlowComparison {
    /// The other version.
    pub against: Flow,
    /// Which it is: "flow version 3f2a9c1d0b4e", "the flow of run …", a file's path.
    pub label: String,
    /// From `against` (a) to the open flow (b).
    pub diff: FlowDiff,
}

/// The open `flow` compared with `against`: a kept version's hash (or a unique prefix), a run's
/// id (the flow it ran) or a flow file (relative to the open flow's folder).
#[tauri::command]
#[specta::specta]
pub async fn compare_flow(
    state: State<'_, AppState>,
    flow: Flow,
    path: Option<String>,
    against: String,
) -> Result<FlowComparison, AppError> {
    let weft = state.weft();
    let folder = path
        .map(|path| absolute(&path))
        .transpose()?
        .and_then(|path| path.parent().map(std::path::Path::to_path_buf));
    blocking(move || {
        let (other, label) = flow_named(weft.store(), &against, folder.as_deref())?;
        let diff = diff_flows(&other, &flow);
        Ok(FlowComparison {
            against: other,
            label,
            diff,
        })
    })
    .await
}

/// What changed from flow `a` to flow `b`: the canvas's comparison asked again after an edit,
/// with the other version it already has (nothing is read again).
#[tauri::command]
#[specta::specta]
pub fn flow_diff(a: Flow, b: Flow) -> FlowDiff {
    diff_flows(&a, &b)
}

/// The flow file named on the command line (`weft-app FLOW`), for the canvas to open first.
#[tauri::command]
#[specta::specta]
pub fn startup_file(state: State<'_, AppState>) -> Option<String> {
    state.startup_file.clone()
}

/// Sends the paths of files dropped on the window over `drops` from now on, for the canvas to
/// open a dropped flow.
#[tauri::command]
#[specta::specta]
pub fn watch_file_drops(state: State<'_, AppState>, drops: Channel<Vec<String>>) {
    state.watch_file_drops(drops);
}

/// Recently opened or saved flow files, newest first.
#[tauri::command]
#[specta::specta]
pub fn recent_files(state: State<'_, AppState>) -> Vec<String> {
    RecentFiles::load(&state.paths.recent_file()).paths
}

fn remember(state: &AppState, path: &str) -> Result<(), AppError> {
    let file = state.paths.recent_file();
    let mut recent = RecentFiles::load(&file);
    recent.touch(path);
    recent.save(&file)
}

fn absolute(path: &str) -> Result<PathBuf, AppError> {
    let trimmed = path.trim();
    if trimmed.is_empty() {
        return Err(AppError::new(ErrorCode::FlowFile, "no file name was given"));
    }
    std::path::absolute(trimmed)
        .map_err(|e| AppError::new(ErrorCode::FlowFile, format!("bad file name {trimmed}: {e}")))
}

/// Every problem of `flow` (the engine's validator), plus warnings about providers the flow
/// uses that the settings leave unconfigured. `path` locates the files `subflow` and `forEach`
/// nodes refer to. Async, like the file commands, so a large flow is never checked on the
/// window's thread.
#[tauri::command]
#[specta::specta]
pub async fn validate_flow(
    state: State<'_, AppState>,
    flow: Flow,
    path: Option<String>,
) -> Result<Vec<Problem>, AppError> {
    let weft = state.weft();
    let flow = state.with_app_servers(flow);
    blocking(move || {
        let path = path.map(PathBuf::from);
        Ok(weft.engine().check(&flow, path.as_deref()))
    })
    .await
}

/// The next `count` occurrences of each of `flow`'s schedules (`settings.schedules`), for the
/// start node; none while they do not parse (the problems say why).
#[tauri::command]
#[specta::specta]
pub fn upcoming_schedules(flow: Flow, count: u32) -> Vec<weft_api::schedules::Upcoming> {
    weft_api::schedules::upcoming_of(
        &flow.name,
        &flow,
        chrono::Utc::now(),
        count.clamp(1, 20) as usize,
    )
}

/// What to run.
#[derive(Debug, Clone, Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RunRequest {
    pub flow: Flow,
    /// The flow's file, for history and to find the files it refers to.
    pub path: Option<String>,
    /// The run's input; empty means the start node's `initialInput`.
    pub input: Option<String>,
    /// Re-run part of the flow with what an earlier run left ("run from here", "run this
    /// node"); `None` runs the whole flow.
    #[serde(default)]
    pub from: Option<RunFrom>,
    /// Replay this earlier run: identical LLM requests get its recorded answers with no
    /// provider call; what differs, and what follows it, goes live.
    #[serde(default)]
    pub replay: Option<String>,
    /// Where the run stops for the person (debugging state, never in the flow file).
    #[serde(default)]
    pub breakpoints: Vec<Breakpoint>,
    /// Outputs that stand for their nodes, which then do not run.
    #[serde(default)]
    pub pins: Pins,
}

/// Starts a flow and returns its run id at once. Its events arrive on `events` as they happen:
/// the first is `run_start`; the run ends with `run_end`, or pauses at a `wait_input`.
#[tauri::command]
#[specta::specta]
pub async fn start_run(
    app: tauri::AppHandle,
    state: State<'_, AppState>,
    request: RunRequest,
    events: Channel<RunEvent>,
) -> Result<String, AppError> {
    let request_flow = state.with_app_servers(request.flow);
    let start = StartRequest {
        input: request.input.filter(|input| !input.trim().is_empty()),
        flow_path: request.path.map(PathBuf::from),
        on_event: Some(forward(events, app)),
        from: request.from,
        replay: request.replay,
        breakpoints: request.breakpoints,
        pins: request.pins,
        trigger: Some(
            weft_store::Trigger::of(weft_store::TriggerKind::Manual).by(state.user_name()),
        ),
        ..StartRequest::default()
    };
    Ok(state.weft().start(request_flow, start).await?.run_id)
}

/// Decides the approval a paused run waits at (paused in this session or an earlier one, by
/// `weft` or a server) as the person named in Settings, and returns once the run is claimed;
/// its events continue on `events`. Refused, the run left as it was, as everywhere else: a run
/// not waiting for a decision, an answer that does not fit the form.
#[tauri::command]
#[specta::specta]
pub async fn resume_run(
    app: tauri::AppHandle,
    state: State<'_, AppState>,
    run_id: String,
    decision: Decision,
    events: Channel<RunEvent>,
) -> Result<DecisionAnswer, AppError> {
    state
        .decide(&run_id, decision, Some(forward(events, app)))
        .await
}

/// What a decision did: the run goes on, or (`approval` set) the decision was counted at an
/// approval that needs more people, and the run still waits.
#[derive(Debug, Clone, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct DecisionAnswer {
    pub run_id: String,
    pub approval: Option<weft_api::ApprovalProgress>,
}

/// Goes on from the breakpoint a paused run stopped at (stepping, or with a replaced value) and
/// returns once it is claimed; its events continue on `events`. A run waiting at an approval,
/// or a replaced output that does not fit the node's `outputSchema`, is refused and the run
/// stays paused.
#[tauri::command]
#[specta::specta]
pub async fn continue_run(
    app: tauri::AppHandle,
    state: State<'_, AppState>,
    run_id: String,
    how: Continue,
    events: Channel<RunEvent>,
) -> Result<String, AppError> {
    let options = resume_options(events, app);
    Ok(state.weft().go_on(&run_id, how, options).await?.run_id)
}

/// The pinned outputs of the flow at `flow_path` (its `NAME.pins.json`; none when missing).
#[tauri::command]
#[specta::specta]
pub async fn read_pins(flow_path: String) -> Result<Pins, AppError> {
    blocking(move || {
        let path = pins_path(&absolute(&flow_path)?);
        if !path.exists() {
            return Ok(Pins::new());
        }
        load_pins(&path).map_err(|error| AppError::new(ErrorCode::FlowFile, error.to_string()))
    })
    .await
}

/// Keeps `pins` beside the flow at `flow_path` (`NAME.pins.json`, which `weft run --pins`
/// reads too); no pins remove the file.
#[tauri::command]
#[specta::specta]
pub async fn save_pins(flow_path: String, pins: Pins) -> Result<(), AppError> {
    blocking(move || {
        let path = pins_path(&absolute(&flow_path)?);
        write_pins(&path, &pins)
            .map_err(|error| AppError::new(ErrorCode::FlowFile, error.to_string()))
    })
    .await
}

/// A resumed run's options: its events forwarded to `events`.
fn resume_options(events: Channel<RunEvent>, app: tauri::AppHandle) -> ResumeOptions {
    ResumeOptions {
        on_event: Some(forward(events, app)),
        ..ResumeOptions::default()
    }
}

/// Continues an interrupted run (its process stopped before it ended, e.g. killed) from its
/// last finished steps, and returns once it is claimed; its events continue on `events`.
#[tauri::command]
#[specta::specta]
pub async fn retry_run(
    app: tauri::AppHandle,
    state: State<'_, AppState>,
    run_id: String,
    events: Channel<RunEvent>,
) -> Result<String, AppError> {
    let options = resume_options(events, app);
    Ok(state
        .weft()
        .retry(&run_id, None, None, options)
        .await?
        .run_id)
}

/// Asks a run going in this app to pause: it starts no new step and stops before the next one,
/// as at a breakpoint (continued with `continue_run`). Returns whether such a run was going.
#[tauri::command]
#[specta::specta]
pub fn pause_run(state: State<'_, AppState>, run_id: String) -> bool {
    state.weft().pause(&run_id).is_ok()
}

/// Cancels a run: one going in this app at once, one paused for a person (by any process) is
/// ended as cancelled; refused for a run going in another process or finished.
#[tauri::command]
#[specta::specta]
pub async fn cancel_run(state: State<'_, AppState>, run_id: String) -> Result<Cancelled, AppError> {
    Ok(state.weft().cancel(&run_id, None).await?)
}

/// History: the newest runs of this store (runs of `weft` and servers in the same store too)
/// and of the team's servers, newest first, with what each cost.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RunHistory {
    pub runs: Vec<RunListing>,
    /// What went wrong asking a server ("server `team`: cannot reach …"), one a server.
    pub problems: Vec<String>,
}

/// History: the newest `limit` runs here and on each team's server, and the servers that
/// could not answer.
#[tauri::command]
#[specta::specta]
pub async fn list_runs(state: State<'_, AppState>, limit: u32) -> Result<RunHistory, AppError> {
    state.history(limit as usize).await
}

/// A run of this store (`server` absent) or of a team's server.
#[derive(Debug, Clone, Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RunRef {
    pub id: String,
    #[serde(default)]
    pub server: Option<String>,
}

/// Two past runs compared node by node: status, output, time, tokens and cost (each of this
/// store or of a server).
#[tauri::command]
#[specta::specta]
pub async fn compare_runs(
    state: State<'_, AppState>,
    a: RunRef,
    b: RunRef,
) -> Result<RunComparison, AppError> {
    state.compare(&a, &b).await
}

/// Every visit of every node of the run `run_id` (loops, forEach items, steps inside subflows),
/// with input, output, time, tokens and cost (a run going now too: its events are stored
/// before the canvas sees them).
#[tauri::command]
#[specta::specta]
pub async fn run_visits(state: State<'_, AppState>, run_id: String) -> Result<RunVisits, AppError> {
    Ok(state.weft().visits(&run_id).await?)
}

/// Opens a past run (a full id or a unique prefix) to show its trace on the canvas: of this
/// store, or of the team's server named `server`.
#[tauri::command]
#[specta::specta]
pub async fn open_run(
    state: State<'_, AppState>,
    run_id: String,
    server: Option<String>,
) -> Result<RunDetail, AppError> {
    state.run_detail(&run_id, server.as_deref()).await
}

/// Follows a run of the team's server `server` live: its events after event `after` arrive on
/// `events` as the server stores them, until the run ends or pauses; then the run as the
/// server keeps it. A stream the server closes is opened again where it stopped; following
/// another run (or `stop_following`) ends this one (`null`).
#[tauri::command]
#[specta::specta]
pub async fn follow_server_run(
    state: State<'_, AppState>,
    server: String,
    run_id: String,
    after: u64,
    events: Channel<RunEvent>,
) -> Result<Option<RunDetail>, AppError> {
    state
        .follow_server_run(&server, &run_id, after, |event| {
            // A canvas that went away ends nothing here: the run is the server's.
            let _ = events.send(event);
        })
        .await
}

/// Goes on from a breakpoint, pauses or cancels a run of the team's server `server` (as its
/// token's name); follow it to see what it does.
#[tauri::command]
#[specta::specta]
pub async fn act_on_server(
    state: State<'_, AppState>,
    server: String,
    run_id: String,
    action: crate::servers::ServerAction,
) -> Result<(), AppError> {
    state.act_on_server(&server, &run_id, &action).await
}

/// A flow of a team's server, as its flows folder lists it.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ServerFlow {
    pub server: String,
    #[serde(flatten)]
    pub flow: weft_api::views::FlowListing,
}

/// The flows of every team's server, and the servers that could not list theirs.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ServerFlows {
    pub flows: Vec<ServerFlow>,
    /// What went wrong asking a server, one a server.
    pub problems: Vec<String>,
}

/// A flow of a team's server opened on the canvas: runs of it go to the server.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct OpenedServerFlow {
    pub server: String,
    /// Its name in the server's folder (what runs of it start it by).
    pub name: String,
    /// The version of the server's file.
    pub version: String,
    pub flow: Flow,
}

/// The flows of every team's server (Settings → Servers).
#[tauri::command]
#[specta::specta]
pub async fn server_flows(state: State<'_, AppState>) -> Result<ServerFlows, AppError> {
    Ok(state.server_flows().await)
}

/// Opens the flow `name` of the team's server `server` (its file as it is now).
#[tauri::command]
#[specta::specta]
pub async fn open_server_flow(
    state: State<'_, AppState>,
    server: String,
    name: String,
) -> Result<OpenedServerFlow, AppError> {
    state.open_server_flow(&server, &name).await
}

/// Runs a flow of the team's server `server` there, with breakpoints and pins, under its
/// token; the run's id (open it to follow it).
#[tauri::command]
#[specta::specta]
pub async fn run_on_server(
    state: State<'_, AppState>,
    server: String,
    request: crate::servers::ServerRunRequest,
) -> Result<String, AppError> {
    state.run_on_server(&server, &request).await
}

/// Ends the following of run `run_id` of `server` (the canvas shows something else); one
/// followed since goes on.
#[tauri::command]
#[specta::specta]
pub fn stop_following(state: State<'_, AppState>, server: String, run_id: String) {
    state.stop_following(&server, &run_id);
}

/// One provider's settings as the canvas sees them: whether a key is set, never the key.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSettingsView {
    pub provider: ProviderKind,
    /// The environment variable of its key; `None` for providers without keys (Ollama).
    pub key_variable: Option<String>,
    pub key_set: bool,
    /// The key comes from the environment, not the app's settings.
    pub key_from_environment: bool,
    pub address_variable: String,
    /// The address set in the app; empty when the default or the environment's is used.
    pub address: String,
    /// The address requests go to.
    pub effective_address: String,
}

#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct SettingsView {
    pub providers: Vec<ProviderSettingsView>,
    pub default_model: String,
    /// The name kept with each decision taken in this app (empty: WEFT_USER, else the login name).
    pub user_name: String,
    /// The price overrides typed in Settings, as JSON text (empty: none).
    pub prices: String,
    /// The MCP servers every flow may use, as JSON text (empty: none).
    pub mcp_servers: String,
    /// Who may decide approvals, as a people file's text (empty: none typed here).
    pub people: String,
    /// The names of the variables set for MCP servers' `${NAME}`s (their values stay here).
    pub variables: Vec<String>,
    /// The `weft serve`s this app connects to (their tokens stay here).
    pub servers: Vec<crate::servers::ServerView>,
    /// Where the settings live (the file is readable by its owner only).
    pub settings_file: String,
    /// The run store.
    pub run_store: String,
}

/// A change to the settings: `None` leaves a value as it is, an empty text removes it.
#[derive(Debug, Clone, Default, Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct SettingsChange {
    pub provider: Option<ProviderKind>,
    pub key: Option<String>,
    pub address: Option<String>,
    pub default_model: Option<String>,
    pub user_name: Option<String>,
    /// Prices by model (`{"openai/gpt-4o": {"input": 2.5, "output": 10}}`, US dollars per
    /// million tokens) that add to or replace the shipped ones; empty removes them.
    pub prices: Option<String>,
    /// MCP servers for every flow, in the form of a flow's `settings.mcpServers`; empty
    /// removes them.
    pub mcp_servers: Option<String>,
    /// Who may decide approvals, one person a line: `NAME EMAIL GROUP...`; empty removes them.
    pub people: Option<String>,
    /// A variable MCP server definitions read as `${NAME}`; an empty value removes it.
    pub variable: Option<VariableChange>,
    /// A `weft serve` added, changed or removed.
    pub server: Option<crate::servers::ServerChange>,
}

/// A variable for MCP servers' `${NAME}`s, written into the settings file only.
#[derive(Debug, Clone, Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct VariableChange {
    pub name: String,
    pub value: String,
}

#[tauri::command]
#[specta::specta]
pub fn get_settings(state: State<'_, AppState>) -> SettingsView {
    state.settings_view()
}

/// Applies `change`, writes the settings file (mode 0600) and uses the new settings for the
/// next runs.
#[tauri::command]
#[specta::specta]
pub fn save_settings(
    state: State<'_, AppState>,
    change: SettingsChange,
) -> Result<SettingsView, AppError> {
    {
        let mut settings = crate::lock(&state.settings);
        let mut updated = settings.clone();
        if let Some(provider) = change.provider {
            let (key, address) = provider_settings_of(provider);
            if let (Some(key_setting), Some(key)) = (key, &change.key) {
                updated.set(key_setting, key);
            }
            if let Some(value) = &change.address {
                updated.set(address, value);
            }
        }
        if let Some(model) = &change.default_model {
            updated.set(Setting::DefaultModel, model);
        }
        if let Some(name) = &change.user_name {
            updated.set(Setting::UserName, name);
        }
        if let Some(prices) = &change.prices {
            updated.set_prices(prices)?;
        }
        if let Some(servers) = &change.mcp_servers {
            updated.set_mcp_servers(servers)?;
        }
        if let Some(people) = &change.people {
            updated.set_people(people)?;
        }
        if let Some(variable) = &change.variable {
            updated.set_variable(&variable.name, &variable.value)?;
        }
        if let Some(server) = &change.server {
            updated.servers = crate::servers::changed(&updated.servers, server)?;
        }
        updated.save(&state.paths.settings_file())?;
        *settings = updated;
    }
    state.rebuild()?;
    Ok(state.settings_view())
}

/// Asks a provider for its model list with the current settings.
#[tauri::command]
#[specta::specta]
pub async fn test_connection(
    state: State<'_, AppState>,
    provider: ProviderKind,
) -> Result<ConnectionReport, AppError> {
    let clients = weft_providers::LlmClients::new(state.provider_settings());
    clients
        .check_connection(provider)
        .await
        .map_err(|e| AppError::new(ErrorCode::Provider, e.to_string()))
}

/// Checks the connection to the server named `name` in Settings → Servers: reached, a Weft
/// server with the routes the app uses, the token taken; what is wrong otherwise.
#[tauri::command]
#[specta::specta]
pub async fn check_server(
    state: State<'_, AppState>,
    name: String,
) -> Result<crate::servers::ServerCheck, AppError> {
    let server = crate::lock(&state.settings)
        .servers
        .iter()
        .find(|server| server.name == name)
        .cloned()
        .ok_or_else(|| {
            AppError::new(
                ErrorCode::NotFound,
                format!("there is no server `{name}` in Settings → Servers"),
            )
        })?;
    Ok(crate::servers::check(&server, crate::servers::CHECK_TIMEOUT).await)
}

/// One MCP server's tools as Settings and the flow's settings panel list them.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct McpServerTools {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// Defined in the app's Settings for every flow, not in the flow.
    pub from_settings: bool,
    pub tools: Vec<McpTool>,
    /// Why it could not be listed (it did not start, an unset `${NAME}`, ...).
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct McpTool {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// Connects to the MCP servers `flow` may use (its own and the app's; the app's alone without
/// a flow) and lists their tools: Settings' and the flow panel's "Test connection", and what
/// the agent inspector's tool picker offers. A server that cannot be listed says why.
#[tauri::command]
#[specta::specta]
pub async fn list_mcp_tools(
    state: State<'_, AppState>,
    flow: Option<Flow>,
    path: Option<String>,
) -> Result<Vec<McpServerTools>, AppError> {
    let app_servers = crate::lock(&state.settings).mcp_servers();
    let servers = match flow {
        Some(flow) => weft_api::tools::servers_of(&state.with_app_servers(flow))
            .map_err(|problems| AppError::new(ErrorCode::InvalidFlow, problems.join("\n")))?,
        None => app_servers.clone(),
    };
    let path = path.map(PathBuf::from);
    let weft = state.weft();
    let listed = weft_api::tools::list_tools(weft.engine().mcp(), &servers, path.as_deref()).await;
    Ok(listed
        .into_iter()
        .map(|server| McpServerTools {
            from_settings: app_servers.get(&server.name) == servers.get(&server.name),
            transport: server.transport.to_string(),
            tools: server
                .tools
                .into_iter()
                .map(|tool| McpTool {
                    name: tool.name,
                    description: tool.description,
                    input_schema: tool.input_schema,
                })
                .collect(),
            error: server.error,
            name: server.name,
        })
        .collect())
}

/// Runs store work off the async runtime's threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AppError> + Send + 'static,
) -> Result<T, AppError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| AppError::new(ErrorCode::Store, format!("the store task failed: {e}")))?
}

/// A listener that sends each event of one run down that run's channel, and tells the desktop
/// when the run pauses for a person while the window is not in front.
fn forward(events: Channel<RunEvent>, app: tauri::AppHandle) -> EventListener {
    Arc::new(move |event: &RunEvent| {
        // A closed window has dropped its end of the channel; the run goes on and is stored.
        let _ = events.send(event.clone());
        if event.kind == EventType::WaitInput {
            let focused = app
                .get_webview_window("main")
                .and_then(|window| window.is_focused().ok())
                .unwrap_or(false);
            if let Some(notice) = pause_notice(event, focused) {
                crate::notify(&app, &notice);
            }
        }
    })
}

/// What the desktop is told when a run pauses: nothing while the window is in front (the
/// prompt is on the canvas), else where it waits and what it asks.
pub(crate) fn pause_notice(event: &RunEvent, focused: bool) -> Option<(String, String)> {
    if focused || event.kind != EventType::WaitInput {
        return None;
    }
    let node = match (&event.scope, &event.node_id) {
        (Some(scope), Some(node)) => format!("{scope}/{node}"),
        (None, Some(node)) => node.to_string(),
        _ => "a node".to_string(),
    };
    let title = if event.content.starts_with("breakpoint ") {
        format!("Weft: a run stopped at a breakpoint at {node}")
    } else {
        format!("Weft: a run waits for your decision at {node}")
    };
    let body: String = event.content.chars().take(200).collect();
    Some((title, body))
}

impl AppState {
    fn settings_view(&self) -> SettingsView {
        let settings = crate::lock(&self.settings).clone();
        let effective = self.provider_settings();
        let providers = [
            ProviderKind::OpenAi,
            ProviderKind::Anthropic,
            ProviderKind::Ollama,
        ]
        .into_iter()
        .map(|provider| {
            let (key, address) = provider_settings_of(provider);
            let in_file = key.and_then(|k| settings.get(k)).is_some();
            let key_set = match provider {
                ProviderKind::OpenAi => effective.openai_api_key.is_some(),
                ProviderKind::Anthropic => effective.anthropic_api_key.is_some(),
                ProviderKind::Ollama => false,
            };
            let effective_address = match provider {
                ProviderKind::OpenAi => effective.openai_base_url.clone(),
                ProviderKind::Anthropic => effective.anthropic_base_url.clone(),
                ProviderKind::Ollama => effective.ollama_host.clone(),
            };
            ProviderSettingsView {
                provider,
                key_variable: key.map(|k| k.variable().to_string()),
                key_set,
                key_from_environment: key_set && !in_file,
                address_variable: address.variable().to_string(),
                address: settings.get(address).unwrap_or_default().to_string(),
                effective_address,
            }
        })
        .collect();
        SettingsView {
            providers,
            default_model: settings
                .get(Setting::DefaultModel)
                .unwrap_or_default()
                .to_string(),
            user_name: settings
                .get(Setting::UserName)
                .unwrap_or_default()
                .to_string(),
            prices: settings
                .prices
                .as_ref()
                .map(|table| serde_json::to_string_pretty(table).unwrap_or_default())
                .unwrap_or_default(),
            mcp_servers: settings
                .mcp_servers
                .as_ref()
                .map(|servers| serde_json::to_string_pretty(servers).unwrap_or_default())
                .unwrap_or_default(),
            people: settings.people.clone().unwrap_or_default(),
            variables: settings.variables(),
            servers: crate::servers::views(&settings.servers),
            settings_file: self.paths.settings_file().display().to_string(),
            run_store: self.paths.store.shown(),
        }
    }
}

/// The test cases beside a flow (`NAME.tests.json`), as the Tests panel lists them.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct TestsView {
    pub tests_file: String,
    /// The file exists (else the panel offers to make one from a past run).
    pub exists: bool,
    pub cases: Vec<TestCaseView>,
    /// Why the file cannot be used (its line named); the cases are then empty.
    pub problem: Option<String>,
}

/// One case in the Tests panel.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct TestCaseView {
    pub name: String,
    /// Where it is written (`triage.tests.json:12`, `rows.csv:3`).
    pub origin: String,
    /// Its assertions, in words.
    pub assertions: Vec<String>,
    /// It has recorded LLM answers, so it runs offline.
    pub recorded: bool,
}

/// The cases of the flow at `path` (checked against `flow`, the canvas's, which may be unsaved).
#[tauri::command]
#[specta::specta]
pub async fn read_tests(flow: Flow, path: String) -> Result<TestsView, AppError> {
    blocking(move || Ok(tests_view(&flow, &PathBuf::from(path)))).await
}

fn tests_view(flow: &Flow, path: &std::path::Path) -> TestsView {
    let tests_file = testing::tests_path(path);
    let exists = tests_file.exists();
    let (cases, problem) = match testing::load_suite(path, flow) {
        Ok(suite) => {
            let cases = suite
                .cases
                .iter()
                .map(|case| TestCaseView {
                    name: case.name.clone(),
                    origin: case.origin.clone(),
                    assertions: case.assertions.iter().map(|a| a.describe()).collect(),
                    recorded: testing::recording_path(&suite.recordings_dir, &case.name).exists(),
                })
                .collect();
            (cases, None)
        }
        Err(_) if !exists => (Vec::new(), None),
        Err(error) => (Vec::new(), Some(error.to_string())),
    };
    TestsView {
        tests_file: tests_file.display().to_string(),
        exists,
        cases,
        problem,
    }
}

/// Which cases to run.
#[derive(Debug, Clone, Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct TestsRequest {
    /// The flow as on the canvas (edits included) and its file, which the cases are beside.
    pub flow: Flow,
    pub path: String,
    /// Only this case; `None` runs them all.
    pub case: Option<String>,
    /// Ask the providers and record their answers (else a recorded case runs offline).
    pub record: bool,
}

/// Runs the cases of a flow (all, or one), each as a stored run; each case's report arrives on
/// `cases` as it ends, and the whole report is the answer.
#[tauri::command]
#[specta::specta]
pub async fn run_tests(
    state: State<'_, AppState>,
    request: TestsRequest,
    cases: Channel<CaseReport>,
) -> Result<SuiteReport, AppError> {
    let weft = state.weft();
    let engine = weft.engine();
    let prices = weft.prices().clone();
    let path = PathBuf::from(&request.path);
    let flow = state.with_app_servers(request.flow);
    let checked =
        check_for_run(flow, Some(&path), engine.llm().settings()).map_err(|problems| {
            AppError::new(
                ErrorCode::InvalidFlow,
                problems
                    .iter()
                    .filter(|problem| problem.is_error())
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        })?;
    let suite = testing::load_suite(&path, checked.flow())?;
    let options = TestOptions {
        case: request.case,
        mode: if request.record {
            RecordMode::Record
        } else {
            RecordMode::Auto
        },
        prices,
        command: format!("weft test {}", path.display()),
        ..TestOptions::default()
    };
    let on_case = Arc::new(move |case: &CaseReport| {
        // A closed window has dropped its end; the runs are stored anyway.
        let _ = cases.send(case.clone());
    });
    Ok(testing::run_suite(engine, &checked, &suite, &options, on_case).await?)
}

/// A past run as a new test case (its input, decisions, status, result and node outputs as
/// expectations), for the person to edit before saving it.
#[tauri::command]
#[specta::specta]
pub async fn case_from_run(
    state: State<'_, AppState>,
    run_id: String,
) -> Result<CaseSpec, AppError> {
    let store = state.weft().store().clone();
    blocking(move || Ok(testing::case_from_run(&store, &run_id)?)).await
}

/// Adds `test_case` to the tests beside the flow at `path` (in place of a case of the same name),
/// checked against `flow`; with `from_run`, that run's LLM answers become the case's recording,
/// so it runs offline at once.
#[tauri::command]
#[specta::specta]
pub async fn save_test_case(
    state: State<'_, AppState>,
    flow: Flow,
    path: String,
    test_case: CaseSpec,
    from_run: Option<String>,
) -> Result<TestsView, AppError> {
    let store = state.weft().store().clone();
    blocking(move || {
        let path = PathBuf::from(path);
        let name = test_case.name.clone();
        testing::save_case(&path, &flow, test_case)?;
        if let Some(run_id) = from_run {
            let recording = testing::recording_of_run(&store, &run_id, &name)?;
            let file = testing::recording_path(&testing::recordings_dir(&path), &name);
            let written = if recording.calls.is_empty() {
                testing::remove_recording(&file)
            } else {
                testing::write_recording(&file, &recording)
            };
            written.map_err(|message| AppError::new(ErrorCode::FlowFile, message))?;
        }
        Ok(tests_view(&flow, &path))
    })
    .await
}

/// The inbox: every approval waiting for a person, across flows and runs (the app's, `weft`'s
/// and a server's runs in the same store, oldest first), then those of the team's servers of
/// Settings → Servers; and the servers that could not answer.
#[derive(Debug, Clone, Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Inbox {
    pub approvals: Vec<PendingApproval>,
    /// What went wrong asking a server ("server `team`: cannot reach …"), one a server.
    pub problems: Vec<String>,
}

/// The inbox (see [`Inbox`]).
#[tauri::command]
#[specta::specta]
pub async fn pending_approvals(state: State<'_, AppState>) -> Result<Inbox, AppError> {
    state.inbox().await
}

/// Decides an approval of a team's server from the inbox, under that server's token.
#[tauri::command]
#[specta::specta]
pub async fn decide_on_server(
    state: State<'_, AppState>,
    server: String,
    run_id: String,
    decision: Decision,
) -> Result<DecisionAnswer, AppError> {
    state.decide_on_server(&server, &run_id, decision).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventType, scope: Option<&str>, content: &str) -> RunEvent {
        RunEvent {
            seq: 4,
            run_id: "run".into(),
            ts: "2026-11-24T10:00:00.000Z".into(),
            kind,
            node_id: Some("review".into()),
            content: content.into(),
            scope: scope.map(str::to_string),
            item: None,
            from: None,
            usage: None,
            model: None,
        }
    }

    #[test]
    fn a_reminder_and_an_escalation_say_who_is_asked_and_what() {
        let mut follow_up = weft_api::FollowedUp {
            run_id: "6c4ba313-67fb".into(),
            node_id: "pay".into(),
            kind: "remind".into(),
            to: vec!["grace".into(), "bob".into()],
            message: "Pay the invoice?".into(),
        };
        assert_eq!(
            crate::follow_up_notice(&follow_up),
            (
                "Reminder for grace, bob: pay waits".to_string(),
                "run 6c4ba313: Pay the invoice?".to_string()
            )
        );
        follow_up.kind = "escalate".into();
        follow_up.to = vec!["group:ops".into()];
        assert_eq!(
            crate::follow_up_notice(&follow_up).0,
            "Escalated to group:ops: pay waits"
        );
    }

    #[test]
    fn a_pause_is_told_to_the_desktop_only_when_the_window_is_not_in_front() {
        let paused = event(EventType::WaitInput, None, "Send the note?");
        assert_eq!(pause_notice(&paused, true), None);
        let (title, body) = pause_notice(&paused, false).expect("told");
        assert_eq!(title, "Weft: a run waits for your decision at review");
        assert_eq!(body, "Send the note?");
        let nested = event(EventType::WaitInput, Some("sub"), "ok?");
        assert!(
            pause_notice(&nested, false)
                .expect("told")
                .0
                .ends_with("at sub/review")
        );
        let stop = event(
            EventType::WaitInput,
            None,
            "breakpoint before `review` (visit 1)",
        );
        assert!(
            pause_notice(&stop, false)
                .expect("told")
                .0
                .contains("breakpoint")
        );
        assert_eq!(
            pause_notice(&event(EventType::StepEnd, None, "x"), false),
            None
        );
    }
}
