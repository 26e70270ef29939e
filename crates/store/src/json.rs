//! JSON text of values that may be large (a step's output, a run's result, pinned outputs),
//! written into a buffer of the exact size: `serde_json::to_string` grows its buffer by
//! doubling, so a 16 MiB value's text would hold up to 32 MiB until it is stored.

use std::io;

use serde::Serialize;

/// Counts the bytes written to it, keeping none.
struct Counter(usize);

impl io::Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Compact JSON of `value`, in a buffer of its length. Written twice (once to count); a
/// value that cannot be written (a map with non-string keys) is `null`, as `Value` never is.
pub fn json_text<T: Serialize + ?Sized>(value: &T) -> String {
    let mut counter = Counter(0);
    if serde_json::to_writer(&mut counter, value).is_err() {
        return "null".to_string();
    }
    let mut text = Vec::with_capacity(counter.0);
    if serde_json::to_writer(&mut text, value).is_err() {
        return "null".to_string();
    }
    // serde_json writes UTF-8 only.
    String::from_utf8(text).unwrap_or_else(|_| "null".to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_text_is_serde_jsons_in_a_buffer_of_its_length() {
        let long = "a \"quoted\" line\n".repeat(100_000);
        for value in [
            json!(null),
            json!("ünïcode and \u{1} controls"),
            json!({"b": [1, 2.5, true], "a": {"c": long}}),
        ] {
            let text = json_text(&value);
            assert_eq!(text, value.to_string());
            assert_eq!(text.capacity(), text.len(), "no room left over");
        }
    }
}
