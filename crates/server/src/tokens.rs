//! Who may call the API: bearer tokens, each with a name that is recorded as the decider of the
//! approvals it answers. They come from a file of `name:token` lines and are never logged,
//! echoed, or written to the store.

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
    #[error(
        "the tokens file {path} has no token; write one `name:token` a line (the server refuses to start without one)"
    )]
    Empty { path: String },
}

/// Tokens shorter than this are refused: they could be guessed.
const MIN_TOKEN: usize = 16;

impl Tokens {
    /// Reads `name:token` lines (blank lines and `#` comments skipped).
    pub fn load(path: &Path) -> Result<Tokens, TokensError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| TokensError::Read {
            path: shown.clone(),
            message: error.to_string(),
        })?;
        Tokens::parse(&text, &shown)
    }

    /// Reads the text of a tokens file (`path` names it in errors).
    pub fn parse(text: &str, path: &str) -> Result<Tokens, TokensError> {
        let mut entries: Vec<(String, String)> = Vec::new();
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
            if entries.iter().any(|(_, other)| other == token) {
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
}
