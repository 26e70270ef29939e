//! Worker threads, the watchdog and panic containment.
//!
//! Interpreters are not `Send` (rustpython is built without its `threading` feature), so each
//! lives on a worker thread of its own and jobs are sent to it. The calling thread waits for
//! the answer and meanwhile acts as the watchdog: it checks the deadline and the process's
//! resident memory every few milliseconds. To stop a run it sends the interpreter a user
//! signal, which the VM runs between two bytecode instructions (see [`stop_signal`]). A panic
//! inside the VM is caught on the worker and becomes [`SandboxError::Internal`]; that
//! interpreter is replaced by a fresh one.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rustpython_vm::signal::{UserSignal, UserSignalSender};

use crate::interp::Engine;
use crate::{CodeRun, Job, Limits, SandboxError};

/// How often the waiting caller checks the clock and memory.
const POLL: Duration = Duration::from_millis(5);

/// How long a stopped run may take to unwind before the caller gives up on its worker.
const GRACE: Duration = Duration::from_millis(250);

/// How often an abandoned run is signalled again.
const REAPER_INTERVAL: Duration = Duration::from_millis(20);

/// Stack size of worker threads: deep Python recursion uses a lot of native stack (more so in
/// debug builds); the VM's own stack check uses what is there.
pub(crate) const WORKER_STACK: usize = 64 * 1024 * 1024;

/// Why a run is being stopped.
const RUNNING: u8 = 0;
const STOP_TIMEOUT: u8 = 1;
const STOP_MEMORY: u8 = 2;
const STOP_CANCELLED: u8 = 3;

/// Shared between the caller and the worker during one run.
#[derive(Default)]
struct Control {
    stop: AtomicU8,
    done: AtomicBool,
    signal: Mutex<Option<UserSignalSender>>,
}

struct Task {
    job: Job,
    control: Arc<Control>,
    reply: mpsc::Sender<Result<CodeRun, SandboxError>>,
}

/// A worker thread, reached through its job queue.
struct Worker {
    tasks: mpsc::Sender<Task>,
}

/// The process-wide pool of idle workers.
pub(crate) struct Pool {
    idle: Mutex<Vec<Worker>>,
    max_idle: usize,
}

/// The name of the threads that run interpreters.
const WORKER_NAME: &str = "weft-sandbox";

impl Pool {
    pub(crate) fn global() -> Arc<Pool> {
        static POOL: OnceLock<Arc<Pool>> = OnceLock::new();
        POOL.get_or_init(|| {
            quiet_panics_on_workers();
            let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
            Arc::new(Pool {
                idle: Mutex::new(Vec::new()),
                max_idle: cores.max(4),
            })
        })
        .clone()
    }

