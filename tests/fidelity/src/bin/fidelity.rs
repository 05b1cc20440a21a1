//! `cargo xtask fidelity`: runs the corpus on the real control plane and
//! replays it on the embedded server, prints the figures and the
//! differences by cause, writes target/fidelity/report.json, and rewrites
//! apiserver/README.md's generated "Not faithful (yet)" list from the
//! allowed list. Exits non-zero when a difference is not on the list or a
//! listed one no longer occurs.

use std::process::ExitCode;

use fidelity::allowed::{self, Allowed};
use fidelity::report::Report;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("fidelity: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let allowed = Allowed::load(&Allowed::default_path())?;
    let readme_path = allowed::readme_path();
    let readme = std::fs::read_to_string(&readme_path)?;
    let updated = allowed::with_readme_block(&readme, &allowed.readme_block()).ok_or("apiserver/README.md has no fidelity block marks")?;
    if updated != readme {
        std::fs::write(&readme_path, updated)?;
        eprintln!("fidelity: rewrote the generated list in {}", readme_path.display());
    }
    let corpus = fidelity::corpus::load(&fidelity::corpus::default_dir())?;
    let Some(plane) = real_cluster::ControlPlane::builder().keep_on_failure(false).start() else {
        return Err("the real control plane is not built (it needs Go): run `cargo xtask real-cluster build`".into());
    };
    let run = fidelity::run(&plane, &corpus).await?;
    drop(plane);
    let report = Report::build(&run.recorded, &run.replayed, &allowed);
    let path = fidelity::write_files(&run, &report)?;
    print!("{}", report.summary(usize::MAX));
    println!("fidelity: report written to {}", path.display());
    Ok(report.unexplained().is_empty() && report.stale.is_empty())
}
