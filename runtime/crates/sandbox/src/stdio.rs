//! Plugin stdout and stderr: captured per call into a size-capped buffer
//! whose overflow is dropped (and counted), never trapping the guest, then
//! forwarded to the host's log tagged with the plugin's name.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    dropped: u64,
}

/// A capped in-memory sink usable as WASI stdout or stderr.
#[derive(Clone)]
pub(crate) struct CappedOutput {
    cap: usize,
    inner: Arc<Mutex<Captured>>,
}

impl CappedOutput {
    pub(crate) fn new(cap: usize) -> Self {
        Self { cap, inner: Arc::default() }
    }

    /// What was written (up to the cap) and how many bytes were dropped.
    pub(crate) fn take(&self) -> (String, u64) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&inner.bytes).into_owned();
        let dropped = inner.dropped;
        *inner = Captured::default();
        (text, dropped)
    }

    pub(super) fn append(&self, data: &[u8]) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = self.cap.saturating_sub(inner.bytes.len());
        let kept = room.min(data.len());
        inner.bytes.extend_from_slice(&data[..kept]);
        inner.dropped += (data.len() - kept) as u64;
    }
}

impl IsTerminal for CappedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for CappedOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Always accept: overflow is dropped, so a chatty plugin is never
        // blocked or trapped by its own logging.
        Ok(64 * 1024)
    }
}

#[async_trait::async_trait]
impl Pollable for CappedOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CappedOutput {
    fn poll_write(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>, buf: &[u8]) -> std::task::Poll<std::io::Result<usize>> {
        self.append(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_cap_is_dropped_and_counted() {
        let out = CappedOutput::new(4);
        out.append(b"abc");
        out.append(b"defg");
        assert_eq!(out.take(), ("abcd".to_string(), 3));
        assert_eq!(out.take(), (String::new(), 0));
    }
}
