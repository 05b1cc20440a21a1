//! The image `cargo xtask image` built, pushed and signed, run as the
//! chart's Pod would run it, on the real control plane.
//!
//! `cargo xtask image` (run by `cargo xtask test` before the tests) leaves
//! the image in a loopback registry's storage (`target/image/registry/`)
//! and says what it pushed in `target/image/published.json`. This test
//! serves a copy of that storage, renders the chart with `image.digest`,
//! verifies the rendered reference with cosign (signature, and the SBOM
//! attestation listing wasmtime and kube at Cargo.lock's versions), pulls
//! it by digest with oras, unpacks its layers into a root filesystem and
//! runs its entrypoint with the Deployment's args, env and user under
//! chroot, with what the kubelet gives a Pod: the ServiceAccount's token,
//! ca.crt and namespace at their standard path, and
//! `KUBERNETES_SERVICE_HOST`/`PORT`. No kubeconfig: the host finds the
//! cluster as in a Pod. A mount namespace of its own gives it `/proc`.
//!
//! What a container runtime adds beyond that (its own network namespace,
//! a read-only root with emptyDirs, cgroup limits) is not reproduced: the
//! image's /tmp and plugin cache are writable by its user instead.

use std::path::{Path, PathBuf};
use std::time::Duration;

use real_cluster::process::{Process, Spec};
use real_cluster::{ControlPlane, Kubectl, Value, binaries, eventually, eventually_within, free_port, http, repo_file};

use crate::common::{CRONJOB_CRD, MYDEPLOYMENT_CRD, has_condition, jobs_of, wait_for_crds};

const RELEASE: &str = "operator-host";
const NAMESPACE: &str = "operator-host-system";

/// What `cargo xtask image` pushed (`target/image/published.json`).
struct Published {
    repository: String,
    digest: String,
    public_key: PathBuf,
    storage: PathBuf,
}

/// The published image and the tools, or `None` after a loud skip.
fn published() -> Option<(Published, Tools)> {
    let file = binaries::target_dir().join("image/published.json");
    let tools = Tools::find();
    let why = match (std::fs::read_to_string(&file), &tools) {
        (Ok(text), Some(_)) => {
            let p: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let Some(storage) = p["registryStorage"].as_str() else {
                panic!("{} names no loopback registry storage: run `cargo xtask image` without --registry", file.display())
            };
            let published = Published {
                repository: p["repository"].as_str().unwrap().to_string(),
                digest: p["digest"].as_str().unwrap().to_string(),
                public_key: PathBuf::from(p["publicKey"].as_str().unwrap()),
                storage: PathBuf::from(storage),
            };
            return Some((published, tools.unwrap()));
        }
        (Err(e), _) => format!("no published image ({}: {e}; `cargo xtask image` makes it)", file.display()),
        (Ok(_), None) => "docker-registry, oras, cosign or helm is missing (cargo xtask test installs and builds them)".to_string(),
    };
    if std::env::var_os("OCI_TOOLS_REQUIRED").is_some() {
        panic!("{why}, although cargo xtask prepared the registry tools");
    }
    binaries::record_skip(&why);
    None
}

/// The CLIs the test drives.
struct Tools {
    registry: PathBuf,
    oras: PathBuf,
    cosign: PathBuf,
    helm: PathBuf,
}

impl Tools {
    fn find() -> Option<Tools> {
        let target = binaries::target_dir();
        let registry = on_path("docker-registry")?;
        let tools = Tools { registry, oras: target.join("oci/bin/oras"), cosign: target.join("oci/bin/cosign"), helm: target.join("ops/bin/helm") };
        [&tools.oras, &tools.cosign, &tools.helm].iter().all(|p| p.exists()).then_some(tools)
    }
}

