//! Weft's engine: runs flows. Start a run, resume a paused one with a decision, go on from a
//! breakpoint, continue one whose process died, cancel one; the scheduler runs branches
//! concurrently and stores every step as it ends, so a run survives its process.
//!
//! - [`run`]: the [`Engine`] and its options; the scheduler and the run's context.
//! - [`breakpoints`]: where a run stops for a person, and what may be changed there.
//! - [`pins`]: outputs that stand in for their nodes, which then do not run.
//!
//! Below it: the flow file (`weft-flow`), node kinds and validation (`weft-nodes`), templates
//! (`weft-template`), providers (`weft-providers`), events (`weft-event`) and the run store
//! (`weft-store`).

pub mod breakpoints;
pub mod pins;
pub mod run;
pub mod trace;

pub use run::{
    Continue, DecideError, Engine, Entry, MAX_RUN_OUTPUT_BYTES, MAX_VALUE_BYTES, PauseAnswer,
    Pricer, RecordedAnswers, ResumeOptions, RunError, RunHandle, RunOptions, RunOutcome, Waiting,
    check_decisions, waiting_of,
};
