//! Weft's desktop app: a Tauri 2 window hosting the canvas (`ui/`), and the commands the canvas
//! calls. The shell only translates: every command calls Weft's application layer (`weft-api`)
//! the way the `weft` command and `weft serve` do, and a run's events stream back over a
//! [`tauri::ipc::Channel`] tied to
//! that run. The TypeScript side of every command and type is generated from here
//! ([`bindings_builder`], checked in as `ui/src/bindings.ts`).

mod commands;
mod error;
mod painting;
pub mod servers;
mod settings;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tauri::Manager;
use weft_api::{Keeper, Lifetime, Weft};
use weft_history::cost::Prices;
use weft_providers::ProviderSettings;

pub use commands::{RunHistory, RunRef};
pub use error::{AppError, ErrorCode};
pub use settings::{AppPaths, SettingsFile};

/// Where the generated TypeScript goes, relative to this crate.
pub const BINDINGS_PATH: &str = "../ui/src/bindings.ts";

/// What the commands share.
pub struct AppState {
    paths: AppPaths,
    /// Shared with the MCP hub, which reads `${NAME}`s from it when a server starts.
    settings: Arc<Mutex<SettingsFile>>,
    /// Rebuilt when the settings change; runs going keep theirs and stay known to the new one.
    weft: Mutex<Weft>,
    /// Settles approval deadlines as they pass and marks runs of dead processes interrupted,
    /// while the app runs (started with the window).
    keeper: Mutex<Option<Keeper>>,
    /// The flow file given on the command line, opened first.
    startup_file: Option<String>,
    /// The server run followed live (its server and id), and how to end its following.
    following: Mutex<Option<(String, String, tokio_util::sync::CancellationToken)>>,
    /// Where the paths of files dropped on the window go, once the canvas watches for them.
    file_drops: Mutex<Option<tauri::ipc::Channel<Vec<String>>>>,
}

impl AppState {
    /// Opens the run store and reads the settings. `startup_file` is a flow to open first.
    pub fn open(paths: AppPaths, startup_file: Option<String>) -> Result<AppState, AppError> {
        let settings = Arc::new(Mutex::new(SettingsFile::load(&paths.settings_file())?));
        let hub = {
            let settings = Arc::clone(&settings);
            weft_mcp::Hub::new(Arc::new(move |name: &str| {
                lock(&settings).variable(name, env)
            }))
        };
        let (providers, prices, people) = {
            let settings = lock(&settings);
            (
                settings.provider_settings(env),
                settings.prices()?,
                people_or_nobody(&settings),
            )
        };
        let weft = Weft::open(paths.store.clone(), Lifetime::Service, providers)?
            .with_host(Arc::new(weft_restate::RestateIngress::default()))
            .with_mcp(Arc::new(hub))
            .with_prices(prices)
            .with_people(people);
        Ok(AppState {
            paths,
            settings,
            weft: Mutex::new(weft),
            keeper: Mutex::new(None),
            startup_file,
            following: Mutex::new(None),
            file_drops: Mutex::new(None),
        })
    }

    /// From now on the paths of files dropped on the window go to `drops` (and no longer to the
    /// channel given before: a canvas drawn again asks anew).
    pub fn watch_file_drops(&self, drops: tauri::ipc::Channel<Vec<String>>) {
        *lock(&self.file_drops) = Some(drops);
    }

    /// Sends the paths of files dropped on the window to the canvas, when it watches for them.
    pub fn files_dropped(&self, paths: &[std::path::PathBuf]) {
        if let Some(drops) = lock(&self.file_drops).as_ref() {
            let paths = paths
                .iter()
                .map(|path| path.display().to_string())
                .collect();
            if let Err(error) = drops.send(paths) {
                tracing::warn!("the dropped files could not be passed to the canvas: {error}");
            }
        }
    }

    /// The app's Weft as the settings are now.
    pub fn weft(&self) -> Weft {
        lock(&self.weft).clone()
    }

    /// Starts the keeper (on the app's async runtime); the runs it continues past their
    /// deadline are seen by the canvas through the store, like runs of other processes. Its
    /// reminders and escalations are desktop notifications.
    pub fn start_keeper(&self, app: tauri::AppHandle) {
        let weft = self
            .weft()
            .on_follow_up(Arc::new(move |follow_up: &weft_api::FollowedUp| {
                notify(&app, &follow_up_notice(follow_up));
            }));
        let keeper = tauri::async_runtime::block_on(async move { weft.keep(None) });
        *lock(&self.keeper) = Some(keeper);
    }

