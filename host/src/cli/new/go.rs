//! `host new NAME --lang go`: a Go module with the same plugin as the Rust
//! scaffold (a ConfigMap per parent, the same fixtures and sample), which
//! builds with `go build` for `GOOS=wasip1` and `host componentize`.
//!
//! The Go SDK travels with the host as the Rust one does: its sources (this
//! repository's plugins/sdk-go) are embedded in the binary and written to
//! `sdk-go/`, which the module's go.mod replaces `operator-host.dev/sdk-go`
//! with. The module's go.mod and go.sum are the example hello-go's (the
//! same imports), so every dependency is pinned and `go test` fetches only
//! those from the Go module proxy.

use std::path::Path;

/// (path in the new module, template); shared templates come from the Rust
/// scaffold, so both languages answer the same fixtures.
pub(super) const FILES: &[(&str, &str)] = &[
    ("go.mod", include_str!("go/go.mod.tmpl")),
    ("go.sum", include_str!("../../../../plugins/examples/hello-go/go.sum")),
    (".gitignore", include_str!("go/gitignore.tmpl")),
    ("README.md", include_str!("go/README.md.tmpl")),
    ("main.go", include_str!("go/main.go.tmpl")),
    ("main_test.go", include_str!("go/main_test.go.tmpl")),
    ("crd.json", include_str!("crd.json.tmpl")),
    ("testdata/fixtures/a-new-{{kind_lower}}-creates-its-configmap/parent.yaml", include_str!("parent.yaml.tmpl")),
    ("testdata/fixtures/a-new-{{kind_lower}}-creates-its-configmap/now.txt", include_str!("now.txt.tmpl")),
    ("testdata/fixtures/a-new-{{kind_lower}}-creates-its-configmap/expected.json", include_str!("created.json.tmpl")),
    ("testdata/fixtures/an-up-to-date-configmap-is-left-alone/parent.yaml", include_str!("parent.yaml.tmpl")),
    ("testdata/fixtures/an-up-to-date-configmap-is-left-alone/children.yaml", include_str!("children.yaml.tmpl")),
    ("testdata/fixtures/an-up-to-date-configmap-is-left-alone/now.txt", include_str!("now.txt.tmpl")),
    ("testdata/fixtures/an-up-to-date-configmap-is-left-alone/expected.json", include_str!("up-to-date.json.tmpl")),
    ("samples/{{kind_lower}}.yaml", include_str!("sample.yaml.tmpl")),
];

/// Where the Go SDK goes in the new module.
pub(super) const SDK_DIR: &str = "sdk-go";

/// The Go SDK's sources (tests left out), as `host new --lang go` vendors them.
pub(super) const SDK_FILES: &[(&str, &str)] = &[
    ("go.mod", include_str!("../../../../plugins/sdk-go/go.mod")),
    ("go.sum", include_str!("../../../../plugins/sdk-go/go.sum")),
    ("README.md", include_str!("../../../../plugins/sdk-go/README.md")),
    ("plugin/abi.go", include_str!("../../../../plugins/sdk-go/plugin/abi.go")),
    ("plugin/adapter_arena.go", include_str!("../../../../plugins/sdk-go/plugin/adapter_arena.go")),
    ("plugin/contract.go", include_str!("../../../../plugins/sdk-go/plugin/contract.go")),
    ("plugin/controller.go", include_str!("../../../../plugins/sdk-go/plugin/controller.go")),
    ("plugin/export.go", include_str!("../../../../plugins/sdk-go/plugin/export.go")),
    ("plugin/log.go", include_str!("../../../../plugins/sdk-go/plugin/log.go")),
    ("plugin/log_native.go", include_str!("../../../../plugins/sdk-go/plugin/log_native.go")),
    ("plugin/objects.go", include_str!("../../../../plugins/sdk-go/plugin/objects.go")),
    ("plugin/plugin.go", include_str!("../../../../plugins/sdk-go/plugin/plugin.go")),
    ("plugin/render.go", include_str!("../../../../plugins/sdk-go/plugin/render.go")),
    ("plugintest/fixtures.go", include_str!("../../../../plugins/sdk-go/plugintest/fixtures.go")),
];

/// What to say after writing the module.
pub(super) fn next_steps(dir: &Path, name: &str) {
    println!("The Go SDK this host speaks is in {}/{SDK_DIR} (go.mod replaces operator-host.dev/sdk-go with it).", dir.display());
    println!(
        "Next: cd {} && go test ./... && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o {name}.core.wasm . && host componentize {name}.core.wasm -o {name}.wasm  (see README.md)",
        dir.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sdk_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/sdk-go")
    }

    /// A file added to the Go SDK must be vendored too, or a new module
    /// would not build.
    #[test]
    fn every_source_file_of_the_go_sdk_is_vendored() {
        let mut on_disk = Vec::new();
        for package in ["plugin", "plugintest"] {
            for entry in std::fs::read_dir(sdk_dir().join(package)).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                if name.ends_with(".go") && !name.ends_with("_test.go") {
                    on_disk.push(format!("{package}/{name}"));
                }
            }
        }
        on_disk.sort();
        let mut vendored: Vec<String> = SDK_FILES.iter().map(|(p, _)| p.to_string()).filter(|p| p.ends_with(".go")).collect();
        vendored.sort();
        assert_eq!(vendored, on_disk);
    }

    /// The scaffold's go.mod is hello-go's with the module name and the SDK's path changed.
    #[test]
    fn the_go_mod_template_pins_what_hello_go_pins() {
        let hello = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/examples/hello-go/go.mod")).unwrap();
        let from_hello = hello.replace("module example.operator.dev/hello-go", "module {{name}}").replace("=> ../../sdk-go", "=> ./sdk-go");
        assert_eq!(FILES[0].1, from_hello);
    }
}
