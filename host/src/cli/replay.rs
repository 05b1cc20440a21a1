//! `host replay --plugin NEW.wasm DIR...`: runs every reconcile recorded with
//! `--record DIR` again on NEW and compares NEW's answer with the recorded
//! one ([`operator_runtime::record::compare`]). Per call: agree, or the differing
//! actions (action, JSON path, old → new), or NEW's error; then
//! `N calls, A agree, D differ, E errors`.
//!
//! Exit codes: 0 every call agrees; 1 any call differs or NEW failed on it;
//! 2 bad input (an unreadable record or a line that is not a recorded call,
//! no calls at all, a NEW that does not load or reconciles another parent
//! kind than the recorded plugin).

use std::path::PathBuf;

use serde::Serialize;

use super::{Failure, SandboxArgs};
use operator_runtime::record::{self, Answer, Difference, Verdict, compare, redact};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The candidate plugin component (.wasm) to run the recorded calls on.
    #[arg(long)]
    plugin: PathBuf,
    /// Record directories written by `host run --record` or `host simulate --record`.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// `text` (one line per call, differences indented) or `json`.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

/// One replayed call, as `--output json` shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Replayed {
    /// `FILE:LINE` of the recorded call.
    at: String,
    parent: String,
    /// The plugin version that answered when recording.
    recorded: String,
    result: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    differences: Vec<Difference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    calls: usize,
    agree: usize,
    differ: usize,
    errors: usize,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} calls, {} agree, {} differ, {} errors", self.calls, self.agree, self.differ, self.errors)
    }
}

pub fn run(sandbox: &SandboxArgs, args: &Args) -> Result<(), Failure> {
    let calls = record::log::read(&args.dirs).map_err(|e| Failure::bad_input(operator_runtime::error_chain(&e)))?;
    if calls.is_empty() {
        let dirs: Vec<String> = args.dirs.iter().map(|d| d.display().to_string()).collect();
        return Err(Failure::bad_input(format!("no recorded calls in {}", dirs.join(", "))));
    }
    let sandbox = sandbox.sandbox().map_err(|e| Failure::bad_input(format!("{e:#}")))?;
    let plugin = sandbox.load_file(&args.plugin).map_err(|e| Failure::bad_input(operator_runtime::error_chain(&e)))?;
    let kind = &plugin.manifest().parent;
    if let Some((at, call)) = calls.iter().find(|(_, c)| c.parent_kind != *kind) {
        return Err(Failure::bad_input(format!(
            "{} reconciles {}/{}, but the call at {at} was recorded from {} {}, which reconciles {}/{}",
            args.plugin.display(),
            kind.api_version(),
            kind.kind,
            call.plugin,
            call.version,
            call.parent_kind.api_version(),
            call.parent_kind.kind
        )));
    }

    let mut summary = Summary::default();
    let mut replayed = Vec::new();
    for (at, call) in &calls {
        let mut answer =
            Answer::of(&plugin.reconcile_related_blocking(&call.inputs.parent, &call.inputs.children, &call.inputs.related, call.inputs.now));
        if call.redacted {
            redact::answer(&mut answer);
        }
        let verdict = compare::verdict(&call.answer, &answer);
        summary.calls += 1;
        let (differences, error) = match verdict {
            Verdict::Agree => {
                summary.agree += 1;
                (vec![], None)
            }
            Verdict::Differ(d) => {
                summary.differ += 1;
                (d, None)
            }
            Verdict::Error(f) => {
                summary.errors += 1;
                (vec![], Some(f.message))
            }
        };
        let result = match (&differences[..], &error) {
            (_, Some(_)) => "error",
            ([], None) => "agree",
            _ => "differ",
        };
        let entry = Replayed {
            at: at.clone(),
            parent: call.inputs.parent_name(),
            recorded: format!("{} {}", call.plugin, call.version),
            result,
            differences,
            error,
        };
        if let Format::Text = args.output {
            print_text(&entry);
        }
        replayed.push(entry);
    }
    match args.output {
        Format::Text => say(&summary.to_string()),
        Format::Json => {
            let doc = serde_json::json!({"plugin": {"name": plugin.name(), "version": plugin.manifest().version, "digest": plugin.info().digest}, "calls": replayed, "summary": summary});
            say(&serde_json::to_string_pretty(&doc).expect("serializable"));
        }
    }
    if summary.agree == summary.calls { Ok(()) } else { Err(Failure { code: 1, message: String::new() }) }
}

fn print_text(r: &Replayed) {
    say(&format!("{} {} (recorded from {}): {}", r.at, r.parent, r.recorded, r.result));
    for d in &r.differences {
        say(&format!("  {d}"));
    }
    if let Some(e) = &r.error {
        say(&format!("  {e}"));
    }
}

/// One line on stdout; a closed pipe (`| head`) is no reason to panic, the
/// exit code still tells the verdict.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}
