//! Hot swap as an operator does it: plugins shipped in a ConfigMap
//! (`kubectl create configmap --from-file`), then a changed build put in its
//! place; behaviour changes in the same host process, no restart. And a
//! safe upgrade: a candidate staged beside the running build, watched
//! through Events with `kubectl get events --watch`, promoted by annotation.

use e2e::{Host, built, eventually};

fn configmap_yaml(host: &Host, files: &[(&str, std::path::PathBuf)]) -> String {
    let mut args = vec!["create".to_string(), "configmap".into(), "plugins".into(), "--dry-run=client".into(), "-o".into(), "yaml".into()];
    args.extend(files.iter().map(|(key, path)| format!("--from-file={key}={}", path.display())));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    host.ok(&args)
}

#[test]
fn a_plugin_in_a_configmap_is_replaced_by_a_new_build_without_a_restart() {
    let host = Host::start_with(&["--plugin-configmap".into(), "default/plugins".into()]);
    let v1 = built("wasm32-wasip2/release/versioned.wasm");
    let v2 = built("plugins/versioned-v2.wasm");
    let cronjob = built("plugins/cronjob.wasm.gz");

    let first = configmap_yaml(&host, &[("cronjob.wasm", cronjob.clone()), ("widgets.wasm", v1)]);
    let o = host.kubectl_stdin(&["create", "-f", "-"], Some(&first));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    host.wait_for_crds(&["cronjobs.batch.tutorial.kubebuilder.io", "widgets.swap.test.operator-host.dev"]);
    host.apply("apiVersion: swap.test.operator-host.dev/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\nspec: {}\n");
    let version = || host.ok(&["get", "configmap", "-l", "widget=w", "-o", "jsonpath={.items[*].data.version}"]);
    eventually("the Widget's child from version 1", || (version() == "1").then_some(()));

    // A changed build replaces the key's bytes.
    let second = configmap_yaml(&host, &[("cronjob.wasm", cronjob), ("widgets.wasm", v2)]);
    let o = host.kubectl_stdin(&["replace", "-f", "-"], Some(&second));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    eventually("the Widget's child rewritten by version 2", || (version() == "2").then_some(()));
    let swapped = eventually("a PluginSwapped event on the ConfigMap", || {
        host.items(&["get", "events"]).into_iter().find(|e| e["involvedObject"]["name"] == "plugins" && e["reason"] == "PluginSwapped")
    });
    let note = swapped["message"].as_str().unwrap_or_default();
    assert!(note.contains("versioned 1.0.0") && note.contains("versioned 2.0.0"), "{note}");

    // A broken build is refused; version 2 keeps running and the Warning says so.
    let broken = host.scratch().join("broken.wasm");
    std::fs::write(&broken, b"not wasm at all").unwrap();
    let third = configmap_yaml(&host, &[("cronjob.wasm", built("plugins/cronjob.wasm.gz")), ("widgets.wasm", broken)]);
    let o = host.kubectl_stdin(&["replace", "-f", "-"], Some(&third));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let warning = eventually("a PluginRejected warning", || {
        host.items(&["get", "events"]).into_iter().find(|e| e["involvedObject"]["name"] == "plugins" && e["reason"] == "PluginRejected")
    });
    assert_eq!(warning["type"], "Warning");
    assert!(warning["message"].as_str().unwrap_or_default().contains("still running versioned 2.0.0"), "{warning}");
    host.apply("apiVersion: swap.test.operator-host.dev/v1\nkind: Widget\nmetadata:\n  name: w2\n  namespace: default\nspec: {}\n");
    eventually("a new Widget served by version 2", || {
        (host.ok(&["get", "configmap", "-l", "widget=w2", "-o", "jsonpath={.items[*].data.version}"]) == "2").then_some(())
    });
}

