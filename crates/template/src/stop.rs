//! A process's request that its runs stop, made the only way a signal handler safely can: by
//! setting a flag (`weft run` sets it on SIGINT and SIGTERM).
//!
//! A host cancels its runs from a task of its own when it is asked to stop; that task cannot
//! run while a step holds the runtime's thread without yielding. A template render is such a
//! step (MiniJinja renders synchronously): at its checkpoints it looks at this flag, and once
//! it is set, cancels its run and stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static REQUESTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The flag: a host hands it to its signal handlers, which set it.
pub fn flag() -> Arc<AtomicBool> {
    Arc::clone(REQUESTED.get_or_init(Arc::default))
}

/// Whether the process was asked to stop.
pub(crate) fn requested() -> bool {
    REQUESTED
        .get()
        .is_some_and(|flag| flag.load(Ordering::Relaxed))
}
