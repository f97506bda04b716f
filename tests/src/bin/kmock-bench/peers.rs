//! The fakes measured side by side, each run as its own process: the `kmock` binary,
//! librdkafka's mock cluster (this program re-run as `kmock-bench serve-librdkafka-mock`) and
//! franz-go's kfake (`fixtures/peers/kfake-serve`). Every one prints
//! `bootstrap: host:port,…` as its first line, and is stopped when its [`Server`] is dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

/// A fake Kafka cluster under measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Peer {
    /// kmock: the `kmock` binary, or `kmock::Cluster` in process.
    Kmock,
    /// librdkafka's mock cluster (`rdkafka::mocking::MockCluster`).
    #[serde(rename = "librdkafka_mock")]
    Librdkafka,
    /// franz-go's `pkg/kfake`.
    Kfake,
}

impl Peer {
    /// Every peer, in the order each round measures them.
    pub const ALL: [Peer; 3] = [Peer::Kmock, Peer::Librdkafka, Peer::Kfake];
    /// The peers kmock is compared with.
    pub const OTHERS: [Peer; 2] = [Peer::Librdkafka, Peer::Kfake];

    pub fn name(self) -> &'static str {
        match self {
            Peer::Kmock => "kmock",
            Peer::Librdkafka => "librdkafka mock",
            Peer::Kfake => "kfake",
        }
    }
}

impl std::str::FromStr for Peer {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "kmock" => Ok(Peer::Kmock),
            "librdkafka" => Ok(Peer::Librdkafka),
            "kfake" => Ok(Peer::Kfake),
            _ => bail!("unknown peer {s:?}: kmock, librdkafka or kfake"),
        }
    }
}

/// Where each fake's program is.
#[derive(Debug, Clone)]
pub struct Tools {
    pub kmock: PathBuf,
    pub kfake: PathBuf,
    /// This program, which serves librdkafka's mock cluster when re-run.
    pub this: PathBuf,
}

impl Tools {
    /// Uses the paths given, or builds what is missing: the `kmock` binary with cargo (in this
    /// program's profile) and, when `kfake_needed`, `kfake-serve` with `go build` (next to this
    /// program).
    ///
    /// # Errors
    /// When a build fails or its output cannot be found.
    pub fn find_or_build(
        kmock: Option<PathBuf>,
        kfake: Option<PathBuf>,
        kfake_needed: bool,
    ) -> Result<Self> {
        let this = std::env::current_exe().context("this program's path")?;
        let kmock = match kmock {
            Some(path) => path,
            None => build_kmock()?,
        };
        let kfake = match kfake {
            Some(path) => path,
            None if kfake_needed => {
                build_kfake(this.parent().context("this program's directory")?)?
            }
            None => PathBuf::from("kfake-serve"),
        };
        Ok(Self { kmock, kfake, this })
    }

    /// The command that serves `peer` as a cluster of `brokers` brokers with `topics`
    /// (name, partitions), on free loopback ports.
    pub fn command(&self, peer: Peer, brokers: usize, topics: &[(&str, i32)]) -> Command {
        let mut command = match peer {
            Peer::Kmock => {
                let mut c = Command::new(&self.kmock);
                c.args(["serve", "--port", "0"]).env("RUST_LOG", "warn");
                c
            }
            Peer::Librdkafka => {
                let mut c = Command::new(&self.this);
                c.arg("serve-librdkafka-mock");
                c
            }
            Peer::Kfake => Command::new(&self.kfake),
        };
        command.args(["--brokers", &brokers.to_string()]);
        for (name, partitions) in topics {
            command.args(["--topic", &format!("{name}:{partitions}")]);
        }
        command
    }
}

/// The workspace root (this crate's parent directory).
fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("kmock-tests sits inside the workspace")
}

/// `cargo build --workspace --bin kmock`, in release when this program is an optimized build,
/// and the path of the binary cargo reports.
fn build_kmock() -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace())
        // The whole workspace's features, as `cargo test --workspace` builds them, so that the
        // binary that build made is reused rather than built again with other features.
        .args(["build", "--workspace", "--bin", "kmock"])
        .args(["--message-format", "json-render-diagnostics"])
        .stderr(Stdio::inherit());
    if !cfg!(debug_assertions) {
        command.arg("--release");
    }
    let output = command
        .output()
        .context("running cargo build --bin kmock")?;
    if !output.status.success() {
        bail!("cargo build --bin kmock failed: {}", output.status);
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "kmock")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| anyhow!("cargo built kmock but named no executable"))
}

