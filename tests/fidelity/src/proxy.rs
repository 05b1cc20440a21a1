//! The recorder: a plain-HTTP proxy on loopback that the clients of a run
//! (kubectl with a kubeconfig naming it, and the corpus' raw requests) talk
//! to. It forwards each request to the server under test with that server's
//! credentials and records the exchange; watch streams pass through as they
//! come and are recorded as their events.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

use crate::exchange::{Body, Exchange, RECORDED_RESPONSE_HEADERS, UNRECORDED_REQUEST_HEADERS, watch_events};
use crate::upstream::Upstream;

type ProxyBody = BoxBody<Bytes, Infallible>;

struct State {
    upstream: Upstream,
    started: Instant,
    step: Mutex<(String, bool)>,
    exchanges: Mutex<Vec<Exchange>>,
}

/// A running recorder; stops serving when dropped.
pub struct Recorder {
    url: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: Upstream) -> std::io::Result<Recorder> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(State { upstream, started: Instant::now(), step: Mutex::new((String::new(), true)), exchanges: Mutex::new(Vec::new()) });
        let serving = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = serving.clone();
                let service = hyper::service::service_fn(move |request| forward(state.clone(), request));
                tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service));
            }
        });
        Ok(Recorder { url, state, task })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Labels the exchanges recorded from now on; `asks_for_discovery`:
    /// whether the step's own subject may be a discovery document (else
    /// such reads are the client's cache refreshes, see [`Exchange::incidental`]).
    pub fn set_step(&self, step: &str, asks_for_discovery: bool) {
        *lock(&self.state.step) = (step.to_string(), asks_for_discovery);
    }

    /// Everything recorded so far, in request order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        lock(&self.state.exchanges).clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn forward(state: Arc<State>, request: Request<Incoming>) -> Result<Response<ProxyBody>, Infallible> {
    let at_ms = u64::try_from(state.started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let path = parts.uri.path_and_query().map_or_else(|| parts.uri.path().to_string(), |p| p.to_string());
    let mut request_headers = std::collections::BTreeMap::new();
    for (name, value) in &parts.headers {
        let name = name.as_str().to_ascii_lowercase();
        if UNRECORDED_REQUEST_HEADERS.contains(&name.as_str()) {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        request_headers.entry(name).and_modify(|v: &mut String| *v = format!("{v}, {value}")).or_insert(value);
    }
    let (step, asks_for_discovery) = lock(&state.step).clone();
    let incidental = !asks_for_discovery && crate::exchange::is_discovery(&path);
    let mut exchange = Exchange {
        step,
        incidental,
        at_ms,
        method: parts.method.to_string(),
        path,
        request_headers,
        request_body: Body::from_bytes(&body),
        status: 0,
        headers: Default::default(),
        body: Body::Empty,
        watch: None,
        duration_ms: 0,
    };
    let outgoing = build_request(&exchange);
    let response = match state.upstream.send(outgoing).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fidelity: forwarding {} failed: {e}", exchange.label());
            exchange.status = 502;
            exchange.body = Body::Text(e.to_string());
            lock(&state.exchanges).push(exchange);
            return Ok(Response::builder().status(502).body(full(Bytes::from(e.to_string()))).unwrap_or_default());
        }
    };
    let (parts, upstream_body) = response.into_parts();
    exchange.status = parts.status.as_u16();
    exchange.headers = recorded_headers(&parts.headers);
    let mut answer = Response::builder().status(parts.status);
    for (name, value) in &parts.headers {
        if !matches!(name.as_str(), "transfer-encoding" | "connection" | "content-length") {
            answer = answer.header(name, value);
        }
    }
    if exchange.is_watch() && parts.status.is_success() {
        exchange.watch = Some(Vec::new());
        let index = {
            let mut all = lock(&state.exchanges);
            all.push(exchange);
            all.len() - 1
        };
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(tee_watch(state, index, upstream_body, tx));
        return Ok(answer.body(ChannelBody(rx).boxed()).unwrap_or_default());
    }
    let bytes = upstream_body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    exchange.body = Body::from_bytes(&bytes);
    exchange.duration_ms = millis_since(&state, at_ms);
    lock(&state.exchanges).push(exchange);
    Ok(answer.body(full(bytes)).unwrap_or_default())
}

/// The request an exchange describes, without credentials (the upstream adds its own).
pub fn build_request(exchange: &Exchange) -> Request<Full<Bytes>> {
    let mut request = Request::builder().method(exchange.method.as_str()).uri(exchange.path.as_str());
    for (name, value) in &exchange.request_headers {
        request = request.header(name.as_str(), value.as_str());
    }
    request.body(Full::new(Bytes::from(exchange.request_body.to_bytes()))).unwrap_or_else(|e| {
        eprintln!("fidelity: {} is not a valid request: {e}", exchange.label());
        Request::new(Full::new(Bytes::new()))
    })
}

pub fn recorded_headers(headers: &hyper::HeaderMap) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for name in RECORDED_RESPONSE_HEADERS {
        let values: Vec<String> = headers.get_all(*name).iter().map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).collect();
        if !values.is_empty() {
            out.insert((*name).to_string(), values.join(", "));
        }
    }
    out
}

/// Passes a watch stream to the client and records its events as they
/// come; stops when either side ends.
async fn tee_watch(state: Arc<State>, index: usize, mut body: Incoming, tx: tokio::sync::mpsc::Sender<Bytes>) {
    let mut seen = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else { continue };
        // What arrives after the client left was never seen by it.
        if tx.is_closed() {
            break;
        }
        seen.extend_from_slice(&data);
        {
            let mut all = lock(&state.exchanges);
            all[index].watch = Some(watch_events(&seen));
            all[index].duration_ms = millis_since(&state, all[index].at_ms);
        }
        if tx.send(data).await.is_err() {
            break;
        }
    }
    let mut all = lock(&state.exchanges);
    all[index].duration_ms = millis_since(&state, all[index].at_ms);
}

fn millis_since(state: &State, at_ms: u64) -> u64 {
    u64::try_from(state.started.elapsed().as_millis()).unwrap_or(u64::MAX).saturating_sub(at_ms)
}

fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes).boxed()
}

/// A response body fed from a channel (a watch being passed through).
struct ChannelBody(tokio::sync::mpsc::Receiver<Bytes>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(|data| Ok(Frame::data(data))))
    }
}
