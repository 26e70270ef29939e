//! Approval links (docs/approvals.md, "By email"): a link emailed to one person for one pause
//! of one run, signed with the server's link key (`WEFT_LINK_KEY`, never stored), and the small
//! page it opens to answer the approval, its form included.
//!
//! A link names the run, the pause, the person and when it expires (the approval's deadline,
//! if it has one), all under an HMAC-SHA256: another run, another person or a later pause of
//! the same run is another link, and an edited one does not verify. It answers once: the
//! decision is kept under that person at that pause, and the store keeps one per person and
//! pause. Opening the page decides nothing (mail scanners follow links); answering is a POST.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use weft_api::{Asked, ErrorKind};
use weft_nodes::FormFieldKind;
use weft_template::output_text;

/// Where the link key is read from (`weft serve`).
pub const LINK_KEY_ENV: &str = "WEFT_LINK_KEY";

/// Shorter keys are refused: the key is all that stands between a guessed link and a decision.
const MIN_KEY_LEN: usize = 32;

/// What the signature covers besides the link, so that a signature made for something else
/// with the same key never verifies as a link.
const DOMAIN: &[u8] = b"weft approval link v1\n";

/// The secret approval links are signed with.
#[derive(Clone)]
pub struct LinkKey(Vec<u8>);

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("LinkKey(..)")
    }
}

impl LinkKey {
    /// A key from its text: at least 32 characters.
    pub fn new(secret: &str) -> Result<LinkKey, String> {
        let secret = secret.trim();
        if secret.len() < MIN_KEY_LEN {
            return Err(format!(
                "{LINK_KEY_ENV} must be at least {MIN_KEY_LEN} characters (it has {}): a random secret, the same for every server answering the links (e.g. `openssl rand -hex 32`)",
                secret.len()
            ));
        }
        Ok(LinkKey(secret.as_bytes().to_vec()))
    }

    /// The key of `WEFT_LINK_KEY`, if it is set.
    pub fn from_env() -> Result<Option<LinkKey>, String> {
        match std::env::var(LINK_KEY_ENV) {
            Ok(secret) => LinkKey::new(&secret).map(Some),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!("{LINK_KEY_ENV} is not UTF-8")),
        }
    }

    fn mac(&self, payload: &[u8]) -> Hmac<Sha256> {
        // HMAC takes keys of any length.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("any key length");
        mac.update(DOMAIN);
        mac.update(payload);
        mac
    }

    /// The link's token (a URL path segment).
    pub fn sign(&self, link: &Link) -> String {
        let payload = link.payload();
        let signature = self.mac(payload.as_bytes()).finalize().into_bytes();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload),
            URL_SAFE_NO_PAD.encode(signature)
        )
    }

    /// The link a token is for, if it was signed with this key and not changed since.
    pub fn open(&self, token: &str) -> Result<Link, String> {
        let refused = || {
            "this link is not valid: it was changed, or it was not made by this server".to_string()
        };
        let (payload, signature) = token.split_once('.').ok_or_else(refused)?;
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| refused())?;
        let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| refused())?;
        // Compared in constant time by the MAC itself.
        self.mac(&payload)
            .verify_slice(&signature)
            .map_err(|_| refused())?;
        let payload = String::from_utf8(payload).map_err(|_| refused())?;
        Link::parse(&payload).ok_or_else(refused)
    }
}

/// What a link lets its person do: answer the approval run `run_id` waits at, at pause `pause`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub run_id: String,
    pub pause: u64,
    pub person: String,
    /// After this (RFC 3339, UTC) the link is refused: the approval's deadline.
    pub expires: Option<String>,
}

impl Link {
    /// Newline-separated, the person last (a person's name has no newline; run ids neither).
    fn payload(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}",
            self.run_id,
            self.pause,
            self.expires.as_deref().unwrap_or(""),
            self.person
        )
    }

    fn parse(payload: &str) -> Option<Link> {
        let mut parts = payload.splitn(4, '\n');
        let run_id = parts.next()?.to_string();
        let pause = parts.next()?.parse().ok()?;
        let expires = Some(parts.next()?.to_string()).filter(|text| !text.is_empty());
        let person = parts.next()?.to_string();
        Some(Link {
            run_id,
            pause,
            person,
            expires,
        })
    }

    /// Whether it expired by `now`.
    pub fn expired(&self, now: chrono::DateTime<chrono::Utc>) -> bool {
        self.expires
            .as_deref()
            .and_then(|expires| chrono::DateTime::parse_from_rfc3339(expires).ok())
            .is_some_and(|expires| expires < now)
    }
}

