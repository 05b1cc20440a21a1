//! The on-disk log: JSON Lines files `calls-NNNNNN.jsonl` in one directory,
//! one [`Call`] per line. A file is closed at `max_bytes / files` and a new
//! one started; past `files` files the oldest is deleted, so the directory
//! never holds much more than `max_bytes`. A restarted host continues after
//! the highest number found. Calls are written by a thread of their own
//! through a bounded channel: a reconcile never waits for the disk, and when
//! the disk cannot keep up, calls are dropped and counted, never queued
//! without bound.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use super::Call;

/// How much is recorded and where.
#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    /// Bound of the directory's size (default 64 MiB).
    pub max_bytes: u64,
    /// Files the bound is split into (default 4): rotation drops a quarter at a time.
    pub files: usize,
    /// Keep Secret `data`/`stringData` values (default false: redacted).
    pub keep_secrets: bool,
}

impl Config {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into(), max_bytes: 64 << 20, files: 4, keep_secrets: false }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot record to {}: the directory is not writable", dir.display())]
    NotWritable {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the record {}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: not a recorded call", path.display())]
    NotACall {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Calls waiting for the writer; past this, calls are dropped.
const QUEUE: usize = 1024;
const PREFIX: &str = "calls-";
const SUFFIX: &str = ".jsonl";

enum Message {
    Call(Box<Call>),
    Flush(SyncSender<()>),
}

/// Writes calls to a directory. Cheap to share behind an `Arc`.
pub struct Recorder {
    config: Config,
    tx: Mutex<Option<SyncSender<Message>>>,
    dropped: AtomicU64,
    written: std::sync::Arc<AtomicU64>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("dir", &self.config.dir).finish_non_exhaustive()
    }
}

/// The numbered log files in `dir`, oldest first.
fn numbered(dir: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    files.sort();
    Ok(files)
}

struct Writer {
    config: Config,
    file: File,
    number: u64,
    size: u64,
}

impl Writer {
    fn open(config: Config) -> Result<Self> {
        let not_writable = |source| Error::NotWritable { dir: config.dir.clone(), source };
        std::fs::create_dir_all(&config.dir).map_err(not_writable)?;
        let number = numbered(&config.dir).map_err(not_writable)?.last().map_or(1, |(n, _)| n + 1);
        let file = Self::create(&config.dir, number).map_err(not_writable)?;
        Ok(Self { config, file, number, size: 0 })
    }

    fn create(dir: &Path, number: u64) -> std::io::Result<File> {
        OpenOptions::new().create(true).append(true).open(dir.join(format!("{PREFIX}{number:06}{SUFFIX}")))
    }

    fn file_limit(&self) -> u64 {
        (self.config.max_bytes / self.config.files.max(1) as u64).max(1)
    }

    fn write(&mut self, call: &Call) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(call).map_err(std::io::Error::other)?;
        line.push(b'\n');
        if self.size > 0 && self.size + line.len() as u64 > self.file_limit() {
            self.rotate()?;
        }
        self.file.write_all(&line)?;
        self.size += line.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.number += 1;
        self.file = Self::create(&self.config.dir, self.number)?;
        self.size = 0;
        let files = numbered(&self.config.dir)?;
        let excess = files.len().saturating_sub(self.config.files.max(1));
        for (_, old) in &files[..excess] {
            std::fs::remove_file(old)?;
        }
        Ok(())
    }

    fn run(mut self, rx: Receiver<Message>, written: std::sync::Arc<AtomicU64>) {
        let mut failing = false;
        for message in rx {
            match message {
                Message::Call(call) => match self.write(&call) {
                    Ok(()) => {
                        written.fetch_add(1, Ordering::Relaxed);
                        failing = false;
                    }
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(dir = %self.config.dir.display(), error = %e, "cannot write a recorded call; calls are lost until writing works again");
                    }
                    Err(_) => {}
                },
                Message::Flush(done) => {
                    let _ = self.file.sync_data();
                    let _ = done.send(());
                }
            }
        }
    }
}

