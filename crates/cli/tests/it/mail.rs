//! Approvals by email (SPEC §16): `weft serve --smtp` emails each approver a link signed for
//! them and that pause, sent to a real SMTP server (aiosmtpd from PyPI, installed by
//! scripts/setup-smtp.sh) that keeps what it receives in a Maildir, read back here. The links
//! are followed with an HTTP client: the page, its form, answers counted under the link's
//! person with channel `email`, and the links that must not answer (edited, used twice, for a
//! run that went on, expired). An SMTP server that is down delays the email and loses nothing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::ports::{free_port, listened_by, start_on_free_ports};
use crate::common::serve::Server;
use crate::common::{Sandbox, edge, node};

const KEY: &str = "a-link-key-for-tests-0123456789abcdef";
/// Where the emails say the server is; the tests swap in the address it listens at.
const PUBLIC_URL: &str = "https://weft.example.test";

const PEOPLE: &str = "\
ada    ada@example.test    finance
grace  grace@example.test  finance
bob    bob@example.test    finance
eve    -                   finance
dan    dan@example.test    ops
";

/// aiosmtpd listening on loopback, keeping each email as a file of its Maildir; killed when
/// dropped.
struct SmtpServer {
    child: Child,
    maildir: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn smtp_python() -> PathBuf {
    let venv = std::env::var_os("WEFT_SMTP_VENV").map_or_else(
        || {
            let home = std::env::var_os("HOME").expect("HOME");
            PathBuf::from(home).join(".cache/weft/smtp-venv")
        },
        PathBuf::from,
    );
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "aiosmtpd is not installed at {}: run scripts/setup-smtp.sh",
        venv.display()
    );
    python
}

/// Where a test's SMTP server writes its errors, in its own directory.
const SERVER_LOG: &str = "server.log";

fn server_log(dir: &tempfile::TempDir) -> std::fs::File {
    std::fs::File::create(dir.path().join(SERVER_LOG)).expect("the SMTP server's log")
}

impl SmtpServer {
    /// On a port of its own, with STARTTLS required when `tls` (certificate, key) is given.
    fn start(tls: Option<(&Path, &Path)>) -> SmtpServer {
        start_on_free_ports("the SMTP server", || SmtpServer::spawn(free_port(), tls))
    }

    /// On `port`, which the test gave out before the server was up.
    fn start_on(port: u16) -> SmtpServer {
        SmtpServer::spawn(port, None)
            .unwrap_or_else(|log| panic!("the SMTP server exited before it listened:\n{log}"))
    }

