//! Who may call the API: bearer tokens, each with a name that is recorded as the decider of the
//! approvals it answers. They come from a file of `name:token` lines and are never logged,
//! echoed, or written to the store.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The tokens the server accepts, kept as their SHA-256 only: a request's token is found by its
/// digest in one lookup, however many tokens there are (comparing it with each in turn cost a
/// request as much as the tokens file is long), and where it stops tells nothing of a token.
#[derive(Clone)]
pub struct Tokens {
    names: Vec<String>,
    /// Each token's digest, to the index of its name.
    by_digest: HashMap<[u8; 32], usize>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

// Never print a token, not even in a debug dump.
impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("names", &self.names)
            .finish()
    }
}

/// Why a tokens file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    #[error("cannot read the tokens file {path}: {message}")]
    Read { path: String, message: String },
    #[error("the tokens file {path}, line {line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
    #[error("the tokens file {path} is not a regular file")]
    NotAFile { path: String },
    #[error(
        "the tokens file {path} is larger than {} MiB, too large for a tokens file",
        MAX_TOKENS_FILE_BYTES / 1024 / 1024
    )]
    TooLarge { path: String },
    #[error(
        "the tokens file {path} has no token; write one `name:token` a line (the server refuses to start without one)"
    )]
    Empty { path: String },
}

/// Tokens shorter than this are refused: they could be guessed.
const MIN_TOKEN: usize = 16;

/// The largest tokens file read (as large as a flow file may be).
pub const MAX_TOKENS_FILE_BYTES: u64 = 32 * 1024 * 1024;

impl Tokens {
    /// Reads `name:token` lines (blank lines and `#` comments skipped) from a regular file of
    /// at most [`MAX_TOKENS_FILE_BYTES`]: a FIFO, which would block opening it, or a device
    /// such as `/dev/zero`, which would be read without end, is refused (read as flow files
    /// are, by [`weft_flow::read_text_file`]).
    pub fn load(path: &Path) -> Result<Tokens, TokensError> {
        let shown = path.display().to_string();
        let text =
            weft_flow::read_text_file(path, MAX_TOKENS_FILE_BYTES).map_err(|error| match error
                .kind()
            {
                std::io::ErrorKind::InvalidInput => TokensError::NotAFile {
                    path: shown.clone(),
                },
                std::io::ErrorKind::FileTooLarge => TokensError::TooLarge {
                    path: shown.clone(),
                },
                _ => TokensError::Read {
                    path: shown.clone(),
                    message: error.to_string(),
                },
            })?;
        Tokens::parse(&text, &shown)
    }

