//! The Python sandbox for Weft's `code` nodes (docs/flows.md#python-in-code-nodes), on
//! rustpython-vm.
//!
//! A node's `data.code` is a function body. [`Sandbox::run`] wraps it as
//! `def _block(initial, <field>, ...):` (or `def _block(initial, input):` when the node
//! declares no input fields), calls it and converts the return value to JSON.
//!
//! Layers of defence, from the outside in:
//!
//! 1. **Static check** ([`Sandbox::check`]): the body is parsed with rustpython's parser
//!    and the syntax tree is walked. `import` in every spelling, `eval`, `exec`, `open`,
//!    `getattr`, `type`, `globals` and the other names of [`REFUSED_NAMES`], any name or
//!    attribute that begins with an underscore (a lone `_` variable is allowed),
//!    `.format`/`.format_map`, frame and code attributes (`gi_frame`, `f_globals`, ...),
//!    `class`, `async` and template strings are refused before anything runs, each with its
//!    line. F-string fields are expressions in the tree, so `f'{x.__class__}'` is refused like
//!    `x.__class__`; the word `getattr` inside an ordinary string is not. Code nested deeper
//!    than the parser and compiler can recurse safely (brackets, blocks, operators per
//!    statement) is refused from the tokens, before parsing.
//! 2. **Restricted builtins**: the code sees only [`ALLOWED_BUILTINS`] plus a captured
//!    `print`. The interpreter is built without the standard library (no file system,
//!    network or process access), and `__import__` is replaced in the VM's own builtins
//!    module too, so `sys`, `os` and the rest are out of reach even if something slipped
//!    through the check.
//! 3. **Guarded operations**: before compiling, the tree is rewritten so that the operations
//!    that can allocate without bound in one step (`*`, `**`, `<<`, `%` formatting,
//!    `str.ljust`/`center`/`zfill`/`expandtabs`/`replace`/`join`/`translate`,
//!    `int.to_bytes`, computed widths in format specs) go through native guards that refuse
//!    results larger than the memory budget (a `MemoryError`, reported as
//!    [`SandboxError::Memory`]). A `range` longer than a million items is iterated by a
//!    generator, so `list(range(10**12))` and `sum(range(10**12))` run as bytecode and can
//!    be interrupted.
//! 4. **Watchdog**: the code runs on a pooled worker thread; the calling thread waits and
//!    watches the clock and the process's resident memory (`/proc/self/status`). On a
//!    timeout, or when resident memory grew by more than the budget during the run, it sends
//!    the interpreter a user signal. The VM runs signals between bytecode instructions; this
//!    one raises an exception and re-arms itself, so every following instruction raises too
//!    and no `except:` or `finally:` block can keep the code alive. The VM unwinds its own
//!    frames and the interpreter is reused. If the code does not stop within a grace period
//!    (one long builtin call, which cannot be interrupted), the caller answers anyway; that
//!    worker leaves the pool and ends when the call returns.
//! 5. **Panics**: every run is wrapped in `catch_unwind`; a VM panic becomes
//!    [`SandboxError::Internal`], that interpreter is replaced and the process stays up.
//!
//! Interpreters and compiled code are reused: each worker thread keeps one interpreter and a
//! cache of compiled code objects keyed by (body, fields). Every run starts from fresh
//! globals, so nothing a run sets is visible to the next.

mod check;
mod convert;
mod guards;
mod interp;
mod pool;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub use check::{ALLOWED_BUILTINS, REFUSED_NAMES};

/// Resource limits for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Wall-clock limit; the code is stopped with [`SandboxError::Timeout`] when it runs
    /// longer.
    pub timeout: Duration,
    /// Maximum depth of nested Python calls inside the body (default 200).
    pub max_recursion: usize,
    /// Memory budget in bytes (default 64 MiB). It bounds two things: the size of the result
    /// of one guarded operation (a repeated sequence, a padded or joined string, ...), and
    /// the growth of the process's resident memory during the run, after which the code is
    /// stopped with [`SandboxError::Memory`]. Resident memory is process-wide: the host's own
    /// allocations and other runs at the same moment count too, and memory that the allocator
    /// kept from earlier runs can be reused without counting.
    pub max_memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(30),
            max_recursion: 200,
            max_memory_bytes: 64 * 1024 * 1024,
        }
    }
}

/// One run's inputs.
pub(crate) struct Job {
    pub body: String,
    pub fields: Vec<String>,
    pub initial: serde_json::Value,
    pub input: serde_json::Value,
    pub limits: Limits,
    /// Set by the caller to stop the run early (its step was cancelled or abandoned).
    pub cancel: Arc<AtomicBool>,
}

