//! `host run --plugin oci://127.0.0.1:PORT/hello-py:v1 --plugin-resources`:
//! the plugin given by flag is published as a Plugin object, so real
//! `kubectl get plugins` shows its digest, Serving and Ready True; each
//! refused version (a layer of the wrong media type, a manifest that does
//! not hash to its digest, a registry that is down) turns Ready False with
//! the message and is a Warning Event on that object, while the old version
//! keeps serving; the registry back with the tag on a good version, Ready is
//! True again.

use std::time::Duration;

use oci_tests::{Host, Registry, Tools, digest_line, eventually_within, ok, plugin, sha256};
use serde_json::Value;

const NAME: &str = "hello-py";

/// The `hello-py` row of `kubectl get plugins` once `ok` holds for it.
fn row(host: &Host, tools: &Tools, what: &str, ok: impl Fn(&[String]) -> bool) -> Vec<String> {
    let kubectl = host.kubectl(tools);
    eventually_within(&format!("`kubectl get plugins`: {what}"), Duration::from_secs(120), || {
        let out = kubectl.run(&["get", "plugins"]);
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        let header: Vec<&str> = table.lines().next()?.split_whitespace().collect();
        assert_eq!(header, ["NAME", "VERSION", "DIGEST", "CONTRACT", "TIER", "STATE", "READY", "AGE"], "{table}");
        let row: Vec<String> = table.lines().find(|l| l.starts_with(&format!("{NAME} ")))?.split_whitespace().map(String::from).collect();
        (row.len() == header.len() && ok(&row)).then_some(row)
    })
}

/// The object's Ready condition once its message contains `needle` (and it is False).
fn not_ready_with(host: &Host, tools: &Tools, needle: &str) -> Value {
    let kubectl = host.kubectl(tools);
    eventually_within(&format!("Plugin {NAME} Ready=False saying {needle:?}"), Duration::from_secs(90), || {
        let out = kubectl.run(&["get", "plugin", NAME, "-o", "json"]);
        let o: Value = serde_json::from_slice(&out.stdout).ok()?;
        let ready = o["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")?.clone();
        (ready["status"] == "False" && ready["message"].as_str()?.contains(needle)).then_some(ready)
    })
}

/// A Warning Event about the object whose note contains `needle`.
fn warned(host: &Host, tools: &Tools, needle: &str) -> Value {
    let kubectl = host.kubectl(tools);
    eventually_within(&format!("a Warning Event on Plugin {NAME} saying {needle:?}"), Duration::from_secs(60), || {
        let out = kubectl.run(&["get", "events.events.k8s.io", "-A", "-o", "json"]);
        let list: Value = serde_json::from_slice(&out.stdout).ok()?;
        list["items"]
            .as_array()?
            .iter()
            .find(|e| {
                e["regarding"]["kind"] == "Plugin"
                    && e["regarding"]["name"] == NAME
                    && e["type"] == "Warning"
                    && e["note"].as_str().is_some_and(|n| n.contains(needle))
            })
            .cloned()
    })
}

#[test]
fn a_plugin_given_by_flag_is_published_and_kubectl_get_plugins_shows_its_digest_ready_and_refusals() {
    let Some(tools) = Tools::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut registry = Registry::start(&tools, dir.path());
    let v1 = registry.oci("hello-py:v1");
    let manifest = digest_line(&ok(&tools.host, &["push", plugin("hello-py").to_str().unwrap(), &v1], &[]));
    let component = sha256(&std::fs::read(plugin("hello-py")).unwrap());
    let short = &component[..("sha256:".len() + 12)];

    let cache = dir.path().join("oci-cache");
    let args = ["--plugin", &v1, "--plugin-resources", "--oci-poll-interval", "300ms", "--oci-cache-dir", cache.to_str().unwrap()];
    let mut host = Host::start(&tools, dir.path(), "host", &args);
    let r = row(&host, &tools, "hello-py Ready", |r| r[2] == short && r[6] == "True");
    assert_eq!(r[5], "Serving", "{r:?}");
    host.serves(&tools, "Hi");

    // Marked as the host's, naming the flag; never read back as input.
    let kubectl = host.kubectl(&tools);
    let o: Value = serde_json::from_slice(&kubectl.run(&["get", "plugin", NAME, "-o", "json"]).stdout).unwrap();
    assert_eq!(o["metadata"]["labels"]["operator-host.dev/published-by"], "host", "{o:#}");
    assert_eq!(o["metadata"]["annotations"]["operator-host.dev/source"], format!("--plugin {v1}"), "{o:#}");
    assert_eq!(o["spec"]["source"]["oci"]["reference"], v1.as_str());
    assert!(!host.log().contains(&format!("plugin/{NAME}")), "the published object was read back as a Plugin:\n{}", host.log());

    // A layer of the wrong media type.
    let tar = dir.path().join("layer.tar");
    std::fs::write(&tar, b"not a plugin").unwrap();
    let home = [("HOME", dir.path().to_str().unwrap())];
    let layer = format!("{}:application/vnd.oci.image.layer.v1.tar", tar.display());
    ok(&tools.oras, &["push", "--plain-http", "--disable-path-validation", &registry.plain("hello-py:v1"), &layer], &home);
    let why = "layer media type application/vnd.oci.image.layer.v1.tar is not a Wasm component";
    let ready = not_ready_with(&host, &tools, why);
    assert!(ready["message"].as_str().unwrap().contains("keeps serving"), "{ready:#}");
    warned(&host, &tools, why);
    let r = row(&host, &tools, "still the Python build, not Ready", |r| r[6] == "False");
    assert_eq!(r[2], short, "the old version still serves: {r:?}");
    host.serves(&tools, "Bonjour");

    // A manifest whose bytes do not hash to the digest the tag names.
    let other = digest_line(&ok(&tools.host, &["push", plugin("versioned-v2").to_str().unwrap(), &registry.oci("hello-py:other")], &[]));
    registry.tamper_manifest(&other);
    registry.point_tag("hello-py", "v1", &other);
    let why = format!("does not hash to {other}");
    not_ready_with(&host, &tools, &why);
    warned(&host, &tools, &why);

    // The registry is down.
    registry.stop();
    let why = format!("registry {}: ", registry.addr);
    not_ready_with(&host, &tools, &why);
    warned(&host, &tools, &why);
    host.serves(&tools, "Hallo");

    // Back up, the tag on the Python build again: Ready once more.
    registry.restart();
    registry.point_tag("hello-py", "v1", &manifest);
    row(&host, &tools, "hello-py Ready again", |r| r[2] == short && r[6] == "True");
    assert!(host.process.exited().is_none(), "the host exited:\n{}", host.process.log_tail(40));
}