/// Runs `program args` with `HOME` (and Helm's homes) in `home`; its stdout, which must be a success.
fn ok(program: &Path, home: &Path, args: &[&str]) -> String {
    let mut c = std::process::Command::new(program);
    c.args(args).env("HOME", home);
    for (var, dir) in [("HELM_CACHE_HOME", "cache"), ("HELM_CONFIG_HOME", "config"), ("HELM_DATA_HOME", "data")] {
        c.env(var, home.join(dir));
    }
    let out = c.output().unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert!(out.status.success(), "{} {args:?} failed:\n{}{}", program.display(), text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
}

/// The registry serving a copy of the published storage, on a free loopback port.
fn serve_copy(tools: &Tools, published: &Published, dir: &Path) -> (Process, String) {
    let storage = dir.join("registry-storage");
    copy_dir(&published.storage, &storage);
    let addr = format!("127.0.0.1:{}", free_port());
    let config = dir.join("registry.yml");
    std::fs::write(
        &config,
        format!("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n", storage.display()),
    )
    .unwrap();
    let mut process = Process::start(Spec::new("registry", &tools.registry).arg("serve").arg(config.display().to_string()), dir.join("registry.log"));
    eventually_within("the registry's /v2/", Duration::from_secs(30), || {
        assert!(process.exited().is_none(), "the registry exited:\n{}", process.log_tail(20));
        http::get(&format!("http://{addr}/v2/")).ok()
    });
    (process, addr)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display())) {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// The chart rendered as `helm template` renders it for this test: the
/// image by digest, the metrics port free on this machine. Each document
/// as helm printed it, and parsed.
fn render_chart(tools: &Tools, home: &Path, image: &str, digest: &str, metrics_port: u16) -> Vec<(String, Value)> {
    let chart = repo_file("deploy/chart/operator-host").display().to_string();
    let (repository, port) = (format!("image.repository={image}"), format!("metrics.port={metrics_port}"));
    let digest = format!("image.digest={digest}");
    let yaml = ok(
        &tools.helm,
        home,
        &["template", RELEASE, &chart, "--namespace", NAMESPACE, "--include-crds", "--set", &repository, "--set", &digest, "--set", &port],
    );
    yaml.split("\n---")
        .map(|doc| doc.trim_start_matches("---").to_string())
        .map(|doc| {
            let parsed = serde_saphyr::from_str::<Value>(&doc).unwrap_or_else(|e| panic!("helm printed YAML that does not parse ({e}):\n{doc}"));
            (doc, parsed)
        })
        .filter(|(_, v)| !v.is_null())
        .collect()
}

/// The Deployment's Pod as a runtime would start it.
struct PodSpec {
    image: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    user: u64,
    group: u64,
    service_account: String,
    grace: Duration,
    readiness: String,
    liveness: String,
}

fn pod_spec(deployment: &Value) -> PodSpec {
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let strings = |v: &Value| v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect::<Vec<_>>();
    PodSpec {
        image: container["image"].as_str().unwrap().to_string(),
        args: strings(&container["args"]),
        env: container["env"].as_array().unwrap().iter().map(|e| (e["name"].as_str().unwrap().into(), e["value"].as_str().unwrap().into())).collect(),
        user: pod["securityContext"]["runAsUser"].as_u64().unwrap(),
        group: pod["securityContext"]["runAsGroup"].as_u64().unwrap(),
        service_account: pod["serviceAccountName"].as_str().unwrap().to_string(),
        grace: Duration::from_secs(pod["terminationGracePeriodSeconds"].as_u64().unwrap()),
        readiness: container["readinessProbe"]["httpGet"]["path"].as_str().unwrap().to_string(),
        liveness: container["livenessProbe"]["httpGet"]["path"].as_str().unwrap().to_string(),
    }
}

/// The value after `flag` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> &'a str {
    let at = args.iter().position(|a| a == flag).unwrap_or_else(|| panic!("the Deployment's args have no {flag}: {args:?}"));
    &args[at + 1]
}

