//! Hot swap as an operator does it: plugins shipped in a ConfigMap
//! (`kubectl create configmap --from-file`), then a changed build put in its
//! place; behaviour changes in the same host process, no restart.

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
