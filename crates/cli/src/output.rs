//! Small helpers for what the commands print: styles (ANSI only on a color terminal), stdout
//! writes that tolerate a closed pipe, one-line previews, durations and times.

use std::io::Write;

use chrono::{DateTime, Local};
use serde_json::Value;

/// Whether to decorate text with colors (ANSI, through `anstyle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Style {
    pub color: bool,
}

impl Style {
    /// Colors on stderr: as `anstream` decides for it (a terminal, `NO_COLOR` unset or empty,
    /// `CLICOLOR_FORCE` honoured).
    pub fn stderr() -> Style {
        Style {
            color: colors(&std::io::stderr()),
        }
    }

    /// Colors on stdout, decided the same way.
    pub fn stdout() -> Style {
        Style {
            color: colors(&std::io::stdout()),
        }
    }

    /// Whether this stream takes colors.
    pub fn colors(self) -> bool {
        self.color
    }

    fn paint(self, style: anstyle::Style, text: &str) -> String {
        if self.color {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_string()
        }
    }

    fn colored(color: anstyle::AnsiColor) -> anstyle::Style {
        anstyle::Style::new().fg_color(Some(color.into()))
    }

    pub fn bold(self, text: &str) -> String {
        self.paint(anstyle::Style::new().bold(), text)
    }

    pub fn dim(self, text: &str) -> String {
        self.paint(anstyle::Style::new().dimmed(), text)
    }

    pub fn red(self, text: &str) -> String {
        self.paint(Style::colored(anstyle::AnsiColor::Red), text)
    }

    pub fn red_bold(self, text: &str) -> String {
        self.paint(Style::colored(anstyle::AnsiColor::Red).bold(), text)
    }

    pub fn green(self, text: &str) -> String {
        self.paint(Style::colored(anstyle::AnsiColor::Green), text)
    }

    pub fn yellow(self, text: &str) -> String {
        self.paint(Style::colored(anstyle::AnsiColor::Yellow), text)
    }

    pub fn cyan(self, text: &str) -> String {
        self.paint(Style::colored(anstyle::AnsiColor::Cyan), text)
    }

    /// A run status, colored by its meaning.
    pub fn status(self, status: weft_event::RunStatus) -> String {
        use weft_event::RunStatus;
        let text = status.as_str();
        match status {
            RunStatus::Completed => self.green(text),
            RunStatus::Failed => self.red(text),
            RunStatus::Cancelled | RunStatus::Paused | RunStatus::Interrupted => self.yellow(text),
            RunStatus::Running => self.cyan(text),
        }
    }
}

fn colors<S: anstream::stream::RawStream>(stream: &S) -> bool {
    anstream::AutoStream::choice(stream) != anstream::ColorChoice::Never
}

/// Writes `text` to stdout and flushes. A closed pipe (`weft runs | head`) is not an error.
/// Colors are stripped where stdout takes none.
pub(crate) fn out(text: &str) -> std::io::Result<()> {
    let mut stdout = anstream::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes `text` to stderr, ignoring failures (there is nowhere left to report them).
pub(crate) fn err(text: &str) {
    // Text with no escape code has nothing to strip: written as it is (anstream reads what it
    // may strip a byte at a time).
    if !text.contains('\x1b') {
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(text.as_bytes());
        let _ = stderr.flush();
        return;
    }
    let mut stderr = anstream::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}

/// A value as text: strings as they are, other JSON compact.
/// The node an event is about, with the path of the subflow / forEach item it ran in
/// (`release/ok`, `each[2]/grade`); empty for run-level events.
pub(crate) fn event_node(event: &weft_event::RunEvent) -> String {
    let node = event.node_id.as_deref().unwrap_or("");
    match &event.scope {
        Some(scope) if !node.is_empty() => format!("{scope}/{node}"),
        _ => node.to_string(),
    }
}

/// Tokens in and out, e.g. `1,204 in / 312 out`.
pub(crate) fn tokens(usage: &weft_providers::Usage) -> String {
    format!("{} in / {} out", usage.input_tokens, usage.output_tokens)
}

pub(crate) fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A run's result for stdout: a JSON string as plain text, other JSON pretty-printed; always
/// ending with a newline.
pub(crate) fn result_text(value: &Value) -> String {
    let mut text = match value {
        Value::String(text) => text.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// `text` on one line (line breaks shown as `⏎`, tabs and other controls as spaces), cut
/// after `max` characters with `…`.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let mut line = String::new();
    for (count, c) in text.trim().chars().enumerate() {
        if count == max {
            line.push('…');
            return line;
        }
        match c {
            '\n' => line.push_str(" ⏎ "),
            '\r' => {}
            c if c.is_control() => line.push(' '),
            c => line.push(c),
        }
    }
    line
}

/// Seconds as a short duration: `0.8 s`, `12.3 s`, `2 min 03 s`, `1 h 02 min`.
pub(crate) fn duration(seconds: f64) -> String {
    let seconds = seconds.max(0.0);
    if seconds < 60.0 {
        return format!("{seconds:.1} s");
    }
    // Whole seconds from here on; the fraction no longer matters.
    let total = seconds.round() as u64;
    if total < 3600 {
        format!("{} min {:02} s", total / 60, total % 60)
    } else {
        format!("{} h {:02} min", total / 3600, (total % 3600) / 60)
    }
}

/// Parses an RFC 3339 timestamp as stored by the engine.
pub(crate) fn parse_time(text: &str) -> Option<DateTime<Local>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|time| time.with_timezone(&Local))
}

