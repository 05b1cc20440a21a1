//! The garbage collector over a persisted store: what was left to collect while no controller
//! ran is collected once one starts.

use crate::common;
use apiserver::{ApiServer, Config};
use serde_json::{Value, json};
use simulated_cluster::ClusterConfig;
use std::path::Path;

fn open(dir: &Path) -> ApiServer {
    ApiServer::with_data_dir(Config::default(), dir).expect("data dir opens")
}

/// Open again after a server in this process was dropped: its in-process clients' background
/// tasks may hold the last reference (and the file) for a moment.
async fn reopen(dir: &Path) -> ApiServer {
    for _ in 0..500 {
        match ApiServer::with_data_dir(Config::default(), dir) {
            Ok(s) => return s,
            Err(apiserver::PersistError::Open { source: redb::DatabaseError::DatabaseAlreadyOpen, .. }) => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await
            }
            Err(e) => panic!("reopen: {e}"),
        }
    }
    panic!("the previous server still holds the data file");
}

#[tokio::test]
async fn dependents_of_an_owner_deleted_before_a_restart_are_collected_by_the_collector_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let cm = |name: &str, owner: Option<&Value>| {
        let mut body = json!({"metadata": {"name": name}});
        if let Some(o) = owner {
            body["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]}]);
        }
        body
    };
    const CMS: &str = "/api/v1/namespaces/default/configmaps";
    {
        // The host is "down": no cluster parts run next to this server.
        let server = open(dir.path());
        let (_, parent) = common::post(&server, CMS, cm("parent", None)).await;
        let (_, child) = common::post(&server, CMS, cm("child", Some(&parent))).await;
        assert_eq!(common::post(&server, CMS, cm("grandchild", Some(&child))).await.0, 201);
        assert_eq!(common::delete(&server, &format!("{CMS}/parent"), None).await.0, 200);
    }
    {
        let server = reopen(dir.path()).await;
        assert_eq!(common::get(&server, &format!("{CMS}/grandchild")).await.0, 200, "nothing collected while down");
        let cluster = simulated_cluster::start(&server, ClusterConfig { nodes: 0, jobs: false, ..Default::default() });
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while common::get(&server, &format!("{CMS}/child")).await.0 != 404 || common::get(&server, &format!("{CMS}/grandchild")).await.0 != 404 {
            assert!(tokio::time::Instant::now() < deadline, "the dependents are still there");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        cluster.stop().await;
    }
    let server = reopen(dir.path()).await;
    assert_eq!(common::get(&server, &format!("{CMS}/child")).await.0, 404, "the collection was persisted");
}
