//! Approval emails (`weft serve --smtp URL --public-url URL`): the mailer drains the store's
//! outbox of approval emails. An email owed for a pause (asking its approvers when the run
//! paused, a reminder, an escalation — whichever process paused the run or did the follow-up)
//! is addressed to the people it is for, then each person's is sent with a link signed for
//! them and that pause. A send that fails is kept with its error and tried again later, waiting
//! twice as long each time (up to five minutes) for as long as the approval waits: an SMTP
//! server that is down delays the email, and the approval waits in the inbox meanwhile.
//!
//! Every `weft serve` with a mailer may drain the same store: each email is claimed before it
//! is sent, for long enough to send it, so one process sends it (a process that dies while
//! sending leaves it to another once the claim runs out, which may send it twice).

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use lettre::message::header::ContentType;
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use weft_api::{Asked, ErrorKind, Weft};
use weft_store::StoredMail;
use weft_template::output_text;

use crate::links::{Link, LinkKey};

/// Where the SMTP user name and password are read from (never from the URL: command lines are
/// visible to every user of the machine).
pub const SMTP_USERNAME_ENV: &str = "WEFT_SMTP_USERNAME";
pub const SMTP_PASSWORD_ENV: &str = "WEFT_SMTP_PASSWORD";
/// A PEM file of certificate authorities the SMTP server's certificate may be issued by,
/// besides the system's (a company's own CA).
pub const SMTP_CA_ENV: &str = "WEFT_SMTP_CA_FILE";

/// How often the mailer looks for emails to send.
const EVERY: Duration = Duration::from_secs(1);
/// How long a claimed email is this process's to send.
const CLAIM: Duration = Duration::from_secs(120);
/// The wait after a first failure; doubled after each next one, up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_secs(2);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Emails looked at in one round.
const BATCH: u32 = 50;
/// How much of a draft an email quotes.
const QUOTED_CHARS: usize = 4000;

/// What sends approval emails: the SMTP server, the sender, and how links are made.
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    /// The SMTP server as given, for messages.
    smtp: String,
    from: Mailbox,
    /// The server's address as people's browsers reach it, without a trailing `/`.
    public_url: String,
    key: LinkKey,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Mailer")
            .field("smtp", &self.smtp)
            .field("from", &self.from.to_string())
            .field("public_url", &self.public_url)
            .finish_non_exhaustive()
    }
}