    /// On a port of its own, taking mail only after AUTH as `user` with `password`
    /// (tests/smtp/auth_server.py).
    fn start_with_login(user: &str, password: &str) -> SmtpServer {
        start_on_free_ports("the SMTP server", || {
            let port = free_port();
            let dir = tempfile::tempdir().expect("dir");
            let maildir = dir.path().join("mail");
            let script = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../tests/smtp/auth_server.py"
            );
            let child = Command::new(smtp_python())
                .arg(script)
                .arg(port.to_string())
                .arg(&maildir)
                .args([user, password])
                .stdout(Stdio::null())
                .stderr(server_log(&dir))
                .spawn()
                .expect("the SMTP server starts");
            SmtpServer::listening(child, maildir, port, dir)
        })
    }

    /// aiosmtpd's own command line on `port`, STARTTLS required when `tls` is given.
    fn spawn(port: u16, tls: Option<(&Path, &Path)>) -> Result<SmtpServer, String> {
        let dir = tempfile::tempdir().expect("dir");
        let maildir = dir.path().join("mail");
        let mut command = Command::new(smtp_python());
        command.args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")]);
        if let Some((certificate, key)) = tls {
            command
                .arg("--tlscert")
                .arg(certificate)
                .arg("--tlskey")
                .arg(key);
        }
        command
            .args(["-c", "aiosmtpd.handlers.Mailbox"])
            .arg(&maildir)
            .stdout(Stdio::null())
            .stderr(server_log(&dir));
        let child = command.spawn().expect("aiosmtpd starts");
        SmtpServer::listening(child, maildir, port, dir)
    }

    /// `child`, once it listens on `port` itself; its log if it exits first. Connecting is not
    /// enough to tell: whatever took the port would answer.
    fn listening(
        child: Child,
        maildir: PathBuf,
        port: u16,
        dir: tempfile::TempDir,
    ) -> Result<SmtpServer, String> {
        let mut server = SmtpServer {
            child,
            maildir,
            port,
            _dir: dir,
        };
        let log_path = server._dir.path().join(SERVER_LOG);
        let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !listened_by(server.child.id(), port) {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("exited ({status}) on port {port}:\n{}", log()));
            }
            assert!(
                Instant::now() < deadline,
                "aiosmtpd never listened on port {port}:\n{}",
                log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(server)
    }

    fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Every email received so far.
    fn received(&self) -> Vec<Email> {
        let mut emails = Vec::new();
        for folder in ["new", "cur"] {
            let Ok(entries) = std::fs::read_dir(self.maildir.join(folder)) else {
                continue;
            };
            for entry in entries {
                let text = std::fs::read_to_string(entry.expect("entry").path()).expect("email");
                emails.push(Email::parse(&text));
            }
        }
        emails
    }

    /// Waits until `count` emails arrived; returns them. Else fails showing the outbox of
    /// `sandbox`'s store (why the sends failed).
    async fn wait_for(&self, count: usize, sandbox: &Sandbox) -> Vec<Email> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let emails = self.received();
            if emails.len() >= count {
                return emails;
            }
            assert!(
                Instant::now() < deadline,
                "{count} emails were expected, {} arrived: {emails:?}; the outbox: {:?}",
                emails.len(),
                outbox(sandbox)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Each email of the store's outbox (SQLite): whom for, sent or why not.
fn outbox(sandbox: &Sandbox) -> Vec<String> {
    let read = || -> rusqlite::Result<Vec<String>> {
        let db = rusqlite::Connection::open(sandbox.db())?;
        let mut rows = db.prepare(
            "SELECT kind || ' ' || person || ': ' || coalesce(sent_at, last_error, 'due') \
             FROM approval_mail",
        )?;
        rows.query_map([], |row| row.get(0))?.collect()
    };
    read().unwrap_or_else(|error| vec![format!("not read: {error}")])
}

/// An email as a person reads it.
#[derive(Debug, Clone)]
struct Email {
    to: String,
    subject: String,
    body: String,
    /// The approval link in it.
    link: String,
}

impl Email {
    fn parse(text: &str) -> Email {
        let text = text.replace("\r\n", "\n");
        let (headers, body) = text.split_once("\n\n").expect("headers and a body");
        let header = |name: &str| {
            headers
                .lines()
                .find_map(|line| {
                    line.split_once(':')
                        .filter(|(key, _)| key.eq_ignore_ascii_case(name))
                        .map(|(_, value)| value.trim().to_string())
                })
                .unwrap_or_default()
        };
        let body = match header("Content-Transfer-Encoding").as_str() {
            "quoted-printable" => unquote(body),
            _ => body.to_string(),
        };
        let link = body
            .lines()
            .find(|line| line.starts_with(PUBLIC_URL))
            .unwrap_or_default()
            .trim()
            .to_string();
        Email {
            to: header("To"),
            subject: header("Subject"),
            body,
            link,
        }
    }

    /// The link's path on the server (`/approve/TOKEN`).
    fn path(&self) -> String {
        self.link
            .strip_prefix(PUBLIC_URL)
            .unwrap_or_else(|| panic!("no link to {PUBLIC_URL} in {self:?}"))
            .to_string()
    }
}

/// Quoted-printable text decoded (soft line breaks, `=XX`).
fn unquote(text: &str) -> String {
    let joined = text.replace("=\n", "");
    let bytes = joined.as_bytes();
    let mut out = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'='
            && index + 2 < bytes.len()
            && let Ok(byte) = u8::from_str_radix(&joined[index + 1..index + 3], 16)
        {
            out.push(byte);
            index += 3;
            continue;
        }
        out.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// start → review (two of finance, not whoever started the run, a required reason) → paid /
/// refused.
fn payment_flow(timeout_seconds: Option<u64>) -> Value {
    let mut review = json!({
        "message": "Pay {{PREVIOUS_OUTPUT}}?",
        "approvers": ["group:finance"],
        "required": 2,
        "allowSelf": false,
        "fields": [{ "name": "reason", "type": "text", "required": true }],
    });
    if let Some(seconds) = timeout_seconds {
        review["timeoutSeconds"] = json!(seconds);
        review["required"] = json!(1);
    }
    json!({
        "version": 1,
        "nodes": [
            node("start", "start", json!({})),
            node("review", "approval", review),
            node("paid", "template", json!({ "template": "paid {{PREVIOUS_OUTPUT}}: {{ approval.reason }}" })),
            node("refused", "template", json!({ "template": "refused" })),
        ],
        "edges": [
            edge("e1", "start", "review", None),
            edge("e2", "review", "paid", Some("approve")),
            edge("e3", "review", "refused", Some("reject")),
        ]
    })
}

/// `weft serve` emailing through `smtp`, with the people file and the link key.
fn serve(sandbox: &Sandbox, smtp: &str) -> Server {
    let people = sandbox.dir.path().join("people.txt");
    std::fs::write(&people, PEOPLE).expect("people");
    let people = people.display().to_string();
    Server::start_with_env(
        sandbox,
        &[
            "--people",
            &people,
            "--smtp",
            smtp,
            "--public-url",
            PUBLIC_URL,
        ],
        None,
        &[("WEFT_LINK_KEY", KEY)],
    )
}

/// GET or POST (a form) of a link's path: the status and the page.
async fn follow(server: &Server, path: &str, form: Option<&[(&str, &str)]>) -> (u16, String) {
    let url = format!("{}{path}", server.url);
    let request = match form {
        Some(form) => server.http.post(url).form(form),
        None => server.http.get(url),
    };
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    (status, response.text().await.expect("page"))
}

/// The email sent to `address`.
fn to<'a>(emails: &'a [Email], address: &str) -> &'a Email {
    emails
        .iter()
        .find(|email| email.to.contains(address))
        .unwrap_or_else(|| panic!("no email to {address}: {emails:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn two_of_finance_approve_through_the_links_emailed_to_them() {
    approve_through_links(Sandbox::new()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_postgres_two_of_finance_approve_through_the_links_emailed_to_them() {
    approve_through_links(Sandbox::on_postgres()).await;
}

async fn approve_through_links(sandbox: Sandbox) {
    let smtp = SmtpServer::start(None);
    let server = serve(&sandbox, &smtp.url());
    sandbox.flow("flows/pay.json", &payment_flow(None));

    // Started with ada's token: ada may not decide it (allowSelf: false), so she is not asked;
    // eve has no address.
    let (status, started) = server
        .post("/v1/runs", json!({ "flow": "pay", "input": "invoice 42" }))
        .await;
    assert_eq!(status, 201, "{started}");
    let id = started["runId"].as_str().expect("id").to_string();
    let emails = smtp.wait_for(2, &sandbox).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(smtp.received().len(), 2, "{emails:?}");
    let grace = to(&emails, "grace@example.test").clone();
    let bob = to(&emails, "bob@example.test").clone();
    for email in [&grace, &bob] {
        assert_eq!(email.subject, "Approval needed: review in pay", "{email:?}");
        assert!(email.body.contains("Pay invoice 42?"), "{email:?}");
        assert!(email.body.contains("It needs 2 approvals"), "{email:?}");
        assert!(email.body.contains("reason (required)"), "{email:?}");
    }
    assert_ne!(grace.link, bob.link, "each person has their own link");

    // An edited link answers nothing: bob making grace's link his, or changing its signature.
    let (payload, signature) = grace
        .path()
        .trim_start_matches("/approve/")
        .split_once('.')
        .map(|(payload, signature)| (payload.to_string(), signature.to_string()))
        .expect("a signed link");
    let bobs_payload = {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let text = String::from_utf8(engine.decode(&payload).expect("payload")).expect("text");
        engine.encode(text.replace("\ngrace", "\nbob"))
    };
    let mut flipped = signature.clone();
    let last = flipped.pop().expect("a character");
    flipped.push(if last == 'A' { 'B' } else { 'A' });
    for edited in [
        format!("/approve/{bobs_payload}.{signature}"),
        format!("/approve/{payload}.{flipped}"),
    ] {
        for form in [None, Some(&[("decision", "approve"), ("reason", "x")][..])] {
            let (status, page) = follow(&server, &edited, form).await;
            assert_eq!(status, 403, "{page}");
            assert!(page.contains("this link is not valid"), "{page}");
        }
    }

    // The page asks grace, shows the form, and decides nothing by being opened.
    let (status, page) = follow(&server, &grace.path(), None).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Pay invoice 42?"), "{page}");
    assert!(page.contains("name=\"reason\""), "{page}");
    assert!(page.contains("approved so far: nobody yet"), "{page}");

    // An answer that does not fit the form is refused; the link still works.
    let (status, page) = follow(&server, &grace.path(), Some(&[("decision", "approve")])).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("`reason` needs an answer"), "{page}");
    let (status, page) = follow(
        &server,
        &grace.path(),
        Some(&[
            ("decision", "approve"),
            ("reason", "budgeted"),
            ("note", "fine"),
        ]),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("counted (1 of 2)"), "{page}");
    assert!(page.contains("bob"), "who may still approve: {page}");

    // Used once: answering or opening it again is refused, naming the earlier answer.
    for form in [None, Some(&[("decision", "reject")][..])] {
        let (status, page) = follow(&server, &grace.path(), form).await;
        assert_eq!(status, 409, "{page}");
        assert!(page.contains("this link was used already"), "{page}");
    }
    let (_, run) = server.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(run["run"]["summary"]["status"], "paused", "{run}");
    assert_eq!(run["approval"]["approvedBy"], json!(["grace"]), "{run}");

    // bob's approval is the second: the run goes on with his reason.
    let (status, page) = follow(
        &server,
        &bob.path(),
        Some(&[("decision", "approve"), ("reason", "invoice checked")]),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("goes on"), "{page}");
    let run = server.wait_for(&id, "completed").await;
    assert_eq!(run["run"]["result"], "paid invoice 42: invoice checked");
    // A link of an approval that went on answers nothing.
    let (status, page) = follow(&server, &bob.path(), None).await;
    assert_eq!(status, 409, "{page}");
    assert!(page.contains("no longer waiting"), "{page}");

    // The audit keeps both, under the links' people, by email.
    let ran = sandbox.run(&["audit", "--run", &id, "--json", "--db", &sandbox.db_arg()]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let audit: Value = serde_json::from_str(&ran.stdout).expect("json");
    let kept: Vec<(String, String, String)> = audit
        .as_array()
        .expect("decisions")
        .iter()
        .map(|decision| {
            (
                decision["by"].as_str().unwrap_or_default().to_string(),
                decision["channel"].as_str().unwrap_or_default().to_string(),
                decision["note"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        kept,
        [
            ("grace".to_string(), "email".to_string(), "fine".to_string()),
            ("bob".to_string(), "email".to_string(), String::new()),
        ]
    );
    // Nothing was sent to ada, and eve (no address) is kept as not sent.
    assert!(
        smtp.received()
            .iter()
            .all(|email| !email.to.contains("ada"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reminder_and_an_escalation_are_emailed_and_the_escalated_person_answers() {
    let smtp = SmtpServer::start(None);
    let sandbox = Sandbox::new();
    let server = serve(&sandbox, &smtp.url());
    let mut flow = payment_flow(None);
    let review = &mut flow["nodes"][1]["data"];
    review["required"] = json!(1);
    review["remindAfterSeconds"] = json!(1);
    review["escalateAfterSeconds"] = json!(2);
    review["escalateTo"] = json!(["group:ops", "ada"]);
    sandbox.flow("flows/pay.json", &flow);
    let (_, started) = server
        .post("/v1/runs", json!({ "flow": "pay", "input": "invoice 5" }))
        .await;
    let id = started["runId"].as_str().expect("id").to_string();

    // Asked (grace, bob), reminded (grace, bob), escalated (dan; not ada, who started it).
    let emails = smtp.wait_for(5, &sandbox).await;
    let subjects = |address: &str| {
        let mut subjects: Vec<String> = emails
            .iter()
            .filter(|email| email.to.contains(address))
            .map(|email| email.subject.clone())
            .collect();
        subjects.sort();
        subjects
    };
    for person in ["grace@", "bob@"] {
        assert_eq!(
            subjects(person),
            [
                "Approval needed: review in pay",
                "Reminder: approval still needed: review in pay"
            ],
            "{emails:?}"
        );
    }
    assert_eq!(
        subjects("dan@"),
        ["Escalated to you: approval needed: review in pay"]
    );
    assert!(subjects("ada@").is_empty(), "{emails:?}");

    // dan was no approver at first; escalated, his link answers.
    let dan = to(&emails, "dan@example.test");
    assert!(dan.body.contains("you may decide it now"), "{dan:?}");
    let (status, page) = follow(
        &server,
        &dan.path(),
        Some(&[("decision", "approve"), ("reason", "escalated")]),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    let run = server.wait_for(&id, "completed").await;
    assert_eq!(run["run"]["result"], "paid invoice 5: escalated");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(smtp.received().len(), 5, "nothing is sent twice");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_link_expires_with_its_approval() {
    let smtp = SmtpServer::start(None);
    let sandbox = Sandbox::new();
    let server = serve(&sandbox, &smtp.url());
    sandbox.flow("flows/pay.json", &payment_flow(Some(3)));
    let (_, started) = server
        .post("/v1/runs", json!({ "flow": "pay", "input": "invoice 7" }))
        .await;
    let id = started["runId"].as_str().expect("id").to_string();
    let emails = smtp.wait_for(1, &sandbox).await;
    let email = &emails[0];
    assert!(
        email.body.contains("works while the approval waits until"),
        "{email:?}"
    );

    // Nobody answered in time: the run failed naming the timeout, and the link is refused.
    server.wait_for(&id, "failed").await;
    let (status, page) = follow(&server, &email.path(), None).await;
    assert_eq!(status, 410, "{page}");
    assert!(page.contains("This link expired"), "{page}");
    let (status, _) = follow(
        &server,
        &email.path(),
        Some(&[("decision", "approve"), ("reason", "late")]),
    )
    .await;
    assert_eq!(status, 410);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_smtp_server_that_is_down_delays_the_email_and_loses_nothing() {
    let port = free_port();
    let sandbox = Sandbox::new();
    let server = serve(&sandbox, &format!("smtp://127.0.0.1:{port}"));
    sandbox.flow("flows/pay.json", &payment_flow(None));
    let (_, started) = server
        .post("/v1/runs", json!({ "flow": "pay", "input": "invoice 9" }))
        .await;
    let id = started["runId"].as_str().expect("id").to_string();

    // The sends fail and are kept with their error, to try again; the approval waits.
    let db = rusqlite::Connection::open(sandbox.db()).expect("db");
    let deadline = Instant::now() + Duration::from_secs(20);
    let error = loop {
        let failed: Option<String> = db
            .query_row(
                "SELECT last_error FROM approval_mail WHERE run_id = ?1 AND person = 'grace' \
                 AND attempts > 0 AND next_at IS NOT NULL",
                [&id],
                |row| row.get(0),
            )
            .ok()
            .flatten();
        if let Some(error) = failed {
            break error;
        }
        assert!(Instant::now() < deadline, "no failed send was kept");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!error.is_empty());
    let (_, inbox) = server.get("/v1/approvals").await;
    assert!(inbox.to_string().contains(&id), "{inbox}");

    // Once the SMTP server is up, the emails go out.
    let smtp = SmtpServer::start_on(port);
    let emails = smtp.wait_for(2, &sandbox).await;
    to(&emails, "grace@example.test");
    to(&emails, "bob@example.test");
    // The mailer marks an email sent after the SMTP server has taken it, so the mark may
    // trail the email's arrival by a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let sent: i64 = db
            .query_row(
                "SELECT count(*) FROM approval_mail WHERE run_id = ?1 AND sent_at IS NOT NULL \
                 AND person <> ''",
                [&id],
                |row| row.get(0),
            )
            .expect("count");
        if sent == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "{sent} of 2 emails marked sent");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let eve: Option<String> = db
        .query_row(
            "SELECT last_error FROM approval_mail WHERE run_id = ?1 AND person = 'eve'",
            [&id],
            |row| row.get(0),
        )
        .expect("eve's");
    assert_eq!(eve.as_deref(), Some("no email address in the people file"));
}

#[tokio::test(flavor = "multi_thread")]
async fn emails_go_over_starttls_to_a_server_with_a_private_certificate() {
    let dir = tempfile::tempdir().expect("dir");
    let file = |name: &str| dir.path().join(name).display().to_string();
    let (authority, certificate, key) = (file("ca.pem"), file("cert.pem"), file("key.pem"));
    std::fs::write(
        file("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .expect("extensions");
    // A private certificate authority, and the server's certificate issued by it.
    let (ca_key, request, extensions) = (file("ca.key"), file("leaf.csr"), file("leaf.ext"));
    for args in [
        vec![
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=Weft test CA",
            "-keyout",
            &ca_key,
            "-out",
            &authority,
        ],
        vec![
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            &key,
            "-out",
            &request,
        ],
        vec![
            "x509",
            "-req",
            "-in",
            &request,
            "-CA",
            &authority,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &extensions,
            "-out",
            &certificate,
        ],
    ] {
        let made = Command::new("openssl")
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl runs");
        assert!(made.success(), "openssl {args:?}");
    }
    let (certificate, key) = (PathBuf::from(certificate), PathBuf::from(key));
    let smtp = SmtpServer::start(Some((&certificate, &key)));
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.dir.path().join("flows")).expect("flows");
    sandbox.flow("flows/pay.json", &payment_flow(None));
    let people = sandbox.dir.path().join("people.txt");
    std::fs::write(&people, PEOPLE).expect("people");
    let people = people.display().to_string();
    let smtp_url = format!("{}?tls=required", smtp.url());
    let server = Server::start_with_env(
        &sandbox,
        &[
            "--people",
            &people,
            "--smtp",
            &smtp_url,
            "--public-url",
            PUBLIC_URL,
        ],
        None,
        &[("WEFT_LINK_KEY", KEY), ("WEFT_SMTP_CA_FILE", &authority)],
    );
    let (status, _) = server
        .post("/v1/runs", json!({ "flow": "pay", "input": "invoice 3" }))
        .await;
    assert_eq!(status, 201);
    let emails = smtp.wait_for(2, &sandbox).await;
    assert!(
        emails
            .iter()
            .all(|email| email.link.starts_with(PUBLIC_URL))
    );
}

#[test]
fn serve_refuses_email_without_what_it_needs() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.dir.path().join("flows")).expect("flows");
    std::fs::write(
        sandbox.dir.path().join("tokens.txt"),
        "ada:a-token-0123456789abcdef\n",
    )
    .expect("tokens");
    let refused = |args: &[&str], key: Option<&str>| {
        let mut all = vec!["serve", "--flows", "flows", "--tokens", "tokens.txt"];
        all.extend_from_slice(args);
        let mut command = sandbox.command(&all, None);
        if let Some(key) = key {
            command.env("WEFT_LINK_KEY", key);
        }
        let ran: crate::common::Ran = command.output().expect("weft runs").into();
        assert_eq!(ran.code, Some(2), "{ran:?}");
        ran.stderr
    };
    let smtp = ["--smtp", "smtp://127.0.0.1:2525"];
    let public = ["--public-url", PUBLIC_URL];
    assert!(refused(&smtp, Some(KEY)).contains("--smtp needs --public-url"));
    assert!(refused(&[&smtp[..], &public[..]].concat(), None).contains("WEFT_LINK_KEY"));
    assert!(refused(&[&smtp[..], &public[..]].concat(), Some("short")).contains("at least 32"));
    let with_password = [
        "--smtp",
        "smtp://ada:secret@127.0.0.1:2525",
        "--public-url",
        PUBLIC_URL,
    ];
    let said = refused(&with_password, Some(KEY));
    assert!(said.contains("WEFT_SMTP_PASSWORD"), "{said}");
    assert!(
        !said.contains("secret@"),
        "the password is not repeated: {said}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_server_logs_in_to_smtp_with_the_credentials_of_the_environment() {
    let smtp = SmtpServer::start_with_login("weft-mailer", "mail-password-1");
    // A wrong password: refused by the SMTP server, kept and retried; the right one: sent.
    for (password, sent) in [("wrong-password", false), ("mail-password-1", true)] {
        let sandbox = Sandbox::new();
        let people = sandbox.dir.path().join("people.txt");
        std::fs::write(&people, PEOPLE).expect("people");
        let people = people.display().to_string();
        let smtp_url = smtp.url();
        let server = Server::start_with_env(
            &sandbox,
            &[
                "--people",
                &people,
                "--smtp",
                &smtp_url,
                "--public-url",
                PUBLIC_URL,
            ],
            None,
            &[
                ("WEFT_LINK_KEY", KEY),
                ("WEFT_SMTP_USERNAME", "weft-mailer"),
                ("WEFT_SMTP_PASSWORD", password),
            ],
        );
        sandbox.flow("flows/pay.json", &payment_flow(None));
        let before = smtp.received().len();
        let (status, _) = server
            .post("/v1/runs", json!({ "flow": "pay", "input": "invoice 8" }))
            .await;
        assert_eq!(status, 201);
        if sent {
            smtp.wait_for(before + 2, &sandbox).await;
            continue;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let outbox = outbox(&sandbox);
            if outbox
                .iter()
                .any(|row| row.starts_with("ask grace: ") && row.contains("535"))
            {
                break;
            }
            assert!(Instant::now() < deadline, "no refusal was kept: {outbox:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(smtp.received().len(), before, "nothing was sent");
        // The password is in no error kept.
        assert!(
            outbox(&sandbox)
                .iter()
                .all(|row| !row.contains("wrong-password")),
            "{:?}",
            outbox(&sandbox)
        );
    }
}
