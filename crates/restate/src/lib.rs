//! `weft restate`: runs as durable workflows on Restate (docs/team-servers.md).
//!
//! A worker serves a Restate service endpoint with one workflow, [`SERVICE`]: an invocation of
//! its `run` handler is one run, keyed by the run's id, of a flow from the worker's flows folder.
//! Restate journals the invocation; the engine runs the flow as everywhere else, on a run store
//! shared by the workers (PostgreSQL), so History, `weft show`, the app and `weft serve` see
//! these runs.
//!
//! How the two kinds of durability meet:
//! - The run goes in *segments*: from its start, and from each decision, up to its end or its
//!   next pause. A segment is one journaled `ctx.run` whose result is where the run stood
//!   (completed with its result, failed with its error, or paused at a node). A finished
//!   segment is never run again: a worker that takes the invocation over replays its result.
//! - Within a segment, each step's output, the run's checkpoints and every LLM answer are
//!   stored as the step finishes (the engine's crash safety). When a worker dies in the middle
//!   of a segment, Restate retries the invocation on another worker; the segment finds the run
//!   left `running` by a process that is gone, marks it interrupted (at once on the same
//!   machine, else when its 15 s lease runs out) and continues it from its last checkpoint:
//!   finished steps are not run again and recorded LLM answers are not asked for again.
//! - A pause is a durable promise of the workflow, named by the run's last event when it paused
//!   (`pause-at-17`). The `decide` handler (through Restate's ingress, or sent there by `weft
//!   resume`, `weft serve` and the app) checks the answer against the approval's form and
//!   resolves it; the next segment resumes the run with it. Of two decisions for one pause,
//!   exactly one is taken. An approval with `timeoutSeconds` also waits on a durable timer:
//!   when it fires first, the run goes on along `timeout`.
//!
//! Segments rather than one journal entry per step: branches run concurrently, so the order in
//! which their steps would be journaled changes from one execution to the next, and Restate's
//! replay needs the same order every time. The store's records are keyed by node and visit
//! instead, which any order finds again.

mod ingress;
#[cfg(feature = "worker")]
mod schedules;
#[cfg(feature = "worker")]
mod worker;

pub use ingress::RestateIngress;
#[cfg(feature = "worker")]
pub use schedules::StartThroughIngress;
#[cfg(feature = "worker")]
pub use worker::*;

/// The workflow's name in Restate (the ingress path is `/WeftRun/{run id}/run`).
pub const SERVICE: &str = "WeftRun";

/// How a run hosted by a Restate workflow names its host: `restate INGRESS-URL`.
pub const HOST_PREFIX: &str = "restate ";
