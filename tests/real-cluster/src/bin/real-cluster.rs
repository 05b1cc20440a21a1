//! `cargo xtask real-cluster`: the real control plane on loopback for a
//! person, until Ctrl-C. Prints `export KUBECONFIG=...`; then, in another
//! terminal, `target/release/host --plugin target/plugins/cronjob.wasm`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn main() {
    let Some(plane) = real_cluster::ControlPlane::builder().start() else {
        eprintln!("run `cargo xtask real-cluster` (it builds the control plane first; it needs Go)");
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
