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
