//! `weft`: validate, run, resume and inspect Weft flows from the command line (docs/cli.md).
//!
//! This file holds the command-line definitions, builds the tokio runtime for the commands
//! that run flows, and is the one place that reports errors and picks the exit code:
//! 0 completed, 1 failed or cancelled, 2 invalid flow or usage, 3 paused.

mod commands;
mod output;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use weft_engine::breakpoints::Breakpoint;
use weft_nodes::Decision;

// mimalloc rather than glibc's allocator: a run allocates events and outputs on the engine's
// threads and frees them on the store's writer thread, which glibc serializes on its arena
// locks, and a large flow's parse fragments glibc's heap. Transparent huge pages stay off
// (no_thp): they would cost a short run far more memory than they save. Version 2 (`v2`)
// rather than 3, which starts slower (it reserves its page map and probes the processor) and
// ran long chains slower. The measurements: docs/benchmarks.md, "Choices and what they cost".
// Counted (weft_alloc): a template render's memory is bounded only under this allocator.
#[global_allocator]
static ALLOCATOR: weft_alloc::Counting<mimalloc::MiMalloc> =
    weft_alloc::Counting(mimalloc::MiMalloc);

/// Run LLM agent workflows headless: the same flows the Weft canvas edits.
#[derive(Debug, Parser)]
#[command(name = "weft", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

const AFTER_HELP: &str = "\
Exit codes: 0 completed (or valid), 1 failed, cancelled or interrupted, 2 invalid flow or usage,
3 paused.

