//! Admission through the real API server: the host serves its plugins'
//! `default`/`validate` as HTTPS webhooks and, with `--webhook-configure`,
//! writes the Mutating/ValidatingWebhookConfiguration itself with its
//! generated certificate's CA; the real kube-apiserver then calls it. A bad
//! CronJob is refused with the plugin's message, a good one is defaulted,
//! and with the host stopped the failure policy decides: `Fail` refuses,
//! `Ignore` admits unchecked.

use std::process::Output;

use real_cluster::{ControlPlane, HostProcess, Kubectl, Value, built, eventually, free_port};

use crate::common::{CRONJOB_CRD, wait_for_crds};

/// The cronjob plugin's webhook (`<plural>.<group>`).
const WEBHOOK: &str = "cronjobs.batch.tutorial.kubebuilder.io";

/// The host with the cronjob plugin, serving its webhooks on a free port and
/// writing its webhook configurations with `policy`; ready.
fn host_configuring_its_webhooks(cluster: &ControlPlane, name: &str, policy: &str, extra: &[&str]) -> HostProcess {
    let port = free_port();
    let cronjob = built("plugins/cronjob.wasm").display().to_string();
    let addr = format!("127.0.0.1:{port}");
    let url = format!("https://127.0.0.1:{port}");
    let certs = cluster.dir().join(format!("{name}-certs")).display().to_string();
    let mut args = vec![
        "--plugin",
        &cronjob,
        "--webhook-addr",
        &addr,
        "--webhook-cert-dir",
        &certs,
        "--webhook-configure",
        "--webhook-url-base",
        &url,
        "--webhook-failure-policy",
        policy,
    ];
    args.extend(extra);
    let mut host = HostProcess::start(name, &cluster.kubeconfig, &cluster.dir().join("logs"), &args);
    host.wait_ready();
    host
}

fn cronjob(name: &str, schedule: &str) -> String {
    format!(
        "apiVersion: batch.tutorial.kubebuilder.io/v1\nkind: CronJob\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  schedule: \"{schedule}\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers: [{{name: hello, image: busybox}}]\n"
    )
}