impl Recorder {
    /// Opens (creates) the directory and starts the writer thread; a
    /// directory that cannot be written is an error now, not a lost log later.
    pub fn open(config: Config) -> Result<Self> {
        let writer = Writer::open(config.clone())?;
        let (tx, rx) = sync_channel(QUEUE);
        let written = std::sync::Arc::new(AtomicU64::new(0));
        let counter = written.clone();
        std::thread::Builder::new()
            .name("record".into())
            .spawn(move || writer.run(rx, counter))
            .map_err(|source| Error::NotWritable { dir: config.dir.clone(), source })?;
        Ok(Self { config, tx: Mutex::new(Some(tx)), dropped: AtomicU64::new(0), written })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Queues `call` for writing; never blocks.
    pub fn record(&self, call: Call) {
        let tx = self.tx.lock().unwrap();
        let Some(tx) = tx.as_ref() else { return };
        if let Err(TrySendError::Full(_)) = tx.try_send(Message::Call(Box::new(call))) {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::warn!(dropped = n, "the record writer cannot keep up; calls dropped");
            }
        }
    }

    /// Calls written so far and calls dropped because the writer was behind.
    pub fn counts(&self) -> (u64, u64) {
        (self.written.load(Ordering::Relaxed), self.dropped.load(Ordering::Relaxed))
    }

    /// Blocks until every call queued so far is on disk.
    pub fn flush(&self) {
        let tx = self.tx.lock().unwrap().clone();
        if let Some(tx) = tx {
            let (done, wait) = sync_channel(1);
            if tx.send(Message::Flush(done)).is_ok() {
                let _ = wait.recv();
            }
        }
    }
}

/// The recorded calls in `dirs`, each with where it was read (file and line),
/// in recording order per directory.
pub fn read(dirs: &[PathBuf]) -> Result<Vec<(String, Call)>> {
    let mut out = Vec::new();
    for dir in dirs {
        let unreadable = |source| Error::Unreadable { path: dir.clone(), source };
        let files = numbered(dir).map_err(unreadable)?;
        for (_, path) in files {
            let file = File::open(&path).map_err(|source| Error::Unreadable { path: path.clone(), source })?;
            for (i, line) in BufReader::new(file).lines().enumerate() {
                let line = line.map_err(|source| Error::Unreadable { path: path.clone(), source })?;
                if line.trim().is_empty() {
                    continue;
                }
                let call = serde_json::from_str(&line).map_err(|source| Error::NotACall { path: path.clone(), line: i + 1, source })?;
                out.push((format!("{}:{}", path.display(), i + 1), call));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Answer, Inputs};
    use operator_plugin_sdk::GroupVersionKind;

    fn call(n: usize) -> Call {
        Call {
            plugin: "p".into(),
            version: "1".into(),
            digest: "sha256:00".into(),
            parent_kind: GroupVersionKind::new("g", "v1", "K"),
            inputs: Inputs { parent: format!("{{\"n\":{n}}}"), children: vec![], related: vec![], now: 0 },
            answer: Answer::Actions(vec![]),
            redacted: true,
        }
    }

    #[test]
    fn the_log_rotates_by_size_keeps_the_newest_files_and_reads_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let line = serde_json::to_vec(&call(100)).unwrap().len() as u64 + 1;
        let config = Config { max_bytes: line * 3 * 4, files: 4, ..Config::new(dir.path()) };
        let r = Recorder::open(config.clone()).unwrap();
        for n in 100..130 {
            r.record(call(n));
        }
        r.flush();
        assert_eq!(r.counts(), (30, 0));
        let files = numbered(dir.path()).unwrap();
        assert_eq!(files.len(), 4, "{files:?}");
        let total: u64 = files.iter().map(|(_, p)| std::fs::metadata(p).unwrap().len()).sum();
        assert!(total <= config.max_bytes, "{total} > {}", config.max_bytes);
        let read: Vec<String> = read(&[dir.path().to_path_buf()]).unwrap().into_iter().map(|(_, c)| c.inputs.parent).collect();
        let expected: Vec<String> = (118..130).map(|n| format!("{{\"n\":{n}}}")).collect();
        assert_eq!(read, expected, "the newest 12 calls, oldest first");

        // A restart continues after the highest number instead of overwriting.
        drop(r);
        let again = Recorder::open(config).unwrap();
        again.record(call(999));
        again.flush();
        assert!(numbered(dir.path()).unwrap().last().unwrap().0 > files.last().unwrap().0);
    }

    #[test]
    fn an_unwritable_directory_and_a_bad_line_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, "x").unwrap();
        let e = Recorder::open(Config::new(file.join("sub"))).unwrap_err();
        assert!(e.to_string().contains("is not writable"), "{e}");
        std::fs::write(dir.path().join("calls-000001.jsonl"), "{\"not\": \"a call\"}\n").unwrap();
        let e = read(&[dir.path().to_path_buf()]).unwrap_err();
        assert!(e.to_string().ends_with("calls-000001.jsonl:1: not a recorded call"), "{e}");
    }
}
