//! Entry points: [`ApiServer`] (the cluster), served in-process as a `tower::Service` (for
//! `kube::Client::new`, no sockets, works under tokio's paused clock) or over HTTP/1.1 on
//! localhost ([`ApiServer::serve`] → [`ServerHandle`]).

use crate::admission::Admission;
use crate::config::Config;
use crate::http::{Body, handle};
use crate::rest::Core;
use crate::store::{Backend, NullBackend, Store};
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body_util::BodyExt;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

/// An embedded Kubernetes-compatible API server. Cheap to clone (shared state).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::{Api, PostParams};
///
/// let server = apiserver::ApiServer::new();
/// let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
/// let before: u64 = cms.list(&Default::default()).await.unwrap().metadata.resource_version.unwrap().parse().unwrap();
/// let cm = serde_json::from_value(serde_json::json!({"metadata": {"name": "hello"}})).unwrap();
/// let created = cms.create(&PostParams::default(), &cm).await.unwrap();
/// assert_eq!(created.metadata.resource_version, Some((before + 1).to_string())); // one global counter
///
/// // The same cluster over HTTP, for kubectl:
/// let handle = server.serve().await.unwrap();
/// let dir = tempfile::tempdir().unwrap();
/// handle.write_kubeconfig(dir.path().join("kubeconfig")).unwrap();
/// handle.shutdown().await;
/// # });
/// ```
#[derive(Clone)]
pub struct ApiServer {
    core: Arc<Core>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer").field("config", &self.core.config).finish()
    }
}

impl Default for ApiServer {
    fn default() -> Self {
        Self::new()
    }
}

impl ApiServer {
    /// A server with [`Config::default`] and nothing but the system namespaces.
    pub fn new() -> Self {
        Self::with_config(Config::default())
    }

    /// A server with the given configuration (in-memory storage).
    pub fn with_config(config: Config) -> Self {
        Self::with_backend(config, Box::new(NullBackend))
    }

    /// A server over a persistence [`Backend`].
    pub fn with_backend(config: Config, backend: Box<dyn Backend>) -> Self {
        let store = Store::new(config.event_window, backend);
        let core = Arc::new(Core::new(store, config, Admission::default()));
        core.bootstrap();
        ApiServer { core }
    }

    /// A server whose store lives in `dir` (one redb file, [`PERSIST_FILE_NAME`](crate::PERSIST_FILE_NAME)): loads what is there
    /// (failing with a clear error for a damaged file) and persists every write before
    /// acknowledging it.
    pub fn with_data_dir(config: Config, dir: impl AsRef<std::path::Path>) -> Result<Self, crate::persist::PersistError> {
        Ok(Self::with_backend(config, Box::new(crate::persist::RedbBackend::open(dir)?)))
    }

    /// The admission hook registry.
    pub fn admission(&self) -> &Admission {
        &self.core.admission
    }

    /// The fault-injection registry.
    pub fn faults(&self) -> &crate::faults::Faults {
        &self.core.faults
    }

    /// Bearer tokens, and the requests RBAC refused.
    pub fn access(&self) -> &crate::auth::Access {
        &self.core.access
    }

    /// Direct access to the verbs (for simulated controllers living next to the server).
    pub fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// The in-process `tower::Service`.
    pub fn service(&self) -> ApiService {
        ApiService { core: self.core.clone(), address: "127.0.0.1:0".into() }
    }

    /// A `kube::Client` talking to this server in-process (no sockets). Must be called inside a
    /// tokio runtime.
    pub fn kube_client(&self) -> kube::Client {
        kube::Client::new(self.service(), "default")
    }

    /// Serve HTTP/1.1 on `config.bind` (port 0 picks a free port).
    pub async fn serve(&self) -> std::io::Result<ServerHandle> {
        self.serve_on(self.core.config.bind).await
    }

    /// Serve HTTP/1.1 on a given address.
    pub async fn serve_on(&self, addr: SocketAddr) -> std::io::Result<ServerHandle> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        self.core.ensure_kubernetes_service(Some(addr)); // the kubernetes Service names where we serve
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let core = self.core.clone();
        let task = tokio::spawn(accept_loop(listener, core, addr, stop_rx));
        Ok(ServerHandle { addr, stop: stop_tx, task: Some(task) })
    }
}