    /// Decides the approval the paused run `run_id` waits at, as the person named in Settings
    /// (else who decides on this machine); returns once the run goes on (its events to
    /// `on_event`), or once the decision is counted at an approval that needs more people. What the Approve and Reject buttons (on a node, in the side panel, in the
    /// inbox) do, refused as `weft resume` and `weft serve` refuse it.
    pub async fn decide(
        &self,
        run_id: &str,
        decision: weft_nodes::Decision,
        on_event: Option<weft_event::EventListener>,
    ) -> Result<commands::DecisionAnswer, AppError> {
        let by = self.user_name();
        let options = weft_api::ResumeOptions {
            on_event,
            ..weft_api::ResumeOptions::default()
        };
        let decided = self
            .weft()
            .decide(run_id, decision, by, weft_api::Channel::App, options)
            .await?;
        Ok(match decided {
            weft_api::Decided::GoingOn(handle) => commands::DecisionAnswer {
                run_id: handle.run_id,
                approval: None,
            },
            weft_api::Decided::Counted {
                run_id, progress, ..
            } => commands::DecisionAnswer {
                run_id,
                approval: Some(progress),
            },
        })
    }

    /// Every approval waiting for a person: this store's (for the app's user), then each
    /// server's of Settings → Servers (for its token's name, marked with the server); a server
    /// that cannot answer is named in `problems` and the rest are listed.
    pub async fn inbox(&self) -> Result<commands::Inbox, AppError> {
        let mut approvals = self.weft().pending_approvals(self.user_name()).await?;
        let (found, problems) = self
            .ask_every_server(|server| async move {
                servers::approvals(&server, servers::LIST_TIMEOUT).await
            })
            .await;
        approvals.extend(found);
        Ok(commands::Inbox {
            approvals,
            problems,
        })
    }

    /// History: the newest `limit` runs of this store and of each server of Settings → Servers
    /// (marked with the server), newest first; a server that cannot answer is named in
    /// `problems` and the rest are listed. A server that keeps its runs in this very store
    /// lists them once, as this store's.
    pub async fn history(&self, limit: usize) -> Result<commands::RunHistory, AppError> {
        let mut runs = self.weft().runs(limit).await?;
        let (found, problems) = self
            .ask_every_server(move |server| async move {
                servers::runs(&server, limit, servers::LIST_TIMEOUT).await
            })
            .await;
        let local: std::collections::HashSet<String> =
            runs.iter().map(|run| run.summary.id.clone()).collect();
        runs.extend(
            found
                .into_iter()
                .filter(|run| !local.contains(&run.summary.id)),
        );
        // RFC 3339 times in UTC, as every store writes them, sort as text.
        runs.sort_by(|a, b| b.summary.started_at.cmp(&a.summary.started_at));
        Ok(commands::RunHistory { runs, problems })
    }

    /// Asks every server of Settings → Servers at once; what they answered, in the order of
    /// Settings, and what went wrong with the others.
    async fn ask_every_server<T, Answer>(
        &self,
        ask: impl Fn(servers::ServerEntry) -> Answer,
    ) -> (Vec<T>, Vec<String>)
    where
        T: Send + 'static,
        Answer: std::future::Future<Output = Result<Vec<T>, String>> + Send + 'static,
    {
        let servers = lock(&self.settings).servers.clone();
        let mut asked = tokio::task::JoinSet::new();
        for (index, server) in servers.into_iter().enumerate() {
            let answer = ask(server);
            asked.spawn(async move { (index, answer.await) });
        }
        let mut answers = asked.join_all().await;
        answers.sort_by_key(|(index, _)| *index);
        let (mut found, mut problems) = (Vec::new(), Vec::new());
        for (_, answer) in answers {
            match answer {
                Ok(answer) => found.extend(answer),
                Err(problem) => problems.push(problem),
            }
        }
        (found, problems)
    }

    /// The server of Settings → Servers named `name`.
    fn server(&self, name: &str) -> Result<servers::ServerEntry, AppError> {
        lock(&self.settings)
            .servers
            .iter()
            .find(|entry| entry.name == name)
            .cloned()
            .ok_or_else(|| {
                AppError::new(
                    ErrorCode::NotFound,
                    format!("there is no server `{name}` in Settings → Servers"),
                )
            })
    }