    fn take_worker(&self) -> Result<Worker, SandboxError> {
        if let Some(worker) = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(worker);
        }
        let (tasks, receiver) = mpsc::channel::<Task>();
        std::thread::Builder::new()
            .name(WORKER_NAME.to_owned())
            .stack_size(WORKER_STACK)
            .spawn(move || worker_main(receiver))
            .map_err(|e| SandboxError::Internal(format!("could not start a worker thread: {e}")))?;
        Ok(Worker { tasks })
    }

    fn give_back(&self, worker: Worker) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.max_idle {
            idle.push(worker);
        }
    }

    /// Runs a job on a worker and watches it.
    pub(crate) fn run(&self, job: Job) -> Result<CodeRun, SandboxError> {
        let limits = job.limits.clone();
        let cancel = job.cancel.clone();
        let worker = self.take_worker()?;
        let control = Arc::new(Control::default());
        let (reply, answer) = mpsc::channel();
        let baseline = resident_bytes();
        let started = Instant::now();
        let deadline = started + limits.timeout;
        let task = Task {
            job,
            control: control.clone(),
            reply,
        };
        if worker.tasks.send(task).is_err() {
            return Err(SandboxError::Internal("a worker thread is gone".to_owned()));
        }

        let mut stopping: Option<(u8, Instant)> = None;
        loop {
            let now = Instant::now();
            let wait = match stopping {
                Some(_) => POLL,
                None => POLL.min(deadline.saturating_duration_since(now)),
            };
            match answer.recv_timeout(wait) {
                Ok(result) => {
                    self.give_back(worker);
                    return result;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(SandboxError::Internal(
                        "the worker thread stopped unexpectedly".to_owned(),
                    ));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            let now = Instant::now();
            if stopping.is_none() {
                let reason = if cancel.load(Ordering::SeqCst) {
                    Some(STOP_CANCELLED)
                } else if now >= deadline {
                    Some(STOP_TIMEOUT)
                } else {
                    match (baseline, resident_bytes()) {
                        (Some(before), Some(current))
                            if current.saturating_sub(before) > limits.max_memory_bytes =>
                        {
                            Some(STOP_MEMORY)
                        }
                        _ => None,
                    }
                };
                if let Some(reason) = reason {
                    control.stop.store(reason, Ordering::SeqCst);
                    stopping = Some((reason, now));
                }
            }
            if let Some((reason, since)) = stopping {
                // Sent again on every poll: the VM-wide "a signal is pending" flag is shared
                // by every interpreter in the process, and another worker may clear it first.
                send_stop(&control);
                if now.duration_since(since) > GRACE {
                    // The interpreter is stuck in one long native call: answer now, and leave
                    // the worker behind (it is not returned to the pool and exits after this
                    // job) with a thread that keeps asking it to stop until it has.
                    keep_stopping(control);
                    return Err(stop_error(reason, &limits));
                }
            }
        }
    }
}

fn stop_error(reason: u8, limits: &Limits) -> SandboxError {
    match reason {
        STOP_MEMORY => SandboxError::Memory,
        STOP_CANCELLED => SandboxError::Cancelled,
        _ => SandboxError::Timeout {
            seconds: limits.timeout.as_secs_f64(),
        },
    }
}

/// Asks the interpreter running `control`'s job to stop.
fn send_stop(control: &Arc<Control>) {
    let signal = control
        .signal
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if let Some(signal) = signal {
        let _ = signal.send(stop_signal(control.clone(), signal.clone()));
    }
}

/// Keeps signalling an abandoned run until its worker reports it done, so that it ends as
/// soon as it executes bytecode again.
fn keep_stopping(control: Arc<Control>) {
    let spawned = std::thread::Builder::new()
        .name("weft-sandbox-reaper".to_owned())
        .stack_size(64 * 1024)
        .spawn(move || {
            while !control.done.load(Ordering::SeqCst) {
                send_stop(&control);
                std::thread::sleep(REAPER_INTERVAL);
            }
        });
    // Without that thread the run still ends if it executes the stop signal it sent itself.
    drop(spawned);
}

/// The signal that stops a run: it raises `KeyboardInterrupt` and sends itself again, so
/// that the next instruction raises again. An `except:` or `finally:` block therefore
/// cannot run a single instruction, and the exception leaves the body like any other:
/// frames are unwound by the VM itself, their objects freed, and the interpreter stays
/// usable. Once the run is over (`done`), a late copy does nothing.
fn stop_signal(control: Arc<Control>, signal: UserSignalSender) -> UserSignal {
    Box::new(move |vm| {
        if control.done.load(Ordering::SeqCst) || control.stop.load(Ordering::SeqCst) == RUNNING {
            return Ok(());
        }
        // Returning an error also ends the VM's loop over pending signals, so the copy sent
        // here runs at the next instruction, not in this same call.
        let _ = signal.send(stop_signal(control.clone(), signal.clone()));
        Err(vm.new_exception_msg(
            vm.ctx.exceptions.keyboard_interrupt.to_owned(),
            "the sandboxed code was stopped".into(),
        ))
    })
}

fn worker_main(tasks: mpsc::Receiver<Task>) {
    let mut engine: Option<Engine> = None;
    for task in tasks {
        let limits = task.job.limits.clone();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if engine.is_none() {
                engine = Some(Engine::new()?);
            }
            let Some(current) = engine.as_mut() else {
                return Err(SandboxError::Internal("no interpreter".to_owned()));
            };
            *task
                .control
                .signal
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(current.signal());
            current.run(&task.job)
        }));
        task.control.done.store(true, Ordering::SeqCst);
        let stop = task.control.stop.load(Ordering::SeqCst);
        let result = match outcome {
            Ok(Err(_)) if stop != RUNNING => Err(stop_error(stop, &limits)),
            Ok(result) => result,
            Err(payload) => {
                // A panic inside the VM: never reuse that interpreter.
                if let Some(broken) = engine.take() {
                    let _ = catch_unwind(AssertUnwindSafe(move || drop(broken)));
                }
                Err(panic_error(payload))
            }
        };
        if task.reply.send(result).is_err() {
            // The caller gave up on this worker: it is no longer in the pool.
            return;
        }
    }
}

/// Installs (once, with the pool) a panic hook that stays silent on sandbox worker threads and
/// defers to the previous hook everywhere else. A VM panic there becomes
/// [`SandboxError::Internal`] with its message; the default hook would print it to the user's
/// terminal and, with `RUST_BACKTRACE` set, spend longer symbolizing a backtrace than the
/// caller's grace period, turning the answer into a false `Memory` or `Timeout`.
fn quiet_panics_on_workers() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() == Some(WORKER_NAME) {
            return;
        }
        previous(info);
    }));
}

fn panic_error(payload: Box<dyn Any + Send>) -> SandboxError {
    let message = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic in the Python VM".to_owned()
    };
    SandboxError::Internal(format!("the Python VM panicked: {message}"))
}

/// The process's resident memory, from `/proc/self/status` (Linux); `None` elsewhere.
fn resident_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: usize = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(body: &str) -> Job {
        Job {
            body: body.to_owned(),
            fields: Vec::new(),
            initial: serde_json::Value::Null,
            input: serde_json::Value::Null,
            limits: Limits::default(),
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }

    #[test]
    fn a_vm_panic_becomes_an_internal_error_and_the_pool_recovers() {
        let pool = Pool::global();
        let error = pool
            .run(job("weft_test_panic()"))
            .expect_err("the run fails");
        assert!(
            matches!(&error, SandboxError::Internal(m) if m.contains("a test panic")),
            "{error:?}"
        );
        let value = pool.run(job("return 41 + 1")).map(|r| r.value);
        assert_eq!(value, Ok(serde_json::json!(42)));
    }

    #[test]
    fn setting_the_cancel_flag_stops_running_code_long_before_its_timeout() {
        let pool = Pool::global();
        let mut spin = job("while True:\n    pass");
        spin.limits.timeout = Duration::from_secs(60);
        let cancel = spin.cancel.clone();
        let started = Instant::now();
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            cancel.store(true, Ordering::SeqCst);
        });
        let error = pool.run(spin).expect_err("stopped");
        setter.join().expect("the setter thread");
        assert_eq!(error, SandboxError::Cancelled);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        // The worker is usable again.
        let value = pool.run(job("return 2")).map(|r| r.value);
        assert_eq!(value, Ok(serde_json::json!(2)));
    }

    #[test]
    fn resident_memory_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(resident_bytes().is_some_and(|b| b > 0));
        }
    }
}