/// `kubectl create -f -` (optionally `--dry-run=server`: admission runs, nothing is stored).
fn create(admin: &Kubectl, yaml: &str, dry_run: bool) -> Output {
    let mut args = vec!["create", "-f", "-"];
    if dry_run {
        args.push("--dry-run=server");
    }
    admin.run_stdin(&args, Some(yaml.as_bytes()))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Both configurations carry the cronjob webhook with `policy`, and the API
/// server calls it (a server-side dry run of a bad CronJob is refused: the
/// API server reads new configurations through an informer, a moment after
/// they are written).
fn wait_until_admission_is_on(admin: &Kubectl, policy: &str, host: &HostProcess) {
    eventually(&format!("the host's webhook configurations with failurePolicy {policy}"), || {
        let webhooks = |kind: &str| -> Option<Vec<Value>> {
            let out = admin.run(&["get", kind, "operator-host", "-o", "json"]);
            let object: Value = serde_json::from_slice(&out.stdout).ok()?;
            object["webhooks"].as_array().cloned()
        };
        let (m, v) = (webhooks("mutatingwebhookconfiguration")?, webhooks("validatingwebhookconfiguration")?);
        let ours = |w: &Vec<Value>| w.len() == 1 && w[0]["name"] == WEBHOOK && w[0]["failurePolicy"] == policy;
        (ours(&m) && ours(&v)).then_some(())
    });
    let refused = eventually("the API server calling the validating webhook", || {
        let out = create(admin, &cronjob("probe", "nope"), true);
        (!out.status.success()).then(|| stderr(&out))
    });
    assert!(refused.contains(&format!("admission webhook \"{WEBHOOK}\" denied the request")), "{refused}\nhost log:\n{}", host.log_tail(40));
}

#[test]
fn a_bad_cronjob_is_refused_by_the_real_api_server_with_the_plugins_message_and_a_good_one_is_defaulted() {
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let admin = cluster.admin();
    let host = host_configuring_its_webhooks(&cluster, "host", "Fail", &[]);
    wait_for_crds(&admin, &[CRONJOB_CRD]);
    wait_until_admission_is_on(&admin, "Fail", &host);

    let configuration = admin.json(&["get", "validatingwebhookconfiguration", "operator-host", "--show-managed-fields"]);
    let managers: Vec<&str> = configuration["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|f| f["manager"].as_str()).collect();
    assert_eq!(managers, ["operator-host"]);
    let ca = std::fs::read(cluster.dir().join("host-certs/generated/ca.crt")).unwrap();
    let bundle = configuration["webhooks"][0]["clientConfig"]["caBundle"].as_str().unwrap();
    assert_eq!(base64_decode(bundle), ca, "the caBundle is the host's generated certificate");

    let out = create(&admin, &cronjob("bad", "nope"), false);
    assert!(!out.status.success(), "a bad schedule was stored");
    let message = stderr(&out);
    assert!(message.contains(&format!("admission webhook \"{WEBHOOK}\" denied the request")), "{message}");
    assert!(message.contains("spec.schedule: Invalid value: \"nope\""), "the plugin's field error: {message}");
    assert!(!admin.run(&["get", "cronjobs.batch.tutorial.kubebuilder.io", "bad"]).status.success(), "nothing stored");

    let out = create(&admin, &cronjob("good", "*/5 * * * *"), false);
    assert!(out.status.success(), "{}", stderr(&out));
    let good = admin.json(&["get", "cronjobs.batch.tutorial.kubebuilder.io", "good"]);
    assert_eq!(good["spec"]["concurrencyPolicy"], "Allow", "defaulted by the mutating webhook: {good}");
    assert_eq!(good["spec"]["successfulJobsHistoryLimit"], 3);
    assert_eq!(good["spec"]["failedJobsHistoryLimit"], 1);
    assert_eq!(good["spec"]["suspend"], false);

    let out =
        admin.run_stdin(&["patch", "cronjobs.batch.tutorial.kubebuilder.io", "good", "--type=merge", "-p", r#"{"spec":{"schedule":"never"}}"#], None);
    assert!(
        !out.status.success() && stderr(&out).contains("spec.schedule: Invalid value: \"never\""),
        "an UPDATE is validated too: {}",
        stderr(&out)
    );
}

#[test]
fn with_the_host_down_fail_refuses_a_create_and_ignore_admits_it_unchecked() {
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let admin = cluster.admin();

    let mut host = host_configuring_its_webhooks(&cluster, "host-fail", "Fail", &[]);
    wait_for_crds(&admin, &[CRONJOB_CRD]);
    wait_until_admission_is_on(&admin, "Fail", &host);
    host.kill();
    let out = create(&admin, &cronjob("while-down", "*/5 * * * *"), false);
    assert!(!out.status.success(), "Fail: a create with the host down was stored");
    let message = stderr(&out);
    assert!(message.contains(&format!("failed calling webhook \"{WEBHOOK}\"")), "{message}");
    assert!(!admin.run(&["get", "cronjobs.batch.tutorial.kubebuilder.io", "while-down"]).status.success());

    // The same configurations, rewritten with Ignore by a host started with it.
    let mut host = host_configuring_its_webhooks(&cluster, "host-ignore", "Ignore", &[]);
    wait_until_admission_is_on(&admin, "Ignore", &host);
    host.kill();
    let out = create(&admin, &cronjob("while-down", "*/5 * * * *"), false);
    assert!(out.status.success(), "Ignore: the create is admitted with the host down: {}", stderr(&out));
    let stored = admin.json(&["get", "cronjobs.batch.tutorial.kubebuilder.io", "while-down"]);
    assert!(stored["spec"]["concurrencyPolicy"].is_null(), "admitted unchecked: no defaults applied: {stored}");
}

#[test]
fn a_webhook_that_answers_later_than_the_timeout_counts_as_failed() {
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let admin = cluster.admin();
    let mut host = host_configuring_its_webhooks(&cluster, "host", "Fail", &["--webhook-timeout", "2s"]);
    wait_for_crds(&admin, &[CRONJOB_CRD]);
    wait_until_admission_is_on(&admin, "Fail", &host);
    let configuration = admin.json(&["get", "mutatingwebhookconfiguration", "operator-host"]);
    assert_eq!(configuration["webhooks"][0]["timeoutSeconds"], 2);

    // SIGSTOP: the kernel still accepts connections on the port, nothing answers.
    let pid = host.process().pid().expect("the host runs").to_string();
    assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let started = std::time::Instant::now();
    let out = create(&admin, &cronjob("slow", "*/5 * * * *"), false);
    let took = started.elapsed();
    assert!(std::process::Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
    let message = stderr(&out);
    assert!(!out.status.success(), "Fail: a create the webhook did not answer in time was stored");
    assert!(message.contains(&format!("failed calling webhook \"{WEBHOOK}\"")), "{message}");
    assert!(message.contains("deadline exceeded") || message.contains("Timeout"), "refused for the timeout: {message}");
    assert!(took >= std::time::Duration::from_secs(2), "the API server waited the 2 s timeout (took {took:?})");
    eprintln!("a stopped host: the create was refused after {took:.1?} (timeoutSeconds 2)");
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).expect("base64")
}