/// cosign verifies the signature and the CycloneDX attestation of
/// `reference` with the published key; the SBOM lists wasmtime and kube at
/// the versions Cargo.lock pins.
fn verify_signature_and_sbom(tools: &Tools, home: &Path, reference: &str, key: &Path) {
    let key = key.to_str().unwrap();
    let insecure = ["--insecure-ignore-tlog=true", "--allow-http-registry", "--allow-insecure-registry"];
    ok(&tools.cosign, home, &[&["verify", "--key", key][..], &insecure, &[reference]].concat());
    let attestations = ok(&tools.cosign, home, &[&["verify-attestation", "--type", "cyclonedx", "--key", key][..], &insecure, &[reference]].concat());
    let envelope: Value = serde_json::from_str(attestations.lines().next().expect("one attestation")).unwrap();
    use base64::Engine;
    let statement = base64::engine::general_purpose::STANDARD.decode(envelope["payload"].as_str().unwrap()).unwrap();
    let statement: Value = serde_json::from_slice(&statement).unwrap();
    let components = statement["predicate"]["components"].as_array().expect("a CycloneDX SBOM as the predicate");
    let lock = std::fs::read_to_string(repo_file("Cargo.lock")).unwrap();
    for name in ["wasmtime", "kube"] {
        let locked = lock.split("[[package]]").find(|p| p.contains(&format!("\nname = \"{name}\"\n"))).unwrap();
        let version = locked.lines().find_map(|l| l.strip_prefix("version = ")).unwrap().trim_matches('"');
        assert!(components.iter().any(|c| c["name"] == name && c["version"] == version), "the SBOM does not list {name} {version}");
    }
}

/// `oras cp` of `reference` into an OCI layout; its one layer unpacked
/// into `rootfs` (owners and modes as in the layer); the image config.
fn pull_and_unpack(tools: &Tools, home: &Path, reference: &str, digest: &str, rootfs: &Path) -> Value {
    let layout = home.join("pulled");
    ok(&tools.oras, home, &["cp", "--from-plain-http", reference, "--to-oci-layout", &format!("{}:pulled", layout.display())]);
    let blob = |digest: &str| std::fs::read(layout.join("blobs/sha256").join(digest.trim_start_matches("sha256:"))).unwrap();
    let index: Value = serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["manifests"][0]["digest"], digest, "oras pulled another manifest");
    let manifest: Value = serde_json::from_slice(&blob(digest)).unwrap();
    let config: Value = serde_json::from_slice(&blob(manifest["config"]["digest"].as_str().unwrap())).unwrap();
    for layer in manifest["layers"].as_array().unwrap() {
        assert_eq!(layer["mediaType"], "application/vnd.oci.image.layer.v1.tar+gzip");
        let gzipped = blob(layer["digest"].as_str().unwrap());
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(gzipped.as_slice()));
        archive.set_preserve_permissions(true);
        archive.set_preserve_ownerships(true);
        archive.unpack(rootfs).unwrap();
    }
    config
}

/// What the kubelet mounts into every container of a Pod with a ServiceAccount.
fn mount_service_account(rootfs: &Path, token: &str, ca: &Path) {
    let dir = rootfs.join("var/run/secrets/kubernetes.io/serviceaccount");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("token"), token.trim()).unwrap();
    std::fs::copy(ca, dir.join("ca.crt")).unwrap();
    std::fs::write(dir.join("namespace"), NAMESPACE).unwrap();
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(program)).find(|p| p.is_file())
}

/// The full path of `program` (`env -i` clears the PATH it would be found on).
fn which(program: &str) -> String {
    on_path(program).unwrap_or_else(|| panic!("{program} is not on PATH (util-linux, coreutils)")).display().to_string()
}

/// The Pod's process: `env -i` (only what a Pod's container gets), a mount
/// namespace with /proc, chroot into `rootfs` as the Pod's user, the
/// image's entrypoint with the Deployment's args.
fn start_pod(rootfs: &Path, config: &Value, pod: &PodSpec, server: &str, log: PathBuf) -> Process {
    let (host, port) = server.trim_start_matches("https://").split_once(':').unwrap();
    let mut env: Vec<String> = config["config"]["Env"].as_array().unwrap().iter().map(|e| e.as_str().unwrap().to_string()).collect();
    env.extend(pod.env.iter().map(|(k, v)| format!("{k}={v}")));
    env.extend([
        format!("KUBERNETES_SERVICE_HOST={host}"),
        format!("KUBERNETES_SERVICE_PORT={port}"),
        "HOSTNAME=operator-host-0".into(),
        "HOME=/home/nonroot".into(),
    ]);
    let entrypoint: Vec<String> = config["config"]["Entrypoint"].as_array().unwrap().iter().map(|e| e.as_str().unwrap().to_string()).collect();
    let spec = Spec::new("pod", which("env"))
        .arg("-i")
        .args(env)
        .args([which("unshare"), format!("--mount-proc={}", rootfs.join("proc").display()), which("chroot")])
        .arg(format!("--userspec={}:{}", pod.user, pod.group))
        .arg(rootfs.display().to_string())
        .args(entrypoint)
        .args(pod.args.iter().cloned());
    Process::start(spec, log)
}

