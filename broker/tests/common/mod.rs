//! Helpers for the tests that drive the `kmock` binary: a served cluster killed on drop, and
//! kcat.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Debian's kcat, installed by `.ci/run`.
pub const KCAT: &str = "/usr/bin/kcat";

/// A running `kmock serve`, killed when dropped so that a failing test leaves nothing behind.
pub struct Server {
    pub child: Child,
    pub bootstrap: String,
    /// Kept open so the server never writes to a closed pipe.
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    /// Starts `kmock serve ARGS` and waits for its `bootstrap: …` line.
    pub fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kmock"))
            .arg("serve")
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kmock starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        // Read the first line on a thread, so a silent server fails the test instead of hanging it.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            let read = stdout.read_line(&mut line).map(|_| line);
            let _ = tx.send((read, stdout));
        });
        let first_line = rx.recv_timeout(Duration::from_secs(10));
        // From here on the child is killed on drop, whatever happens below.
        let Ok((line, stdout)) = first_line else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kmock serve {args:?} printed no line within 10 s");
        };
        let mut server = Server {
            child,
            bootstrap: String::new(),
            _stdout: stdout,
        };
        let line = line.expect("kmock's stdout is readable");
        server.bootstrap = line
            .trim_end()
            .strip_prefix("bootstrap: ")
            .unwrap_or_else(|| panic!("first stdout line {line:?} is not `bootstrap: …`"))
            .to_owned();
        server
    }

    /// The broker addresses of the bootstrap line.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.bootstrap
            .split(',')
            .map(|a| {
                a.parse()
                    .unwrap_or_else(|e| panic!("bootstrap entry {a:?}: {e}"))
            })
            .collect()
    }

    /// Sends SIGTERM and waits up to 5 s for a clean exit (status 0).
    pub fn stop(&mut self) {
        let kill = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(kill.success(), "kill -TERM failed: {kill}");
        let status = self
            .wait_exit(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("kmock still runs 5 s after SIGTERM"));
        assert_eq!(
            status.code(),
            Some(0),
            "kmock exited with {status} on SIGTERM"
        );
    }

    /// Waits up to `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs kcat with `args` (under `timeout 30`) feeding it `stdin`; panics unless it succeeds.
pub fn kcat(args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("timeout")
        .args(["30", KCAT])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat starts");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    let input = stdin.to_owned();
    let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("kcat runs");
    writer
        .join()
        .expect("stdin writer")
        .expect("kcat reads its stdin");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr),
    );
    assert!(
        status.success(),
        "kcat {args:?} failed with {status} (124 = timed out)\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout.into_owned()
}
