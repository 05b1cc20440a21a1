//! A real Prometheus (Debian's `prometheus` package, which `cargo xtask
//! test` installs) scrapes a running host and evaluates the shipped rules;
//! PromQL over its HTTP API then returns what the host did. The server runs
//! on loopback with a temporary config and data directory, and is stopped
//! when the test ends, however it ends.

use crate::common;
use crate::status::{client, create};

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::process::Running;
use serde_json::Value;

/// A Prometheus server; killed on drop.
struct Prometheus {
    child: Child,
    addr: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `prometheus` on PATH, or `None` after saying loudly that the test is
/// skipped (`cargo xtask test` installs it and sets PROMETHEUS_REQUIRED).
fn prometheus_binary() -> Option<&'static str> {
    if Command::new("prometheus").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Some("prometheus");
    }
    assert!(std::env::var_os("PROMETHEUS_REQUIRED").is_none(), "prometheus is not on PATH, although cargo xtask installed it");
    eprintln!("SKIPPED: prometheus is not installed (apt-get install prometheus, or run cargo xtask test)");
    None
}

impl Prometheus {
    /// Scrapes `target` every second as job `operator-host`, evaluating `rules` every second.
    fn start(program: &str, dir: &Path, target: &str, rules: &Path) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n- {}\nscrape_configs:\n- job_name: operator-host\n  static_configs:\n  - targets: ['{target}']\n",
                rules.display()
            ),
        )
        .unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(program)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Prometheus { child, addr }
    }
}

/// The `data.result` of an instant query at the server `addr`, or `None` while it is not up.
fn query(addr: &str, promql: &str) -> Option<Vec<Value>> {
    let path = format!("/api/v1/query?query={}", percent_encoded(promql));
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let body = text.split_once("\r\n\r\n")?.1;
    let doc: Value = serde_json::from_str(body).ok()?;
    assert_eq!(doc["status"], "success", "{promql}: {doc}");
    doc["data"]["result"].as_array().cloned()
}

/// The one sample's value of `promql`, if it has exactly one.
fn value(addr: &str, promql: &str) -> Option<f64> {
    let result = query(addr, promql)?;
    let [sample] = result.as_slice() else { return None };
    sample["value"][1].as_str()?.parse().ok()
}

fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_host_and_promql_counts_the_cronjobs_reconciles() {
    let Some(program) = prometheus_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut c = Command::new(env!("CARGO_BIN_EXE_host"));
    c.env("HOST_LOG", "warn").arg("--plugin-cache-dir").arg(common::plugin_cache_dir("prometheus"));
    c.args(["run", "--embedded", "--metrics-addr", "127.0.0.1:0", "--kubeconfig-out"]).arg(&kubeconfig);
    c.arg("--plugin").arg(common::built_plugin("cronjob"));
    let host = Running::start(c);
    let target = host.line_with("metrics at http://").trim_start_matches("metrics at http://").trim_end_matches("/metrics").to_string();
    host.line_with("export KUBECONFIG=");

    let rules = common::workspace_root().join("deploy/prometheus/rules.yaml");
    let prometheus = Prometheus::start(program, dir.path(), &target, &rules);
    let addr = prometheus.addr.clone();
    let reconciles = "sum(controller_runtime_reconcile_total{job=\"operator-host\", controller=\"cronjob\"})";
    let before = tokio::task::spawn_blocking(move || {
        wait_for("Prometheus to scrape the host", || (value(&addr, "up{job=\"operator-host\"}")? == 1.0).then_some(()));
        value(&addr, reconciles).unwrap_or(0.0)
    })
    .await
    .unwrap();
    assert_eq!(before, 0.0, "no CronJob exists yet, so nothing was reconciled");

    let client = client(&kubeconfig).await;
    let sample: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(common::workspace_root().join("deploy/samples/batch_v1_cronjob.yaml")).unwrap()).unwrap();
    create(&client, "batch.tutorial.kubebuilder.io", "CronJob", "cronjobs", sample).await;

    let addr = prometheus.addr.clone();
    tokio::task::spawn_blocking(move || {
        let counted = wait_for("PromQL to count the CronJob's reconciles", || value(&addr, reconciles).filter(|v| *v >= 1.0));
        let adds = value(&addr, "sum(workqueue_adds_total{job=\"operator-host\", name=\"cronjob\"})").unwrap();
        assert!(adds >= 1.0, "the CronJob was queued: {adds}");
        // The shipped recording rule, evaluated over what was scraped: NaN
        // (0/0) until the counter grew between two scrapes, which the
        // CronJob's next run (every minute) makes it do; then 0, none failed.
        let ratio = wait_for("the error-ratio recording rule over two reconciles", || {
            value(&addr, "operator_host:reconcile_errors:ratio_rate5m{controller=\"cronjob\"}").filter(|r| !r.is_nan())
        });
        assert_eq!(ratio, 0.0);
        println!("PromQL {reconciles} = {counted}; workqueue adds {adds}; error ratio {ratio}");
    })
    .await
    .unwrap();
    drop(prometheus);
    drop(host);
}
