//! Persistence (`ApiServer::with_data_dir`): the store survives a restart, every acknowledged
//! write survives `kill -9`, a damaged file is refused with a clear error, and a write that
//! cannot be persisted is refused rather than acknowledged.

use crate::common;

use apiserver::store::{Backend, BackendError, Event};
use apiserver::{ApiServer, Config, RedbBackend};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

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

fn crontabs(client: kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("stable.example.com", "v1", "CronTab"), "crontabs");
    Api::namespaced_with(client, "default", &ar)
}

#[tokio::test]
async fn a_restart_keeps_objects_crds_and_resource_versions() {
    let dir = tempfile::tempdir().unwrap();
    let (last_rv, old_rv) = {
        let server = open(dir.path());
        assert_eq!(common::post(&server, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", common::crontab_crd()).await.0, 201);
        let cts = crontabs(server.kube_client());
        let ct: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "nightly"}, "spec": {"cronSpec": "0 0 * * *"}}),
        )
        .unwrap();
        cts.create(&PostParams::default(), &ct).await.unwrap();
        let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
        let first = cms
            .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "keep"}, "data": {"a": "1"}})).unwrap())
            .await
            .unwrap();
        let old_rv = first.metadata.resource_version.unwrap();
        let mut keep = cms.get("keep").await.unwrap();
        keep.data = Some([("a".to_string(), "2".to_string())].into());
        cms.replace("keep", &PostParams::default(), &keep).await.unwrap();
        cms.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "gone"}})).unwrap()).await.unwrap();
        cms.delete("gone", &DeleteParams::default()).await.unwrap();
        (server.core().store.current_rv(), old_rv)
    };

    let server = reopen(dir.path()).await;
    assert_eq!(server.core().store.current_rv(), last_rv, "the resourceVersion continues");
    let cms: Api<ConfigMap> = Api::namespaced(server.kube_client(), "default");
    let keep = cms.get("keep").await.unwrap();
    assert_eq!(keep.data.unwrap()["a"], "2");
    assert!(cms.get_opt("gone").await.unwrap().is_none(), "a delete is persisted too");
    let ct = crontabs(server.kube_client()).get("nightly").await.expect("the CRD serves its resource again");
    assert_eq!(ct.data["spec"]["cronSpec"], "0 0 * * *");
    let created = cms.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "new"}})).unwrap()).await.unwrap();
    assert!(created.metadata.resource_version.unwrap().parse::<u64>().unwrap() > last_rv);
    // Watches do not survive a restart: resuming from before it is 410, as upstream.
    let (code, body) = common::call(
        &server,
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={old_rv}&timeoutSeconds=1"),
        "",
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!((body["type"].as_str(), body["object"]["code"].as_u64()), (Some("ERROR"), Some(410)), "{body}");
    assert_eq!(common::get(&server, "/api/v1/namespaces").await.1["items"].as_array().unwrap().len(), 4, "system namespaces are not created twice");
}

fn write_some(dir: &Path, marker: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let server = open(dir);
        for i in 0..20 {
            let (code, _) = common::post(
                &server,
                "/api/v1/namespaces/default/configmaps",
                json!({"metadata": {"name": format!("cm-{i}")}, "data": {"marker": marker}}),
            )
            .await;
            assert_eq!(code, 201);
        }
    });
}

fn flip_every(path: &Path, needle: &[u8]) -> usize {
    let mut bytes = std::fs::read(path).unwrap();
    let mut hits = 0;
    let mut i = 0;
    while i + needle.len() <= bytes.len() {
        if &bytes[i..i + needle.len()] == needle {
            bytes[i + needle.len() / 2] ^= 0x20;
            hits += 1;
        }
        i += 1;
    }
    std::fs::write(path, bytes).unwrap();
    hits
}

