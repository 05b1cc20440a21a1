//! Interop with oras (the CNCF ORAS CLI, built from the Go module proxy):
//! what oras pushes in the CNCF layout or Kubewarden's older one, `host
//! pull` reads back byte for byte; what `host push` writes, oras reads back
//! byte for byte and sees in the CNCF layout.

use oci_tests::{Registry, Tools, digest_line, ok, plugin, sha256, text};

#[test]
fn oras_and_host_read_what_the_other_pushed() {
    let Some(tools) = Tools::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start(&tools, dir.path());
    let home = [("HOME", dir.path().to_str().unwrap())];
    let wasm = plugin("hello");
    let bytes = std::fs::read(&wasm).unwrap();
    // oras names a layer by the file's path: push from its directory.
    std::fs::copy(&wasm, dir.path().join("hello.wasm")).unwrap();
    std::fs::write(dir.path().join("config.json"), br#"{"architecture":"wasm","os":"wasip2"}"#).unwrap();
    let oras = |args: &[&str]| {
        let mut c = std::process::Command::new(&tools.oras);
        c.current_dir(dir.path()).args(args).env("HOME", dir.path());
        let out = c.output().unwrap();
        assert!(out.status.success(), "oras {args:?}: {}{}", text(&out.stdout), text(&out.stderr));
        text(&out.stdout)
    };
    let cache = dir.path().join("cache");
    let pull = |reference: &str, out: &std::path::Path| {
        ok(&tools.host, &["pull", reference, "--oci-cache-dir", cache.to_str().unwrap(), "--output", out.to_str().unwrap()], &home)
    };

    // oras → host: the CNCF layout, and Kubewarden's (wasm-to-oci's) media types.
    for (tag, config, layer) in [
        ("cncf", "application/vnd.wasm.config.v0+json", "application/wasm"),
        ("kubewarden", "application/vnd.wasm.config.v1+json", "application/vnd.wasm.content.layer.v1+wasm"),
    ] {
        oras(&[
            "push",
            "--plain-http",
            &registry.plain(&format!("by-oras:{tag}")),
            "--config",
            &format!("config.json:{config}"),
            &format!("hello.wasm:{layer}"),
        ]);
        let resolved = oras(&["resolve", "--plain-http", &registry.plain(&format!("by-oras:{tag}"))]);
        let out = dir.path().join(format!("{tag}.wasm"));
        let printed = pull(&registry.oci(&format!("by-oras:{tag}")), &out);
        assert_eq!(digest_line(&printed), resolved.trim(), "host and oras agree on the manifest digest");
        assert!(printed.contains(layer), "{printed}");
        assert_eq!(std::fs::read(&out).unwrap(), bytes, "{tag}: the component host pulled is the file oras pushed");
    }

    // host → oras: the manifest is the CNCF layout, and its layer the file.
    let pushed = digest_line(&ok(&tools.host, &["push", wasm.to_str().unwrap(), &registry.oci("by-host:v1")], &home));
    let manifest: serde_json::Value = serde_json::from_str(&oras(&["manifest", "fetch", "--plain-http", &registry.plain("by-host:v1")])).unwrap();
    assert_eq!(oras(&["resolve", "--plain-http", &registry.plain("by-host:v1")]).trim(), pushed);
    assert_eq!(manifest["config"]["mediaType"], "application/vnd.wasm.config.v0+json");
    assert_eq!(manifest["layers"].as_array().map(Vec::len), Some(1));
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    let layer = manifest["layers"][0]["digest"].as_str().unwrap().to_string();
    assert_eq!(layer, sha256(&bytes));
    oras(&["blob", "fetch", "--plain-http", "--output", "fetched.wasm", &registry.plain(&format!("by-host@{layer}"))]);
    assert_eq!(std::fs::read(dir.path().join("fetched.wasm")).unwrap(), bytes, "the layer oras fetched is the file host pushed");
    let config: serde_json::Value = serde_json::from_str(&oras(&[
        "blob",
        "fetch",
        "--plain-http",
        "--output",
        "-",
        &registry.plain(&format!("by-host@{}", manifest["config"]["digest"].as_str().unwrap())),
    ]))
    .unwrap();
    assert_eq!((config["architecture"].as_str(), config["os"].as_str()), (Some("wasm"), Some("wasip2")));
    assert_eq!(config["layerDigests"][0], layer.as_str());

    // Pinned by digest, the same bytes (from the cache now, hashed again).
    let out = dir.path().join("pinned.wasm");
    assert!(pull(&registry.oci(&format!("by-host@{pushed}")), &out).contains(&format!("digest {pushed}")));
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
}
