//! The guard in front of MiniJinja's recursive parser.

use super::{MAX_OPERATORS_PER_TAG, TemplateError};

/// Refuses a tag with more operators than [`MAX_OPERATORS_PER_TAG`], before MiniJinja's
/// recursive parser sees it.
pub(super) fn check_nesting(source: &str) -> Result<(), TemplateError> {
    let bytes = source.as_bytes();
    let mut index = 0;
    while index + 1 < bytes.len() {
        let opens_tag = bytes[index] == b'{' && matches!(bytes[index + 1], b'{' | b'%');
        if !opens_tag {
            index += 1;
            continue;
        }
        let close = if bytes[index + 1] == b'{' { b'}' } else { b'%' };
        let mut operators = 0;
        let mut quote: Option<u8> = None;
        let mut word_start: Option<usize> = None;
        index += 2;
        while index < bytes.len() {
            let byte = bytes[index];
            if let Some(open) = quote {
                if byte == b'\\' {
                    index += 1;
                } else if byte == open {
                    quote = None;
                }
                index += 1;
                continue;
            }
            if byte.is_ascii_alphabetic() || byte == b'_' {
                word_start.get_or_insert(index);
            } else if let Some(start) = word_start.take()
                && matches!(
                    &source[start..index],
                    "not" | "and" | "or" | "is" | "in" | "if"
                )
            {
                operators += 1;
            }
            match byte {
                b'\'' | b'"' => quote = Some(byte),
                b'+' | b'-' | b'*' | b'/' | b'%' | b'~' | b'|' | b'.' | b'(' | b'[' | b'{'
                | b'<' | b'>' | b'=' | b'!'
                    if !(byte == close && bytes.get(index + 1) == Some(&b'}')) =>
                {
                    operators += 1;
                }
                _ => {}
            }
            if byte == close && bytes.get(index + 1) == Some(&b'}') {
                index += 2;
                break;
            }
            index += 1;
        }
        if operators > MAX_OPERATORS_PER_TAG {
            let line = source[..index.min(source.len())].matches('\n').count() + 1;
            return Err(TemplateError::Syntax(format!(
                "an expression nests or chains more than {MAX_OPERATORS_PER_TAG} operators in one tag (line {line}); split it up"
            )));
        }
    }
    Ok(())
}