    /// Everything kept of run `run_id`: of this store, or of the server named `server`.
    pub async fn run_detail(
        &self,
        run_id: &str,
        server: Option<&str>,
    ) -> Result<weft_api::views::RunDetail, AppError> {
        match server {
            None => Ok(self.weft().run(run_id).await?),
            Some(server) => servers::run(&self.server(server)?, run_id).await,
        }
    }

    /// Two runs compared node by node, each of this store or of a server.
    pub async fn compare(
        &self,
        a: &commands::RunRef,
        b: &commands::RunRef,
    ) -> Result<weft_api::views::RunComparison, AppError> {
        if a.server.is_none() && b.server.is_none() {
            return Ok(self.weft().compare(&a.id, &b.id).await?);
        }
        let (a, b) = tokio::try_join!(
            self.run_detail(&a.id, a.server.as_deref()),
            self.run_detail(&b.id, b.server.as_deref())
        )?;
        Ok(weft_api::views::compare_details(&a, &b))
    }

    /// Follows run `run_id` of the server named `server` live from after event `after` (see
    /// [`servers::follow`]); following another run, or [`AppState::stop_following`], ends it
    /// (`None`).
    pub async fn follow_server_run(
        &self,
        server: &str,
        run_id: &str,
        after: u64,
        on_event: impl FnMut(weft_event::RunEvent),
    ) -> Result<Option<weft_api::views::RunDetail>, AppError> {
        let entry = self.server(server)?;
        let stop = tokio_util::sync::CancellationToken::new();
        let followed = (server.to_string(), run_id.to_string(), stop.clone());
        if let Some((_, _, before)) = lock(&self.following).replace(followed) {
            before.cancel();
        }
        let followed = servers::follow(&entry, run_id, after, &stop, on_event).await;
        stop.cancel();
        followed
    }

    /// Ends the following of run `run_id` of `server`, if it is the one followed (one
    /// followed since is left alone).
    pub fn stop_following(&self, server: &str, run_id: &str) {
        let mut following = lock(&self.following);
        if let Some((followed_server, followed_run, stop)) = following.as_ref()
            && followed_server == server
            && followed_run == run_id
        {
            stop.cancel();
            *following = None;
        }
    }

    /// Decides the approval run `run_id` of the server named `server` waits at, under that
    /// server's token.
    pub async fn decide_on_server(
        &self,
        server: &str,
        run_id: &str,
        decision: weft_nodes::Decision,
    ) -> Result<commands::DecisionAnswer, AppError> {
        let decided = servers::decide(&self.server(server)?, run_id, &decision).await?;
        Ok(commands::DecisionAnswer {
            run_id: decided.run_id,
            approval: decided.approval,
        })
    }

    /// The flows of every server of Settings → Servers, each marked with its server; a server
    /// that cannot answer is named in `problems` and the rest are listed.
    pub async fn server_flows(&self) -> commands::ServerFlows {
        let (flows, problems) = self
            .ask_every_server(|server| async move {
                let name = server.name.clone();
                servers::flows(&server, servers::LIST_TIMEOUT)
                    .await
                    .map(|flows| {
                        flows
                            .into_iter()
                            .map(|flow| commands::ServerFlow {
                                server: name.clone(),
                                flow,
                            })
                            .collect::<Vec<_>>()
                    })
            })
            .await;
        commands::ServerFlows { flows, problems }
    }

    /// The flow `name` of the server named `server`, to edit and run on the canvas.
    pub async fn open_server_flow(
        &self,
        server: &str,
        name: &str,
    ) -> Result<commands::OpenedServerFlow, AppError> {
        let detail = servers::flow(&self.server(server)?, name).await?;
        let flow = weft_flow::Flow::parse(&detail.flow.to_string(), &format!("{server}:{name}"))
            .map_err(|error| {
                AppError::new(
                    ErrorCode::FlowFile,
                    format!("the flow `{name}` of server `{server}` does not load here: {error}"),
                )
            })?;
        Ok(commands::OpenedServerFlow {
            server: server.to_string(),
            name: detail.name,
            version: detail.version,
            flow,
        })
    }

