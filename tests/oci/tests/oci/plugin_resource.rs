//! A `Plugin` object whose source is a registry reference: the Python hello
//! plugin pushed with `host push` runs from it, `kubectl get plugins` shows
//! its digest and Ready, and a moved tag is swapped in at `pollInterval`.

use std::time::Duration;

use oci_tests::{Host, Registry, Tools, eventually_within, ok, plugin, sha256};

fn plugin_object(reference: &str) -> String {
    format!(
        "apiVersion: plugins.operator-host.dev/v1alpha1\nkind: Plugin\nmetadata:\n  name: hello\nspec:\n  source:\n    oci: {{reference: \"{reference}\", pollInterval: 1s}}\n"
    )
}

/// The row of `kubectl get plugins` for `hello` once it is Ready with the
/// component whose SHA-256 is `component`.
fn ready_row(host: &Host, tools: &Tools, component: &str) -> Vec<String> {
    let kubectl = host.kubectl(tools);
    eventually_within(&format!("`kubectl get plugins` to show hello Ready at sha256:{}", &component[..12]), Duration::from_secs(120), || {
        let out = kubectl.run(&["get", "plugins"]);
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        let header: Vec<&str> = table.lines().next()?.split_whitespace().collect();
        assert_eq!(header, ["NAME", "VERSION", "DIGEST", "CONTRACT", "TIER", "STATE", "READY", "AGE"], "{table}");
        let row: Vec<String> = table.lines().find(|l| l.starts_with("hello "))?.split_whitespace().map(String::from).collect();
        // Columns of a status not written yet are blank.
        (row.len() == header.len() && row[2] == format!("sha256:{}", &component[..12]) && row[6] == "True").then_some(row)
    })
}

#[test]
fn a_plugin_object_runs_a_registry_plugin_and_kubectl_get_plugins_shows_its_digest_and_ready() {
    let Some(tools) = Tools::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start(&tools, dir.path());
    let v1 = registry.oci("hello:v1");
    ok(&tools.host, &["push", plugin("hello-py").to_str().unwrap(), &v1], &[]);
    let (py, rust) = (component_digest("hello-py"), component_digest("hello"));

    let cache = dir.path().join("oci-cache");
    let mut host = Host::start(&tools, dir.path(), "host", &["--plugin-resources", "--oci-cache-dir", cache.to_str().unwrap()]);
    let kubectl = host.kubectl(&tools);
    eventually_within("the Plugin CRD served", Duration::from_secs(60), || {
        kubectl.run_stdin(&["apply", "-f", "-"], Some(plugin_object(&v1).as_bytes())).status.success().then_some(())
    });
    let row = ready_row(&host, &tools, &py);
    assert_eq!(row[5], "Serving", "{row:?}");
    host.serves(&tools, "Hi");

    // The tag moves to the Rust build: pulled at pollInterval and swapped in.
    ok(&tools.host, &["push", plugin("hello").to_str().unwrap(), &v1], &[]);
    ready_row(&host, &tools, &rust);
    host.serves(&tools, "Bonjour");

    // And back to the Python build.
    ok(&tools.host, &["push", plugin("hello-py").to_str().unwrap(), &v1], &[]);
    ready_row(&host, &tools, &py);
    host.serves(&tools, "Ciao");
    assert!(host.process.exited().is_none(), "the host exited:\n{}", host.process.log_tail(40));
}

/// The hex SHA-256 of a test plugin's component: what `status.digest` names.
fn component_digest(name: &str) -> String {
    sha256(&std::fs::read(plugin(name)).unwrap()).trim_start_matches("sha256:").to_string()
}