impl Mailer {
    /// A mailer sending through `smtp` (`smtp://HOST[:PORT]`, `smtps://HOST[:PORT]` for TLS
    /// from the start, `?tls=required` for STARTTLS), from `from` (`weft@` the public URL's
    /// host when `None`), with links to `public_url`; credentials and extra certificate
    /// authorities from the environment.
    pub fn new(
        smtp: &str,
        public_url: &str,
        from: Option<&str>,
        key: LinkKey,
    ) -> Result<Mailer, String> {
        let server = SmtpUrl::parse(smtp)?;
        let public_url = public_url.trim().trim_end_matches('/').to_string();
        let host = public_url
            .strip_prefix("https://")
            .or_else(|| public_url.strip_prefix("http://"))
            .map(|rest| rest.split(['/', ':']).next().unwrap_or(rest))
            .filter(|host| !host.is_empty())
            .ok_or_else(|| {
                format!(
                    "--public-url {public_url}: an http:// or https:// address people's browsers reach this server at was expected"
                )
            })?;
        let from = from.map_or_else(|| format!("Weft <weft@{host}>"), str::to_string);
        let from: Mailbox = from
            .parse()
            .map_err(|error| format!("--mail-from {from}: not an email address ({error})"))?;
        let tls = match server.tls {
            TlsMode::None => Tls::None,
            mode => {
                let mut parameters = TlsParameters::builder(server.host.clone());
                if let Some(path) = std::env::var_os(SMTP_CA_ENV) {
                    let pem = std::fs::read(&path).map_err(|error| {
                        format!("{SMTP_CA_ENV} {}: {error}", path.to_string_lossy())
                    })?;
                    let certificate = Certificate::from_pem(&pem).map_err(|error| {
                        format!("{SMTP_CA_ENV} {}: {error}", path.to_string_lossy())
                    })?;
                    parameters = parameters.add_root_certificate(certificate);
                }
                let parameters = parameters
                    .build()
                    .map_err(|error| format!("--smtp {smtp}: TLS cannot be set up: {error}"))?;
                match mode {
                    TlsMode::Wrapper => Tls::Wrapper(parameters),
                    _ => Tls::Required(parameters),
                }
            }
        };
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&server.host)
            .port(server.port)
            .tls(tls)
            .timeout(Some(Duration::from_secs(30)));
        match (
            std::env::var(SMTP_USERNAME_ENV),
            std::env::var(SMTP_PASSWORD_ENV),
        ) {
            (Ok(user), Ok(password)) => {
                builder = builder.credentials(Credentials::new(user, password));
            }
            (Err(_), Err(_)) => {}
            _ => {
                return Err(format!(
                    "set both {SMTP_USERNAME_ENV} and {SMTP_PASSWORD_ENV}, or neither"
                ));
            }
        }
        Ok(Mailer {
            transport: builder.build(),
            smtp: server.shown,
            from,
            public_url,
            key,
        })
    }

    /// Sends what is due until `stop` is cancelled, in the background.
    pub fn start(self, weft: Weft, stop: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(async move {
            tracing::info!("approval emails go out through {}", self.smtp);
            while !stop.is_cancelled() {
                if let Err(error) = self.send_due(&weft).await {
                    tracing::warn!("approval emails could not be looked up: {error}");
                }
                tokio::select! {
                    () = tokio::time::sleep(EVERY) => {}
                    () = stop.cancelled() => {}
                }
            }
        })
    }

    /// Addresses the emails owed and sends those due, once each across processes.
    pub async fn send_due(&self, weft: &Weft) -> Result<(), weft_api::Error> {
        let now = Utc::now();
        let now_text = time_text(now);
        let due = weft
            .in_store({
                let now_text = now_text.clone();
                move |store| store.due_mail(&now_text, BATCH)
            })
            .await?;
        for mail in due {
            if mail.person.is_empty() {
                self.address(weft, &mail, &now_text).await?;
            } else {
                self.send(weft, mail, now).await?;
            }
        }
        Ok(())
    }

    /// Turns an owed email into one per person it is for.
    async fn address(
        &self,
        weft: &Weft,
        mail: &StoredMail,
        now: &str,
    ) -> Result<(), weft_api::Error> {
        let to = match weft.mail_to(&mail.run_id, mail.pause, &mail.kind).await {
            Ok(Some((_, to))) => Some(to),
            Ok(None) => None,
            Err(error) if error.kind == ErrorKind::NotFound => None,
            Err(error) => return Err(error),
        };
        let mail = mail.clone();
        let now = now.to_string();
        weft.in_store(move |store| match to {
            Some(to) => store.address_mail(&mail.key(), &to, &now),
            None => store.mail_failed(&mail.key(), NO_LONGER_WAITING, None),
        })
        .await
    }

    /// Sends one person's email if this process claims it; keeps how it went.
    async fn send(
        &self,
        weft: &Weft,
        mail: StoredMail,
        now: DateTime<Utc>,
    ) -> Result<(), weft_api::Error> {
        let Some(seen) = mail.next_at.clone() else {
            return Ok(());
        };
        let until = time_text(now + CLAIM);
        let claimed = weft
            .in_store({
                let mail = mail.clone();
                move |store| store.claim_mail(&mail.key(), &seen, &until)
            })
            .await?;
        if !claimed {
            return Ok(());
        }
        let asked = match weft.asked(&mail.run_id, mail.pause).await {
            Ok(asked) => asked,
            Err(error) if matches!(error.kind, ErrorKind::Conflict | ErrorKind::NotFound) => {
                return self
                    .finish(weft, &mail, Err((NO_LONGER_WAITING, None)))
                    .await;
            }
            Err(error) => return Err(error),
        };
        if asked.decisions.iter().any(|kept| kept.by == mail.person) {
            return self
                .finish(weft, &mail, Err(("not sent: they had answered", None)))
                .await;
        }
        let attempt = mail.attempts + 1;
        match self.deliver(&asked, &mail).await {
            Ok(()) => {
                tracing::info!(
                    "emailed {} ({}) about run {} waiting at `{}`",
                    mail.person,
                    mail.kind,
                    mail.run_id,
                    asked.node_id
                );
                self.finish(weft, &mail, Ok(())).await
            }
            Err(error) => {
                let retry = now + backoff(attempt);
                tracing::warn!(
                    "the email to {} about run {} could not be sent through {} (attempt {attempt}; trying again at {}): {error}",
                    mail.person,
                    mail.run_id,
                    self.smtp,
                    time_text(retry)
                );
                let retry = time_text(retry);
                self.finish(weft, &mail, Err((&error, Some(&retry)))).await
            }
        }
    }

    async fn finish(
        &self,
        weft: &Weft,
        mail: &StoredMail,
        outcome: Result<(), (&str, Option<&str>)>,
    ) -> Result<(), weft_api::Error> {
        let key = mail.clone();
        let at = time_text(Utc::now());
        let outcome =
            outcome.map_err(|(error, retry)| (error.to_string(), retry.map(str::to_string)));
        weft.in_store(move |store| match outcome {
            Ok(()) => store.mail_sent(&key.key(), &at),
            Err((error, retry)) => store.mail_failed(&key.key(), &error, retry.as_deref()),
        })
        .await
    }

    /// Sends `mail` (one person's) about `asked`.
    async fn deliver(&self, asked: &Asked, mail: &StoredMail) -> Result<(), String> {
        let address = mail
            .email
            .as_deref()
            .ok_or("no email address")?
            .parse()
            .map_err(|error| format!("{:?}: not an email address ({error})", mail.email))?;
        let link = Link {
            run_id: asked.run_id.clone(),
            pause: asked.pause,
            person: mail.person.clone(),
            expires: asked.deadline.clone(),
        };
        let url = format!("{}/approve/{}", self.public_url, self.key.sign(&link));
        let (subject, text) = compose(asked, &mail.kind, &mail.person, &url);
        let message = Message::builder()
            .from(self.from.clone())
            .to(Mailbox::new(Some(mail.person.clone()), address))
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(text)
            .map_err(|error| format!("the email cannot be made: {error}"))?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|error| error.to_string())
    }
}

