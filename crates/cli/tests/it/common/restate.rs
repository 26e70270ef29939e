//! A Restate server for tests (the binary of the npm package `@restatedev/restate-server`,
//! installed by scripts/setup-restate.sh; `WEFT_RESTATE_SERVER` names another), in a temporary
//! base directory on free loopback ports, stopped with its files when the test process ends;
//! and a TCP balancer that spreads connections over several workers as a load balancer in front
//! of them would, trying the next worker when one does not answer.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::ports::{free_port, listened_by, start_on_free_ports};

/// A running Restate server.
pub struct RestateServer {
    pub ingress: String,
    pub admin: String,
    pub dir: PathBuf,
    /// The shell that stops the server when the test process ends (it ends with it).
    _watchdog: std::process::Child,
}

impl RestateServer {
    /// Starts a server and waits until its admin API and ingress answer. A server that exits
    /// while starting (another process may take a port between its pick and the server's bind)
    /// is started again on other ports, twice at most; its log is shown either way.
    pub fn start() -> RestateServer {
        let binary = std::env::var_os("WEFT_RESTATE_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
                    "../../tests/restate/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server",
                )
            });
        assert!(
            binary.exists(),
            "no Restate server at {}: run scripts/setup-restate.sh (the test command does)",
            binary.display()
        );
        start_on_free_ports("the Restate server", || RestateServer::try_start(&binary))
    }

    /// One start: the server, or its log when it exited before answering.
    fn try_start(binary: &std::path::Path) -> Result<RestateServer, String> {
        let dir = std::env::temp_dir().join(format!(
            "weft-restate-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|since| since.as_nanos())
                .unwrap_or_default()
        ));
        std::fs::create_dir_all(&dir).expect("restate dir");
        // Beside the base directory, so that it outlives a server that exits.
        let log = dir.with_extension("log");
        let [ingress, admin, node] = [free_port(), free_port(), free_port()];
        // Ends the server and removes its files once the test process is gone. A server that
        // exits on its own gets a last line in its log, which the wait below looks for.
        let script = format!(
            "\"$0\" --base-dir {dir} --node-name weft-test --listen-mode tcp --no-logo \
             >{log} 2>&1 & server=$!; \
             while kill -0 {me} 2>/dev/null && kill -0 $server 2>/dev/null; do sleep 0.2; done; \
             if kill -0 {me} 2>/dev/null; then wait $server; echo \"{EXITED} $?\" >>{log}; fi; \
             kill -TERM $server 2>/dev/null; sleep 2; kill -KILL $server 2>/dev/null; rm -rf {dir}; \
             while kill -0 {me} 2>/dev/null; do sleep 1; done; rm -f {log}",
            dir = dir.display(),
            log = log.display(),
            me = std::process::id(),
        );
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .arg(binary)
            .env(
                "RESTATE_INGRESS__BIND_ADDRESS",
                format!("127.0.0.1:{ingress}"),
            )
            .env("RESTATE_ADMIN__BIND_ADDRESS", format!("127.0.0.1:{admin}"))
            .env("RESTATE_BIND_ADDRESS", format!("127.0.0.1:{node}"))
            .env(
                "RESTATE_ADVERTISED_ADDRESS",
                format!("http://127.0.0.1:{node}/"),
            )
            .env("RESTATE_DISABLE_TELEMETRY", "true")
            .env("RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE", "256MiB")
            .env("RESTATE_DEFAULT_NUM_PARTITIONS", "4")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start restate-server");
        let server = RestateServer {
            ingress: format!("http://127.0.0.1:{ingress}"),
            admin: format!("http://127.0.0.1:{admin}"),
            dir,
            _watchdog: watchdog,
        };
        let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
        let started = Instant::now();
        // Its own answers: whatever took a port since it was picked would answer too.
        let watchdog = server._watchdog.id();
        while !(listened_by(watchdog, admin)
            && listened_by(watchdog, ingress)
            && answers_ok(admin, "/health")
            && answers_ok(ingress, "/restate/health"))
        {
            let so_far = read_log();
            if so_far.contains(EXITED) {
                return Err(so_far);
            }
            assert!(
                started.elapsed() < Duration::from_secs(90),
                "the Restate server did not answer within 90 s:\n{so_far}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }
}

/// The line the watchdog adds to a server's log when the server exits on its own.
const EXITED: &str = "weft-test: restate-server exited with status";

/// A running `weft restate`, killed when dropped.
pub struct Worker {
    pub child: Child,
    /// Where its endpoint listens (the first line it prints).
    pub addr: SocketAddr,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Worker {
    /// Starts `command` (a `weft restate …` on port 0) and reads where it listens.
    pub fn spawn(mut command: Command) -> Worker {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("weft restate");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut first)
            .expect("the endpoint's URL");
        let addr = first
            .trim()
            .strip_prefix("http://")
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("not an endpoint URL: {first:?}"));
        Worker { child, addr }
    }
}

/// A TCP balancer on loopback in front of several workers.
pub struct Balancer {
    pub addr: SocketAddr,
    /// Connections handed to each worker, by index.
    pub connections: Arc<Vec<AtomicUsize>>,
}

impl Balancer {
    /// Listens on a free port; each new connection goes to the next worker in turn, or the one
    /// after when that one does not accept.
    pub async fn start(workers: Vec<SocketAddr>) -> Balancer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("balancer listens");
        let addr = listener.local_addr().expect("address");
        let connections: Arc<Vec<AtomicUsize>> =
            Arc::new(workers.iter().map(|_| AtomicUsize::new(0)).collect());
        let counted = connections.clone();
        let next = Arc::new(AtomicUsize::new(0));
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let workers = workers.clone();
                let counted = counted.clone();
                let first = next.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    for offset in 0..workers.len() {
                        let index = (first + offset) % workers.len();
                        if let Ok(mut outbound) =
                            tokio::net::TcpStream::connect(workers[index]).await
                        {
                            counted[index].fetch_add(1, Ordering::Relaxed);
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                            return;
                        }
                    }
                });
            }
        });
        Balancer { addr, connections }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn counts(&self) -> Vec<usize> {
        self.connections
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .collect()
    }
}

/// Whether `GET path` on loopback port `port` answers 200.
fn answers_ok(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}
