//! Fixtures of the registry tests: the tools (Debian's `docker-registry`,
//! and `oras` and `cosign` built by `cargo xtask test` into
//! `target/oci/bin/`), a registry started per test on a free loopback port
//! with its own config and storage (stopped on drop, even when the test
//! fails), the built `host`, and edits of the registry's storage that make
//! it serve tampered bytes.
//!
//! Without the tools a test prints `SKIPPED` and returns; when `cargo xtask
//! test` installed them (`OCI_TOOLS_REQUIRED=1`) a missing one fails it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use real_cluster::process::{Process, Spec};

pub use real_cluster::{built, eventually_within, free_port};

/// The tools a registry test runs.
pub struct Tools {
    pub registry: PathBuf,
    pub oras: PathBuf,
    pub cosign: PathBuf,
    pub host: PathBuf,
    /// The real control plane's kubectl (built with it, from the Go proxy).
    pub kubectl: PathBuf,
}

impl Tools {
    /// The tools, or `None` after a loud skip.
    pub fn find() -> Option<Tools> {
        let bin = real_cluster::binaries::target_dir().join("oci/bin");
        let registry = which("docker-registry");
        let (oras, cosign) = (bin.join("oras"), bin.join("cosign"));
        let kubectl = real_cluster::binaries::target_dir().join("real-cluster/bin/kubectl");
        let mut missing = Vec::new();
        if registry.is_none() {
            missing.push("docker-registry (Debian's package)".to_string());
        }
        for p in [&oras, &cosign, &kubectl] {
            if !p.exists() {
                missing.push(p.display().to_string());
            }
        }
        if !missing.is_empty() {
            let why = format!("missing {} (cargo xtask test installs and builds them; Go and apt-get as root needed)", missing.join(", "));
            if std::env::var_os("OCI_TOOLS_REQUIRED").is_some() {
                panic!("{why}, although cargo xtask prepared them");
            }
            let test = std::thread::current().name().unwrap_or("unnamed").to_string();
            eprintln!("SKIPPED {test}: {why}");
            return None;
        }
        Some(Tools { registry: registry.expect("checked"), oras, cosign, host: built("release/host"), kubectl })
    }
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(program)).find(|p| p.is_file())
}

/// A distribution registry on 127.0.0.1, stopped on drop.
pub struct Registry {
    process: Process,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Its storage root.
    pub storage: PathBuf,
}

impl Registry {
    /// Starts one under `dir` and waits for `/v2/`.
    pub fn start(tools: &Tools, dir: &Path) -> Registry {
        let storage = dir.join("registry-storage");
        let addr = format!("127.0.0.1:{}", free_port());
        let config = dir.join("registry.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
                storage.display()
            ),
        )
        .unwrap();
        let spec = Spec::new("registry", &tools.registry).arg("serve").arg(config.display().to_string());
        let process = Process::start(spec, dir.join("registry.log"));
        let mut r = Registry { process, addr, storage };
        r.wait_up();
        r
    }

    fn wait_up(&mut self) {
        let url = format!("http://{}/v2/", self.addr);
        eventually_within("the registry's /v2/", Duration::from_secs(30), || {
            assert!(self.process.exited().is_none(), "the registry exited:\n{}", self.process.log_tail(30));
            real_cluster::http::get(&url).ok().map(|_| ())
        });
    }

    /// `oci://127.0.0.1:PORT/<path>`.
    pub fn oci(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.addr)
    }

    /// `127.0.0.1:PORT/<path>` (what oras and cosign take).
    pub fn plain(&self, path: &str) -> String {
        format!("{}/{path}", self.addr)
    }

    pub fn stop(&mut self) {
        self.process.stop(Duration::from_secs(5));
    }

    pub fn restart(&mut self) {
        self.process.restart();
        self.wait_up();
    }

    fn blob_data(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage.join("docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }

    /// Changes one byte of a stored layer in place: the registry then serves
    /// bytes that do not hash to their digest.
    pub fn tamper_blob(&self, digest: &str, at: usize) {
        let path = self.blob_data(digest);
        let mut bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("blob {digest} at {}: {e}", path.display()));
        bytes[at] ^= 0x01;
        std::fs::write(&path, bytes).unwrap();
    }

    /// Changes a stored manifest so that it stays a valid manifest (the
    /// registry still serves it) but no longer hashes to its digest: the
    /// first digit of the config's size goes up by one (9 becomes 8).
    pub fn tamper_manifest(&self, digest: &str) {
        let path = self.blob_data(digest);
        let mut bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("manifest {digest} at {}: {e}", path.display()));
        let at = bytes.windows(7).position(|w| w == b"\"size\":").expect("a manifest has sizes") + 7;
        bytes[at] = if bytes[at] == b'9' { b'8' } else { bytes[at] + 1 };
        std::fs::write(&path, bytes).unwrap();
    }

    /// Points `repo:tag` at manifest `digest` by the registry's own link
    /// file (what a push of that tag leaves), without sending any bytes.
    pub fn point_tag(&self, repo: &str, tag: &str, digest: &str) {
        let dir = self.storage.join("docker/registry/v2/repositories").join(repo).join("_manifests/tags").join(tag);
        std::fs::create_dir_all(dir.join("current")).unwrap();
        let index = dir.join("index/sha256").join(digest.trim_start_matches("sha256:"));
        std::fs::create_dir_all(&index).unwrap();
        std::fs::write(index.join("link"), digest).unwrap();
        let tmp = dir.join("current/link.new");
        std::fs::write(&tmp, digest).unwrap();
        std::fs::rename(tmp, dir.join("current/link")).unwrap();
    }
}

