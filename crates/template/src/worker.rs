//! Renders by MiniJinja run on threads of their own, each under a memory budget
//! ([`weft_alloc::Budget`]).
//!
//! A render's intermediate values can grow without calling Weft in between (a string doubled
//! in a loop over a literal list, a list concatenated with itself in a recursive loop), so the
//! render's checkpoints cannot bound them: the allocator does. Past the soft limit a render
//! stops at its next checkpoint; at the hard limit the allocator parks its thread for good,
//! which only a thread of its own may suffer. The caller waits for the render and gives up on
//! it when its budget is exhausted, when its run is cancelled, or shortly after its deadline
//! (a render stops at its deadline by itself when it reaches a checkpoint).
//!
//! Threads are kept for the next render; one given up on is not (it ends when its render
//! does, or never, when parked). A process keeps at most [`MAX_PARKED`] parked renders, each
//! holding at most [`RENDER_MEMORY_HARD_LIMIT`]: past that, renders by MiniJinja are refused.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft_alloc::Budget;

use crate::{RENDER_MEMORY_HARD_LIMIT, RENDER_MEMORY_SOFT_LIMIT, RenderLimits, TemplateError};

/// A render to run: all it needs, owned.
pub(crate) type Work = Box<dyn FnOnce() -> Result<String, TemplateError> + Send>;

/// Renders stopped at the hard limit a process keeps before it refuses renders.
pub const MAX_PARKED: usize = 4;

/// Threads kept idle for the next renders.
const MAX_IDLE: usize = 4;

/// How long after its deadline a render that reached no checkpoint is waited for (one that
/// reaches one stops there at its deadline).
const GRACE: Duration = Duration::from_millis(200);

/// How often the waiter looks at the budget and the run's cancellation.
const POLL: Duration = Duration::from_millis(10);

/// MiniJinja renders by recursion (nested loops, macros, includes): the room the caller's
/// thread would have had.
const STACK_BYTES: usize = 8 * 1024 * 1024;

struct Job {
    work: Work,
    exhausted: Arc<AtomicBool>,
    reply: mpsc::SyncSender<Result<String, TemplateError>>,
}

struct Worker {
    jobs: mpsc::Sender<Job>,
}

/// A render its waiter gave up on (its deadline passed, its run was cancelled), watched until
/// it ends: by itself, or parked at the hard limit, which counts against [`MAX_PARKED`].
struct GivenUp {
    exhausted: Arc<AtomicBool>,
    answer: mpsc::Receiver<Result<String, TemplateError>>,
}

static IDLE: Mutex<Vec<Worker>> = Mutex::new(Vec::new());
static GIVEN_UP: Mutex<Vec<GivenUp>> = Mutex::new(Vec::new());
static PARKED: AtomicUsize = AtomicUsize::new(0);

/// Counts the renders given up on that have parked since, and forgets those that ended.
fn settle_given_up() {
    let mut given_up = GIVEN_UP
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    given_up.retain(|render| {
        if Budget::exhausted(&render.exhausted) {
            PARKED.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        matches!(render.answer.try_recv(), Err(mpsc::TryRecvError::Empty))
    });
}

fn give_up(exhausted: Arc<AtomicBool>, answer: mpsc::Receiver<Result<String, TemplateError>>) {
    GIVEN_UP
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(GivenUp { exhausted, answer });
}

/// Runs `work` on a render thread and waits for it within `limits`.
pub(crate) fn render(work: Work, limits: &RenderLimits) -> Result<String, TemplateError> {
    settle_given_up();
    if PARKED.load(Ordering::Relaxed) >= MAX_PARKED {
        return Err(TemplateError::Unavailable);
    }
    let exhausted = Arc::new(AtomicBool::new(false));
    let (reply, answer) = mpsc::sync_channel(1);
    let job = Job {
        work,
        exhausted: Arc::clone(&exhausted),
        reply,
    };
    let worker = hand_over(job)?;
    let give_up_at = limits.deadline + GRACE;
    loop {
        match answer.recv_timeout(POLL) {
            Ok(result) => {
                let mut idle = IDLE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if idle.len() < MAX_IDLE {
                    idle.push(worker);
                }
                return result;
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(TemplateError::Render(
                    "the template engine stopped unexpectedly".to_string(),
                ));
            }
            Err(RecvTimeoutError::Timeout) => {
                if Budget::exhausted(&exhausted) {
                    PARKED.fetch_add(1, Ordering::Relaxed);
                    return Err(TemplateError::TooMuchMemory);
                }
                if crate::stop::requested() {
                    // As a render's checkpoint does: the host's task that would cancel the run
                    // may not run while this thread waits.
                    limits.cancel.cancel();
                }
                if limits.cancel.is_cancelled() {
                    give_up(exhausted, answer);
                    return Err(TemplateError::Cancelled);
                }
                if Instant::now() >= give_up_at {
                    give_up(exhausted, answer);
                    return Err(TemplateError::TimedOut);
                }
            }
        }
    }
}

/// Gives `job` to an idle render thread, or to a new one.
fn hand_over(mut job: Job) -> Result<Worker, TemplateError> {
    loop {
        let idle = IDLE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        let worker = match idle {
            Some(worker) => worker,
            None => start().map_err(|error| {
                TemplateError::Render(format!("cannot start a thread to render: {error}"))
            })?,
        };
        match worker.jobs.send(job) {
            Ok(()) => return Ok(worker),
            // The thread ended (it cannot, short of a panic outside a render): another.
            Err(mpsc::SendError(returned)) => job = returned,
        }
    }
}

fn start() -> std::io::Result<Worker> {
    let (jobs, received) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("weft-template".to_string())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            for job in received {
                let budget = Budget::open(
                    RENDER_MEMORY_SOFT_LIMIT,
                    RENDER_MEMORY_HARD_LIMIT,
                    job.exhausted,
                );
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job.work))
                    .unwrap_or_else(|_| {
                        Err(TemplateError::Render(
                            "the template engine failed on this template".to_string(),
                        ))
                    });
                drop(budget);
                // A waiter that gave up is gone: the result is dropped with the job.
                let _ = job.reply.send(result);
            }
        })?;
    Ok(Worker { jobs })
}