const NO_LONGER_WAITING: &str = "not sent: the approval was no longer waiting";

/// The subject and text of an email of `kind` to `person` about `asked`, answered at `url`.
fn compose(asked: &Asked, kind: &str, person: &str, url: &str) -> (String, String) {
    let what = format!("{} in {}", asked.node_id, asked.flow_name);
    let subject = match kind {
        "remind" => format!("Reminder: approval still needed: {what}"),
        "escalate" => format!("Escalated to you: approval needed: {what}"),
        _ => format!("Approval needed: {what}"),
    };
    let mut text = format!(
        "Hello {person},\n\nRun {} of flow {} waits for a decision at `{}`",
        asked.run_id, asked.flow_name, asked.node_id
    );
    text.push_str(match kind {
        "escalate" => ", and nobody decided it in time: you may decide it now.\n",
        "remind" => ", and still needs yours.\n",
        _ => ".\n",
    });
    if !asked.message.is_empty() {
        text.push_str(&format!("\n{}\n", asked.message));
    }
    let input = output_text(&asked.input);
    if !input.is_empty() {
        let quoted: String = input.chars().take(QUOTED_CHARS).collect();
        let more = if quoted.len() < input.len() {
            "\n[…]"
        } else {
            ""
        };
        text.push_str(&format!("\n---\n{quoted}{more}\n---\n"));
    }
    let progress = &asked.progress;
    if progress.required > 1 {
        let approved = if progress.approved_by.is_empty() {
            "nobody yet".to_string()
        } else {
            progress.approved_by.join(", ")
        };
        text.push_str(&format!(
            "\nIt needs {} approvals; approved so far: {approved}.\n",
            progress.required
        ));
    }
    if !asked.fields.is_empty() {
        let fields: Vec<String> = asked
            .fields
            .iter()
            .map(|field| {
                let label = if field.label.is_empty() {
                    &field.name
                } else {
                    &field.label
                };
                if field.required {
                    format!("{label} (required)")
                } else {
                    label.to_string()
                }
            })
            .collect();
        text.push_str(&format!("\nThe form asks: {}.\n", fields.join(", ")));
    }
    let until = match &asked.deadline {
        Some(deadline) => format!(" until {deadline}"),
        None => String::new(),
    };
    text.push_str(&format!(
        "\nApprove or reject here (the link is for you alone, answers once, and works while the approval waits{until}):\n{url}\n\n-- \nWeft\n"
    ));
    (subject, text)
}