    /// Starts `request` on the server named `server`, under its token; the run's id.
    pub async fn run_on_server(
        &self,
        server: &str,
        request: &servers::ServerRunRequest,
    ) -> Result<String, AppError> {
        servers::start(&self.server(server)?, request).await
    }

    /// Does `action` to run `run_id` of the server named `server`, under its token.
    pub async fn act_on_server(
        &self,
        server: &str,
        run_id: &str,
        action: &servers::ServerAction,
    ) -> Result<(), AppError> {
        servers::act(&self.server(server)?, run_id, action).await
    }

    /// Who uses this app: the name in Settings, else who decides on this machine.
    pub fn user_name(&self) -> Option<String> {
        lock(&self.settings).user_name(env)
    }

    /// The price table runs are costed at: shipped, `WEFT_PRICES`, then the app's settings.
    fn prices(&self) -> Result<Prices, AppError> {
        lock(&self.settings).prices()
    }

    /// `flow` with the MCP servers Settings add for every flow (its own win).
    pub(crate) fn with_app_servers(&self, flow: weft_flow::Flow) -> weft_flow::Flow {
        let servers = lock(&self.settings).mcp_servers();
        weft_api::tools::with_shared_servers(flow, &servers)
    }

    fn provider_settings(&self) -> ProviderSettings {
        lock(&self.settings).provider_settings(env)
    }

    /// Cancels the runs going (the window is closing) and waits up to `grace` until each has
    /// been stored as cancelled, so none is left `running` in the store. Paused runs are not
    /// going: they stay paused and can be answered after the next start.
    fn stop_runs(&self, grace: std::time::Duration) {
        let weft = self.weft();
        let keeper = lock(&self.keeper).take();
        tauri::async_runtime::block_on(async move {
            if let Some(keeper) = keeper {
                keeper.stop().await;
            }
            if !weft.engine().shutdown(grace).await {
                tracing::warn!("some runs were still going when the app closed");
            }
        });
    }

    /// New settings apply to runs started after this; runs going keep theirs (and can still
    /// be cancelled: a Weft made this way shares the runs going).
    fn rebuild(&self) -> Result<(), AppError> {
        let weft = self
            .weft()
            .with_providers(self.provider_settings())
            .with_prices(self.prices()?)
            .with_people(people_or_nobody(&lock(&self.settings)));
        *lock(&self.weft) = weft;
        Ok(())
    }
}

/// The people of the settings; a people file (`WEFT_PEOPLE_FILE`) that cannot be used does
/// not keep the app from opening: approvals naming groups are refused, saying so, until it is
/// fixed.
fn people_or_nobody(settings: &SettingsFile) -> weft_api::People {
    settings.people().unwrap_or_else(|error| {
        tracing::warn!("no people for approvals: {error}");
        weft_api::People::default()
    })
}

pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Locks a mutex; a panic in another command must not make the app unusable, and the data
/// behind these locks (maps and settings) stays consistent between statements.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every command the canvas may call, with the types tauri-specta exports to TypeScript.
pub fn bindings_builder() -> tauri_specta::Builder<tauri::Wry> {
    tauri_specta::Builder::<tauri::Wry>::new()
        .error_handling(tauri_specta::ErrorHandlingMode::Throw)
        // The 64-bit integers crossing IPC are sequence numbers, visit and token counts and
        // integer field bounds, all far below 2^53, so a TypeScript `number` holds them exactly.
        .dangerously_cast_bigints_to_number()
        // How many characters of a version's hash name it where it is shown, as `weft` shows it.
        .constant("SHORT_HASH", weft_flow::SHORT_HASH)
        // One TypeScript type per Rust type (not separate read and write shapes): the canvas
        // sends back what it received (flows), so the two must be the same type.
        .disable_serde_phases()
        .commands(tauri_specta::collect_commands![
            commands::describe_kinds,
            commands::open_flow,
            commands::save_flow,
            commands::startup_file,
            commands::watch_file_drops,
            commands::recent_files,
            commands::validate_flow,
            commands::upcoming_schedules,
            commands::start_run,
            commands::resume_run,
            commands::continue_run,
            commands::retry_run,
            commands::cancel_run,
            commands::pause_run,
            commands::list_runs,
            commands::run_visits,
            commands::pending_approvals,
            commands::read_tests,
            commands::run_tests,
            commands::case_from_run,
            commands::save_test_case,
            commands::compare_runs,
            commands::flow_versions,
            commands::compare_flow,
            commands::flow_diff,
            commands::open_run,
            commands::read_pins,
            commands::save_pins,
            commands::get_settings,
            commands::save_settings,
            commands::test_connection,
            commands::check_server,
            commands::decide_on_server,
            commands::follow_server_run,
            commands::stop_following,
            commands::act_on_server,
            commands::server_flows,
            commands::open_server_flow,
            commands::run_on_server,
            commands::list_mcp_tools,
        ])
}

