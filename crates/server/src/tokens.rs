//! Who may call the API: bearer tokens, each with a name that is recorded as the decider of the
//! approvals it answers. They come from a file of `name:token` lines and are never logged,
//! echoed, or written to the store.

use std::collections::HashSet;
use std::path::Path;

/// The tokens the server accepts.
#[derive(Clone)]
pub struct Tokens {
    entries: Vec<(String, String)>,
}

// Never print a token, not even in a debug dump.
impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.entries.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Tokens").field("names", &names).finish()
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
        let mut entries: Vec<(String, String)> = Vec::new();
        // The tokens seen so far, to refuse one given to two names without comparing each
        // line with every other.
        let mut seen: HashSet<&str> = HashSet::new();
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
            if !seen.insert(token) {
                return Err(refused(&format!(
                    "the token of `{name}` is another name's too"
                )));
            }
            entries.push((name.to_string(), token.to_string()));
        }
        if entries.is_empty() {
            return Err(TokensError::Empty {
                path: path.to_string(),
            });
        }
        Ok(Tokens { entries })
    }

    /// The name of the token in an `Authorization` header's value (`Bearer TOKEN`).
    pub fn caller(&self, authorization: &str) -> Option<&str> {
        let token = authorization
            .strip_prefix("Bearer ")
            .or_else(|| authorization.strip_prefix("bearer "))?
            .trim();
        // Every entry is compared, each in time that depends only on the lengths.
        let mut found = None;
        for (name, known) in &self.entries {
            if same(known.as_bytes(), token.as_bytes()) {
                found = Some(name.as_str());
            }
        }
        found
    }

    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(name, _)| name.as_str()).collect()
    }
}

/// Whether `a` and `b` are equal, looking at every byte of the shorter.
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut differ = a.len() ^ b.len();
    for (x, y) in a.iter().zip(b) {
        differ |= usize::from(x ^ y);
    }
    differ == 0
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