Environment:
  WEFT_DB              the run store: a file or postgres://… (default: runs.db in the user's data directory)
  OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OLLAMA_HOST
                       LLM providers
  WEFT_DEFAULT_MODEL   the model of agents that name none
  WEFT_USER            who decides, kept with each decision (default: the login name)
  WEFT_TOKENS_FILE     `weft serve`'s tokens, one name:token a line
  WEFT_PRICES          a JSON file of model prices, added to the shipped ones:
                       {\"openai/gpt-4o\": {\"input\": 2.5, \"output\": 10}} (US$ per million tokens)
  WEFT_LOG             log filter for diagnostics on stderr (e.g. `debug`; default `warn`)
  NO_COLOR             set to disable colors

Examples:
  weft validate flows/triage.json
  weft tools flows/files.json       # the tools of a flow's MCP servers
  weft mcp --flows flows            # the flows as MCP tools, over stdio
  weft run flows/triage.json --input 'My order never arrived'
  weft run flows/triage.json --decide review=approve --events > events.ndjson
  weft run flows/triage.json --pins     # nodes pinned in flows/triage.pins.json do not run
  weft run flows/triage.json --replay 3f2a   # recorded answers; only what changed goes live
  weft resume 3f2a --decision reject --note 'too long'
  weft resume 3f2a --retry          # a run whose process was killed
  weft cancel 3f2a                  # a run waiting for a person
  weft run flows/triage.json --break 'classify:after'
  weft resume 3f2a --continue --set '{\"label\": \"bug\"}'
  weft runs
  weft show 3f2a
  weft diff 3f2a 9bc1               # two runs node by node
  weft versions flows/triage.json   # the versions it ran in; --restore HASH writes one back
  weft flow-diff 5d41a2c flows/triage.json   # a kept version against the file
  weft audit --verify               # every approval decision, its hash chain checked
  weft test flows/                  # the cases of every NAME.tests.json, offline when recorded
  weft test flows/triage.json --record --case refund
  weft serve --flows flows --tokens tokens.txt   # the HTTP API (GET /openapi.json)
  weft kinds --json";

// A command's arguments are defined only when it is the one given: defining every command's
// took ~0.1 ms of a short run's start.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Command {
    /// Check a flow file and list every problem, one line per problem.
    Validate(ValidateArgs),
    /// Connect to the MCP servers of a flow (settings.mcpServers) and list each one's tools
    /// with their arguments. Exits 1 when a server cannot be reached.
    Tools(ToolsArgs),
    /// Run a flow until it completes, fails or pauses at an approval.
    Run(RunArgs),
    /// Resume a paused run with a decision, or continue an interrupted one (--retry).
    Resume(ResumeArgs),
    /// Cancel a run paused for a person (by this or any process); a run going in another
    /// process is cancelled there (Ctrl-C).
    Cancel(CancelArgs),
    /// List recent runs.
    Runs(RunsArgs),
    /// Show one run: its status, result, cost, node outputs, LLM calls and event trace.
    Show(ShowArgs),
    /// Compare two runs node by node: status, output, time, tokens and cost. Exits 0 when
    /// every node's output is the same, 1 when any differs.
    Diff(DiffArgs),
    /// List the node kinds: their handles and the fields of their data, with types and help.
    Kinds(KindsArgs),
    /// Run the test cases beside flows (NAME.tests.json), offline from their recordings when
    /// they have them. Exits 0 when every case passed, 1 when any failed.
    Test(TestArgs),
    /// Serve an HTTP API: start runs of the flows in a folder, follow their events (SSE), list
    /// and decide approvals, cancel, webhooks. Every request needs a bearer token.
    Serve(ServeArgs),
    /// List the schedules of the flows in a folder (settings.schedules) with their next
    /// occurrences. Exits 1 when a flow's schedules cannot be used.
    Schedules(SchedulesArgs),
    /// Write flow files in Weft's canonical form (the form the app saves: keys in a stable
    /// order, 2-space indent, integer positions), so that a flow under git diffs by what
    /// changed. Exits 1 with --check when a file is not in that form, 2 when one cannot be read.
    Fmt(FmtArgs),
    /// List a flow file's versions kept in the run store (each distinct content it was run or
    /// saved in), newest first, with the runs that used each; --restore HASH writes one back.
    Versions(VersionsArgs),
    /// List every approval decision kept in the run store (who, when, how, the form's answers,
    /// the edit made to a draft), chained by hash; --verify names the first decision altered or
    /// removed and exits 1 then.
    Audit(AuditArgs),
    /// Compare two versions of a flow (flow files, version hashes, or the flows stored runs
    /// ran): nodes added,
    /// removed, changed field by field, edges and settings. Exits 0 when they are the same, 1
    /// when they differ, 2 when one cannot be read.
    FlowDiff(FlowDiffArgs),
    /// Serve the flows of a folder as MCP tools over standard input and output, for an MCP
    /// client that starts `weft mcp` (an IDE assistant): each flow is a tool named by its file.
    Mcp(McpArgs),
    /// Serve a Restate service endpoint on which each run of a flow in a folder is a durable
    /// workflow (WeftRun): a worker that dies mid-run is replaced by another without repeating
    /// finished steps, and approvals are durable promises decided through Restate's ingress.
    Restate(RestateArgs),
}