    /// Reads the text of a tokens file (`path` names it in errors).
    pub fn parse(text: &str, path: &str) -> Result<Tokens, TokensError> {
        let mut names: Vec<String> = Vec::new();
        let mut by_digest: HashMap<[u8; 32], usize> = HashMap::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let refused = |message: &str| TokensError::Line {
                path: path.to_string(),
                line: index + 1,
                message: message.to_string(),
            };
            let (name, token) = line
                .split_once(':')
                .ok_or_else(|| refused("expected name:token"))?;
            let (name, token) = (name.trim(), token.trim());
            if name.is_empty() {
                return Err(refused("the token has no name (name:token)"));
            }
            if token.chars().count() < MIN_TOKEN {
                return Err(refused(&format!(
                    "the token of `{name}` is shorter than {MIN_TOKEN} characters"
                )));
            }
            // The server reads the token from an `Authorization` header, which carries printable
            // ASCII, spaces and tabs only: a token with any other character could never be sent.
            if !token
                .chars()
                .all(|character| character.is_ascii_graphic() || matches!(character, ' ' | '\t'))
            {
                return Err(refused(&format!(
                    "the token of `{name}` has a character an `Authorization` header cannot carry (use printable ASCII)"
                )));
            }
            match by_digest.entry(digest(token)) {
                Entry::Occupied(_) => {
                    return Err(refused(&format!(
                        "the token of `{name}` is another name's too"
                    )));
                }
                Entry::Vacant(slot) => {
                    slot.insert(names.len());
                }
            }
            names.push(name.to_string());
        }
        if names.is_empty() {
            return Err(TokensError::Empty {
                path: path.to_string(),
            });
        }
        Ok(Tokens { names, by_digest })
    }

    /// The name of the token in an `Authorization` header's value (`Bearer TOKEN`).
    pub fn caller(&self, authorization: &str) -> Option<&str> {
        let token = authorization
            .strip_prefix("Bearer ")
            .or_else(|| authorization.strip_prefix("bearer "))?
            .trim();
        let index = *self.by_digest.get(&digest(token))?;
        self.names.get(index).map(String::as_str)
    }

    pub fn names(&self) -> Vec<&str> {
        self.names.iter().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_tokens_and_refuses_bad_lines() {
        let tokens = Tokens::parse(
            "# who may call\nada: 0123456789abcdef0\n\nci:fedcba9876543210x\n",
            "t",
        )
        .expect("tokens");
        assert_eq!(tokens.names(), ["ada", "ci"]);
        assert_eq!(tokens.caller("Bearer 0123456789abcdef0"), Some("ada"));
        assert_eq!(tokens.caller("Bearer fedcba9876543210x"), Some("ci"));
        assert_eq!(tokens.caller("Bearer 0123456789abcdef"), None);
        assert_eq!(tokens.caller("0123456789abcdef0"), None);
        assert!(
            !format!("{tokens:?}").contains("0123"),
            "no token in a debug dump"
        );
        for (text, wanted) in [
            ("ada", "line 1: expected name:token"),
            (":0123456789abcdef0", "has no name"),
            ("ada:short", "shorter than 16"),
            (
                "a:0123456789abcdef0\nb:0123456789abcdef0",
                "line 2: the token of `b` is another name's",
            ),
            ("# nothing\n", "has no token"),
        ] {
            let error = Tokens::parse(text, "t").expect_err(text).to_string();
            assert!(error.contains(wanted), "{text}: {error}");
        }
    }

    /// Found by the fuzz properties: such tokens loaded, and no request could present them (the
    /// server reads the header as text, which it is only when printable ASCII).
    #[test]
    fn a_token_an_authorization_header_cannot_carry_is_refused() {
        for text in [
            "ada:0123456789abcdefé",
            "ada:0123456789\u{0}abcdef",
            "ada:0123456789\u{b}abcdef",
            "ada:0123456789\u{7f}abcdef",
        ] {
            let error = Tokens::parse(text, "t").expect_err(text).to_string();
            assert!(
                error.contains("line 1: the token of `ada` has a character an `Authorization` header cannot carry"),
                "{text:?}: {error}"
            );
            assert!(
                !error.contains("0123456789"),
                "no token in an error: {error}"
            );
        }
        // Every printable ASCII character, spaces and tabs inside, are fine.
        let printable: String = (' '..='~').collect();
        let text = format!("ada: a\tb {printable}\nbo:{}", printable.trim());
        let tokens = Tokens::parse(&text, "t").expect("tokens");
        for (token, name) in [
            (format!("a\tb {}", printable.trim_end()), "ada"),
            (printable.trim().to_string(), "bo"),
        ] {
            let header =
                axum::http::HeaderValue::from_str(&format!("Bearer {token}")).expect("a header");
            assert_eq!(tokens.caller(header.to_str().expect("text")), Some(name));
        }
    }

    #[test]
    fn a_large_file_loads_and_a_token_twice_is_still_refused() {
        let count = 160_000;
        let mut text: String = (0..count)
            .map(|index| format!("user{index}:token-{index:020}-abcdef\n"))
            .collect();
        let tokens = Tokens::parse(&text, "t").expect("tokens");
        assert_eq!(tokens.names().len(), count);
        assert_eq!(
            tokens.caller(&format!("Bearer token-{:020}-abcdef", count - 1)),
            Some(format!("user{}", count - 1).as_str())
        );
        text.push_str("late:token-00000000000000000007-abcdef\n");
        let error = Tokens::parse(&text, "t")
            .expect_err("a token twice")
            .to_string();
        assert!(
            error.contains(&format!("line {}: the token of `late`", count + 1)),
            "{error}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn only_a_regular_file_of_bounded_size_is_read() {
        let dir = tempfile::tempdir().expect("dir");
        let large = dir.path().join("large.txt");
        let file = std::fs::File::create(&large).expect("large");
        file.set_len(MAX_TOKENS_FILE_BYTES + 1)
            .expect("a sparse file");
        for (path, wanted) in [
            (dir.path().to_path_buf(), "is not a regular file"),
            (
                Path::new("/dev/zero").to_path_buf(),
                "is not a regular file",
            ),
            (large, "is larger than 32 MiB"),
            (dir.path().join("none.txt"), "cannot read the tokens file"),
        ] {
            let error = Tokens::load(&path).expect_err("refused").to_string();
            assert!(error.contains(wanted), "{}: {error}", path.display());
        }
        let fine = dir.path().join("tokens.txt");
        std::fs::write(&fine, "ada:0123456789abcdef0\n").expect("tokens");
        assert_eq!(Tokens::load(&fine).expect("tokens").names(), ["ada"]);
    }
}

/// Property tests over the tokens file: files built line by line (valid lines, blank lines,
/// comments, and lines wrong in each way) load into exactly their valid lines' tokens, or fail
/// naming the file and the first wrong line; valid files mutated as text, and random bytes,
/// load or fail naming the file, never panic.
///
/// As in `crates/engine/tests/it/fuzz.rs`, the test command runs a fixed number of cases from a
/// fixed seed; `scripts/fuzz.sh` runs many more from random seeds (`WEFT_FUZZ_CASES`,
/// `WEFT_FUZZ_SEED=random`), each case in a child process that catches aborts and hangs.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;
    use proptest::sample::Index;
    use weft_fuzz::config;

    use super::*;

    /// One line of a tokens file, and what it is.
    #[derive(Debug, Clone)]
    enum Line {
        /// Blank, or a comment: skipped.
        Skipped(String),
        /// `name:token` as written, the name and the token.
        Valid(String, String, String),
        /// The token of an earlier valid line (the `Index` picks it) given to `name`.
        Again(String, Index),
        /// Wrong whatever comes before it.
        Wrong(String),
    }

    /// Spaces and tabs around a part of a line.
    fn padding() -> impl Strategy<Value = String> {
        prop_oneof![4 => Just(String::new()), 1 => "[ \t]{1,3}"]
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z][a-z0-9_.@-]{0,11}",
            // Anything but a colon or a line break, not starting with a space or `#`.
            "[^:#\\s][^:\r\n]{0,12}",
        ]
    }

    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-Za-z0-9+/=_-]{16,40}",
            // Colons and hashes are part of a token; so is anything after the first colon.
            "[A-Za-z0-9:#]{16,24}",
            "[^\\s][^\r\n]{14,30}[^\\s]",
        ]
    }

    fn line() -> impl Strategy<Value = Line> {
        prop_oneof![
            1 => prop_oneof![
                Just(String::new()),
                "[ \t]{1,4}",
                "[ \t]{0,2}#[^\r\n]{0,30}",
            ]
            .prop_map(Line::Skipped),
            4 => (padding(), name(), padding(), padding(), token(), padding()).prop_map(
                |(before, name, after, space, token, end)| {
                    let text = format!("{before}{name}{after}:{space}{token}{end}");
                    Line::Valid(text, name.trim().to_string(), token.trim().to_string())
                }
            ),
            1 => (name(), any::<Index>()).prop_map(|(name, of)| Line::Again(name, of)),
            1 => prop_oneof![
                // No colon.
                "[a-z0-9][^:\r\n]{0,30}",
                // No name.
                ("[ \t]{0,2}", token()).prop_map(|(space, token)| format!("{space}:{token}")),
                // A token too short.
                (name(), "[A-Za-z0-9]{0,15}").prop_map(|(name, token)| format!("{name}:{token}")),
                (name(), "[^\r\n]{0,15}").prop_map(|(name, token)| format!("{name}:{token}")),
            ]
            .prop_map(Line::Wrong),
        ]
    }

    /// What loading the lines must give: the names and tokens of the valid lines, or the number
    /// of the first wrong line (`None` when no line is wrong but none is valid).
    type Expected = Result<Vec<(String, String)>, Option<usize>>;

    /// The file's text, and what it must load to.
    fn file_of(lines: &[Line], ending: &str, last_ending: bool) -> (String, Expected) {
        let mut texts = Vec::new();
        let mut valid: Vec<(String, String)> = Vec::new();
        let mut wrong = None;
        for (index, line) in lines.iter().enumerate() {
            let text = match line {
                Line::Skipped(text) => text.clone(),
                Line::Valid(text, name, token) => {
                    // A token already given is wrong here (names may repeat).
                    if valid.iter().any(|(_, known)| known == token) || !token_is_good(token) {
                        wrong.get_or_insert(index + 1);
                    } else {
                        valid.push((name.clone(), token.clone()));
                    }
                    text.clone()
                }
                Line::Again(name, of) => match valid.get(of.index(valid.len().max(1))) {
                    Some((_, token)) => {
                        wrong.get_or_insert(index + 1);
                        format!("{name}:{token}")
                    }
                    None => String::new(),
                },
                Line::Wrong(text) => {
                    wrong.get_or_insert(index + 1);
                    text.clone()
                }
            };
            texts.push(text);
        }
        let mut text = texts.join(ending);
        if last_ending && !texts.is_empty() {
            text.push_str(ending);
        }
        let expected = match wrong {
            Some(line) => Err(Some(line)),
            None if valid.is_empty() => Err(None),
            None => Ok(valid),
        };
        (text, expected)
    }

    /// Long enough, and of characters an `Authorization` header carries.
    fn token_is_good(token: &str) -> bool {
        token.chars().count() >= MIN_TOKEN
            && token
                .chars()
                .all(|character| (' '..='~').contains(&character) || character == '\t')
    }

    /// The `name:token` lines of `text` that are neither blank nor comments, trimmed.
    fn lines_of(text: &str) -> Vec<(String, String)> {
        text.lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(|line| {
                let (name, token) = line.split_once(':').expect("a colon");
                (name.trim().to_string(), token.trim().to_string())
            })
            .collect()
    }

    /// Whether `tokens` are exactly `entries`: their names in order, each token known by its
    /// name, and no other.
    fn holds(tokens: &Tokens, entries: &[(String, String)]) -> bool {
        let names: Vec<&str> = entries.iter().map(|(name, _)| name.as_str()).collect();
        tokens.names() == names
            && tokens.by_digest.len() == entries.len()
            && entries.iter().all(|(name, token)| {
                tokens.caller(&format!("Bearer {token}")) == Some(name.as_str())
            })
    }

    /// What loading `text`, as a file and as text, gives: the same either way, each token known
    /// by the name on its line, and an error that names the file (and the line, in range).
    fn load(text: &[u8]) -> Result<Result<Tokens, TokensError>, TestCaseError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tokens.txt");
        std::fs::write(&path, text).expect("write the tokens file");
        let shown = path.display().to_string();
        let loaded = Tokens::load(&path);
        match &loaded {
            Ok(tokens) => {
                let text = std::str::from_utf8(text).expect("UTF-8");
                let parsed = Tokens::parse(text, &shown).expect("parses as text too");
                prop_assert_eq!(&parsed.names, &tokens.names);
                prop_assert_eq!(&parsed.by_digest, &tokens.by_digest);
                let entries = lines_of(text);
                prop_assert!(holds(tokens, &entries));
                prop_assert!(!entries.is_empty());
                for (name, token) in &entries {
                    prop_assert!(!name.is_empty() && !name.contains(':'));
                    prop_assert!(token_is_good(token));
                    prop_assert_eq!(
                        tokens.caller(&format!("Bearer {token}")),
                        Some(name.as_str())
                    );
                    // As the server reads it: an `Authorization` header's value, as text.
                    let header = axum::http::HeaderValue::from_str(&format!("Bearer {token}"));
                    let sent = header.as_ref().ok().and_then(|value| value.to_str().ok());
                    prop_assert_eq!(
                        sent.and_then(|sent| tokens.caller(sent)),
                        Some(name.as_str()),
                        "the token of `{}` cannot be sent: {:?}",
                        name,
                        token
                    );
                    prop_assert_eq!(tokens.caller(token), None);
                }
                prop_assert_eq!(tokens.caller("Bearer "), None);
                prop_assert_eq!(tokens.caller(""), None);
            }
            Err(error) => {
                let message = error.to_string();
                prop_assert!(
                    message.contains(&format!("the tokens file {shown}")),
                    "an error naming no file: {}",
                    message
                );
                if let TokensError::Line { line, .. } = error {
                    let lines = String::from_utf8_lossy(text).lines().count();
                    prop_assert!((1..=lines).contains(line), "line {} of {}", line, lines);
                    prop_assert!(message.contains(&format!(", line {line}: ")), "{}", message);
                }
                if let Ok(text) = std::str::from_utf8(text) {
                    let parsed = Tokens::parse(text, &shown).expect_err("fails as text too");
                    prop_assert_eq!(parsed.to_string(), message);
                }
            }
        }
        Ok(loaded)
    }

    proptest! {
        #![proptest_config(config(256))]

        #[test]
        fn a_tokens_file_loads_exactly_its_valid_lines_or_names_the_first_wrong_one(
            lines in prop::collection::vec(line(), 0..12),
            crlf in any::<bool>(),
            last_ending in any::<bool>(),
        ) {
            let ending = if crlf { "\r\n" } else { "\n" };
            let (text, expected) = file_of(&lines, ending, last_ending);
            let loaded = load(text.as_bytes())?;
            match (loaded, expected) {
                (Ok(tokens), Ok(valid)) => {
                    prop_assert!(holds(&tokens, &valid), "{:?} against {:?}", tokens, valid);
                }
                (Err(TokensError::Line { line, .. }), Err(Some(wrong))) => {
                    prop_assert_eq!(line, wrong);
                }
                (Err(TokensError::Empty { .. }), Err(None)) => {}
                (loaded, expected) => {
                    prop_assert!(false, "{:?}: loaded {:?}, expected {:?}", text, loaded, expected);
                }
            }
        }

        #[test]
        fn a_mutated_tokens_file_loads_or_fails_naming_the_file(
            lines in prop::collection::vec(line(), 1..8),
            cut in any::<Index>(),
            length in 0usize..32,
            insert in prop::collection::vec(any::<u8>(), 0..12),
        ) {
            let (text, _) = file_of(&lines, "\n", true);
            let mut bytes = text.into_bytes();
            let at = cut.index(bytes.len() + 1);
            let end = (at + length).min(bytes.len());
            bytes.splice(at..end, insert);
            if let Ok(tokens) = load(&bytes)? {
                // Exactly the lines that are neither blank nor comments, each a name and its
                // token.
                let text = String::from_utf8(bytes).expect("loaded, so UTF-8");
                prop_assert!(holds(&tokens, &lines_of(&text)));
            }
        }

        #[test]
        fn random_bytes_as_a_tokens_file_load_or_fail_naming_the_file(
            bytes in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            let _ = load(&bytes)?;
        }
    }
}