async fn accept_loop(listener: tokio::net::TcpListener, core: Arc<Core>, addr: SocketAddr, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let svc = ApiService { core: core.clone(), address: addr.to_string() };
                let mut conn_stop = stop.clone();
                conns.spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let hsvc = hyper_util::service::TowerToHyperService::new(svc);
                    let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, hsvc);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = stopped(&mut conn_stop) => {
                            conn.as_mut().graceful_shutdown();
                            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), conn).await;
                        }
                    }
                });
            }
            _ = stopped(&mut stop) => break,
        }
        while conns.try_join_next().is_some() {}
    }
    drop(listener);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), async { while conns.join_next().await.is_some() {} }).await;
    conns.abort_all();
}

async fn stopped(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// A running HTTP server.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl ServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Write a kubeconfig pointing at this server (context `embedded`).
    pub fn write_kubeconfig(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        crate::kubeconfig::write_kubeconfig(path, &self.url())
    }

    /// A `kube::Client` for this server over HTTP.
    pub fn kube_client(&self) -> kube::Result<kube::Client> {
        let config = kube::Config::new(self.url().parse().expect("valid url"));
        kube::Client::try_from(config)
    }

    /// Stop accepting, let in-flight requests finish (up to ~2 s), then close.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// The server as a `tower::Service` over any request body.
#[derive(Clone)]
pub struct ApiService {
    core: Arc<Core>,
    address: String,
}

impl<B> tower::Service<Request<B>> for ApiService
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: std::fmt::Display,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let core = self.core.clone();
        let address = self.address.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let bytes = match read_limited(body, crate::limits::MAX_REQUEST_BODY_BYTES).await {
                Ok(bytes) => bytes,
                Err(err) => {
                    let mut r = Response::new(http_body_util::Full::new(Bytes::from(crate::wire::to_vec(&err.to_status()))).boxed_unsync());
                    *r.status_mut() = http::StatusCode::from_u16(err.code).unwrap_or(http::StatusCode::BAD_REQUEST);
                    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
                    return Ok(r);
                }
            };
            let req = Request::from_parts(parts, bytes);
            Ok(handle(core, req, &address).await)
        })
    }
}

/// The request body, read frame by frame and refused (413) as soon as it passes `limit`, so an
/// oversized body is never held in memory (upstream's `limitedReadBody`).
///
/// After the refusal, what the client is still sending is read and dropped for a short while
/// (at most [`DRAIN_WAIT`] and [`DRAIN_BYTES`]), so that it can finish writing and read the 413:
/// closing with unread bytes makes the kernel reset the connection, which can destroy the answer
/// on its way, and kubectl then reports `write: broken pipe` instead of the Status (Go's server
/// waits for the same reason, `closeWriteAndWait`). A client that announced more than it sends
/// is answered after the wait.
async fn read_limited<B>(body: B, limit: usize) -> Result<Bytes, crate::status::ApiError>
where
    B: http_body::Body,
    B::Error: std::fmt::Display,
{
    use bytes::{Buf, BufMut};
    let mut body = std::pin::pin!(body);
    let mut read = bytes::BytesMut::new();
    let mut refused: Option<(tokio::time::Instant, usize)> = None;
    loop {
        let frame = match refused {
            None => body.frame().await,
            Some((at, _)) => match tokio::time::timeout_at(at + DRAIN_WAIT, body.frame()).await {
                Ok(frame) => frame,
                Err(_) => break,
            },
        };
        let Some(frame) = frame else { break };
        let frame = match (frame, refused) {
            (Ok(frame), _) => frame,
            (Err(_), Some(_)) => break,
            (Err(e), None) => return Err(crate::status::ApiError::bad_request(format!("reading request body: {e}"))),
        };
        let Ok(mut data) = frame.into_data() else { continue };
        if let Some((_, dropped)) = refused.as_mut() {
            *dropped += data.remaining();
            if *dropped > DRAIN_BYTES {
                break;
            }
            continue;
        }
        if read.len() + data.remaining() > limit {
            refused = Some((tokio::time::Instant::now(), 0));
            read = bytes::BytesMut::new();
            continue;
        }
        while data.has_remaining() {
            let chunk = data.chunk();
            let n = chunk.len();
            read.put_slice(chunk);
            data.advance(n);
        }
    }
    match refused {
        Some(_) => Err(crate::limits::request_entity_too_large()),
        None => Ok(read.freeze()),
    }
}

/// How long a refused body is still read (and dropped) so the client can read the 413.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// How much of a refused body is read (and dropped) at most.
const DRAIN_BYTES: usize = 64 << 20;
