//! A PostgreSQL server for tests: `initdb` into a temporary directory and `postgres` on a free
//! loopback port, from the system's packages (Debian's `postgresql`; `WEFT_PG_BIN` names another
//! directory of server programs). One server serves a whole test process, each test getting a
//! database of its own ([`PostgresServer::new_database`]).
//!
//! The server stops and its directory is removed when the test process ends, however it ends:
//! a watchdog shell started with it waits for the test process to go. As root (CI), the server
//! runs as the `postgres` user (with `setpriv`), since PostgreSQL refuses to run as root.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The superuser `initdb` creates; logins from loopback need no password.
const USER: &str = "weft";

/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running server.
#[derive(Debug)]
pub struct PostgresServer {
    port: u16,
    next_database: AtomicUsize,
    /// The server's directory: its data, socket, log, process id, and the `hold` file that
    /// keeps the watchdog from starting it again ([`PostgresServer::outage`]).
    dir: PathBuf,
}

impl PostgresServer {
    /// The test process's server, started on first use.
    ///
    /// Panics with what is missing when no server can be started (e.g. the `postgresql`
    /// package is not installed): a test that needs the server cannot pass without it.
    pub fn shared() -> &'static PostgresServer {
        static SERVER: OnceLock<PostgresServer> = OnceLock::new();
        SERVER.get_or_init(|| {
            PostgresServer::start().unwrap_or_else(|error| {
                panic!("cannot start a PostgreSQL server for the tests: {error}")
            })
        })
    }

    /// Starts a server in a new temporary directory.
    pub fn start() -> Result<PostgresServer, String> {
        let bin = server_programs()?;
        let dir =
            std::env::temp_dir().join(format!("weft-postgres-{}-{}", std::process::id(), unique()));
        let data = dir.join("data");
        std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        let as_root = is_root();
        if as_root {
            run(Command::new("chown").args(["postgres:", path_text(&dir)?]))?;
        }
        run(as_server_user(as_root, &bin.join("initdb")).args([
            "-D",
            path_text(&data)?,
            "-U",
            USER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ]))?;
        let port = free_port()?;
        let server = format!(
            "{runas}{postgres} -D {data} -p {port} -k {dir} -c listen_addresses=127.0.0.1 \
             -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200",
            runas = if as_root { SERVER_USER_PREFIX } else { "" },
            postgres = path_text(&bin.join("postgres"))?,
            data = path_text(&data)?,
            dir = path_text(&dir)?,
        );
        // Starts the server again when it stopped, unless a `hold` file says to wait (an outage,
        // see `outage`); ends it (fast shutdown) and removes its files once this process is
        // gone.
        let watchdog = format!(
            "while kill -0 {me} 2>/dev/null; do \
               if [ ! -e {dir}/hold ]; then \
                 {server} >>{dir}/server.log 2>&1 & server=$!; echo $server >{dir}/server.pid; \
                 while kill -0 {me} 2>/dev/null && kill -0 $server 2>/dev/null; do sleep 0.1; done; \
               fi; sleep 0.05; \
             done; \
             kill -INT $server 2>/dev/null; wait $server; rm -rf {dir}",
            dir = path_text(&dir)?,
            me = std::process::id(),
        );
        Command::new("sh")
            .args(["-c", &watchdog])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start sh: {error}"))?;
        let server = PostgresServer {
            port,
            next_database: AtomicUsize::new(0),
            dir: dir.clone(),
        };
        server.wait_until_up()?;
        Ok(server)
    }

    /// Waits until the server accepts connections.
    fn wait_until_up(&self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            match on_own_thread(|| connect(&self.url("postgres")).map(drop)) {
                Ok(_) => return Ok(()),
                Err(_) if started.elapsed() < START_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(error) => {
                    let log =
                        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
                    return Err(format!(
                        "the server did not accept connections: {error}\n{log}"
                    ));
                }
            }
        }
    }

    /// Stops the server (fast shutdown: its connections are cut) for `down`, then starts it
    /// again and waits until it accepts connections: a database outage, as a restart or a
    /// failover makes one. For a server of one's own ([`PostgresServer::start`]), not the
    /// shared one.
    pub fn outage(&self, down: Duration) -> Result<(), String> {
        let hold = self.dir.join("hold");
        std::fs::write(&hold, b"").map_err(|error| format!("{}: {error}", hold.display()))?;
        let pid_file = self.dir.join("server.pid");
        let pid = std::fs::read_to_string(&pid_file)
            .map_err(|error| format!("{}: {error}", pid_file.display()))?;
        let pid = pid.trim();
        run(Command::new("kill").args(["-INT", pid]))?;
        let started = Instant::now();
        while Command::new("kill")
            .args(["-0", pid])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
        {
            if started.elapsed() > START_TIMEOUT {
                return Err(format!("the server (process {pid}) did not stop"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(down);
        std::fs::remove_file(&hold).map_err(|error| format!("{}: {error}", hold.display()))?;
        self.wait_until_up()
    }

    /// The connection URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates a new, empty database and returns its URL.
    pub fn new_database(&self) -> String {
        let name = format!(
            "weft_test_{}_{}",
            std::process::id(),
            self.next_database.fetch_add(1, Ordering::Relaxed)
        );
        on_own_thread(|| {
            connect(&self.url("postgres"))
                .and_then(|mut client| client.batch_execute(&format!("CREATE DATABASE {name}")))
                .expect("create a test database")
        });
        self.url(&name)
    }
}

fn connect(url: &str) -> Result<postgres::Client, postgres::Error> {
    postgres::Client::connect(url, postgres::NoTls)
}

/// Runs `work` on a thread of its own: the client blocks on a runtime of its own, which a
/// thread of an async test (`#[tokio::test]`) cannot enter.
fn on_own_thread<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(work)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// The directory of the server programs (`initdb`, `postgres`).
fn server_programs() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("WEFT_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    // Debian installs them under /usr/lib/postgresql/VERSION/bin: take the newest.
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        "no PostgreSQL server programs in /usr/lib/postgresql/*/bin: install the Debian \
         package postgresql (scripts/test.sh does), or set WEFT_PG_BIN"
            .to_string()
    })
}

/// Runs what follows as the `postgres` user. `setpriv` execs the program itself (where
/// `runuser` would stay between, ignoring the watchdog's signal), so the server's process id is
/// the one the watchdog stops.
const SERVER_USER_PREFIX: &str = "setpriv --reuid=postgres --regid=postgres --clear-groups ";

fn as_server_user(as_root: bool, program: &Path) -> Command {
    if as_root {
        let mut words = SERVER_USER_PREFIX.split_whitespace();
        let mut command = Command::new(words.next().unwrap_or("setpriv"));
        command.args(words).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|error| format!("cannot run {command:?}: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|me| me.uid() == 0)
}

fn path_text(path: &Path) -> Result<&str, String> {
    path.to_str()
        .ok_or_else(|| format!("{} is not UTF-8", path.display()))
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|error| format!("cannot find a free port: {error}"))
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_nanos())
        .unwrap_or_default()
}
