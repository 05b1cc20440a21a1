//! The fixture itself: a real upstream server, ready, and nothing left
//! running after a test that panics or a process that is killed.

use std::time::Duration;

use real_cluster::{ControlPlane, eventually_within};

#[test]
fn kubectl_version_is_an_upstream_release_and_readyz_lists_etcd() {
    let Some(cluster) = ControlPlane::builder().pods_run(false).start() else { return };
    let admin = cluster.admin();
    let version = admin.json(&["version"]);
    let server = version["serverVersion"]["gitVersion"].as_str().unwrap_or_default().to_string();
    eprintln!("kubectl version: client {} server {server}", version["clientVersion"]["gitVersion"]);
    let built = cluster.binaries.versions();
    assert!(built.lines().any(|l| l == format!("kubernetes: {server}")), "the server says {server}; built: {built}");
    let minor: u32 = version["serverVersion"]["minor"].as_str().and_then(|m| m.trim_end_matches('+').parse().ok()).unwrap_or(0);
    assert!(version["serverVersion"]["major"] == "1" && minor >= 34, "{version}");
    assert_eq!(version["clientVersion"]["gitVersion"], version["serverVersion"]["gitVersion"], "kubectl of the same release");
    assert_eq!(version["serverVersion"]["gitTreeState"], "clean");

    let readyz = admin.ok(&["get", "--raw", "/readyz?verbose"]);
    eprintln!("{readyz}");
    assert!(readyz.lines().any(|l| l == "[+]etcd ok"), "{readyz}");
    assert!(readyz.trim_end().ends_with("readyz check passed"), "{readyz}");
}

/// `true` while a process with this pid exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()).unwrap_or("");
        state != "Z" && state != "X"
    })
}

/// The pids whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit(')').next()?.split_whitespace().nth(1)?.parse::<u32>().ok())
                .is_some_and(|ppid| ppid == parent)
        })
        .collect()
}

#[test]
fn a_panicking_test_leaves_no_control_plane_process_behind() {
    if real_cluster::binaries::Binaries::find().is_none() {
        return;
    }
    let mut pids = Vec::new();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let cluster = ControlPlane::builder().pods_run(false).keep_on_failure(false).start().expect("built");
        pids = cluster.pids();
        assert_eq!(pids.len(), 3, "etcd, kube-apiserver and kube-controller-manager run: {pids:?}");
        panic!("a failing test");
    }));
    assert!(outcome.is_err());
    let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "still running after the panic: {left:?}");
}

#[test]
fn a_killed_owner_takes_its_control_plane_with_it() {
    if real_cluster::binaries::Binaries::find().is_none() {
        return;
    }
    // `cargo xtask real-cluster`'s binary owns a control plane; SIGKILL runs
    // no destructor, so only the parent-death signal can stop its children.
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut owner = std::process::Command::new(env!("CARGO_BIN_EXE_real-cluster"))
        .stdout(log.reopen().unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the real-cluster binary");
    eventually_within("the owner to print its KUBECONFIG", Duration::from_secs(90), || {
        std::fs::read_to_string(log.path()).ok().filter(|s| s.contains("export KUBECONFIG=")).map(|_| ())
    });
    let pids = children_of(owner.id());
    assert!(pids.len() >= 5, "the whole control plane runs: {pids:?}");
    owner.kill().unwrap();
    owner.wait().unwrap();
    eventually_within("every child to be gone", Duration::from_secs(10), || pids.iter().all(|p| !alive(*p)).then_some(()));
}

/// `real-cluster --help` is a user command's help: it prints how to run and
/// build it, starts nothing (no etcd, no directory), and an unknown
/// argument is an error that says so, not a control plane.
#[test]
fn the_real_cluster_command_prints_its_help_and_starts_nothing() {
    let bin = env!("CARGO_BIN_EXE_real-cluster");
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin)
            .args(args)
            .env("REAL_CLUSTER_DIR", dir.path())
            .env("TMPDIR", dir.path())
            // Under `cargo xtask test` a missing control plane is a panic; here it is the point.
            .env_remove("REAL_CLUSTER_REQUIRED")
            .output()
            .expect("real-cluster runs");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for help in ["--help", "-h"] {
        let (code, stdout, _) = run(&[help]);
        assert_eq!(code, Some(0), "{help}");
        assert!(stdout.contains("Usage: real-cluster [--dir DIR]") && stdout.contains("cargo build --release -p real-cluster"), "{stdout}");
    }
    let (code, _, stderr) = run(&["--bogus"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unknown argument \"--bogus\""), "{stderr}");
    // An empty --dir holds no control plane: the command says how to build one.
    let (code, _, stderr) = run(&["--dir", dir.path().to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("cargo xtask real-cluster build"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).filter(|n| n != "skipped").collect();
    assert!(left.is_empty(), "nothing was started: {left:?}");
}
