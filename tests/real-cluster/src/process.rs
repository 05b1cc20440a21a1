//! A child process that cannot outlive its owner.
//!
//! Each process runs in a process group of its own (so a stop reaches what
//! it started too) and with `PR_SET_PDEATHSIG = SIGKILL`, so the kernel kills
//! it when the thread that spawned it ends, even when the test process is
//! killed with SIGKILL and no destructor runs. Linux ties the parent-death
//! signal to the spawning *thread*: start and restart processes from the
//! test's own thread, never from a helper thread that ends earlier.
//!
//! Output (stdout and stderr) goes to a log file that stays after the
//! process, so a failing test can print its tail.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How a process is started, kept so it can be started again.
#[derive(Clone, Debug)]
pub struct Spec {
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Spec {
    pub fn new(name: &str, program: impl Into<PathBuf>) -> Spec {
        Spec { name: name.to_string(), program: program.into(), args: Vec::new(), env: Vec::new() }
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Spec {
        self.args.push(arg.into());
        self
    }

    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Spec {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: &str, value: impl Into<String>) -> Spec {
        self.env.push((key.to_string(), value.into()));
        self
    }
}

/// A running (or stopped) child process and its log.
#[derive(Debug)]
pub struct Process {
    spec: Spec,
    log: PathBuf,
    child: Option<Child>,
}

impl Process {
    /// Starts `spec`, appending its output to `log`.
    pub fn start(spec: Spec, log: PathBuf) -> Process {
        let mut process = Process { spec, log, child: None };
        process.restart();
        process
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The OS process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts the process again with the same command (stopping it first if it runs).
    pub fn restart(&mut self) {
        self.kill();
        let out = File::options().create(true).append(true).open(&self.log).unwrap_or_else(|e| panic!("open {}: {e}", self.log.display()));
        let err = out.try_clone().expect("clone a log file handle");
        let mut command = Command::new(&self.spec.program);
        command.args(&self.spec.args).envs(self.spec.env.iter().map(|(k, v)| (k, v))).stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot start {} ({}): {e}", self.spec.name, self.spec.program.display()));
        self.child = Some(child);
    }

    /// Whether it exited (and how), without waiting.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits for the process to exit on its own, up to `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM to the process group, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        if let Some(child) = self.child.as_mut() {
            signal_group(child.id(), libc::SIGTERM);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.kill();
    }

    /// SIGKILL to the process group, and reap it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal_group(child.id(), libc::SIGKILL);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

fn signal_group(pid: u32, signal: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return };
    // SAFETY: kill(2) with a negative pid signals that process group only.
    unsafe {
        libc::kill(-pid, signal);
    }
}

/// The last `lines` lines of a file (reads at most its last 256 KiB).
pub fn tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else { return format!("({} is missing)", path.display()) };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(256 << 10);
    let _ = file.seek(SeekFrom::Start(start));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
