//! What keeps one rendering bounded, besides MiniJinja's fuel:
//!
//! - filters whose numeric argument sizes what they build are MiniJinja's own behind a bound,
//!   so `indent(10**12)` is an error naming the limit rather than an allocation that ends the
//!   process;
//! - `replace` and `join` refuse a result larger than [`MAX_RENDERED_BYTES`] before they build
//!   it (a text of 10,000 characters with a megabyte put between each is 10 GB);
//! - the rendered text stops at [`MAX_RENDERED_BYTES`];
//! - at every checkpoint, the render stops once it has allocated more than
//!   [`crate::RENDER_MEMORY_SOFT_LIMIT`] (the allocator stops it at the hard limit, between
//!   checkpoints if need be; see `worker`);
//! - the render watches its step's deadline and its run's cancellation at checkpoints: every
//!   printed value, every item of a `range`, and the filters that can take long on a large
//!   value (MiniJinja has no hook between instructions, so a checkpoint is where it calls Weft).

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

use minijinja::value::{Kwargs, Rest, StringInput, Value, ValueOrKwargs};
use minijinja::{Environment, Error, ErrorKind, State};
use tokio_util::sync::CancellationToken;

use super::{MAX_FILTER_SIZE, MAX_RENDERED_BYTES};

/// When a render must stop early: its step's deadline and its run's cancellation.
#[derive(Debug, Clone)]
pub struct RenderLimits {
    pub deadline: Instant,
    /// Shared rather than a token's clone: cloning and dropping a token lock its node, twice
    /// for every template a run renders.
    pub cancel: Arc<CancellationToken>,
}

impl RenderLimits {
    /// A render that may last `timeout` from now, and stops when `cancel` fires.
    pub fn within(timeout: std::time::Duration, cancel: &Arc<CancellationToken>) -> RenderLimits {
        RenderLimits {
            deadline: Instant::now() + timeout,
            cancel: Arc::clone(cancel),
        }
    }
}

/// Why a render was stopped at a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stopped {
    TimedOut,
    Cancelled,
    OutOfMemory,
}

struct Watched {
    limits: RenderLimits,
    stopped: Option<Stopped>,
}

thread_local! {
    /// The render under way on this thread (MiniJinja renders synchronously on the caller's
    /// thread, and filters cannot be handed a context of Weft's).
    static CURRENT: RefCell<Option<Watched>> = const { RefCell::new(None) };
}

/// The limits of a render, installed on this thread while it lasts.
pub(super) struct Watch {
    previous: Option<Watched>,
}

impl Watch {
    pub(super) fn start(limits: RenderLimits) -> Watch {
        let watched = Watched {
            limits,
            stopped: None,
        };
        Watch {
            previous: CURRENT.with(|current| current.borrow_mut().replace(watched)),
        }
    }

    /// Why the render was stopped, if it was.
    pub(super) fn stopped(&self) -> Option<Stopped> {
        CURRENT.with(|current| {
            current
                .borrow()
                .as_ref()
                .and_then(|watched| watched.stopped)
        })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|current| *current.borrow_mut() = previous);
    }
}

/// Whether the render on this thread may go on; records why not.
fn keep_going() -> bool {
    CURRENT.with(|current| {
        let mut current = current.borrow_mut();
        let Some(watched) = current.as_mut() else {
            return true;
        };
        if watched.stopped.is_none() {
            if watched.limits.cancel.is_cancelled() {
                watched.stopped = Some(Stopped::Cancelled);
            } else if crate::stop::requested() {
                // The process was asked to stop while this render holds its thread, where the
                // host's task that would cancel the run cannot run: the render does it.
                watched.limits.cancel.cancel();
                watched.stopped = Some(Stopped::Cancelled);
            } else if Instant::now() >= watched.limits.deadline {
                watched.stopped = Some(Stopped::TimedOut);
            } else if weft_alloc::Budget::over_soft_limit() {
                watched.stopped = Some(Stopped::OutOfMemory);
            }
        }
        watched.stopped.is_none()
    })
}

/// A checkpoint: an error (replaced by the reason when the render ends) once the render must
/// stop.
fn checkpoint() -> Result<(), Error> {
    if keep_going() {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::InvalidOperation,
            "the rendering was stopped",
        ))
    }
}

/// Prints values as MiniJinja does, but refuses a collection so long that its text could
/// not fit in [`MAX_RENDERED_BYTES`] (each item takes at least three bytes: `1, `):
/// printing one goes through every item even after the output is full.
pub(super) fn formatter(
    out: &mut minijinja::Output<'_>,
    state: &mut State<'_, '_>,
    value: &Value,
) -> Result<(), Error> {
    checkpoint()?;
    let is_collection = matches!(
        value.kind(),
        minijinja::value::ValueKind::Seq
            | minijinja::value::ValueKind::Map
            | minijinja::value::ValueKind::Iterable
    );
    if is_collection && value.len().is_some_and(|len| len > MAX_RENDERED_BYTES / 3) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "a list of {} items is too long to print",
                value.len().unwrap_or_default()
            ),
        ));
    }
    minijinja::escape_formatter(out, state, value)
}

pub(super) fn add_filters(env: &mut Environment<'static>) {
    env.add_filter("indent", indent);
    env.add_filter("slice", slice);
    env.add_filter("batch", batch);
    env.add_filter("format", format);
    env.add_filter("tojson", tojson);
    env.add_filter("replace", replace);
    env.add_filter("join", join);
    env.add_function("range", range);
}

