//! Where each value of a JSON text starts: the line of `cases[1].expect[2]`, so that a problem
//! found after parsing (an assertion naming a node the flow lacks) names its line too.

use std::collections::HashMap;

/// The 1-based line each value of `text` starts on, by path (`""` for the whole document,
/// `cases[1]`, `cases[1].expect[2].node`). Empty when `text` is not JSON.
pub(crate) fn value_lines(text: &str) -> HashMap<String, usize> {
    let mut scanner = Scanner {
        bytes: text.as_bytes(),
        at: 0,
        line: 1,
        lines: HashMap::new(),
    };
    if scanner.value(String::new(), 0).is_none() {
        return HashMap::new();
    }
    scanner.lines
}

/// The line of `path`, or of the nearest enclosing value that has one.
pub(crate) fn line_of(lines: &HashMap<String, usize>, path: &str) -> Option<usize> {
    let mut path = path;
    loop {
        if let Some(line) = lines.get(path) {
            return Some(*line);
        }
        let cut = path.rfind(['.', '['])?;
        path = &path[..cut];
    }
}

/// Nesting this deep is refused (the document is then left without lines).
const MAX_DEPTH: usize = 256;

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
    line: usize,
    lines: HashMap<String, usize>,
}

impl Scanner<'_> {
    fn skip_space(&mut self) {
        while let Some(&byte) = self.bytes.get(self.at) {
            match byte {
                b'\n' => self.line += 1,
                b' ' | b'\t' | b'\r' => {}
                _ => return,
            }
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn value(&mut self, path: String, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.skip_space();
        self.lines.insert(path.clone(), self.line);
        match self.peek()? {
            b'{' => {
                self.at += 1;
                self.skip_space();
                if self.peek()? == b'}' {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    self.skip_space();
                    let key = self.string()?;
                    self.skip_space();
                    if self.peek()? != b':' {
                        return None;
                    }
                    self.at += 1;
                    let child = if path.is_empty() {
                        key
                    } else {
                        format!("{path}.{key}")
                    };
                    self.value(child, depth + 1)?;
                    self.skip_space();
                    match self.peek()? {
                        b',' => self.at += 1,
                        b'}' => {
                            self.at += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.at += 1;
                self.skip_space();
                if self.peek()? == b']' {
                    self.at += 1;
                    return Some(());
                }
                let mut index = 0;
                loop {
                    self.value(format!("{path}[{index}]"), depth + 1)?;
                    index += 1;
                    self.skip_space();
                    match self.peek()? {
                        b',' => self.at += 1,
                        b']' => {
                            self.at += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => self.string().map(|_| ()),
            _ => {
                // A number or a literal: up to the next delimiter.
                let start = self.at;
                while let Some(byte) = self.peek() {
                    if matches!(byte, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                        break;
                    }
                    self.at += 1;
                }
                (self.at > start).then_some(())
            }
        }
    }

    /// A string's text (escapes kept as written: keys with escapes are rare in tests files).
    fn string(&mut self) -> Option<String> {
        if self.peek()? != b'"' {
            return None;
        }
        self.at += 1;
        let start = self.at;
        loop {
            match self.peek()? {
                b'\\' => self.at += 2,
                b'"' => {
                    let text = String::from_utf8_lossy(&self.bytes[start..self.at]).into_owned();
                    self.at += 1;
                    return Some(text);
                }
                b'\n' => return None,
                _ => self.at += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_has_the_line_it_starts_on() {
        let text = "{\n  \"cases\": [\n    {\"name\": \"a\"},\n    {\n      \"name\": \"b\",\n      \"expect\": [{\"node\": \"x\"}, \n {\"equals\": [1, 2]}]\n    }\n  ]\n}\n";
        let lines = value_lines(text);
        assert_eq!(lines[""], 1);
        assert_eq!(lines["cases"], 2);
        assert_eq!(lines["cases[0]"], 3);
        assert_eq!(lines["cases[1]"], 4);
        assert_eq!(lines["cases[1].name"], 5);
        assert_eq!(lines["cases[1].expect[0].node"], 6);
        assert_eq!(lines["cases[1].expect[1]"], 7);
        assert_eq!(line_of(&lines, "cases[1].expect[1].equals[1]"), Some(7));
        assert_eq!(line_of(&lines, "cases[1].expect[9].node"), Some(6));
        assert!(value_lines("{\"a\": ").is_empty());
        assert!(value_lines(&"[".repeat(1000)).is_empty());
    }
}