/// `kubectl get events --watch -o json` in the background: every Event it
/// prints, parsed, on a channel.
fn watch_events(host: &Host) -> (std::process::Child, std::sync::mpsc::Receiver<serde_json::Value>) {
    let mut child = host
        .kubectl_client()
        .command(&["get", "events", "-n", "default", "--watch", "-o", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("kubectl get events --watch");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for event in serde_json::Deserializer::from_reader(out).into_iter::<serde_json::Value>().map_while(Result::ok) {
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// The first watched Event on the plugins ConfigMap with `reason`.
fn next_event(events: &std::sync::mpsc::Receiver<serde_json::Value>, reason: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let e = events.recv_timeout(left).unwrap_or_else(|_| panic!("kubectl --watch showed no {reason} event"));
        if e["involvedObject"]["name"] == "plugins" && e["reason"] == reason {
            return e;
        }
    }
}

#[test]
fn a_candidate_staged_with_kubectl_is_shadowed_reported_in_events_and_promoted_by_annotation() {
    let host = Host::start_with(&["--plugin-configmap".into(), "default/plugins".into()]);
    let v1 = built("wasm32-wasip2/release/versioned.wasm");
    let v2 = built("plugins/versioned-v2.wasm");
    let o = host.kubectl_stdin(&["create", "-f", "-"], Some(&configmap_yaml(&host, &[("widgets.wasm", v1.clone())])));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    host.wait_for_crds(&["widgets.swap.test.operator-host.dev"]);
    host.apply("apiVersion: swap.test.operator-host.dev/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\nspec: {}\n");
    let version = |w: &str| host.ok(&["get", "configmap", "-l", &format!("widget={w}"), "-o", "jsonpath={.items[*].data.version}"]);
    eventually("the Widget's child from version 1", || (version("w") == "1").then_some(()));
    let (mut watch, events) = watch_events(&host);

    // Stage version 2 beside version 1.
    let staged = configmap_yaml(&host, &[("widgets.wasm", v1), ("widgets.wasm.candidate", v2)]);
    let o = host.kubectl_stdin(&["replace", "-f", "-"], Some(&staged));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let staged = next_event(&events, "PluginStaged");
    let note = staged["message"].as_str().unwrap_or_default().to_string();
    assert!(note.contains("candidate versioned 2.0.0") && note.contains("beside versioned 1.0.0"), "{note}");

    // A new parent is reconciled by version 1 and, in its shadow, by version 2.
    host.apply("apiVersion: swap.test.operator-host.dev/v1\nkind: Widget\nmetadata:\n  name: w2\n  namespace: default\nspec: {}\n");
    let differs = next_event(&events, "ShadowDiffers");
    assert_eq!(differs["type"], "Warning");
    let message = differs["message"].as_str().unwrap_or_default();
    assert!(message.contains("Widget default/w") && message.contains(r#""1" → "2""#), "the parent and the differing action: {message}");
    eventually("w2's child from version 1 (the candidate's writes are not executed)", || (version("w2") == "1").then_some(()));
    assert_eq!(version("w"), "1");

    // Promote it with the command the PluginStaged event gave.
    let promote = note.split_whitespace().find(|w| w.starts_with("operator-host.dev/promote=")).expect("the promote command").trim_end_matches('`');
    host.ok(&["annotate", "configmap", "plugins", "--overwrite", promote]);
    next_event(&events, "PluginSwapped");
    let promoted = next_event(&events, "PluginPromoted");
    assert!(promoted["message"].as_str().unwrap_or_default().contains("candidate versioned 2.0.0"), "{promoted}");
    eventually("every child rewritten by version 2", || (version("w") == "2" && version("w2") == "2").then_some(()));
    let _ = watch.kill();
    let _ = watch.wait();
}

/// `bytes` with a custom section appended: another digest, the same code.
fn rebuilt(mut bytes: Vec<u8>) -> Vec<u8> {
    let (name, payload) = (b"rebuilt", b"same behaviour, other bytes");
    bytes.extend_from_slice(&[0, (1 + name.len() + payload.len()) as u8, name.len() as u8]);
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(payload);
    bytes
}

#[test]
fn a_candidate_file_beside_a_watched_plugin_is_promoted_by_renaming_it_after_agreeing_reconciles() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("widgets.wasm");
    let candidate = dir.path().join("widgets.wasm.candidate");
    let v1 = std::fs::read(built("wasm32-wasip2/release/versioned.wasm")).unwrap();
    std::fs::write(&plugin, &v1).unwrap();
    let args: Vec<String> = ["--plugin", &plugin.display().to_string(), "--watch", "--watch-interval", "100ms", "--shadow-promote-after", "4"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let host = Host::start_with(&args);
    host.wait_for_crds(&["widgets.swap.test.operator-host.dev"]);
    let same = rebuilt(v1.clone());
    std::fs::write(&candidate, &same).unwrap();
    // Time for the watch to stage it (it must hold still for one interval).
    std::thread::sleep(std::time::Duration::from_millis(1000));
    for i in 0..6 {
        host.apply(&format!("apiVersion: swap.test.operator-host.dev/v1\nkind: Widget\nmetadata:\n  name: f{i}\n  namespace: default\nspec: {{}}\n"));
    }
    eventually("the candidate renamed over the plugin", || (!candidate.exists() && std::fs::read(&plugin).unwrap() == same).then_some(()));
    let version = |w: &str| host.ok(&["get", "configmap", "-l", &format!("widget={w}"), "-o", "jsonpath={.items[*].data.version}"]);
    host.apply("apiVersion: swap.test.operator-host.dev/v1\nkind: Widget\nmetadata:\n  name: after\n  namespace: default\nspec: {}\n");
    eventually("a Widget served after the promotion", || (version("after") == "1").then_some(()));
}