/// Seconds between two stored timestamps.
pub(crate) fn seconds_between(start: &str, end: &str) -> Option<f64> {
    let start = DateTime::parse_from_rfc3339(start).ok()?;
    let end = DateTime::parse_from_rfc3339(end).ok()?;
    Some((end - start).num_milliseconds() as f64 / 1000.0)
}

/// A stored timestamp in local time, `2024-05-01 14:03:07`; the text itself if it does not parse.
pub(crate) fn date_time(text: &str) -> String {
    parse_time(text).map_or_else(
        || text.to_string(),
        |time| time.format("%Y-%m-%d %H:%M:%S").to_string(),
    )
}

/// The time of day of a stored timestamp in local time, `14:03:07.123`.
pub(crate) fn time_of_day(text: &str) -> String {
    parse_time(text).map_or_else(
        || text.to_string(),
        |time| time.format("%H:%M:%S%.3f").to_string(),
    )
}

/// `word` for a shell: as it is when it needs no quoting, else in single quotes.
pub(crate) fn shell_word(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `count` and the noun, pluralized with `s`: `1 error`, `3 errors`.
pub(crate) fn count(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// Pads `text` with spaces to `width` characters (by chars, not bytes).
pub(crate) fn pad(text: &str, width: usize) -> String {
    let len = text.chars().count();
    if len >= width {
        text.to_string()
    } else {
        format!("{text}{}", " ".repeat(width - len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_cuts_and_flattens() {
        assert_eq!(one_line("  a\nb\tc  ", 10), "a ⏎ b c");
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line("abc", 3), "abc");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(0.84), "0.8 s");
        assert_eq!(duration(123.0), "2 min 03 s");
        assert_eq!(duration(3725.0), "1 h 02 min");
    }

    #[test]
    fn shell_words_are_quoted_when_needed() {
        assert_eq!(shell_word("/tmp/runs.db"), "/tmp/runs.db");
        assert_eq!(shell_word("my runs.db"), "'my runs.db'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }

    #[test]
    fn results_print_plainly() {
        assert_eq!(result_text(&Value::String("hi".into())), "hi\n");
        assert_eq!(
            result_text(&serde_json::json!({"a": 1})),
            "{\n  \"a\": 1\n}\n"
        );
    }

    #[test]
    fn no_ansi_without_color() {
        let style = Style { color: false };
        assert_eq!(style.red_bold("x"), "x");
        assert_eq!(Style { color: true }.bold("x"), "\x1b[1mx\x1b[0m");
        assert_eq!(Style { color: true }.red("x"), "\x1b[31mx\x1b[0m");
    }

    #[test]
    fn times_between() {
        let seconds = seconds_between("2024-05-01T10:00:00.000Z", "2024-05-01T10:00:01.500Z");
        assert_eq!(seconds, Some(1.5));
    }
}
