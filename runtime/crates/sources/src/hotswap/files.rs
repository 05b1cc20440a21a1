//! `--plugin FILE --watch`: polls each file's size and modification time
//! (every `interval`) and sends its bytes once a change has held still for
//! one interval, so a file being written is not read half-way. Polling, not
//! inotify: it works the same on every filesystem (ConfigMap volumes swap a
//! symlink, editors rename over the file) and costs one `stat` per file per
//! interval. A file that disappears keeps the running version. The
//! signature beside a file (`FILE.sig`, [`super::trust`]) is part of its
//! stamp and sent with its bytes, so re-signing a refused file loads it.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;

use super::{Origin, Update};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    /// The signature file's (len, modified), if there is one.
    signature: Option<(u64, Option<SystemTime>)>,
}

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    let signature = std::fs::metadata(super::trust::signature_path(path)).ok().map(|s| (s.len(), s.modified().ok()));
    Some(Stamp { len: m.len(), modified: m.modified().ok(), signature })
}

/// One file's watch state: the stamp last sent, and a changed stamp waiting
/// to hold still.
struct Watched {
    path: PathBuf,
    sent: Option<Stamp>,
    pending: Option<Stamp>,
}

impl Watched {
    /// Whether the file should be read now.
    fn poll(&mut self, now: Option<Stamp>) -> bool {
        let Some(now) = now else {
            self.pending = None;
            return false;
        };
        if Some(now) == self.sent {
            self.pending = None;
            return false;
        }
        if self.pending == Some(now) {
            self.sent = Some(now);
            self.pending = None;
            return true;
        }
        self.pending = Some(now);
        false
    }
}

/// The watched files, stamped when the watch is made. Make it before the
/// files are first read, so a change made while they load (or before the
/// polling task first runs) is seen as a change, not taken as the loaded
/// version.
pub struct FileWatch {
    files: Vec<Watched>,
}

impl FileWatch {
    /// Stamps `paths` now: each is sent again only once it differs from now.
    /// A candidate staged beside a plugin (`super::shadow`) is not loaded at
    /// start, so it is sent at the first poll that finds it holding still.
    pub fn new(paths: Vec<PathBuf>) -> FileWatch {
        let sent = |p: &std::path::Path| if super::shadow::active_id(&p.display().to_string()).is_some() { None } else { stamp(p) };
        FileWatch { files: paths.into_iter().map(|path| Watched { sent: sent(&path), path, pending: None }).collect() }
    }

    /// Polls every `interval` until the receiver is dropped.
    pub async fn run(mut self, interval: Duration, tx: mpsc::Sender<Update>) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for f in &mut self.files {
                if !f.poll(stamp(&f.path)) {
                    continue;
                }
                match tokio::fs::read(&f.path).await {
                    Ok(bytes) => {
                        tracing::info!(path = %f.path.display(), "plugin file changed; reloading");
                        let signature = tokio::fs::read(super::trust::signature_path(&f.path)).await.ok();
                        if tx
                            .send(Update { origin: Origin::File(f.path.clone()), bytes: Some(bytes), signature, trust: None, cosign: None })
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(path = %f.path.display(), error = %e, "cannot read changed plugin file; keeping the running version")
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(len: u64) -> Option<Stamp> {
        Some(Stamp { len, modified: None, signature: None })
    }

    #[test]
    fn a_change_is_read_once_it_holds_still_for_one_poll() {
        let mut w = Watched { path: "p".into(), sent: s(1), pending: None };
        assert!(!w.poll(s(1)), "unchanged");
        assert!(!w.poll(s(5)), "changed: wait one poll");
        assert!(!w.poll(s(9)), "still being written");
        assert!(w.poll(s(9)), "held still: read");
        assert!(!w.poll(s(9)), "read once");
        assert!(!w.poll(None), "gone: keep the running version");
        assert!(!w.poll(s(9)), "back as it was: nothing to do");
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_written_after_the_watch_is_made_is_sent_even_before_the_first_poll() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugin.wasm");
        let watch = FileWatch::new(vec![path.clone()]);
        // Written before the polling task has run once: still a change.
        std::fs::write(&path, b"v1").unwrap();
        let (tx, mut rx) = mpsc::channel(1);
        tokio::spawn(watch.run(Duration::from_millis(10), tx));
        let update = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("sent within a few polls").expect("the file is sent");
        assert_eq!(update.bytes.as_deref(), Some(&b"v1"[..]));
    }
}
