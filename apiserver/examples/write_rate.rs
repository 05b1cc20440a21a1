//! Writes per second through the in-process API, in memory and with a data directory (one
//! fsync per acknowledged write): `cargo run --release -p apiserver --example write_rate -- [DIR] [WRITES] [WRITERS]`.
//! DIR is where the temporary data directory goes (default: the system temp dir; use a
//! directory on the disk you care about, /tmp may be a RAM disk).

use apiserver::{ApiServer, Config};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use std::time::Instant;

async fn rate(server: ApiServer, writes: usize, writers: usize) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
            tokio::spawn(async move {
                for i in 0..writes / writers {
                    let cm = serde_json::from_value(serde_json::json!({"metadata": {"name": format!("w{w}-{i}")}, "data": {"k": "v".repeat(200)}}))
                        .unwrap();
                    cms.create(&PostParams::default(), &cm).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    writes as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let base = args.next().map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let writes: usize = args.next().map(|a| a.parse().expect("WRITES is a number")).unwrap_or(2000);
    let writers: usize = args.next().map(|a| a.parse().expect("WRITERS is a number")).unwrap_or(4);
    let memory = rate(ApiServer::new(), writes, writers).await;
    let dir = tempfile::tempdir_in(&base).unwrap();
    let persisted = rate(ApiServer::with_data_dir(Config::default(), dir.path()).unwrap(), writes, writers).await;
    println!("{writes} creates, {writers} writers: in memory {memory:.0}/s, --data-dir on {} {persisted:.0}/s", base.display());
}