// Where runs are stored. (Not a doc comment: the commands that flatten these arguments would
// take it for their own description once their arguments are deferred.)
#[derive(Debug, Clone, Args)]
pub(crate) struct StoreArgs {
    /// The run store: an SQLite file (created when missing) or a PostgreSQL URL
    /// (postgres://USER@HOST/DATABASE; the password may come from PGPASSWORD) [default: runs.db in
    /// the user's data directory]
    #[arg(long, value_name = "PATH|URL", env = "WEFT_DB", hide_env_values = true)]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// The flow file (JSON).
    #[arg(value_name = "FLOW")]
    pub flow: PathBuf,
    /// Print `{"valid": bool, "problems": [...]}` on stdout instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Also connect to the MCP servers the agents name and check their `tools.mcp` entries
    /// against the tools each server lists.
    #[arg(long)]
    pub connect: bool,
}

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// The folder whose flows are the tools (`triage` is DIR/triage.json).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub flows: PathBuf,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ToolsArgs {
    /// The flow file (JSON).
    #[arg(value_name = "FLOW")]
    pub flow: PathBuf,
    /// Print `{"servers": [{name, transport, tools: [{name, description, inputSchema}], error?}]}`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The flow file (JSON).
    #[arg(value_name = "FLOW")]
    pub flow: PathBuf,
    /// The run's input (a JSON object or array is read as JSON) [default: the start node's
    /// initialInput]
    #[arg(long, value_name = "TEXT")]
    pub input: Option<String>,
    /// Answer an approval in advance: NODE=approve, NODE=reject or NODE=reject:NOTE (repeatable).
    #[arg(long = "decide", value_name = "NODE=DECISION[:NOTE]", value_parser = parse_decide)]
    pub decisions: Vec<(String, Decision)>,
    /// Print every event as one JSON line on stdout (NDJSON) instead of progress and result.
    #[arg(long)]
    pub events: bool,
    /// Run from NODE on, feeding it what the run given with --after left (its input, and every
    /// node's output for templates); the nodes before it do not run again.
    #[arg(long, value_name = "NODE", requires = "after", conflicts_with = "only")]
    pub from: Option<String>,
    /// Run only NODE, with what the run given with --after left.
    #[arg(long, value_name = "NODE", requires = "after")]
    pub only: Option<String>,
    /// The earlier run (id or unique prefix) whose outputs --from or --only reuse.
    #[arg(long, value_name = "RUN_ID")]
    pub after: Option<String>,
    /// Use the pinned outputs in NAME.pins.json beside the flow: those nodes do not run, their
    /// pin is their output ({"pins": {"NODE": {"output": VALUE}}}).
    #[arg(long)]
    pub pins: bool,
    /// Replay the run RUN_ID (id or unique prefix): a request identical to one it recorded (same
    /// node, visit and request) gets the recorded answer with no provider call; the first that
    /// differs, and every node after it on its branch, goes live.
    #[arg(long, value_name = "RUN_ID")]
    pub replay: Option<String>,
    /// Stop before NODE runs, or after it ran (NODE:after), optionally only when a condition
    /// holds: 'NODE[:after] if visit == 3' (repeatable); NODE:tool stops before each MCP tool
    /// call of the agent NODE. The run pauses there; go on with `weft resume RUN --continue`.
    #[arg(long = "break", value_name = "NODE[:after|:tool] [if CONDITION]", value_parser = parse_break)]
    pub breakpoints: Vec<Breakpoint>,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("how").required(true).multiple(true).args(["decision", "retry", "go_on"])))]
pub(crate) struct ResumeArgs {
    /// The paused (or interrupted) run's id, or a unique prefix of it.
    #[arg(value_name = "RUN_ID")]
    pub run_id: String,
    /// The answer for the approval the run waits at: approve or reject.
    #[arg(long, value_name = "approve|reject")]
    pub decision: Option<String>,
    /// Continue an interrupted run (its process stopped before it ended) from its last
    /// finished steps: only the steps that were running run again, and LLM calls they had
    /// already made are not sent again.
    #[arg(long)]
    pub retry: bool,
    /// Go on from the breakpoint the run is paused at.
    #[arg(long = "continue", conflicts_with_all = ["decision", "retry"])]
    pub go_on: bool,
    /// With --continue: stop again before the steps that become ready next.
    #[arg(long, requires = "go_on")]
    pub step: bool,
    /// With --continue: go on with this JSON value instead of the one at the breakpoint (the
    /// node's input before it, its output after; an output is checked against outputSchema).
    #[arg(long, value_name = "JSON", requires = "go_on")]
    pub set: Option<String>,
    /// A note stored with the decision (`{{ approval.note }}` in templates).
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "",
        hide_default_value = true
    )]
    pub note: String,
    /// An answer for the approval's form: NAME=VALUE (`{{ approval.NAME }}`); repeatable.
    #[arg(long = "field", value_name = "NAME=VALUE", value_parser = parse_field)]
    pub fields: Vec<(String, String)>,
    /// Who decides, kept with the decision [default: WEFT_USER, else the login name].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Print every event as one JSON line on stdout (NDJSON) instead of progress and result.
    #[arg(long)]
    pub events: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

fn parse_field(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("`{text}` should look like NAME=VALUE")),
    }
}