#[test]
fn a_damaged_data_file_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    write_some(dir.path(), "precious-marker-value");
    let file = dir.path().join(apiserver::PERSIST_FILE_NAME);
    assert!(flip_every(&file, b"precious-marker-value") > 0, "the object is in the file");
    let err = RedbBackend::open(dir.path()).expect_err("a damaged file is not loaded").to_string();
    assert!(err.contains("store.redb"), "{err}");
    assert!(err.contains("corrupt") || err.contains("Corrupt") || err.contains("checksum"), "{err}");
    assert!(err.contains("move it away"), "says what to do: {err}");
    println!("{err}");
}

#[test]
fn a_truncated_or_foreign_data_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_some(dir.path(), "x");
    let file = dir.path().join(apiserver::PERSIST_FILE_NAME);
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(len / 3).unwrap();
    let err = RedbBackend::open(dir.path()).expect_err("a truncated file is not loaded").to_string();
    assert!(err.contains("store.redb"), "{err}");

    std::fs::write(&file, b"{\"not\": \"a redb file\"}").unwrap();
    let err = RedbBackend::open(dir.path()).expect_err("a foreign file is not loaded").to_string();
    assert!(err.contains("cannot open data file") && err.contains("store.redb"), "{err}");
}

/// Refuses every write after the first `allowed`.
struct FailingAfter {
    allowed: usize,
    seen: Arc<AtomicUsize>,
}

impl Backend for FailingAfter {
    fn record(&self, _event: &Event) -> Result<(), BackendError> {
        if self.seen.fetch_add(1, Ordering::SeqCst) < self.allowed { Ok(()) } else { Err(BackendError("disk full".into())) }
    }
}

#[tokio::test]
async fn a_write_that_cannot_be_persisted_is_refused_not_acknowledged() {
    // What a fresh server writes first (namespaces, their defaults, the bootstrap objects) is
    // allowed; counted on a server that refuses nothing.
    let bootstrap = Arc::new(AtomicUsize::new(0));
    let _counted = ApiServer::with_backend(Config::default(), Box::new(FailingAfter { allowed: usize::MAX, seen: bootstrap.clone() }));
    let allowed = bootstrap.load(Ordering::SeqCst);
    let server = ApiServer::with_backend(Config::default(), Box::new(FailingAfter { allowed, seen: Arc::new(AtomicUsize::new(0)) }));
    let (code, body) = common::post(&server, "/api/v1/namespaces/default/configmaps", json!({"metadata": {"name": "a"}})).await;
    assert_eq!(code, 500, "{body}");
    assert_eq!(body["reason"], "InternalError");
    assert!(body["message"].as_str().unwrap().contains("could not be persisted: disk full"), "{body}");
    assert_eq!(common::get(&server, "/api/v1/namespaces/default/configmaps/a").await.0, 404);
    let (code, body) = common::put(&server, "/api/v1/namespaces/default", json!({"metadata": {"name": "default", "labels": {"x": "y"}}})).await;
    assert_eq!(code, 500, "updates too: {body}");
    assert_eq!(common::delete(&server, "/api/v1/namespaces/kube-public", None).await.0, 500, "and deletes");
    assert!(common::get(&server, "/api/v1/namespaces/kube-public").await.1["metadata"]["deletionTimestamp"].is_null());
}

// ---- kill -9 during a write burst ----------------------------------------------------------

const CHILD_DIR: &str = "APISERVER_PERSIST_CHILD_DIR";

/// Not a test on its own: the child process of the kill -9 test (this test binary run again
/// with `CHILD_DIR` set) serves a data dir over HTTP until it is killed.
#[test]
fn child_serving_a_data_dir_until_killed() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let server = open(Path::new(&dir));
        let handle = server.serve().await.unwrap();
        // The URL goes to a file, written whole then renamed (the parent polls for it).
        let tmp = Path::new(&dir).join("url.tmp");
        std::fs::write(&tmp, handle.url()).unwrap();
        std::fs::rename(&tmp, Path::new(&dir).join("url")).unwrap();
        std::future::pending::<()>().await;
    });
}

