//! Run the embedded API server on localhost and write a kubeconfig for it.
//!
//! `cargo run -p apiserver --example serve -- /tmp/embedded.kubeconfig [port]`, then
//! `kubectl --kubeconfig /tmp/embedded.kubeconfig get ns`.

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "embedded.kubeconfig".into());
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let server = apiserver::ApiServer::new();
    let handle = server.serve_on(([127, 0, 0, 1], port).into()).await?;
    handle.write_kubeconfig(&path)?;
    println!("serving on {} (kubeconfig: {path})", handle.url());
    tokio::signal::ctrl_c().await?;
    handle.shutdown().await;
    Ok(())
}