#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    /// The run's id (or a unique prefix of it).
    #[arg(value_name = "RUN_ID")]
    pub run_id: String,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RunsArgs {
    /// Print the runs as a JSON array.
    #[arg(long)]
    pub json: bool,
    /// How many runs to list, newest first.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The run's id (or a unique prefix of it).
    #[arg(value_name = "RUN_ID")]
    pub run_id: String,
    /// Print `{"run", "nodeOutputs", "events"}` as JSON (with every event, deltas included).
    #[arg(long)]
    pub json: bool,
    /// Also list `llm_delta` events (streamed tokens), hidden by default.
    #[arg(long)]
    pub deltas: bool,
    /// Show every visit of this node instead (each loop pass, forEach item and step inside a
    /// subflow): input, output, time, tokens and cost.
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The folder whose flows can be started by name (`triage` is DIR/triage.json).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub flows: PathBuf,
    /// Where to listen.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8420")]
    pub addr: String,
    /// The tokens that may call, one `name:token` a line (the name is kept as the decider).
    #[arg(long, value_name = "FILE", env = "WEFT_TOKENS_FILE")]
    pub tokens: Option<PathBuf>,
    /// Request bodies larger than this many bytes are refused with 413 [default: 1 MiB].
    #[arg(long, value_name = "BYTES")]
    pub max_body: Option<usize>,
    /// A connection that has not sent a request's line and headers within this many seconds
    /// (after it opened, or after its last answer) is closed.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = weft_server::DEFAULT_HEADER_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    pub header_timeout: u64,
    /// A request body that has not all arrived within this many seconds is refused with 408.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = weft_server::DEFAULT_BODY_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    pub body_timeout: u64,
    /// Who may decide approvals that name approvers or groups: one person a line, `NAME EMAIL
    /// GROUP...` (docs/approvals.md).
    #[arg(long, value_name = "FILE", env = "WEFT_PEOPLE_FILE")]
    pub people: Option<PathBuf>,
    /// Email approvers a link to answer through this SMTP server: smtp://HOST[:PORT],
    /// smtps://HOST[:PORT] (TLS), smtp://HOST[:PORT]?tls=required (STARTTLS). Needs
    /// --public-url and WEFT_LINK_KEY; credentials from WEFT_SMTP_USERNAME and
    /// WEFT_SMTP_PASSWORD.
    #[arg(long, value_name = "URL", env = "WEFT_SMTP_URL")]
    pub smtp: Option<String>,
    /// This server's address as approvers' browsers reach it, for the links in emails.
    #[arg(long, value_name = "URL", env = "WEFT_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Who approval emails come from [default: Weft <weft@HOST of --public-url>].
    #[arg(long, value_name = "ADDRESS", env = "WEFT_MAIL_FROM")]
    pub mail_from: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RestateArgs {
    /// The folder whose flows can be run by name (`triage` is DIR/triage.json).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub flows: PathBuf,
    /// Where the endpoint listens for Restate.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9080")]
    pub addr: String,
    /// Register the endpoint with Restate's admin API at this URL (e.g. http://127.0.0.1:9070).
    #[arg(long, value_name = "URL", env = "WEFT_RESTATE_ADMIN")]
    pub register: Option<String>,
    /// Restate's ingress as the other hosts of the run store reach it: a decision given to
    /// `weft resume`, `weft serve` or the app for one of these runs is sent there.
    #[arg(
        long,
        value_name = "URL",
        env = "WEFT_RESTATE_INGRESS",
        default_value = "http://127.0.0.1:8080"
    )]
    pub ingress: String,
    /// The endpoint's URL as Restate reaches it, when registering [default: http://ADDR].
    #[arg(long, value_name = "URL")]
    pub endpoint_url: Option<String>,
    /// How long Restate waits before retrying a run whose worker went away [default: 1 s].
    #[arg(long, value_name = "MILLISECONDS", default_value_t = 1_000)]
    pub retry_after_ms: u64,
    /// Who may decide approvals that name approvers or groups: one person a line, `NAME EMAIL
    /// GROUP...` (docs/approvals.md).
    #[arg(long, value_name = "FILE", env = "WEFT_PEOPLE_FILE")]
    pub people: Option<PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct TestArgs {
    /// A flow (its cases are in NAME.tests.json beside it), a tests file, or a folder (every
    /// tests file in it).
    #[arg(value_name = "FLOW|DIR")]
    pub target: PathBuf,
    /// Only the case of this name.
    #[arg(long, value_name = "NAME")]
    pub case: Option<String>,
    /// Run each case N times (instead of its own `repeat`).
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// The share of a case's runs that must pass, 0 to 1 (instead of its own `passRate`).
    #[arg(long, value_name = "RATE")]
    pub pass_rate: Option<f64>,
    /// Ask the providers and keep their answers in NAME.recordings/ for offline runs.
    #[arg(long)]
    pub record: bool,
    /// Never ask a provider: a case without a recording fails at its first LLM request.
    #[arg(long)]
    pub offline: bool,
    /// Print the results as JSON on stdout (no progress on stderr).
    #[arg(long)]
    pub json: bool,
    /// Also write the results as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Cases run at the same time.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub jobs: usize,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// The first run's id (or a unique prefix of it).
    #[arg(value_name = "RUN_A")]
    pub a: String,
    /// The second run's id (or a unique prefix of it).
    #[arg(value_name = "RUN_B")]
    pub b: String,
    /// Print the comparison as JSON: `{"a", "b", "nodes": [...], "equal"}`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct SchedulesArgs {
    /// The folder whose flows' schedules to list.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub flows: PathBuf,
    /// Print `{"schedules": [...], "problems": [...]}` as JSON.
    #[arg(long)]
    pub json: bool,
    /// How many occurrences of each schedule to list.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub count: usize,
}