fn payload(writer: usize, seq: usize) -> String {
    // Sizes vary so writes span several pages now and then.
    let len = 64 + (writer * 977 + seq * 131) % 6000;
    format!("{writer}:{seq}:").repeat(len / 8 + 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_survives_kill_9_and_nothing_is_half_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["persist::child_serving_a_data_dir_until_killed", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url_file = dir.path().join("url");
    let mut waited = 0;
    while !url_file.exists() {
        assert!(waited < 6000, "the child did not start serving within 60 s");
        assert!(child.try_wait().unwrap().is_none(), "the child exited");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        waited += 1;
    }
    let url = std::fs::read_to_string(&url_file).unwrap();
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();

    // Writers: each creates its own objects and updates one counter object, recording every
    // write the server acknowledged (name → last acknowledged sequence number).
    const WRITERS: usize = 4;
    let acked: Arc<std::sync::Mutex<Vec<(String, usize)>>> = Arc::default();
    let total = Arc::new(AtomicUsize::new(0));
    let mut tasks = vec![];
    for w in 0..WRITERS {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let (acked, total) = (acked.clone(), total.clone());
        tasks.push(tokio::spawn(async move {
            let counter = format!("counter-{w}");
            let obj = |name: &str, seq: usize| {
                serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": name}, "data": {"seq": seq.to_string(), "payload": payload(w, seq)}}))
                    .unwrap()
            };
            if cms.create(&PostParams::default(), &obj(&counter, 0)).await.is_err() {
                return;
            }
            acked.lock().unwrap().push((counter.clone(), 0));
            for seq in 1.. {
                let name = format!("w{w}-{seq}");
                if cms.create(&PostParams::default(), &obj(&name, seq)).await.is_err() {
                    return;
                }
                acked.lock().unwrap().push((name, seq));
                // Replace without a resourceVersion: this writer is the counter's only writer.
                if cms.replace(&counter, &PostParams::default(), &obj(&counter, seq)).await.is_err() {
                    return;
                }
                acked.lock().unwrap().push((counter.clone(), seq));
                total.fetch_add(2, Ordering::SeqCst);
            }
        }));
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(120);
    while total.load(Ordering::SeqCst) < 150 {
        assert!(tokio::time::Instant::now() < deadline, "the writers made no progress");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    child.kill().unwrap(); // SIGKILL, mid-burst
    child.wait().unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 150);

    // Restart on the same directory (a new process would do the same: the lock died with the child).
    let server = open(dir.path());
    let (items, _) =
        server.core().store.list(&apiserver::resources::GroupResource { group: "".into(), resource: "configmaps".into() }, Some("default"));
    let stored: std::collections::HashMap<String, Value> =
        items.into_iter().map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o)).collect();
    let mut last: std::collections::HashMap<String, usize> = Default::default();
    for (name, seq) in &acked {
        last.insert(name.clone(), *seq);
    }
    for (name, seq) in &last {
        let obj = stored.get(name).unwrap_or_else(|| panic!("acknowledged {name} is lost"));
        let got: usize = obj["data"]["seq"].as_str().unwrap().parse().unwrap();
        // A write in flight at the kill may have been committed without its answer arriving.
        assert!(got == *seq || got == seq + 1, "{name}: acknowledged seq {seq}, stored {got}");
    }
    for (name, obj) in &stored {
        let Some(w) = name.strip_prefix("w").or_else(|| name.strip_prefix("counter-")).and_then(|r| r.split('-').next()?.parse::<usize>().ok())
        else {
            continue;
        };
        let seq: usize = obj["data"]["seq"].as_str().unwrap().parse().unwrap();
        assert_eq!(obj["data"]["payload"].as_str().unwrap(), payload(w, seq), "{name} is complete");
    }
    let unacked = stored.keys().filter(|n| n.starts_with('w') && !last.contains_key(*n)).count();
    assert!(unacked <= WRITERS, "at most one unacknowledged create per writer: {unacked}");
    println!("{} acknowledged writes before kill -9, all present after restart", acked.len());
}
