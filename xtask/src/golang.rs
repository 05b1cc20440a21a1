//! The plugins written in Go, built with the standard Go toolchain to
//! `target/plugins/<name>.wasm`: `go build` for `GOOS=wasip1 GOARCH=wasm`
//! as a reactor (`-buildmode=c-shared`), then the host's own `host
//! componentize` (the contract's WIT and the WASI preview 1 reactor adapter
//! are built into the host), so the build is exactly what a plugin author
//! runs. Every Go dependency is pinned by the module's go.mod and go.sum.
//!
//! Without Go these plugins are not built and xtask says so: the tests that
//! need them build their own copies and skip loudly without Go.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::{Result, root, status, target_dir};

/// (component name, module directory).
const MODULES: &[(&str, &str)] = &[("hello-go", "plugins/examples/hello-go"), ("cronjob-go", "plugins/examples/cronjob-go")];

/// For `cargo xtask plugins`, which builds no host: the Go plugins with the
/// host a previous build left, or a note saying how to get them.
pub fn build_with_built_host() -> Result {
    let host = target_dir().join("release/host");
    if host.exists() {
        return build(&host);
    }
    eprintln!("xtask: no {} yet: the Go plugins need `host componentize`; `cargo xtask build` builds both", host.display());
    Ok(())
}

/// Builds every Go plugin into `target/plugins/` with `host` (the built host binary).
pub fn build(host: &Path) -> Result {
    if Command::new("go").arg("version").output().map(|o| !o.status.success()).unwrap_or(true) {
        eprintln!("xtask: Go not found: the Go plugins ({}) are not built", MODULES.iter().map(|m| m.0).collect::<Vec<_>>().join(", "));
        return Ok(());
    }
    let out = target_dir().join("plugins");
    for (name, dir) in MODULES {
        let started = Instant::now();
        let core = out.join(format!("{name}.core.wasm"));
        let mut c = Command::new("go");
        c.current_dir(root().join(dir)).env("GOOS", "wasip1").env("GOARCH", "wasm");
        c.args(["build", "-trimpath", "-buildmode=c-shared", "-o"]).arg(&core).arg(".");
        status(c)?;
        let mut c = Command::new(host);
        c.arg("componentize").arg(&core).arg("-o").arg(out.join(format!("{name}.wasm")));
        status(c)?;
        eprintln!("xtask: go built {name}.wasm in {:.1?}", started.elapsed());
    }
    Ok(())
}