#[derive(Debug, Args)]
pub(crate) struct FlowDiffArgs {
    /// The first version: a flow file, a version's hash (or a unique prefix of it, as `weft
    /// versions` lists them), or a run's id (or a unique prefix) whose flow to take.
    #[arg(value_name = "A")]
    pub a: String,
    /// The second version, the same way.
    #[arg(value_name = "B")]
    pub b: String,
    /// Print `{"equal", "changes": {flow, settings, nodesAdded, nodesRemoved, nodesChanged,
    /// nodesMoved, edgesAdded, edgesRemoved}}` as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    /// Only the decisions of this run (an id or a unique prefix).
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// Print the decisions as a JSON array: `[{seq, runId, nodeId, pause, decision, by,
    /// channel, note, fields, draftEdit?, at, prevHash, hash}]`.
    #[arg(long)]
    pub json: bool,
    /// Walk the whole chain and name the first decision altered or removed (exit 1), else say
    /// how many are intact.
    #[arg(long)]
    pub verify: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct VersionsArgs {
    /// The flow file.
    #[arg(value_name = "FLOW")]
    pub flow: PathBuf,
    /// Print `{"path", "current", "versions": [{hash, firstAt, lastAt, runs, subflowRuns,
    /// saves, current}]}` as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the version with this hash (or a unique prefix of it) to FLOW, in canonical form.
    #[arg(long, value_name = "HASH")]
    pub restore: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub(crate) struct FmtArgs {
    /// The flow files.
    #[arg(value_name = "FLOW", required = true)]
    pub flows: Vec<PathBuf>,
    /// Write nothing: list the files not in canonical form, and exit 1 when there are any.
    #[arg(long)]
    pub check: bool,
}

#[derive(Debug, Args)]
pub(crate) struct KindsArgs {
    /// Print `{"kinds": [...], "commonFields": [...]}` as JSON: what a canvas draws nodes from.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the node-kind reference as Markdown (docs/kinds.md is this output).
    #[arg(long)]
    pub markdown: bool,
}

fn parse_decide(text: &str) -> Result<(String, Decision), String> {
    Decision::parse_for_node(text)
}

fn parse_break(text: &str) -> Result<Breakpoint, String> {
    Breakpoint::parse(text)
}

/// How a command ended; the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// 0: the run completed, or the flow is valid.
    Success,
    /// 1: the run failed or was cancelled.
    Failure,
    /// 2: the flow is invalid or the command was used wrongly.
    Invalid,
    /// 3: the run is paused, waiting for a decision.
    Paused,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(match exit {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Invalid => 2,
            Exit::Paused => 3,
        })
    }
}

