//! The `host` command line.
//!
//! Exit codes: 0 success; 1 a plugin could not be loaded or failed in the
//! sandbox (trap, deadline, memory, invalid output); 2 bad input (flags,
//! files); 3 the plugin reported an error of its own.

mod adapter_arena;
#[cfg(feature = "embedded")]
mod cluster;
mod componentize;
#[cfg(feature = "embedded")]
mod embedded_args;
mod generate;
mod input;
mod inspect;
mod kubeconfig;
mod leader_args;
mod new;
mod oci_args;
mod pull;
mod push;
mod reconcile;
mod replay;
mod run;
mod sharded;
mod sign;
#[cfg(feature = "embedded")]
mod simulate;
mod status;
mod validate;
mod webhook_args;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use operator_runtime::sandbox::{ChildCompiler, PrecompiledCache, Sandbox, SandboxConfig, Tiering};

#[derive(Debug, Parser)]
#[command(
    name = "host",
    version,
    about = "Runs Kubernetes controllers from sandboxed WebAssembly plugins",
    arg_required_else_help = true,
    after_help = "`run` is the default command: `host --plugin cronjob.wasm` is `host run --plugin cronjob.wasm`."
)]
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
    /// Create a plugin crate: typed spec/status, reconcile, fixtures, a sample.
    New(new::Args),
    /// Turn a WASI preview 1 core module (Go's `-buildmode=c-shared`) into a plugin component.
    Componentize(componentize::Args),
    /// Run one reconcile offline and print the actions.
    Reconcile(reconcile::Args),
    /// Run reconciles recorded with `--record DIR` on another plugin build and compare the answers.
    Replay(replay::Args),
    /// Check one object through the plugin's `default` and `validate`, as admission would.
    Validate(validate::Args),
    /// Run plugins as controllers against a cluster (or `--embedded`); the default command.
    Run(Box<run::Args>),
    /// Run plugins against the embedded cluster under virtual time and print what happened.
    #[cfg(feature = "embedded")]
    Simulate(simulate::Args),
    /// Run only the embedded cluster (API server + simulated cluster parts) for a host in another process.
    #[cfg(feature = "embedded")]
    Cluster(cluster::Args),
    /// Print deployment manifests derived from plugins: `crds` or `rbac`.
    Generate(generate::Args),
    /// Sign a plugin for `run --plugin-trust-key`: writes FILE.sig.
    Sign(sign::Args),
    /// Push a plugin to an OCI registry (CNCF Wasm layout) and print its digest.
    Push(push::Args),
    /// Pull and verify a registry plugin as `run` would, and print (or save) it.
    Pull(pull::Args),
    /// What a running host is doing: per plugin its version, tier, state, queue, recent reconciles and last error.
    Status(status::Args),
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
    /// Read-only directory of plugins precompiled ahead of time by a host of
    /// this same build, looked at before the cache (the image ships its
    /// plugins precompiled here). An artifact of another build or CPU is
    /// passed over and the plugin compiled as without it.
    #[arg(long, global = true, env = "HOST_PLUGIN_PRECOMPILED_DIR")]
    pub plugin_precompiled_dir: Option<PathBuf>,
    /// `run` and `inspect`: compile a plugin that is not cached with
    /// Cranelift before it runs. By default `run` serves it at once from a
    /// Winch build (compiled several times faster, slower code) and switches
    /// to Cranelift's build when the background compile is done, and
    /// `inspect` reads the manifest from a Winch build.
    #[arg(long, global = true)]
    pub no_plugin_baseline: bool,
}

impl SandboxArgs {
    pub fn sandbox(&self) -> anyhow::Result<Sandbox> {
        self.sandbox_tiered(Tiering::Off)
    }

