//! `bench serve-native`: the host's manager with the CronJob plugin's logic
//! compiled natively into this process (`Sandbox::load_native`), against
//! the cluster in `KUBECONFIG`, with the defaults `host run` uses. The
//! head-to-head's "native logic" contestant: everything but the Wasm
//! boundary is the host's. `/readyz` on `--ready-addr` answers 200 once the
//! caches are synced; SIGTERM or SIGINT stops it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use operator_runtime::manager::{self, Options};
use operator_runtime::sandbox::{PrecompiledCache, Sandbox, SandboxConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub async fn run(concurrency: usize, ready_addr: SocketAddr) -> anyhow::Result<()> {
    let client = operator_runtime::api_client::client(kube::Config::infer().await?)?;
    let sandbox = Sandbox::new(SandboxConfig { cache: PrecompiledCache::disabled(), ..SandboxConfig::default() })?;
    let plugin = sandbox.load_native::<cronjob::CronJobPlugin>()?;
    let mut options = Options::default();
    options.controller.concurrency = concurrency;
    let ready = Arc::new(AtomicBool::new(false));
    let listener = tokio::net::TcpListener::bind(ready_addr).await?;
    let answering = ready.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            // The request is read before the answer: closing a socket with
            // unread bytes resets the connection, and the client sees an error.
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let status = if answering.load(Ordering::Relaxed) { "200 OK" } else { "503 Service Unavailable" };
            let _ = stream.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes()).await;
        }
    });
    let running = manager::Builder::new(client)
        .plugins([plugin])
        .options(options)
        .start()
        .await
        .map_err(|e| anyhow::anyhow!("manager: {}", operator_runtime::error_chain(&e)))?;
    running.wait_synced().await;
    ready.store(true, Ordering::Relaxed);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    running.shutdown(Duration::from_secs(10)).await;
    Ok(())
}