/// An error that exits with code 2 (invalid flow or usage) rather than 1. It may be wrapped
/// in context; `main` finds it anywhere in the chain.
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A usage error (exit 2) with `message`.
pub(crate) fn usage_error(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    // Before any store is opened: the engines made from here on export traces when the
    // OTEL_* variables ask for them.
    weft_otel::init("weft");
    let result = match cli.command {
        Command::Validate(args) => commands::validate::validate(&args),
        Command::Tools(args) => block_on(Threads::Pool, || commands::tools::tools(args)),
        Command::Run(args) => commands::run::run(args),
        Command::Resume(args) => block_on(Threads::Pool, || commands::resume::resume(args)),
        Command::Cancel(args) => commands::cancel::cancel(&args),
        Command::Runs(args) => commands::runs::runs(&args),
        Command::Show(args) => commands::show::show(&args),
        Command::Diff(args) => commands::diff::diff(&args),
        Command::Kinds(args) => commands::kinds::kinds(&args),
        Command::Schedules(args) => commands::schedules::schedules(&args),
        Command::Fmt(args) => commands::fmt::fmt(&args),
        Command::FlowDiff(args) => commands::flow_diff::flow_diff(&args),
        Command::Versions(args) => commands::versions::versions(&args),
        Command::Audit(args) => commands::audit::audit(&args),
        Command::Test(args) => block_on(Threads::Pool, || commands::test::test(args)),
        Command::Serve(args) => block_on(Threads::Pool, || commands::serve::serve(args)),
        Command::Restate(args) => block_on(Threads::Pool, || commands::restate::restate(args)),
        Command::Mcp(args) => block_on(Threads::Pool, || commands::mcp::mcp(args)),
    };
    // The MCP servers the runs started end with the process (their groups: what they started
    // too). A second Ctrl-C quits from the signal handler instead: a server then sees its
    // input close, and a well-behaved one exits.
    weft_mcp::stop_all_servers();
    weft_otel::shutdown();
    match result {
        Ok(exit) => exit.into(),
        Err(error) => {
            let style = output::Style::stderr();
            eprintln!("{} {error:#}", style.red_bold("error:"));
            let usage = error.chain().any(|cause| cause.is::<UsageError>());
            if usage { Exit::Invalid } else { Exit::Failure }.into()
        }
    }
}

/// The threads that drive a command's async tasks (blocking work, such as a `code` node's
/// Python, has threads of its own either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Threads {
    /// The command's own thread: enough for a flow that runs one step at a time.
    One,
    /// A worker per core.
    Pool,
}

/// Runs a command on the async runtime. Once the command has its answer, the process does not
/// wait for work the run abandoned (a step still unwinding on a blocking thread) beyond a
/// moment: the run's end is already stored.
///
/// The command's future is made here and kept on the heap: a command's future is large, and
/// made by the caller it would be part of `main`'s stack frame, every command's at once, all of
/// whose pages a process touches when it starts (a page fault each).
#[inline(never)]
fn block_on<T, F: std::future::Future<Output = anyhow::Result<T>>>(
    threads: Threads,
    command: impl FnOnce() -> F,
) -> anyhow::Result<T> {
    use anyhow::Context as _;
    let mut builder = match threads {
        Threads::One => tokio::runtime::Builder::new_current_thread(),
        Threads::Pool => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = builder
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(Box::pin(command()));
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    result
}

/// Diagnostics (not progress) go to stderr, filtered by `WEFT_LOG`; never to stdout.
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("WEFT_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let color = output::Style::stderr().color;
    // A second initialization cannot happen here; ignore the error rather than panic.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(color)
        .with_target(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn decide_parses_node_and_decision() {
        let cli = Cli::try_parse_from([
            "weft",
            "run",
            "f.json",
            "--decide",
            "review=reject:too long",
        ])
        .expect("parses");
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.decisions.len(), 1);
        assert_eq!(args.decisions[0].0, "review");
        assert_eq!(args.decisions[0].1.note, "too long");
        assert!(
            Cli::try_parse_from(["weft", "run", "f.json", "--decide", "review=maybe"]).is_err()
        );
    }
}