/// Runs `program args`, asserting success; its stdout.
pub fn ok(program: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = run(program, args, env);
    assert!(out.status.success(), "{} {args:?} failed ({}):\n{}{}", program.display(), out.status, text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
}

pub fn run(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(program);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()))
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The value after `digest ` in `host push`/`host pull` output.
pub fn digest_line(out: &str) -> String {
    out.lines().find_map(|l| l.strip_prefix("digest ")).unwrap_or_else(|| panic!("no digest line in:\n{out}")).trim().to_string()
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// The test plugin `name`'s Wasm: `target/plugins/<name>.wasm`, or the
/// test-only build under `target/wasm32-wasip2/release/`.
pub fn plugin(name: &str) -> PathBuf {
    let shipped = real_cluster::binaries::target_dir().join("plugins").join(format!("{name}.wasm"));
    if shipped.exists() {
        return shipped;
    }
    built(&format!("wasm32-wasip2/release/{}.wasm", name.replace('-', "_")))
}

/// A `host` process (`host run --embedded ...`), its log, metrics and kubeconfig.
pub struct Host {
    pub process: Process,
    pub metrics: String,
    pub kubeconfig: PathBuf,
}

impl Host {
    /// Starts `host run --embedded` with `args`; returns once it serves.
    pub fn start(tools: &Tools, dir: &Path, name: &str, args: &[&str]) -> Host {
        let port = free_port();
        let kubeconfig = dir.join(format!("{name}.kubeconfig"));
        let spec = Spec::new(name, &tools.host)
            .env("HOST_LOG", "info")
            .arg("--plugin-cache-dir")
            .arg(dir.join("plugin-cache").display().to_string())
            .args(["run", "--embedded", "--metrics-addr", &format!("127.0.0.1:{port}"), "--kubeconfig-out", kubeconfig.to_str().unwrap()])
            .args(args.iter().copied());
        let mut process = Process::start(spec, dir.join(format!("{name}.log")));
        let metrics = format!("http://127.0.0.1:{port}");
        eventually_within(&format!("{name}'s /readyz"), Duration::from_secs(120), || {
            if let Some(status) = process.exited() {
                panic!("{name} exited ({status}) before it was ready:\n{}", process.log_tail(40));
            }
            real_cluster::http::get(&format!("{metrics}/readyz")).ok().map(|_| ())
        });
        Host { process, metrics, kubeconfig }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.process.log()).unwrap_or_default()
    }

    /// Waits for a log line containing `needle`.
    pub fn wait_log(&mut self, what: &str, needle: &str) {
        eventually_within(what, Duration::from_secs(90), || {
            assert!(self.process.exited().is_none(), "the host exited:\n{}", self.process.log_tail(40));
            self.log().contains(needle).then_some(())
        });
    }

    /// The sum of the metric samples whose line starts with `prefix`.
    pub fn metric(&self, prefix: &str) -> f64 {
        let page = real_cluster::http::get(&format!("{}/metrics", self.metrics)).unwrap_or_default();
        page.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
    }

    /// kubectl against the embedded server.
    pub fn kubectl(&self, tools: &Tools) -> real_cluster::Kubectl {
        real_cluster::Kubectl::new(tools.kubectl.clone(), self.kubeconfig.clone())
    }

    /// Applies the Hello `world` with `greeting` and waits until the serving
    /// hello plugin wrote it to its ConfigMap `world-greeting`.
    pub fn serves(&self, tools: &Tools, greeting: &str) {
        let kubectl = self.kubectl(tools);
        let hello = format!(
            "apiVersion: example.operator.dev/v1alpha1\nkind: Hello\nmetadata:\n  name: world\n  namespace: default\nspec:\n  greeting: {greeting}\n"
        );
        eventually_within("kubectl apply of a Hello (once its CRD is served)", Duration::from_secs(60), || {
            kubectl.run_stdin(&["apply", "-f", "-"], Some(hello.as_bytes())).status.success().then_some(())
        });
        eventually_within(&format!("the plugin's ConfigMap saying {greeting}"), Duration::from_secs(60), || {
            let out = kubectl.run(&["get", "configmap", "world-greeting", "-n", "default", "-o", "jsonpath={.data.greeting}"]);
            (String::from_utf8_lossy(&out.stdout) == greeting).then_some(())
        });
    }
}
