//! A `host` process started by a test: its stdout read line by line on a
//! thread (so a test can wait for `export KUBECONFIG=...` without blocking
//! forever), killed when the test ends, however it ends.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a test waits for a line or a condition before it fails.
pub const WAIT: Duration = Duration::from_secs(180);

pub struct Running {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
}

impl Running {
    /// Spawns `cmd` with stdout piped to the line reader and stderr inherited
    /// (the test's output shows the host's log when it fails).
    pub fn start(mut cmd: Command) -> Running {
        cmd.stderr(Stdio::inherit());
        Self::start_logging_to_file(cmd)
    }

    /// [`Self::start`] with stderr where `cmd` already sends it (a log file).
    pub fn start_logging_to_file(mut cmd: Command) -> Running {
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn host");
        let out = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running { child, lines }
    }

    /// The first stdout line from now on containing `needle`; fails the test
    /// after [`WAIT`] or when stdout closes without one.
    pub fn line_with(&self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| panic!("no stdout line with {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// SIGKILL: no shutdown path runs.
    pub fn kill_9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` until it returns `Some`, for at most [`WAIT`].
pub fn poll<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    operator_test_kit::wait::blocking(what, WAIT, f)
}
