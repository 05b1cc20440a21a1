//! `host status` against a running host: the embedded cluster with the
//! CronJob plugin (which reconciles) and a build of the hot-swap test plugin
//! that panics on every reconcile, so both a healthy and a failing plugin
//! show; the JSON a script reads and the table a person reads.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{Running, poll};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

fn host() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_host"));
    c.env("HOST_LOG", "warn").arg("--plugin-cache-dir").arg(common::plugin_cache_dir("status"));
    c
}

/// `host status` as a user types it; stdout, or the failure's stderr.
fn status(addr: &str, json: bool) -> Result<String, String> {
    let mut c = host();
    c.args(["status", "--metrics-addr", addr]);
    if json {
        c.args(["-o", "json"]);
    }
    let out = c.output().unwrap();
    if out.status.success() { Ok(String::from_utf8(out.stdout).unwrap()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

fn inspected_digest(plugin: &Path) -> String {
    let out = host().arg("inspect").arg(plugin).args(["-o", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["info"]["digest"].as_str().unwrap().to_string()
}

/// A client of the embedded cluster, from the kubeconfig `--kubeconfig-out` wrote.
pub(crate) async fn client(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Creates `object` in `default`, retrying while its CRD is not served yet.
pub(crate) async fn create(client: &kube::Client, group: &str, kind: &str, plural: &str, object: Value) {
    let gvk = kube::api::GroupVersionKind::gvk(group, "v1", kind);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk_with_plural(&gvk, plural));
    let deadline = Instant::now() + Duration::from_secs(60);
    // The CRDs are installed by the host as it starts: wait for them to serve.
    loop {
        match api.create(&PostParams::default(), &serde_json::from_value(object.clone()).unwrap()).await {
            Ok(_) => return,
            Err(e) if Instant::now() < deadline => {
                eprintln!("creating {kind}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("creating {kind}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_status_shows_each_plugins_version_state_queue_reconciles_and_last_error() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (cronjob, broken) = (common::built_plugin("cronjob"), common::built_plugin("versioned-broken"));
    let mut c = host();
    c.args(["run", "--embedded", "--metrics-addr", "127.0.0.1:0", "--kubeconfig-out"]).arg(&kubeconfig);
    c.arg("--plugin").arg(&cronjob).arg("--plugin").arg(&broken);
    let r = Running::start(c);
    let addr = r.line_with("metrics at http://").trim_start_matches("metrics at http://").trim_end_matches("/metrics").to_string();
    r.line_with("export KUBECONFIG=");

    let client = client(&kubeconfig).await;
    let sample: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(common::workspace_root().join("deploy/samples/batch_v1_cronjob.yaml")).unwrap()).unwrap();
    create(&client, "batch.tutorial.kubebuilder.io", "CronJob", "cronjobs", sample).await;
    let widget = json!({"apiVersion": "swap.test.operator-host.dev/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {}});
    create(&client, "swap.test.operator-host.dev", "Widget", "widgets", widget).await;

    let doc: Value = tokio::task::spawn_blocking(move || {
        poll("host status to show a reconcile of each plugin and the broken one's error", || {
            let doc: Value = serde_json::from_str(&status(&addr, true).ok()?).unwrap();
            let by = |name: &str| doc["plugins"].as_array().unwrap().iter().find(|p| p["name"] == name).cloned();
            let ok = by("cronjob")?["total"]["reconciles"].as_u64()? >= 1 && by("versioned")?["lastError"].is_object();
            ok.then_some((doc, addr.clone()))
        })
    })
    .await
    .map(|(doc, addr)| {
        // The table reads the same document.
        let table = status(&addr, false).unwrap();
        println!("{table}");
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("PLUGIN") && lines[0].contains("RECONCILES(5m)") && lines[0].contains("LAST ERROR"), "{table}");
        let row = |name: &str| {
            lines.iter().find(|l| l.split_whitespace().next() == Some(name)).copied().unwrap_or_else(|| panic!("no {name} row:\n{table}"))
        };
        assert!(row("cronjob").contains(" serving "), "{table}");
        assert!(row("versioned").contains(" 3.0.0 ") && row("versioned").contains("default/w1 PluginPanicked"), "{table}");
        assert!(table.contains("versioned: last error at "), "{table}");
        doc
    })
    .unwrap();

    assert_eq!(doc["apiVersion"], "operator-host.dev/status/v1");
    assert_eq!(doc["recentSeconds"], 300);
    let plugins = doc["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 2, "{doc:#}");
    let cron = plugins.iter().find(|p| p["name"] == "cronjob").unwrap();
    assert_eq!(cron["id"], cronjob.display().to_string());
    assert_eq!(cron["digest"], inspected_digest(&cronjob));
    assert_eq!(cron["parent"], "batch.tutorial.kubebuilder.io/v1 CronJob");
    assert_eq!(cron["state"], "serving");
    assert!(matches!(cron["tier"].as_str(), Some("baseline" | "optimized")), "{cron:#}");
    assert!(cron["contract"].as_str().is_some_and(|c| c.starts_with("0.")), "{cron:#}");
    assert!(cron["queue"]["adds"].as_u64().unwrap() >= 1, "{cron:#}");
    assert!(cron["recent"]["reconciles"].as_u64().unwrap() >= 1, "{cron:#}");
    assert_eq!(cron["recent"]["errors"], 0, "{cron:#}");
    assert!(cron["lastError"].is_null(), "{cron:#}");
    let broken_status = plugins.iter().find(|p| p["name"] == "versioned").unwrap();
    assert_eq!(broken_status["version"], "3.0.0");
    assert_eq!(broken_status["digest"], inspected_digest(&broken));
    assert!(broken_status["recent"]["errors"].as_u64().unwrap() >= 1, "{broken_status:#}");
    assert_eq!(broken_status["lastError"]["object"], "default/w1", "{broken_status:#}");
    assert_eq!(broken_status["lastError"]["reason"], "PluginPanicked", "{broken_status:#}");
    assert!(broken_status["lastError"]["message"].as_str().unwrap().contains("broken on purpose"), "{broken_status:#}");
}

#[test]
fn host_status_without_a_host_says_where_it_looked() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let err = status(&addr, true).unwrap_err();
    assert!(err.contains(&format!("cannot reach the host at {addr}")), "{err}");
}
