//! The accept loop the runtime's HTTP servers share: `/metrics` and the probes here, the
//! admission webhooks in `operator-webhook` (which depends on this crate, the lowest both reach).
//!
//! Each connection is served on a task of its own, so a slow client holds up no other; when
//! `shutdown` resolves the loop stops accepting, and connections already open finish their
//! requests. A failed accept (too many open files, a connection reset before it was taken) is
//! skipped: the next one may succeed, and a server that stopped on it would stop for good.

use std::future::Future;

use hyper::body::{Body, Incoming};
use hyper::service::HttpService;
use tokio::net::{TcpListener, TcpStream};

/// Accepts connections on `listener` until `shutdown` resolves, each handed to `connection` on a
/// task of its own.
pub async fn serve<Connection, Served>(listener: TcpListener, shutdown: impl Future<Output = ()>, connection: Connection)
where
    Connection: Fn(TcpStream) -> Served,
    Served: Future<Output = ()> + Send + 'static,
{
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                tokio::spawn(connection(stream));
            }
        }
    }
}

/// Serves HTTP/1.1 `service` on `io` (a TCP stream, or a TLS stream over one) until the client
/// closes it. An error on one connection (a client gone mid-request, a malformed request) is that
/// client's: the server goes on.
pub async fn serve_http1<Io, Service>(io: Io, service: Service)
where
    Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    Service: HttpService<Incoming>,
    Service::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    Service::ResBody: 'static,
    <Service::ResBody as Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = hyper_util::rt::TokioIo::new(io);
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn each_connection_is_handed_over_until_shutdown_and_none_after() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (handed, mut connections) = tokio::sync::mpsc::unbounded_channel();
        let server = tokio::spawn(serve(
            listener,
            async {
                let _ = stopped.await;
            },
            move |stream: TcpStream| {
                let handed = handed.clone();
                async move {
                    let _ = handed.send(stream.peer_addr().ok());
                }
            },
        ));
        for _ in 0..2 {
            let client = TcpStream::connect(addr).await.unwrap();
            let seen = tokio::time::timeout(Duration::from_secs(30), connections.recv()).await.expect("the connection was handed over");
            assert_eq!(seen.flatten(), Some(client.local_addr().unwrap()));
        }
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(30), server).await.expect("the loop ends on shutdown").unwrap();
        // The listener went with the loop: nobody accepts any more.
        assert!(TcpStream::connect(addr).await.is_err(), "a connection was accepted after shutdown");
    }
}
