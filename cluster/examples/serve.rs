//! Run the embedded API server on localhost, with the simulated cluster parts (garbage
//! collector, scheduler + kubelet on fake nodes, Job runner) next to it, and write a kubeconfig.
//!
//! `cargo run -p simulated-cluster --example serve -- /tmp/embedded.kubeconfig [port] [nodes]`, then
//! `kubectl --kubeconfig /tmp/embedded.kubeconfig get nodes`. `nodes` defaults to 1; `0` serves
//! the bare API server (no controllers: pods stay Pending, owners' dependents stay).

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "embedded.kubeconfig".into());
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let nodes: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(1);
    let server = apiserver::ApiServer::new();
    let handle = server.serve_on(([127, 0, 0, 1], port).into()).await?;
    let cluster = (nodes > 0).then(|| simulated_cluster::start(&server, simulated_cluster::ClusterConfig { nodes, ..Default::default() }));
    handle.write_kubeconfig(&path)?;
    println!("serving on {} (kubeconfig: {path}, nodes: {nodes})", handle.url());
    tokio::signal::ctrl_c().await?;
    if let Some(c) = cluster {
        c.stop().await;
    }
    handle.shutdown().await;
    Ok(())
}