/// MiniJinja's `range`, whose items are checkpoints: a loop over one stops when its step's
/// time is up.
fn range(lower: isize, upper: Option<isize>, step: Option<isize>) -> Result<Value, Error> {
    let items = minijinja::functions::range(lower, upper, step)?;
    Ok(Value::make_object_iterable(items, |items| {
        let each = items.try_iter().into_iter().flatten();
        Box::new(each.take_while(|_| keep_going()))
    }))
}

fn replace(
    state: &mut State,
    value: StringInput<'_>,
    from: StringInput<'_>,
    to: StringInput<'_>,
) -> Result<Value, Error> {
    checkpoint()?;
    let (text, from_text, to_text) = (value.as_str(), from.as_str(), to.as_str());
    if to_text.len() > from_text.len() {
        // An empty pattern matches between every two characters and at both ends.
        let matches = if from_text.is_empty() {
            text.chars().count() + 1
        } else {
            text.matches(from_text).count()
        };
        let grows_by = matches.saturating_mul(to_text.len() - from_text.len());
        let size = text.len().saturating_add(grows_by);
        if size > MAX_RENDERED_BYTES {
            return Err(too_large("replace", size));
        }
    }
    minijinja::filters::replace(state, value, from, to)
}

fn too_large(filter: &str, size: usize) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "{filter}: a result of {size} bytes is more than {} MiB",
            MAX_RENDERED_BYTES / 1024 / 1024
        ),
    )
}

fn join(
    state: &mut State,
    value: &Value,
    joiner: Option<StringInput<'_>>,
    attribute: Option<&str>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    checkpoint()?;
    if let Some(joiner) = &joiner
        && let Some(items) = value.len()
    {
        let size = items
            .saturating_sub(1)
            .saturating_mul(joiner.as_str().len());
        if size > MAX_RENDERED_BYTES {
            return Err(too_large("join", size));
        }
    }
    minijinja::filters::join(state, value, joiner, attribute, kwargs)
}

fn tojson(value: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    checkpoint()?;
    let width = match &indent {
        Some(indent) => indent.as_usize(),
        None => kwargs.get::<Option<usize>>("indent")?,
    };
    if let Some(width) = width
        && width > MAX_FILTER_SIZE
    {
        return Err(too_big("tojson", "indent", width));
    }
    minijinja::filters::tojson(value, indent, kwargs)
}

fn too_big(filter: &str, what: &str, size: usize) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!("{filter}: a {what} of {size} is more than {MAX_FILTER_SIZE}"),
    )
}

fn indent(
    value: StringInput<'_>,
    width: Option<usize>,
    first: Option<bool>,
    blank: Option<bool>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    checkpoint()?;
    let width = match width {
        Some(width) => width,
        None => kwargs.get::<Option<usize>>("width")?.unwrap_or(4),
    };
    if width > MAX_FILTER_SIZE {
        return Err(too_big("indent", "width", width));
    }
    minijinja::filters::indent(value, Some(width), first, blank, kwargs)
}

fn slice(state: &State, value: Value, count: usize, fill: Option<Value>) -> Result<Value, Error> {
    checkpoint()?;
    if count > MAX_FILTER_SIZE {
        return Err(too_big("slice", "count", count));
    }
    minijinja::filters::slice(state, value, count, fill)
}

fn batch(state: &State, value: Value, count: usize, fill: Option<Value>) -> Result<Value, Error> {
    checkpoint()?;
    if fill.is_some() && count > MAX_FILTER_SIZE {
        return Err(too_big("batch", "count", count));
    }
    minijinja::filters::batch(state, value, count, fill)
}

fn format(state: &mut State, format: &Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    checkpoint()?;
    if let Some(text) = format.as_str()
        && let Some(width) = widest(text)
        && width > MAX_FILTER_SIZE
    {
        return Err(too_big("format", "width", width));
    }
    minijinja::filters::format(state, format, args)
}

/// The largest width or precision a printf-style format asks for.
fn widest(format: &str) -> Option<usize> {
    let mut widest = None;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        let mut digits = String::new();
        while let Some(&next) = chars.peek() {
            if next.is_ascii_digit() {
                digits.push(next);
            } else if matches!(next, '-' | '+' | ' ' | '#' | '.') {
                if let Ok(number) = digits.parse::<usize>() {
                    widest = widest.max(Some(number));
                }
                digits.clear();
            } else {
                break;
            }
            chars.next();
        }
        match digits.parse::<usize>() {
            Ok(number) => widest = widest.max(Some(number)),
            Err(_) if !digits.is_empty() => widest = Some(usize::MAX),
            Err(_) => {}
        }
    }
    widest
}

/// Rendered text, refused past [`MAX_RENDERED_BYTES`].
#[derive(Default)]
pub(super) struct BoundedText {
    bytes: Vec<u8>,
    pub(super) too_large: bool,
}

impl BoundedText {
    pub(super) fn text(self) -> String {
        // MiniJinja writes whole UTF-8 strings; a cut is impossible below the limit.
        String::from_utf8(self.bytes)
            .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
    }
}

impl std::io::Write for BoundedText {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + bytes.len() > MAX_RENDERED_BYTES {
            self.too_large = true;
            return Err(std::io::Error::other("the rendered text is too large"));
        }
        self.bytes.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
