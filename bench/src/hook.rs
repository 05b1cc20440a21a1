//! Benchmark 2: the Wasm call against a Metacontroller-style hook.
//!
//! BENCHMARK FIXTURE, not part of the product: the same native plugin logic
//! behind an HTTP JSON endpoint on loopback (hyper 1 server), called by a
//! hyper client that keeps the connection alive, the hook's best case. The
//! request carries the parent and children as JSON text (one object per
//! line, so each is parsed once, straight into the plugin's types, as the
//! Wasm call parses them) and the answer is the actions as JSON, as a sync
//! hook does; both sides parse what they get.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use operator_plugin_sdk::Action;

use crate::Profile;
use crate::native::NativeLib;
use crate::stats::Summary;
use crate::workload::{self, Kind};

/// The sizes the hook is compared at.
pub const SIZES: [usize; 2] = [10, 100];

#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub kind: Kind,
    pub children: usize,
    /// Microseconds per call.
    pub wasm: Summary,
    pub hook: Summary,
}

impl Row {
    /// How many times faster the Wasm call is (> 1: Wasm wins).
    pub fn speedup(&self) -> f64 {
        self.hook.median / self.wasm.median
    }
}

/// The hook's side: the body is newline-delimited JSON (the call's `now` in
/// Unix milliseconds, the parent, then one child per line), so the hook
/// parses each object's text straight into the plugin's types, as the Wasm
/// guest and the native comparator do. A hook that first parsed the whole
/// body into `Value` trees would do more work than they and flatter Wasm.
fn answer(native: &NativeLib, kind: Kind, body: &[u8]) -> (u16, Vec<u8>) {
    let bad = |why: String| (400, format!("bad request: {why}").into_bytes());
    let Ok(text) = std::str::from_utf8(body) else { return bad("not UTF-8".into()) };
    let mut lines = text.split('\n');
    let now_ms = match lines.next().map(str::parse::<i64>) {
        Some(Ok(ms)) => ms,
        _ => return bad("the first line is not `now` in Unix milliseconds".into()),
    };
    let Some(parent) = lines.next() else { return bad("no parent line".into()) };
    let children: Vec<&str> = lines.collect();
    // The library copies the texts into its own strings, as a hook owns its request.
    let input = native.input(kind, parent, &children, now_ms);
    let outcome = input.reconcile();
    match outcome.json() {
        Ok(actions) => (200, actions.as_bytes().to_vec()),
        Err(e) => (422, e.as_bytes().to_vec()),
    }
}

/// Serves `kind`'s native logic on 127.0.0.1 until the runtime stops.
async fn serve(native: Arc<NativeLib>, kind: Kind) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let native = native.clone();
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let native = native.clone();
                async move {
                    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                    let (status, out) = answer(&native, kind, &body);
                    Ok::<_, Infallible>(
                        Response::builder().status(status).header("content-type", "application/json").body(Full::new(Bytes::from(out))).unwrap(),
                    )
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok(addr)
}

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

/// One hook call as a controller would make it: the objects it holds as
/// JSON text go into one request body; the answer is parsed into actions.
async fn call(client: &HttpClient, url: &str, input: &workload::Input) -> anyhow::Result<Vec<Action>> {
    let mut body = String::with_capacity(input.parent.len() + input.children.iter().map(|c| c.len() + 1).sum::<usize>() + 24);
    body.push_str(&input.now_ms.to_string());
    for object in std::iter::once(&input.parent).chain(&input.children) {
        // Compact JSON text has no raw newline (one inside a string is escaped).
        anyhow::ensure!(!object.contains('\n'), "an object's JSON text spans lines");
        body.push('\n');
        body.push_str(object);
    }
    let req = Request::post(url).header("content-type", "application/x-ndjson").body(Full::new(Bytes::from(body)))?;
    let resp = client.request(req).await?;
    let status = resp.status();
    let bytes = resp.into_body().collect().await?.to_bytes();
    anyhow::ensure!(status.is_success(), "hook answered {status}: {}", String::from_utf8_lossy(&bytes));
    Ok(serde_json::from_slice(&bytes)?)
}

pub async fn run(profile: &Profile, plugins: &crate::Plugins) -> anyhow::Result<Vec<Row>> {
    let client: HttpClient = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(1).build_http();
    let mut rows = Vec::new();
    for kind in Kind::ALL {
        let url = format!("http://{}/sync", serve(plugins.native()?, kind).await?);
        let plugin = plugins.get(kind).clone();
        for n in SIZES {
            let input = workload::input(kind, n);
            let from_hook = call(&client, &url, &input).await?;
            let from_wasm = plugin.reconcile_blocking(&input.parent, &input.children, input.now_ms)?;
            anyhow::ensure!(from_hook == from_wasm, "{} with {n} children: hook and Wasm disagree", kind.plugin());
            // The texts as the controller hands them over: shared, from its cache.
            let parent: std::sync::Arc<str> = input.parent.as_str().into();
            let children: std::sync::Arc<[std::sync::Arc<str>]> = input.children.iter().map(|c| c.as_str().into()).collect();
            let t = Instant::now();
            for _ in 0..3 {
                plugin.reconcile(parent.clone(), children.clone(), input.now_ms).await?;
                call(&client, &url, &input).await?;
            }
            let one_pair = t.elapsed().as_secs_f64() / 3.0;
            let iters = ((profile.per_measurement().as_secs_f64() / one_pair) as usize).clamp(profile.min_iterations(), 20_000);
            let warmup = (iters / 10).max(3);
            let (mut wasm, mut hook) = (Vec::with_capacity(iters), Vec::with_capacity(iters));
            for i in 0..warmup + iters {
                // The Wasm call is awaited as the controller awaits it (in place, `block_in_place`).
                let t = Instant::now();
                let a = plugin.reconcile(parent.clone(), children.clone(), input.now_ms).await?;
                let w = t.elapsed();
                std::hint::black_box(a);
                let t = Instant::now();
                let a = call(&client, &url, &input).await?;
                let h = t.elapsed();
                std::hint::black_box(a);
                if i >= warmup {
                    wasm.push(w);
                    hook.push(h);
                }
            }
            let row = Row { kind, children: n, wasm: Summary::micros(&wasm), hook: Summary::micros(&hook) };
            eprintln!(
                "bench: hook {} {n:>4} {}: wasm {:.1} µs, http hook {:.1} µs, wasm {:.2}x faster",
                kind.plugin(),
                kind.child(),
                row.wasm.median,
                row.hook.median,
                row.speedup()
            );
            rows.push(row);
        }
    }
    Ok(rows)
}
