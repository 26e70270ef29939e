//! Weft's engine: everything a host (the `weft` command, the desktop app) needs to load,
//! validate, run and inspect LLM agent workflows.
//!
//! - [`flow`]: the flow file: load (with normalization of older forms), save.
//! - [`validate()`]: every problem of a flow at once, each naming its node or edge.
//! - [`nodes`]: the node kinds, one file each, and the registry that lists them.
//! - [`step`]: what a node kind sees of a run while it runs (the step interface).
//! - [`run`]: the [`Engine`]: start, resume, cancel, shut down; the scheduler.
//! - [`template`]: MiniJinja templates with the names of SPEC §3.
//! - [`providers`]: LLM providers over their real HTTP wire formats.
//! - [`event`]: the ordered events every run emits.
//! - [`stop`]: a process's request that its runs stop, as a signal handler makes it.
//! - [`store`]: the SQLite run store (runs, events, node outputs, paused queues).
//! - [`compare`], [`cost`], [`visits`]: what runs did and cost, per node, per visit, side by side.
//! - [`testing`]: flow tests: cases beside a flow, their assertions, judges and recordings.

pub mod backoff;
pub mod breakpoints;
pub mod compare;
pub mod cost;
pub mod event;
pub mod flow;
pub mod flow_names;
pub mod history;
pub mod nodes;
pub mod output_schema;
pub mod path;
pub mod pins;
pub mod providers;
pub mod run;
pub mod step;
pub mod stop;
pub mod store;
pub mod template;
pub mod testing;
pub mod validate;
pub mod visits;

pub use event::{EventSink, EventType, RunEvent, RunStatus};
pub use flow::{Edge, Flow, LoadError, Node};
pub use flow_names::{FlowNameError, flow_in_dir};
pub use nodes::Decision;
pub use run::{
    Continue, DecideError, Engine, Entry, EventListener, PauseAnswer, PendingApproval,
    RESTATE_HOST, RESTATE_WORKFLOW, RecordedAnswers, ResumeOptions, RunError, RunHandle,
    RunOptions, RunOutcome, Waiting, check_decisions, waiting_of,
};
pub use store::{Store, StoreError, WriterStart, is_postgres_url, shown_location};
pub use validate::{
    CheckedFlow, FlowToRun, Problem, ProblemCode, Severity, check_flow, check_for_run,
    provider_problems, validate,
};