/// The TypeScript bindings as they should be checked in.
pub fn bindings_typescript() -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("weft-bindings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("bindings.ts");
    bindings_builder()
        .export(
            specta_typescript::Typescript::default()
                .header("// Generated from src-tauri by `cargo run -p weft-app --bin export-bindings`; do not edit.\n"),
            &file,
        )
        .map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(&file).map_err(|e| e.to_string());
    let _ = std::fs::remove_dir_all(&dir);
    text
}

/// Opens the window and serves the commands until the window closes. The first argument, if
/// any, is a flow file to open (`weft-app flows/offline.json`).
pub fn run() -> Result<(), String> {
    // First: it sets the environment the web process starts with, before any thread runs.
    painting::choose();
    // Before the store is opened: its engines export traces when the OTEL_* variables ask.
    weft_otel::init("weft-app");
    let paths = AppPaths::from_env().map_err(|e| e.message)?;
    let startup_file = std::env::args().nth(1).and_then(|arg| {
        std::path::absolute(&arg)
            .ok()
            .map(|path| path.display().to_string())
    });
    let state = AppState::open(paths, startup_file).map_err(|e| e.message)?;
    let builder = bindings_builder();
    let app = tauri::Builder::default()
        .plugin(
            tauri::plugin::Builder::<tauri::Wry>::new("weft-kinds")
                .js_init_script(kinds_script())
                .build(),
        )
        .plugin(tauri_plugin_notification::init())
        .plugin(tauri_plugin_dialog::init())
        .manage(state)
        .invoke_handler(builder.invoke_handler())
        // Files dropped on the window reach the canvas through `watch_file_drops`, not through
        // listeners the page registers for Tauri's drag-and-drop events: registering those has
        // the shell evaluate script in the page, and WebKit answers each evaluation with a
        // JavaScript value in this process, so JavaScriptCore was set up here too, at start,
        // for nothing to be dropped yet.
        .on_window_event(|window, event| {
            if let tauri::WindowEvent::DragDrop(tauri::DragDropEvent::Drop { paths, .. }) = event {
                window.state::<AppState>().files_dropped(paths);
            }
        })
        .setup(|app| {
            app.state::<AppState>().start_keeper(app.handle().clone());
            exit_on_terminate(app.handle().clone());
            Ok(())
        })
        .build(tauri::generate_context!())
        .map_err(|e| e.to_string())?;
    app.run(|handle, event| {
        if let tauri::RunEvent::Exit = event {
            handle.state::<AppState>().stop_runs(EXIT_GRACE);
            // The MCP servers runs started end with the app (their process groups too).
            weft_mcp::stop_all_servers();
            weft_otel::shutdown();
        }
    });
    Ok(())
}