/// `go build` of `fixtures/peers/kfake-serve` into `dir`; Go's build cache makes a
/// repeated build quick. Modules come from the Go proxy, checked against the committed go.sum.
fn build_kfake(dir: &Path) -> Result<PathBuf> {
    let out = dir.join("kfake-serve");
    let status = Command::new("go")
        .current_dir(workspace().join("fixtures/peers/kfake-serve"))
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&out)
        .arg(".")
        .status()
        .context("running go build (is Go installed?)")?;
    if !status.success() {
        bail!("go build of fixtures/peers/kfake-serve failed: {status}");
    }
    Ok(out)
}

/// A running fake cluster, stopped when dropped.
#[derive(Debug)]
pub struct Server {
    child: Child,
    /// The brokers' addresses, from the bootstrap line.
    pub addrs: Vec<SocketAddr>,
    /// Kept open so the server never writes to a closed pipe.
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    /// Spawns `command` and waits (up to 60 s) for its `bootstrap: …` line.
    ///
    /// # Errors
    /// When it does not start, prints something else, or prints nothing in time.
    pub fn spawn(mut command: Command) -> Result<Self> {
        let what = format!("{:?}", command.get_program());
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        // Read the first line on a thread, so a silent server fails instead of hanging.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            let read = stdout.read_line(&mut line).map(|_| line);
            let _ = tx.send((read, stdout));
        });
        let Ok((line, stdout)) = rx.recv_timeout(Duration::from_secs(60)) else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{what} printed no line within 60 s");
        };
        let mut server = Server {
            child,
            addrs: Vec::new(),
            _stdout: stdout,
        };
        let line = line.with_context(|| format!("reading {what}'s stdout"))?;
        let bootstrap = line
            .trim_end()
            .strip_prefix("bootstrap: ")
            .ok_or_else(|| anyhow!("{what}'s first line {line:?} is not `bootstrap: …`"))?;
        server.addrs = bootstrap
            .split(',')
            .map(|a| a.parse().with_context(|| format!("bootstrap entry {a:?}")))
            .collect::<Result<_>>()?;
        Ok(server)
    }

    /// The bootstrap servers, comma-separated.
    pub fn bootstrap(&self) -> String {
        let addrs: Vec<_> = self.addrs.iter().map(SocketAddr::to_string).collect();
        addrs.join(",")
    }

    /// Its resident set size, in bytes (`VmRSS` of `/proc/PID/status`).
    ///
    /// # Errors
    /// When the process is gone or the file has no `VmRSS` line.
    pub fn rss_bytes(&self) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| anyhow!("no VmRSS in /proc/{}/status", self.child.id()))?;
        Ok(kib * 1024)
    }
}

impl Server {
    /// CPU time its process has used so far, user and system, in seconds (`utime` + `stime`
    /// of `/proc/PID/stat`, every thread counted).
    ///
    /// # Errors
    /// When the process is gone or the file does not parse.
    pub fn cpu_seconds(&self) -> Result<f64> {
        cpu_seconds_of(&self.child.id().to_string())
    }
}

/// CPU time process `pid` (a number, or `self`) has used so far, user and system, in seconds
/// (`utime` + `stime` of `/proc/PID/stat`, every thread counted).
///
/// # Errors
/// When the process is gone or the file does not parse.
pub fn cpu_seconds_of(pid: &str) -> Result<f64> {
    {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the command name, which is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| -> Result<f64> {
            let field = fields
                .get(i)
                .ok_or_else(|| anyhow!("short /proc/PID/stat"))?;
            Ok(field.parse::<f64>()?)
        };
        // utime and stime are fields 14 and 15 of the line; what follows the name starts at 3.
        Ok((ticks(11)? + ticks(12)?) / clock_ticks_per_second())
    }
}

/// `getconf CLK_TCK`: the unit of `/proc/PID/stat` times (100 on Linux unless configured).
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

impl Drop for Server {
    /// Asks the server to stop (SIGTERM: every peer exits on it, so a profiler wrapping one can
    /// write its output), and kills it if it has not exited within 10 s.
    fn drop(&mut self) {
        let asked = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if asked {
            for _ in 0..1000 {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kmock-bench serve-librdkafka-mock`: librdkafka's mock cluster with `brokers` brokers and
/// `topics` (replication factor 1, as kmock's), serving until killed.
///
/// # Errors
/// When librdkafka cannot create the cluster or a topic.
pub fn serve_librdkafka_mock(brokers: usize, topics: &[(String, i32)]) -> Result<()> {
    let cluster = rdkafka::mocking::MockCluster::new(i32::try_from(brokers)?)?;
    for (name, partitions) in topics {
        cluster.create_topic(name, *partitions, 1)?;
    }
    println!("bootstrap: {}", cluster.bootstrap_servers());
    loop {
        std::thread::park();
    }
}
