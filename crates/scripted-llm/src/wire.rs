//! What every wire format shares: the facts of one response, tool calls as sent, the headers,
//! and how text is cut into streamed pieces.

use std::io;

use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::http;
use crate::{SearchResult, Shared, ToolCall};

pub fn json_headers() -> Vec<(String, String)> {
    vec![("content-type".to_string(), "application/json".to_string())]
}

pub(crate) fn sse_headers() -> Vec<(String, String)> {
    vec![
        ("content-type".to_string(), "text/event-stream".to_string()),
        ("cache-control".to_string(), "no-cache".to_string()),
    ]
}

/// The wire format of a request, decided by its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// `POST …/chat/completions`.
    OpenAi,
    /// `POST …/messages`.
    Anthropic,
}

/// Per-response facts shared by the wire formats.
pub(crate) struct Ctx {
    pub wire: Wire,
    pub id: String,
    pub model: String,
    pub prompt_tokens: usize,
    pub stream: bool,
    /// OpenAI's `stream_options.include_usage`.
    pub include_usage: bool,
    pub close: bool,
    /// Pause before each streamed chunk (see [`Reply::Text`]).
    pub chunk_gap_ms: u64,
}

/// A tool call with its id decided and its arguments serialized.
pub(crate) struct ResolvedCall {
    pub id: String,
    pub name: String,
    pub input: Value,
    pub arguments: String,
}

impl ResolvedCall {
    pub(crate) fn new(shared: &Shared, wire: Wire, call: ToolCall) -> Self {
        Self {
            id: call.id.unwrap_or_else(|| shared.call_id(wire)),
            name: call.name,
            arguments: call.arguments.to_string(),
            input: call.arguments,
        }
    }
}

/// A rough token count for the arguments of tool calls.
pub(crate) fn call_tokens(calls: &[ResolvedCall]) -> usize {
    calls
        .iter()
        .map(|c| 1 + word_count(&c.arguments.replace([',', ':'], " ")))
        .sum()
}

/// A web search the server pretends to have made (Anthropic shows it as blocks).
pub(crate) struct Search<'a> {
    pub id: String,
    pub query: String,
    pub sources: &'a [SearchResult],
}

/// A rough, deterministic token count: whitespace-separated words.
pub(crate) fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// Splits text word by word, each piece keeping the whitespace that follows it (leading
/// whitespace stays with the first word). Concatenating the pieces gives back `text`.
pub(crate) fn split_words(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut seen_word = false;
    let mut after_word_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            after_word_space |= seen_word;
        } else {
            if after_word_space {
                pieces.push(&text[start..i]);
                start = i;
                after_word_space = false;
            }
            seen_word = true;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// Splits text into pieces of at most `max` characters.
pub(crate) fn split_chars(text: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (count, (i, _)) in text.char_indices().enumerate() {
        if count > 0 && count % max == 0 {
            pieces.push(&text[start..i]);
            start = i;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// Longest fragment of tool-call arguments per streamed chunk, in characters.
pub(crate) const ARGUMENT_FRAGMENT: usize = 16;

/// Announces the full length of `body` but sends only its first half.
pub(crate) async fn cut_body<W: AsyncWrite + Unpin>(io: &mut W, body: &[u8]) -> io::Result<()> {
    http::write_head_with_length(io, 200, &json_headers(), body.len()).await?;
    io.write_all(&body[..body.len() / 2]).await?;
    io.flush().await
}

#[cfg(test)]
mod tests {
    use super::{split_chars, split_words};

    #[test]
    fn split_words_keeps_spaces() {
        assert_eq!(
            split_words("  Hello big  world\n"),
            vec!["  Hello ", "big  ", "world\n"]
        );
        assert_eq!(split_words("one"), vec!["one"]);
        assert!(split_words("").is_empty());
        assert_eq!(split_words("   "), vec!["   "]);
    }

    #[test]
    fn split_chars_respects_boundaries() {
        assert_eq!(split_chars("abcdefg", 3), vec!["abc", "def", "g"]);
        assert_eq!(split_chars("ééé", 2), vec!["éé", "é"]);
        assert!(split_chars("", 4).is_empty());
    }
}