/// The result of a successful run.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeRun {
    /// The function's return value as JSON.
    pub value: serde_json::Value,
    /// What `print()` wrote: one entry per call, without the trailing newline.
    pub printed: Vec<String>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum SandboxError {
    /// Refused by the static check before running (`line` is 1-based within the body; 0 for
    /// a problem with the field names).
    #[error("line {line}: {message}")]
    Refused { line: usize, message: String },
    /// The body does not parse or compile.
    #[error("syntax error at line {line}: {message}")]
    Syntax { line: usize, message: String },
    /// The code raised an exception that it did not catch.
    #[error("{kind} at line {line}: {message}")]
    Raised {
        /// The exception class, e.g. `ZeroDivisionError`.
        kind: String,
        /// The line of the body where it was raised (0 when unknown).
        line: usize,
        message: String,
    },
    /// The code ran longer than [`Limits::timeout`].
    #[error("the code ran longer than {seconds} s and was stopped")]
    Timeout { seconds: f64 },
    /// The caller asked the run to stop ([`Sandbox::run_until`]): its step was cancelled.
    #[error("the code was stopped because its run was cancelled")]
    Cancelled,
    /// The code exceeded [`Limits::max_memory_bytes`].
    #[error("the code used too much memory and was stopped")]
    Memory,
    /// The code nested calls deeper than [`Limits::max_recursion`].
    #[error("the code recursed too deeply (more than {0} levels)")]
    Recursion(usize),
    /// The return value cannot be converted to JSON (a set, a function, NaN, ...).
    #[error("the return value is not JSON: {0}")]
    NotJson(String),
    /// The sandbox itself failed (a VM panic, a lost worker thread).
    #[error("the sandbox failed: {0}")]
    Internal(String),
}

/// A handle on the sandbox. Cheap to clone and share between threads: all handles use one
/// process-wide pool of worker threads, each with its own reusable interpreter and code
/// cache.
#[derive(Clone)]
pub struct Sandbox {
    /// Private: a handle is made by [`Sandbox::new`]. The pool it uses is found at each run
    /// (see there).
    _handle: (),
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::new()
    }
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox").finish_non_exhaustive()
    }
}

impl Sandbox {
    /// A handle on the process-wide sandbox pool. The pool, its worker threads and their
    /// interpreters are made at the first run: a process that runs no code node (most `weft
    /// run`s) never makes them.
    pub fn new() -> Sandbox {
        Sandbox { _handle: () }
    }

    /// Runs `body` wrapped as `def _block(initial, <fields...>):` (one parameter per name in
    /// `fields`, taken from `input` when it is an object; a missing field is None) or, when
    /// `fields` is empty, `def _block(initial, input):`; calls it and converts the return
    /// value (None/bool/int/float/str/list/tuple/dict with str keys) to JSON.
    ///
    /// Synchronous: it blocks the calling thread for up to about `limits.timeout` (call it
    /// from `spawn_blocking` in async code). The static check runs first; a refused body
    /// returns the first refusal.
    pub fn run(
        &self,
        body: &str,
        fields: &[String],
        initial: &serde_json::Value,
        input: &serde_json::Value,
        limits: &Limits,
    ) -> Result<CodeRun, SandboxError> {
        let never = Arc::new(AtomicBool::new(false));
        self.run_until(body, fields, initial, input, limits, &never)
    }

    /// [`Sandbox::run`], stopped early with [`SandboxError::Cancelled`] once `cancel` is set
    /// (checked as often as the clock, every few milliseconds), so that a cancelled run or
    /// a failed sibling branch does not wait for the code's own timeout.
    pub fn run_until(
        &self,
        body: &str,
        fields: &[String],
        initial: &serde_json::Value,
        input: &serde_json::Value,
        limits: &Limits,
        cancel: &Arc<AtomicBool>,
    ) -> Result<CodeRun, SandboxError> {
        pool::Pool::global().run(Job {
            body: body.to_owned(),
            fields: fields.to_vec(),
            initial: initial.clone(),
            input: input.clone(),
            limits: limits.clone(),
            cancel: cancel.clone(),
        })
    }

    /// The static check alone (for the validator): every refusal with its line, or the
    /// syntax error. Empty when the body would be run.
    ///
    /// Runs on a short-lived thread with a large stack (parsing and compiling recurse once per
    /// nesting level), so it is safe to call from any thread.
    pub fn check(body: &str, fields: &[String]) -> Vec<SandboxError> {
        let checked = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("weft-sandbox-check".to_owned())
                .stack_size(pool::WORKER_STACK)
                .spawn_scoped(scope, || check::prepare(body, fields))
                .map(|handle| handle.join())
        });
        match checked {
            Ok(Ok(Ok(_))) => Vec::new(),
            Ok(Ok(Err(errors))) => errors,
            Ok(Err(_)) => vec![SandboxError::Internal("the check panicked".to_owned())],
            Err(e) => vec![SandboxError::Internal(format!(
                "could not start the check thread: {e}"
            ))],
        }
    }
}