/// The engine's node kinds as a script the page runs before its own (`window.__WEFT_KINDS__`):
/// the canvas draws its first frame from them at once. Asked for over IPC, they put a wait on
/// the path to the first frame, longer whenever this process was busy (docs/benchmarks.md).
///
/// The script is kept to ASCII: one character beyond Latin-1 has WebKit hold and parse a
/// script as two bytes a character (`ui/vite.config.ts` keeps the page's own script so too).
fn kinds_script() -> String {
    let catalog = serde_json::to_string(&commands::describe_kinds())
        .expect("the kinds' description is plain data, always serializable");
    let mut script = String::with_capacity(catalog.len() + 32);
    script.push_str("window.__WEFT_KINDS__ = ");
    // serde_json writes characters beyond ASCII only inside strings, where an escape means
    // the same character.
    for character in catalog.chars() {
        if character.is_ascii() {
            script.push(character);
        } else {
            let mut units = [0u16; 2];
            for unit in character.encode_utf16(&mut units) {
                script.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    script.push(';');
    script
}

/// What the desktop is told of a reminder or an escalation: where the approval waits, who is
/// asked, what it asks.
pub(crate) fn follow_up_notice(follow_up: &weft_api::FollowedUp) -> (String, String) {
    let run = follow_up.run_id.get(..8).unwrap_or(&follow_up.run_id);
    let who = follow_up.to.join(", ");
    let title = match follow_up.kind.as_str() {
        "escalate" => format!("Escalated to {who}: {} waits", follow_up.node_id),
        _ if who.is_empty() => format!("Reminder: {} waits", follow_up.node_id),
        _ => format!("Reminder for {who}: {} waits", follow_up.node_id),
    };
    (title, format!("run {run}: {}", follow_up.message))
}

/// Shows a desktop notification; a desktop without a notification service only loses the
/// notice (the inbox and the canvas still show the pause).
fn notify(app: &tauri::AppHandle, (title, body): &(String, String)) {
    use tauri_plugin_notification::NotificationExt;
    if let Err(error) = app.notification().builder().title(title).body(body).show() {
        tracing::debug!("no desktop notification: {error}");
    }
}

/// SIGTERM (a logout, `kill`, a test harness ending its session) closes the app like its
/// window's close button does, so runs going are stored as cancelled rather than left
/// `running`.
fn exit_on_terminate(handle: tauri::AppHandle) {
    #[cfg(unix)]
    tauri::async_runtime::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate())
            && terminate.recv().await.is_some()
        {
            handle.exit(0);
        }
    });
    #[cfg(not(unix))]
    let _ = handle;
}

/// How long closing the app waits for cancelled runs to be stored as such.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tauri::ipc::{Channel, InvokeResponseBody};

    use super::*;

    /// A channel that keeps what is sent over it, as the canvas would receive it.
    fn kept_channel() -> (Channel<Vec<String>>, Arc<Mutex<Vec<String>>>) {
        let received = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&received);
        let channel = Channel::new(move |body| {
            if let InvokeResponseBody::Json(json) = body {
                lock(&sink).push(json);
            }
            Ok(())
        });
        (channel, received)
    }

    #[test]
    fn the_page_gets_the_engines_kinds_before_its_script_runs() {
        let script = kinds_script();
        let catalog = script
            .strip_prefix("window.__WEFT_KINDS__ = ")
            .and_then(|rest| rest.strip_suffix(';'))
            .expect("one assignment");
        let sent: serde_json::Value = serde_json::from_str(catalog).expect("JSON");
        let asked = serde_json::to_value(commands::describe_kinds()).expect("JSON");
        assert_eq!(sent, asked);
        assert!(script.is_ascii(), "escaped to ASCII");
        assert!(
            serde_json::to_string(&asked).is_ok_and(|text| !text.is_ascii()),
            "the kinds' help has characters beyond ASCII, so the escaping is tested"
        );
        assert!(
            sent["kinds"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|kind| kind["id"] == "agent")),
            "the agent kind is among them: {catalog:.200}"
        );
    }

    #[test]
    fn dropped_files_reach_the_canvas_watching_for_them_and_only_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = dir.path().join("runs.db");
        let paths = AppPaths {
            config_dir: dir.path().join("config"),
            store: weft_api::StoreLocation::find(store.to_str()).expect("store location"),
        };
        let state = AppState::open(paths, None).expect("app state");
        let dropped = [std::path::PathBuf::from("/flows/triage.json")];
        // Before the canvas watches, a drop goes nowhere (and does not fail).
        state.files_dropped(&dropped);

        let (first, first_received) = kept_channel();
        state.watch_file_drops(first);
        state.files_dropped(&dropped);
        assert_eq!(*lock(&first_received), ["[\"/flows/triage.json\"]"]);

        // A canvas drawn again watches anew; the drop goes to it alone.
        let (second, second_received) = kept_channel();
        state.watch_file_drops(second);
        state.files_dropped(&[
            std::path::PathBuf::from("/flows/a.json"),
            std::path::PathBuf::from("/notes/b.txt"),
        ]);
        assert_eq!(lock(&first_received).len(), 1);
        assert_eq!(
            *lock(&second_received),
            ["[\"/flows/a.json\",\"/notes/b.txt\"]"]
        );
    }
}