/// The wait before attempt `attempt + 1`, after `attempt` failed.
fn backoff(attempt: u32) -> chrono::Duration {
    let doubled = FIRST_BACKOFF.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    chrono::Duration::from_std(doubled.min(MAX_BACKOFF)).unwrap_or(chrono::Duration::MAX)
}

fn time_text(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// How the SMTP server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TlsMode {
    None,
    /// STARTTLS, required.
    StartTls,
    /// TLS from the start (`smtps://`).
    Wrapper,
}

#[derive(Debug, PartialEq, Eq)]
struct SmtpUrl {
    host: String,
    port: u16,
    tls: TlsMode,
    /// As given.
    shown: String,
}

impl SmtpUrl {
    fn parse(url: &str) -> Result<SmtpUrl, String> {
        // A password given in the URL anyway is not repeated in messages.
        let shown = match url.split_once("://") {
            Some((scheme, rest)) if rest.contains('@') => {
                format!(
                    "{scheme}://…@{}",
                    rest.rsplit_once('@').map_or("", |(_, host)| host)
                )
            }
            _ => url.to_string(),
        };
        let bad = |why: &str| format!("--smtp {shown}: {why}");
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("smtp://HOST[:PORT] or smtps://HOST[:PORT] was expected"))?;
        let (address, query) = rest.split_once('?').unwrap_or((rest, ""));
        let address = address.trim_end_matches('/');
        if address.contains('@') {
            return Err(bad(&format!(
                "credentials do not go in the URL (it shows in process lists): set {SMTP_USERNAME_ENV} and {SMTP_PASSWORD_ENV}"
            )));
        }
        let mut tls = match scheme {
            "smtp" => TlsMode::None,
            "smtps" => TlsMode::Wrapper,
            other => {
                return Err(bad(&format!(
                    "`{other}://`: smtp:// or smtps:// was expected"
                )));
            }
        };
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            match pair {
                "tls=required" | "tls=starttls" if tls == TlsMode::None => tls = TlsMode::StartTls,
                "tls=none" if tls == TlsMode::None => {}
                _ => {
                    return Err(bad(&format!(
                        "`{pair}`: the one option is tls=required (STARTTLS) on smtp://"
                    )));
                }
            }
        }
        let (host, port) = match address.rsplit_once(':') {
            Some((host, port)) => (
                host,
                port.parse::<u16>()
                    .map_err(|_| bad(&format!("`{port}` is not a port")))?,
            ),
            None => (
                address,
                match tls {
                    TlsMode::Wrapper => 465,
                    TlsMode::StartTls => 587,
                    TlsMode::None => 25,
                },
            ),
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(SmtpUrl {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
            tls,
            shown,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smtp_urls_say_where_and_how_and_never_carry_credentials() {
        let parsed = |url: &str| SmtpUrl::parse(url).map(|url| (url.host, url.port, url.tls));
        assert_eq!(
            parsed("smtp://127.0.0.1:2525"),
            Ok(("127.0.0.1".to_string(), 2525, TlsMode::None))
        );
        assert_eq!(
            parsed("smtp://mail.example.com?tls=required"),
            Ok(("mail.example.com".to_string(), 587, TlsMode::StartTls))
        );
        assert_eq!(
            parsed("smtps://mail.example.com"),
            Ok(("mail.example.com".to_string(), 465, TlsMode::Wrapper))
        );
        for (url, says) in [
            ("smtp://ada:secret@mail.example.com", SMTP_PASSWORD_ENV),
            ("http://mail.example.com", "smtp://"),
            ("mail.example.com", "smtp://HOST"),
            ("smtp://mail.example.com:99999", "not a port"),
            ("smtps://mail.example.com?tls=none", "tls=required"),
            ("smtp://:25", "no host"),
        ] {
            let refused = SmtpUrl::parse(url).expect_err(url);
            assert!(refused.contains(says), "{url}: {refused}");
        }
    }

    #[test]
    fn retries_wait_twice_as_long_each_time_up_to_five_minutes() {
        let waits: Vec<i64> = (1..=10)
            .map(|attempt| backoff(attempt).num_seconds())
            .collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(backoff(u32::MAX).num_seconds(), 300);
    }
}
