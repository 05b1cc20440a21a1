//! `real-cluster`: the real control plane on loopback for a person, until
//! Ctrl-C (`cargo xtask real-cluster` builds and starts it; `--help` says
//! how to run it by hand). Prints `export KUBECONFIG=...`; then, in another
//! terminal, `target/release/host run --plugin target/plugins/cronjob.wasm`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

const USAGE: &str = "\
real-cluster: a real Kubernetes control plane on loopback (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok as the kubelet), built from
upstream's Go modules pinned in tests/real-cluster/go/. Prints
`export KUBECONFIG=...` and runs until Ctrl-C, which stops every process and
removes the control plane's directory.

Usage: real-cluster [--dir DIR]

Options:
  --dir DIR   where the control plane was built: DIR/bin/{etcd,kube-apiserver,
              kube-controller-manager,kube-scheduler,kubectl,kwok} and
              DIR/kwok-stages.yaml (default: $REAL_CLUSTER_DIR, else
              <target>/real-cluster of the repository this binary was built in,
              where `cargo xtask real-cluster build` puts them)
  -h, --help  print this help

Build it: `cargo xtask real-cluster build` (the control plane; needs Go 1.26 or
newer), `cargo build --release -p real-cluster --bin real-cluster` (this binary,
target/release/real-cluster). `cargo xtask real-cluster` does both and starts it.";

/// What the command line asked for.
enum Command {
    Help,
    Start { dir: Option<PathBuf> },
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
    let mut dir = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--dir" => dir = Some(PathBuf::from(args.next().ok_or("--dir needs a directory")?)),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Command::Start { dir })
}

fn main() {
    let dir = match parse(std::env::args().skip(1)) {
        Ok(Command::Help) => {
            println!("{USAGE}");
            return;
        }
        Ok(Command::Start { dir }) => dir,
        Err(e) => {
            eprintln!("real-cluster: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Some(dir) = dir {
        // SAFETY: set before any other thread exists.
        unsafe { std::env::set_var(real_cluster::binaries::DIR_VAR, dir) };
    }
    let Some(plane) = real_cluster::ControlPlane::builder().start() else {
        eprintln!(
            "real-cluster: the control plane is not built: `cargo xtask real-cluster build` builds it (it needs Go), or pass --dir (see --help)"
        );
        std::process::exit(2);
    };
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, stop as *const () as libc::sighandler_t);
    }
    let kubectl = plane.binaries.path("kubectl");
    println!("{}", plane.binaries.versions().trim_end());
    println!("# kubectl of the same release: {}", kubectl.display());
    println!("# logs: {}", plane.dir().join("logs").display());
    println!("export KUBECONFIG={}", plane.kubeconfig.display());
    println!("# Ctrl-C stops the control plane and removes its directory");
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(plane);
}
