//! `cargo xtask api-surface`: starts the real control plane, captures its
//! API surface (`fidelity::surface`) and writes it to `apiserver/surface/`,
//! the files the embedded API server serves its built-in surface from.
//! Prints what changed against the committed files.

use std::process::ExitCode;

use fidelity::surface::{self, Surface};

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("api-surface: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let Some(plane) = real_cluster::ControlPlane::builder().pods_run(false).keep_on_failure(false).start() else {
        return Err("the real control plane is not built (it needs Go): run `cargo xtask real-cluster build`".into());
    };
    plane.wait_ready();
    let captured = surface::capture_plane(&plane).await?;
    drop(plane);
    let dir = surface::committed_dir();
    match Surface::load(&dir) {
        Ok(committed) => {
            let changed = committed.differences(&captured);
            eprintln!("api-surface: {} part(s) changed{}", changed.len(), changed.iter().map(|c| format!("\n  {c}")).collect::<String>());
        }
        Err(e) => eprintln!("api-surface: no committed surface to compare with ({e})"),
    }
    captured.write(&dir)?;
    eprintln!("api-surface: wrote {} ({} group versions, {} Table column sets)", dir.display(), captured.openapi.len(), captured.tables.len());
    Ok(())
}
