//! The `host` command line.
//!
//! Exit codes: 0 success; 1 a plugin could not be loaded or failed in the
//! sandbox (trap, deadline, memory, invalid output); 2 bad input (flags,
//! files); 3 the plugin reported an error of its own.

#[cfg(feature = "embedded")]
mod cluster;
mod kubeconfig;
#[cfg(feature = "embedded")]
mod embedded_args;
mod generate;
mod input;
mod inspect;
mod leader_args;
mod reconcile;
mod run;
#[cfg(feature = "embedded")]
mod simulate;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::sandbox::{PrecompiledCache, Sandbox, SandboxConfig};

#[derive(Debug, Parser)]
#[command(name = "host", version, about = "Runs Kubernetes controllers from sandboxed WebAssembly plugins")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show what a plugin is: manifest, contract version, imports, exports, size.
    Inspect(inspect::Args),
    /// Run one reconcile offline and print the actions.
    Reconcile(reconcile::Args),
    /// Run plugins as controllers against a cluster (or `--embedded`).
    Run(run::Args),
    /// Run plugins against the embedded cluster under virtual time and print what happened.
    #[cfg(feature = "embedded")]
    Simulate(simulate::Args),
    /// Run only the embedded cluster (API server + simulated cluster parts) for a host in another process.
    #[cfg(feature = "embedded")]
    Cluster(cluster::Args),
    /// Print deployment manifests derived from plugins: `crds` or `rbac`.
    Generate(generate::Args),
}

/// Sandbox limits, shared by every subcommand that runs plugins.
#[derive(Debug, clap::Args)]
pub struct SandboxArgs {
    /// Wall-clock limit of one plugin call, e.g. `1s`, `250ms`.
    #[arg(long, global = true, default_value = "1s", value_parser = parse_duration, env = "HOST_PLUGIN_DEADLINE")]
    pub plugin_deadline: Duration,
    /// Memory limit of one plugin instance, in MiB.
    #[arg(long, global = true, default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..=4096), env = "HOST_PLUGIN_MEMORY_MIB")]
    pub plugin_memory_mib: u64,
    /// Directory for precompiled plugins (created if missing).
    #[arg(long, global = true, env = "HOST_PLUGIN_CACHE_DIR", conflicts_with = "no_plugin_cache")]
    pub plugin_cache_dir: Option<PathBuf>,
    /// Compile plugins on every load instead of caching the artifact.
    #[arg(long, global = true)]
    pub no_plugin_cache: bool,
}

impl SandboxArgs {
    pub fn sandbox(&self) -> anyhow::Result<Sandbox> {
        let cache = if self.no_plugin_cache {
            PrecompiledCache::disabled()
        } else {
            PrecompiledCache::at(self.plugin_cache_dir.clone().unwrap_or_else(default_cache_dir))?
        };
        Sandbox::new(SandboxConfig {
            deadline: self.plugin_deadline,
            memory_limit: usize::try_from(self.plugin_memory_mib << 20)?,
            cache,
            ..SandboxConfig::default()
        })
    }
}

/// `$XDG_CACHE_HOME/operator-host/plugins`, else `~/.cache/...`, else a
/// directory under the system temp dir.
fn default_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("operator-host")
        .join("plugins")
}

/// Parses `1s`, `250ms`, `2m`, `1h30m` (humantime).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e} (expected e.g. 500ms, 2s, 1m)"))
}

#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum OutputFormat {
    #[default]
    Json,
    Yaml,
}

/// A failure with its exit code; the message is printed to stderr.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self { code: 2, message: message.into() }
    }

    pub fn plugin(message: impl std::fmt::Display) -> Self {
        Self { code: 1, message: message.to_string() }
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let result = match &cli.command {
        Command::Inspect(args) => inspect::run(&cli.sandbox, args),
        Command::Reconcile(args) => reconcile::run(&cli.sandbox, args),
        Command::Run(args) => run::run(&cli.sandbox, args),
        #[cfg(feature = "embedded")]
        Command::Simulate(args) => simulate::run(&cli.sandbox, args),
        #[cfg(feature = "embedded")]
        Command::Cluster(args) => cluster::run(args),
        Command::Generate(args) => generate::run(&cli.sandbox, args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.message.is_empty() {
                eprintln!("error: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("HOST_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal();
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).try_init();
}