#[test]
fn the_signed_image_pulled_by_digest_runs_as_the_charts_pod_reconciles_both_samples_and_stops_on_sigterm() {
    let Some((published, tools)) = published() else { return };
    let Some(cluster) = ControlPlane::builder().start() else { return };
    let admin = cluster.admin();
    let dir = cluster.dir().join("image");
    std::fs::create_dir_all(&dir).unwrap();
    let (_registry, addr) = serve_copy(&tools, &published, &dir);

    let metrics_port = free_port();
    let objects = render_chart(&tools, &dir, &format!("{addr}/{}", published.repository), &published.digest, metrics_port);
    let deployment = objects.iter().map(|(_, o)| o).find(|o| o["kind"] == "Deployment").expect("the chart renders a Deployment");
    let pod = pod_spec(deployment);
    assert_eq!(pod.image, format!("{addr}/{}@{}", published.repository, published.digest), "the chart references the image by digest");
    verify_signature_and_sbom(&tools, &dir, &pod.image, &published.public_key);

    let rootfs = dir.join("rootfs");
    let config = pull_and_unpack(&tools, &dir, &pod.image, &published.digest, &rootfs);
    assert_eq!(config["config"]["User"], format!("{}:{}", pod.user, pod.group), "the image's user is the chart's runAsUser");
    std::fs::create_dir_all(rootfs.join("proc")).unwrap();

    // Everything the chart renders but the Deployment (kwok would only pretend to run it).
    admin.ok(&["create", "namespace", NAMESPACE]);
    let rest: Vec<&str> = objects.iter().filter(|(_, o)| o["kind"] != "Deployment").map(|(doc, _)| doc.as_str()).collect();
    let applied = admin.run_stdin(&["apply", "--server-side", "-f", "-"], Some(rest.join("\n---\n").as_bytes()));
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let plugins_configmap = flag(&pod.args, "--plugin-configmap").split_once('/').unwrap().1.to_string();
    let files: Vec<String> = ["cronjob", "mydeployment"]
        .iter()
        .map(|p| format!("--from-file={}", real_cluster::built(&format!("plugins/{p}.wasm.gz")).display()))
        .collect();
    admin.ok(&[&["create", "configmap", &plugins_configmap, "-n", NAMESPACE][..], &files.iter().map(String::as_str).collect::<Vec<_>>()].concat());
    let token = admin.ok(&["create", "token", &pod.service_account, "-n", NAMESPACE, "--duration=1h"]);
    mount_service_account(&rootfs, &token, &cluster.pki.ca_cert);

    let mut process = start_pod(&rootfs, &config, &pod, &cluster.server, cluster.dir().join("logs/pod.log"));
    run_as_the_pod(&admin, &mut process, &pod, metrics_port);

    // The ConfigMap's plugins are the image's own: the host loaded them from
    // the artifacts the image ships (HOST_PLUGIN_PRECOMPILED_DIR) and
    // compiled nothing, so its writable cache (the chart's emptyDir) holds
    // nothing. A compile would have written Cranelift's build there.
    let cache = env_value(&config, "HOST_PLUGIN_CACHE_DIR");
    let shipped = env_value(&config, "HOST_PLUGIN_PRECOMPILED_DIR");
    let artifacts = |dir: &str| -> Vec<String> {
        let dir = rootfs.join(dir.trim_start_matches('/'));
        std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(artifacts(&shipped).len(), 2, "the image ships both plugins precompiled: {:?}", artifacts(&shipped));
    assert!(artifacts(&cache).is_empty(), "the Pod compiled plugins the image ships precompiled: {:?}", artifacts(&cache));
}

/// The value of `name` in the image configuration's environment.
fn env_value(config: &Value, name: &str) -> String {
    let env = config["config"]["Env"].as_array().unwrap();
    let prefix = format!("{name}=");
    env.iter().find_map(|e| e.as_str()?.strip_prefix(&prefix)).unwrap_or_else(|| panic!("the image sets no {name}: {env:?}")).to_string()
}

/// Probes, identity, both samples, metrics, then SIGTERM.
fn run_as_the_pod(admin: &Kubectl, process: &mut Process, pod: &PodSpec, metrics_port: u16) {
    let base = format!("http://127.0.0.1:{metrics_port}");
    eventually_within("the Pod's readiness probe", Duration::from_secs(120), || {
        assert!(process.exited().is_none(), "the image's host exited:\n{}", process.log_tail(60));
        http::get(&format!("{base}{}", pod.readiness)).ok()
    });
    http::get(&format!("{base}{}", pod.liveness)).unwrap_or_else(|e| panic!("liveness probe: {e}"));
    let uid = std::fs::read_to_string(format!("/proc/{}/status", process.pid().unwrap())).unwrap();
    let uid = uid.lines().find_map(|l| l.strip_prefix("Uid:")).unwrap().split_whitespace().next().unwrap().to_string();
    assert_eq!(uid, pod.user.to_string(), "the host runs as the chart's user");

    let lease = flag(&pod.args, "--leader-election-id").to_string();
    eventually("the Pod to hold the Lease", || {
        let l = admin.json(&["get", "lease", &lease, "-n", NAMESPACE]);
        l["spec"]["holderIdentity"].as_str().filter(|h| !h.is_empty()).map(str::to_string)
    });
    wait_for_crds(admin, &[CRONJOB_CRD, MYDEPLOYMENT_CRD]);
    admin.apply(&std::fs::read_to_string(repo_file("plugins/mydeployment/samples/my-deployment-instance.yaml")).unwrap());
    admin.apply(&std::fs::read_to_string(repo_file("plugins/cronjob/samples/batch_v1_cronjob.yaml")).unwrap());
    eventually("the MyDeployment's status", || (admin.json(&["get", "md", "my-nginx-app"])["status"]["readyReplicas"] == 3).then_some(()));
    eventually_within("a Job of the CronJob", Duration::from_secs(80), || jobs_of(admin, "default", "cronjob-sample").into_iter().next());
    eventually("the CronJob's Valid condition", || {
        has_condition(&admin.json(&["get", "cronjobs.batch.tutorial.kubebuilder.io", "cronjob-sample"]), "Valid", "True").then_some(())
    });
    let metrics = http::get(&format!("{base}/metrics")).unwrap();
    for controller in ["cronjob", "mydeployment"] {
        let label = format!("controller=\"{controller}\"");
        let reconciled = metrics.lines().any(|l| l.starts_with("controller_runtime_reconcile_total") && l.contains(&label) && !l.ends_with(" 0"));
        assert!(reconciled, "no reconcile of {controller} counted:\n{metrics}");
    }
    let log = std::fs::read_to_string(process.log()).unwrap();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("forbidden") || l.contains("Forbidden")).collect();
    assert!(refused.is_empty(), "the authorizer refused the ServiceAccount: {refused:#?}");

    // SIGTERM, as the kubelet stops a container: drained within the grace period, exit 0, Lease released.
    let pid = libc::pid_t::try_from(process.pid().unwrap()).unwrap();
    // SAFETY: kill(2) on the child's own pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = process.wait_exit(pod.grace).unwrap_or_else(|| panic!("still running {:?} after SIGTERM:\n{}", pod.grace, process.log_tail(40)));
    assert!(status.success(), "exit {status} after SIGTERM:\n{}", process.log_tail(40));
    let released = admin.json(&["get", "lease", &lease, "-n", NAMESPACE]);
    assert_eq!(released["spec"]["holderIdentity"].as_str().unwrap_or_default(), "", "the Lease was not released: {released}");
}