/// A page of the link, as HTML with its status.
pub struct Page {
    pub status: axum::http::StatusCode,
    pub html: String,
}

impl axum::response::IntoResponse for Page {
    fn into_response(self) -> axum::response::Response {
        use axum::http::header;
        (
            self.status,
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                // The link is a credential: not cached, not sent on as a referrer, not framed.
                (header::CACHE_CONTROL, "no-store"),
                (header::REFERRER_POLICY, "no-referrer"),
                (header::X_FRAME_OPTIONS, "DENY"),
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
                ),
            ],
            self.html,
        )
            .into_response()
    }
}

/// A page saying why the link cannot answer, with the status that fits.
pub fn refusal(kind: Option<ErrorKind>, message: &str) -> Page {
    use axum::http::StatusCode;
    let status = match kind {
        Some(ErrorKind::Forbidden) | None => StatusCode::FORBIDDEN,
        Some(ErrorKind::NotFound) => StatusCode::NOT_FOUND,
        Some(ErrorKind::Conflict) => StatusCode::CONFLICT,
        Some(ErrorKind::Invalid) => StatusCode::BAD_REQUEST,
        Some(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    Page {
        status,
        html: document(
            "This link cannot answer",
            &format!("<p class=\"refused\">{}</p>", escape(message)),
        ),
    }
}

/// The expired link's page.
pub fn expired(link: &Link) -> Page {
    Page {
        status: axum::http::StatusCode::GONE,
        html: document(
            "This link expired",
            &format!(
                "<p class=\"refused\">This link expired at {}: the approval's time ran out.</p>",
                escape(link.expires.as_deref().unwrap_or(""))
            ),
        ),
    }
}

/// The page asking `person` to decide `asked`: what it asks, the draft, who approved, its form.
pub fn ask_page(asked: &Asked, person: &str) -> Page {
    let mut body = String::new();
    body.push_str(&format!(
        "<p>Run <code>{}</code> of <b>{}</b> waits for your decision at <code>{}</code>, {}.</p>",
        escape(&asked.run_id),
        escape(&asked.flow_name),
        escape(&asked.node_id),
        escape(person)
    ));
    if !asked.message.is_empty() {
        body.push_str(&format!(
            "<p class=\"message\">{}</p>",
            escape(&asked.message)
        ));
    }
    let has_draft = asked
        .fields
        .iter()
        .any(|field| field.kind == FormFieldKind::Draft);
    let input = output_text(&asked.input);
    if !has_draft && !input.is_empty() {
        body.push_str(&format!(
            "<h2>What it was given</h2><pre>{}</pre>",
            escape(&input)
        ));
    }
    body.push_str(&progress_text(asked));
    if let Some(deadline) = &asked.deadline {
        body.push_str(&format!(
            "<p>Answer before {}; then the approval times out.</p>",
            escape(deadline)
        ));
    }
    body.push_str("<form method=\"post\">");
    for field in &asked.fields {
        let label = if field.label.is_empty() {
            &field.name
        } else {
            &field.label
        };
        let name = escape(&field.name);
        let required = if field.required { " required" } else { "" };
        body.push_str(&format!(
            "<label for=\"f-{name}\">{}{}</label>",
            escape(label),
            if field.required { " *" } else { "" }
        ));
        match field.kind {
            FormFieldKind::Text => body.push_str(&format!(
                "<input id=\"f-{name}\" name=\"{name}\" type=\"text\"{required}>"
            )),
            FormFieldKind::Number => body.push_str(&format!(
                "<input id=\"f-{name}\" name=\"{name}\" type=\"number\" step=\"any\"{required}>"
            )),
            FormFieldKind::Choice => {
                body.push_str(&format!(
                    "<select id=\"f-{name}\" name=\"{name}\"{required}><option value=\"\"></option>"
                ));
                for option in &field.options {
                    let option = escape(option);
                    body.push_str(&format!("<option value=\"{option}\">{option}</option>"));
                }
                body.push_str("</select>");
            }
            FormFieldKind::Draft => body.push_str(&format!(
                "<textarea id=\"f-{name}\" name=\"{name}\" rows=\"12\">{}</textarea>",
                escape(&input)
            )),
        }
    }
    body.push_str(
        "<label for=\"note\">Note</label><textarea id=\"note\" name=\"note\" rows=\"3\"></textarea>\
         <div class=\"buttons\"><button name=\"decision\" value=\"approve\">Approve</button>\
         <button name=\"decision\" value=\"reject\" formnovalidate>Reject</button></div></form>",
    );
    Page {
        status: axum::http::StatusCode::OK,
        html: document(&format!("Approval: {}", asked.node_id), &body),
    }
}

/// The page after a decision was kept.
pub fn answered_page(title: &str, text: &str) -> Page {
    Page {
        status: axum::http::StatusCode::OK,
        html: document(title, &format!("<p class=\"done\">{}</p>", escape(text))),
    }
}

/// Who approved so far and how many more it needs, when it needs several people.
fn progress_text(asked: &Asked) -> String {
    let progress = &asked.progress;
    if progress.required <= 1 {
        return String::new();
    }
    let approved = if progress.approved_by.is_empty() {
        "nobody yet".to_string()
    } else {
        progress.approved_by.join(", ")
    };
    format!(
        "<p>It needs {} approvals; approved so far: {}.</p>",
        progress.required,
        escape(&approved)
    )
}

fn document(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · Weft</title><style>\
         body{{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;color:#1f2328}}\
         label{{display:block;margin-top:1rem;font-weight:600}}\
         input,select,textarea{{width:100%;box-sizing:border-box;font:inherit;padding:.4rem}}\
         pre{{white-space:pre-wrap;background:#f6f8fa;padding:.75rem}}\
         .message{{white-space:pre-wrap;font-size:1.1rem}}\
         .buttons{{margin-top:1.5rem;display:flex;gap:1rem}}\
         button{{font:inherit;padding:.5rem 1.5rem}}\
         .refused{{color:#82071e}}\
         </style></head><body><h1>{title}</h1>{body}</body></html>",
        title = escape(title),
    )
}

/// Text as HTML text or an attribute's value.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(character),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> LinkKey {
        LinkKey::new("0123456789abcdef0123456789abcdef").expect("key")
    }

    fn link() -> Link {
        Link {
            run_id: "run-1".into(),
            pause: 7,
            person: "ada".into(),
            expires: Some("2026-11-28T12:00:00.000Z".into()),
        }
    }

    #[test]
    fn a_signed_link_opens_as_itself_and_an_edited_one_does_not() {
        let token = key().sign(&link());
        assert_eq!(key().open(&token), Ok(link()));

        // The same link for another person, run or pause, signed by nobody.
        let (_, signature) = token.split_once('.').expect("two parts");
        for other in [
            Link {
                person: "grace".into(),
                ..link()
            },
            Link {
                run_id: "run-2".into(),
                ..link()
            },
            Link { pause: 8, ..link() },
            Link {
                expires: None,
                ..link()
            },
        ] {
            let forged = format!("{}.{signature}", URL_SAFE_NO_PAD.encode(other.payload()));
            let refused = key().open(&forged).expect_err("forged");
            assert!(refused.contains("not valid"), "{refused}");
        }
        // Another key's link, and text that is no link at all.
        let other_key = LinkKey::new("another secret of thirty-two characters").expect("key");
        assert!(key().open(&other_key.sign(&link())).is_err());
        for junk in ["", ".", "abc", "abc.def", "%%.%%"] {
            assert!(key().open(junk).is_err(), "{junk}");
        }
    }

    #[test]
    fn a_short_key_is_refused_naming_the_variable() {
        let refused = LinkKey::new("short").expect_err("too short");
        assert!(
            refused.contains(LINK_KEY_ENV) && refused.contains("32"),
            "{refused}"
        );
    }

    #[test]
    fn a_link_expires_after_its_approvals_deadline_only() {
        let at = |text: &str| {
            chrono::DateTime::parse_from_rfc3339(text)
                .expect("time")
                .with_timezone(&chrono::Utc)
        };
        assert!(!link().expired(at("2026-11-28T11:59:59Z")));
        assert!(link().expired(at("2026-11-28T12:00:01Z")));
        let without = Link {
            expires: None,
            ..link()
        };
        assert!(!without.expired(at("2099-01-01T00:00:00Z")));
    }

    #[test]
    fn text_is_escaped_in_pages() {
        assert_eq!(
            escape("<script>\"a\" & 'b'</script>"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;"
        );
    }
}
