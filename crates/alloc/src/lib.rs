//! Bounds on what one piece of work may allocate, kept by the process's global allocator.
//!
//! A template render (MiniJinja) builds its intermediate values with plain allocations: a
//! string doubled in a loop, a list concatenated with itself in a recursive loop. Nothing
//! between those allocations calls Weft, so no check at a checkpoint can stop them in time,
//! and an allocation that fails ends the process. The allocator is the one place that sees
//! them all: a host wraps its allocator in [`Counting`], and a thread that does bounded work
//! opens a [`Budget`] for it.
//!
//! While a budget is open, the thread's allocations are counted (net of what it frees). Past
//! the budget's soft limit, [`Budget::over_soft_limit`] says so, and the work stops at its
//! next checkpoint. At the hard limit the allocator cannot fail the allocation (that aborts
//! the process) nor unwind (undefined behaviour): it marks the budget exhausted and parks the
//! thread for good, before allocating. Whoever waits for the work sees [`Budget::exhausted`]
//! and reports the error; the thread keeps what it holds (at most the hard limit) until the
//! process ends. Such work therefore runs on a thread of its own, never one that others
//! wait on or that holds a lock another thread needs.
//!
//! Threads without an open budget pay one thread-local read per allocation.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A global allocator that counts the allocations of threads with an open [`Budget`].
///
/// ```ignore
/// #[global_allocator]
/// static ALLOCATOR: weft_alloc::Counting<std::alloc::System> = weft_alloc::Counting(std::alloc::System);
/// ```
pub struct Counting<A>(pub A);

#[derive(Clone, Copy)]
struct Open {
    /// Bytes allocated and not freed since the budget opened (negative when the work frees
    /// what was allocated before).
    live: isize,
    soft: isize,
    hard: isize,
    /// The budget's flag, owned by the [`Budget`] (and its waiter) while it is open.
    exhausted: *const AtomicBool,
}

thread_local! {
    /// The open budget of this thread. A constant initializer and no destructor: reading it
    /// never allocates, so the allocator may.
    static OPEN: Cell<Option<Open>> = const { Cell::new(None) };
}

/// Counts `delta` bytes against this thread's open budget, if any; at the hard limit, parks
/// the thread for good.
fn count(delta: isize) {
    OPEN.with(|open| {
        let Some(mut budget) = open.get() else {
            return;
        };
        budget.live = budget.live.saturating_add(delta);
        if delta > 0 && budget.live > budget.hard {
            // SAFETY: the flag is owned by an `Arc` the open `Budget` holds; the budget is
            // closed (this cell emptied) before that `Arc` is dropped.
            let exhausted = unsafe { &*budget.exhausted };
            exhausted.store(true, Ordering::Release);
            open.set(None);
            loop {
                // A sleep makes no allocation; the thread's work can never go on.
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        open.set(Some(budget));
    });
}

// SAFETY: every method hands the layout and pointer to the wrapped allocator unchanged; the
// counting before it allocates nothing and never unwinds.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(size(layout.size()));
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(size(layout.size()));
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-size(layout.size()));
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(size(new_size).saturating_sub(size(layout.size())));
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

fn size(bytes: usize) -> isize {
    isize::try_from(bytes).unwrap_or(isize::MAX)
}

/// Limits on what the current thread may allocate while the budget is open.
pub struct Budget {
    /// The flag the thread's open budget points to, kept alive while it is open.
    _exhausted: Arc<AtomicBool>,
}

impl Budget {
    /// Opens a budget on this thread: past `soft` bytes [`Budget::over_soft_limit`] is true,
    /// and at `hard` bytes the thread is parked for good (see the crate's documentation). The
    /// budget counts only when the process's global allocator is [`Counting`].
    ///
    /// # Panics
    /// When this thread already has a budget open.
    pub fn open(soft: usize, hard: usize, exhausted: Arc<AtomicBool>) -> Budget {
        OPEN.with(|open| {
            assert!(
                open.get().is_none(),
                "a budget is already open on this thread"
            );
            open.set(Some(Open {
                live: 0,
                soft: size(soft),
                hard: size(hard),
                exhausted: Arc::as_ptr(&exhausted),
            }));
        });
        Budget {
            _exhausted: exhausted,
        }
    }

    /// Whether the work on this thread has allocated more than the soft limit.
    pub fn over_soft_limit() -> bool {
        OPEN.with(|open| open.get().is_some_and(|budget| budget.live > budget.soft))
    }

    /// Bytes allocated and not freed on this thread since its budget opened (0 without one).
    pub fn live_bytes() -> isize {
        OPEN.with(|open| open.get().map_or(0, |budget| budget.live))
    }

    /// Whether the work of a budget whose flag is `exhausted` reached its hard limit (its
    /// thread is parked for good).
    pub fn exhausted(exhausted: &AtomicBool) -> bool {
        exhausted.load(Ordering::Acquire)
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        OPEN.with(|open| open.set(None));
    }
}

/// Whether the process's allocator counts budgets: a budget opened on a thread is counted
/// only under [`Counting`], and a host that does not install it has no memory bound.
pub fn counting() -> bool {
    let exhausted = Arc::new(AtomicBool::new(false));
    let budget = Budget::open(usize::MAX, usize::MAX, exhausted);
    let probe = std::hint::black_box(vec![0_u8; 64]);
    let counted = Budget::live_bytes() >= 64;
    drop(probe);
    drop(budget);
    counted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static ALLOCATOR: Counting<std::alloc::System> = Counting(std::alloc::System);

    #[test]
    fn a_budget_counts_what_its_thread_allocates_and_frees() {
        assert!(counting());
        let exhausted = Arc::new(AtomicBool::new(false));
        let budget = Budget::open(1024, usize::MAX, Arc::clone(&exhausted));
        let small = std::hint::black_box(vec![0_u8; 512]);
        assert!(!Budget::over_soft_limit());
        let large = std::hint::black_box(vec![0_u8; 4096]);
        assert!(Budget::over_soft_limit());
        drop(large);
        drop(small);
        assert!(Budget::live_bytes() <= 0, "{}", Budget::live_bytes());
        drop(budget);
        assert_eq!(Budget::live_bytes(), 0);
        assert!(!Budget::exhausted(&exhausted));
    }

    #[test]
    fn work_that_reaches_the_hard_limit_is_parked_and_its_waiter_told() {
        let exhausted = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&exhausted);
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _budget = Budget::open(1 << 20, 8 << 20, flag);
            let mut text = String::from("x");
            for _ in 0..40 {
                text = text.repeat(2);
            }
            // Never reached: 2^40 bytes are far past the hard limit.
            let _ = done.send(text.len());
        });
        let started = std::time::Instant::now();
        while !Budget::exhausted(&exhausted) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the work was not stopped"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(finished.try_recv().is_err());
    }
}
