//! An event's JSON written directly, byte for byte as `serde_json` writes it: the CLI prints
//! every event of a run (`weft run --events`) and the store keeps each in a batch's JSON, and
//! serde's field-by-field writing (each key and value a separate escaped write) cost the
//! store's writer thread more than committing the run's steps.

use crate::RunEvent;
use weft_providers::Usage;

impl RunEvent {
    /// Appends this event's JSON to `out`, as `serde_json::to_writer` writes it; without its
    /// `runId` field when `with_run_id` is false (a store's batch of one run's events).
    pub fn write_json(&self, out: &mut String, with_run_id: bool) {
        // Every field named: a field added to the event does not compile until it is written.
        let RunEvent {
            seq,
            run_id,
            ts,
            kind,
            node_id,
            content,
            scope,
            item,
            from,
            usage,
            model,
        } = self;
        out.reserve(96 + content.len());
        out.push_str("{\"seq\":");
        push_number(out, *seq);
        if with_run_id {
            out.push_str(",\"runId\":");
            push_text(out, run_id);
        }
        out.push_str(",\"ts\":");
        push_text(out, ts);
        out.push_str(",\"type\":\"");
        // Event type names are lowercase letters and underscores: nothing to escape.
        out.push_str(kind.as_str());
        out.push('"');
        if let Some(node_id) = node_id {
            out.push_str(",\"nodeId\":");
            push_text(out, node_id);
        }
        out.push_str(",\"content\":");
        push_text(out, content);
        if let Some(scope) = scope {
            out.push_str(",\"scope\":");
            push_text(out, scope);
        }
        if let Some(item) = item {
            out.push_str(",\"item\":");
            push_number(out, *item);
        }
        if let Some(from) = from {
            out.push_str(",\"from\":");
            push_text(out, from);
        }
        if let Some(Usage {
            input_tokens,
            output_tokens,
        }) = usage
        {
            out.push_str(",\"usage\":{\"inputTokens\":");
            push_number(out, *input_tokens);
            out.push_str(",\"outputTokens\":");
            push_number(out, *output_tokens);
            out.push('}');
        }
        if let Some(model) = model {
            out.push_str(",\"model\":");
            push_text(out, model);
        }
        out.push('}');
    }
}

fn push_number(out: &mut String, number: u64) {
    out.push_str(itoa::Buffer::new().format(number));
}

/// `text` as a JSON string, escaped as `serde_json` escapes it: `"` and `\`, the control
/// characters with a short form as that form (`\n`), the others as `\u00XX`; nothing else.
fn push_text(out: &mut String, text: &str) {
    out.push('"');
    // Most text needs no escape: checked first, then copied in one piece.
    if is_plain(text.as_bytes()) {
        out.push_str(text);
        out.push('"');
        return;
    }
    // The bytes escaped are ASCII, so the text is cut between characters.
    let mut plain_from = 0;
    for (at, &byte) in text.as_bytes().iter().enumerate() {
        if !needs_escape(byte) {
            continue;
        }
        out.push_str(&text[plain_from..at]);
        plain_from = at + 1;
        match byte {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            control => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(control >> 4)]));
                out.push(char::from(HEX[usize::from(control & 0xf)]));
            }
        }
    }
    out.push_str(&text[plain_from..]);
    out.push('"');
}

fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// Whether no byte of `bytes` [`needs_escape`]: eight bytes at a time, as one word, with the
/// tests for a zero byte and for a byte below a bound that work on all bytes of a word at once
/// (each says exactly whether some byte of the word matches).
fn is_plain(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH_BITS: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut words = bytes.chunks_exact(8);
    let mut found = 0;
    for word in &mut words {
        let mut eight = [0; 8];
        eight.copy_from_slice(word);
        let word = u64::from_ne_bytes(eight);
        let below_space = word.wrapping_sub(ONES * 0x20) & !word;
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        found |= below_space
            | (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash);
    }
    found & HIGH_BITS == 0 && !words.remainder().iter().any(|&byte| needs_escape(byte))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::{EventType, RunEvent};
    use strum::IntoEnumIterator;
    use weft_providers::Usage;

    fn event(content: &str) -> RunEvent {
        RunEvent {
            seq: 7,
            run_id: Arc::from("5ba2c2ce-af3e-4812-b721-56018c4ad98f"),
            ts: Arc::from("2026-11-30T13:26:02.204Z"),
            kind: EventType::StepEnd,
            node_id: Some(Arc::from("s1")),
            content: content.to_string(),
            scope: None,
            item: None,
            from: None,
            usage: None,
            model: None,
        }
    }

    /// What `write_json` writes, with and without the run id.
    fn written(event: &RunEvent) -> (String, String) {
        let mut with = String::new();
        event.write_json(&mut with, true);
        let mut without = String::new();
        event.write_json(&mut without, false);
        (with, without)
    }

    fn assert_as_serde_writes(event: &RunEvent) {
        let (with, without) = written(event);
        let serde = serde_json::to_string(event).expect("serializes");
        assert_eq!(with, serde);
        // Without the run id: the same text with that one field left out.
        let run_id_field = format!(
            ",\"runId\":{}",
            serde_json::to_string(&*event.run_id).expect("serializes")
        );
        assert_eq!(without, serde.replacen(&run_id_field, "", 1));
        let read: RunEvent = serde_json::from_str(&with).expect("reads back");
        assert_eq!(&read, event);
    }

    #[test]
    fn every_field_is_written_as_serde_writes_it() {
        let mut full = event("done");
        full.scope = Some("outer/inner".to_string());
        full.item = Some(3);
        full.from = Some(Arc::from("s0"));
        full.usage = Some(Usage {
            input_tokens: 12,
            output_tokens: u64::MAX,
        });
        full.model = Some("openai/gpt-4o-mini".to_string());
        assert_as_serde_writes(&full);
        let mut bare = event("");
        bare.node_id = None;
        bare.seq = 0;
        assert_as_serde_writes(&bare);
    }

    #[test]
    fn every_event_type_is_written_by_its_name() {
        for kind in EventType::iter() {
            assert_as_serde_writes(&RunEvent { kind, ..event("x") });
        }
    }

    #[test]
    fn text_is_escaped_as_serde_escapes_it() {
        // Every ASCII byte, alone, among others, and at each place of text checked eight
        // bytes at a time (next to multi-byte characters too).
        for byte in 0u8..0x80 {
            let text = String::from(char::from(byte));
            assert_as_serde_writes(&event(&text));
            assert_as_serde_writes(&event(&format!("a{text}b{text}")));
            for at in 0..17 {
                let mut long = "abcdefghijklmnopq".to_string();
                long.replace_range(at..=at, &text);
                assert_as_serde_writes(&event(&long));
                assert_as_serde_writes(&event(&format!("é{long}ü")));
            }
        }
        for text in [
            "plain words",
            "a \"quoted\" C:\\path\\",
            "lines\nand\ttabs\r\n\u{8}\u{c}",
            "\u{0}\u{1f}\u{7f}",
            "ünïcödé ✓ 日本語 🙂 \u{2028}\u{2029}",
            "{\"json\": [1, 2, \"three\"]}",
        ] {
            let mut escaped = event(text);
            escaped.node_id = Some(Arc::from(text));
            escaped.scope = Some(text.to_string());
            escaped.from = Some(Arc::from(text));
            escaped.model = Some(text.to_string());
            escaped.ts = Arc::from(text);
            escaped.run_id = Arc::from(text);
            assert_as_serde_writes(&escaped);
        }
    }
}