    /// [`Self::sandbox`] serving uncached plugins by `tiering` (unless
    /// `--no-plugin-baseline`).
    pub fn sandbox_tiered(&self, tiering: Tiering) -> anyhow::Result<Sandbox> {
        let mut cache = if self.no_plugin_cache {
            PrecompiledCache::disabled()
        } else {
            PrecompiledCache::at(self.plugin_cache_dir.clone().unwrap_or_else(default_cache_dir))?
        };
        if let Some(dir) = &self.plugin_precompiled_dir {
            cache = cache.with_shipped(dir);
        }
        let tiering = if self.no_plugin_baseline { Tiering::Off } else { tiering };
        let child_compiler = match (tiering, cache.dir()) {
            (Tiering::BaselineFirst, Some(dir)) => self.child_compiler(dir),
            _ => None,
        };
        Sandbox::new(SandboxConfig {
            deadline: self.plugin_deadline,
            memory_limit: usize::try_from(self.plugin_memory_mib << 20)?,
            cache,
            tiering,
            child_compiler,
            ..SandboxConfig::default()
        })
    }

    /// A tier-up's Cranelift compile in a child process: this same binary
    /// with these sandbox flags (they make the engine configuration the
    /// artifact's name carries), `--no-plugin-baseline inspect FILE`, which
    /// compiles into the cache `dir`. The plugin's bytes go through a
    /// temporary file in `dir`, removed afterwards.
    fn child_compiler(&self, dir: &Path) -> Option<ChildCompiler> {
        let program =
            std::env::current_exe().inspect_err(|e| tracing::warn!(error = %e, "cannot find this binary; plugins are compiled in-process")).ok()?;
        let (dir, deadline, memory_mib) = (dir.to_path_buf(), self.plugin_deadline, self.plugin_memory_mib);
        Some(ChildCompiler::new(move |bytes| {
            let file = tempfile::Builder::new().suffix(".wasm").tempfile_in(&dir).map_err(|e| format!("temporary file in {}: {e}", dir.display()))?;
            std::fs::write(file.path(), bytes).map_err(|e| format!("write {}: {e}", file.path().display()))?;
            let out = std::process::Command::new(&program)
                .arg("--plugin-cache-dir")
                .arg(&dir)
                .args(["--plugin-deadline", &format!("{}ms", deadline.as_millis()), "--plugin-memory-mib", &memory_mib.to_string()])
                .args(["--no-plugin-baseline", "inspect"])
                .arg(file.path())
                .env_remove("HOST_PLUGIN_PRECOMPILED_DIR")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .output()
                .map_err(|e| format!("run {}: {e}", program.display()))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!("{} exited {}: {}", program.display(), out.status, String::from_utf8_lossy(&out.stderr).trim()))
            }
        }))
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

/// Parses `1s`, `250ms`, `2m`, `1h30m`: the one syntax of every flag and spec
/// ([`operator_runtime::clock::parse_duration`], humantime).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    operator_runtime::clock::parse_duration(text)
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

/// `host --plugin X ...` is `host run --plugin X ...`: inserts `run` before
/// the first argument that is neither a global flag (with its value) nor a
/// subcommand, help or version. Read from clap's own model of the command
/// line, so a new subcommand or global flag needs no change here.
fn with_default_command(mut args: Vec<OsString>) -> Vec<OsString> {
    let cmd = Cli::command();
    let mut i = 1;
    while let Some(arg) = args.get(i).and_then(|a| a.to_str()) {
        let Some(long) = arg.strip_prefix("--") else { break };
        let (name, inline_value) = long.split_once('=').map_or((long, false), |(n, _)| (n, true));
        let Some(global) = cmd.get_arguments().find(|a| a.is_global_set() && a.get_long() == Some(name)) else { break };
        i += if !inline_value && global.get_action().takes_values() { 2 } else { 1 };
    }
    let is_run_flag = args.get(i).and_then(|a| a.to_str()).is_some_and(|a| a.starts_with('-') && !matches!(a, "-h" | "--help" | "-V" | "--version"));
    if is_run_flag {
        args.insert(i, "run".into());
    }
    args
}

/// Subcommands that run no plugin: the sandbox's global flags mean nothing
/// to them, so their `--help` leaves them out (clap would list them).
const WITHOUT_SANDBOX: &[&str] = &["new", "componentize", "sign", "status", "cluster"];

/// The command line as clap parses it, with the sandbox flags hidden from
/// the help of [`WITHOUT_SANDBOX`] (still accepted there, as before any
/// subcommand, so `host --no-plugin-cache new x` keeps working).
fn command() -> clap::Command {
    let mut cmd = Cli::command();
    // Global flags reach the subcommands when the command is built; hiding
    // them has to come after that.
    cmd.build();
    for name in WITHOUT_SANDBOX {
        if cmd.find_subcommand(name).is_some() {
            cmd = cmd.mut_subcommand(name, |sub| sub.mut_args(|a| if a.is_global_set() { a.hide(true) } else { a }));
        }
    }
    cmd
}

fn parse(args: Vec<OsString>) -> Cli {
    use clap::FromArgMatches;
    let matches = command().get_matches_from(with_default_command(args));
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

pub fn main() -> ExitCode {
    let cli = parse(std::env::args_os().collect());
    init_tracing();
    let result = match &cli.command {
        Command::Inspect(args) => inspect::run(&cli.sandbox, args),
        Command::New(args) => new::run(args),
        Command::Componentize(args) => componentize::run(args),
        Command::Reconcile(args) => reconcile::run(&cli.sandbox, args),
        Command::Replay(args) => replay::run(&cli.sandbox, args),
        Command::Run(args) => run::run(&cli.sandbox, args),
        Command::Validate(args) => validate::run(&cli.sandbox, args),
        #[cfg(feature = "embedded")]
        Command::Simulate(args) => simulate::run(&cli.sandbox, args),
        #[cfg(feature = "embedded")]
        Command::Cluster(args) => cluster::run(args),
        Command::Generate(args) => generate::run(&cli.sandbox, args),
        Command::Sign(args) => sign::run(args),
        Command::Push(args) => push::run(args),
        Command::Pull(args) => pull::run(args),
        Command::Status(args) => status::run(args),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(line: &str) -> String {
        let args = with_default_command(line.split_whitespace().map(OsString::from).collect());
        args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn run_is_the_default_command() {
        assert_eq!(parsed("host --plugin a.wasm"), "host run --plugin a.wasm");
        assert_eq!(parsed("host --plugin-cache-dir /c --plugin a.wasm"), "host --plugin-cache-dir /c run --plugin a.wasm");
        assert_eq!(
            parsed("host --no-plugin-cache --plugin-deadline=2s -n x --plugin a.wasm"),
            "host --no-plugin-cache --plugin-deadline=2s run -n x --plugin a.wasm"
        );
        assert!(Cli::try_parse_from(with_default_command(["host", "--embedded", "--plugin", "a.wasm"].map(OsString::from).to_vec())).is_ok());
    }

    #[test]
    fn help_of_a_command_that_runs_no_plugin_lists_only_its_own_flags() {
        let help = |name: &str| command().find_subcommand_mut(name).expect("a subcommand").render_long_help().to_string();
        let new = help("new");
        assert!(new.contains("--sdk") && new.contains("--group"), "{new}");
        assert!(!new.contains("--plugin-deadline") && !new.contains("--no-plugin-baseline"), "{new}");
        assert!(help("inspect").contains("--plugin-deadline"), "commands that run plugins keep the sandbox flags");
        let cli = parse(["host", "--no-plugin-cache", "new", "demo"].map(OsString::from).to_vec());
        assert!(cli.sandbox.no_plugin_cache && matches!(cli.command, Command::New(_)));
    }

    #[test]
    fn subcommands_help_and_version_are_left_alone() {
        for line in ["host run --plugin a.wasm", "host --plugin-cache-dir /c inspect a.wasm", "host --help", "host -V", "host", "host help run"] {
            assert_eq!(parsed(line), line);
        }
    }
}
