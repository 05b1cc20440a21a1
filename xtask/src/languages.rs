//! The plugins written in JavaScript and Python, built with the Bytecode
//! Alliance componentize tools to `target/plugins/<name>.wasm`: the examples
//! `hello-js` and `hello-py`, and the test-only sandbox probes `probe-js` and
//! `probe-py`.
//!
//! The tools come from their registries at pinned versions, installed into
//! the work tree once: componentize-js by `npm ci` into the plugin's
//! `node_modules/` (package-lock.json pins it), componentize-py by pip into a
//! virtual environment under `target/` (requirements.txt pins it). Neither
//! tool builds reproducibly (the same source gives a new sha256, so a new
//! plugin to the cache and to hot swap), so a component is rebuilt only when
//! one of its inputs is newer than it.
//!
//! A missing node/npm or python3 is an error naming what to install: CI must
//! not skip these plugins silently.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Instant, SystemTime};

use crate::{Result, root, status, target_dir};

/// A plugin outside Rust: its directory and entry point (a JS module file, or a
/// Python module name), built to `target/plugins/<name>.wasm`.
struct Source {
    name: &'static str,
    dir: &'static str,
    entry: &'static str,
}

/// The example plugins, then the test-only probes (the sandbox tests run them).
const JAVASCRIPT: &[Source] = &[
    Source { name: "hello-js", dir: "plugins/examples/hello-js", entry: "hello.js" },
    Source { name: "probe-js", dir: "tests/plugins/probe-js", entry: "probe.js" },
];
const PYTHON: &[Source] = &[
    Source { name: "hello-py", dir: "plugins/examples/hello-py", entry: "app" },
    Source { name: "probe-py", dir: "tests/plugins/probe-py", entry: "app" },
];
/// The JavaScript and Python plugins are built against contract 0.1, kept
/// byte-identical beside the current one: the host runs 0.1 and 0.2 side by side.
const V0_1_WIT: &str = "wit/v0.1";
/// Where componentize-js is installed (package.json and package-lock.json pin it).
const JS_TOOL_DIR: &str = "plugins/examples/hello-js";
/// The file pinning componentize-py.
const PY_REQUIREMENTS: &str = "plugins/examples/hello-py/requirements.txt";

/// Builds every JavaScript and Python plugin into `target/plugins/`.
pub fn build() -> Result {
    let out = target_dir().join("plugins");
    let js = componentize_js()?;
    for source in JAVASCRIPT {
        let dir = root().join(source.dir);
        let inputs = [dir.join(source.entry), root().join(JS_TOOL_DIR).join("package-lock.json"), root().join(V0_1_WIT)];
        // The `build` script of hello-js's package.json runs the same command.
        let mut c = Command::new(&js);
        c.current_dir(&dir).arg(source.entry).args(["--wit", "../../../wit/v0.1", "--world-name", "plugin"]);
        // Without wasi:http, which the host does not link; clocks and random stay
        // (the host serves them deterministically), or `Date.now()` would be the
        // build time and `Math.random()` a constant.
        c.args(["--disable", "http", "fetch-event", "--out"]).arg(out.join(format!("{}.wasm", source.name)));
        componentize(source, c, &inputs, "componentize-js")?;
    }
    let py = componentize_py()?;
    for source in PYTHON {
        let dir = root().join(source.dir);
        let inputs = [dir.join(format!("{}.py", source.entry)), root().join(PY_REQUIREMENTS), root().join(V0_1_WIT)];
        let mut c = Command::new(&py);
        c.current_dir(&dir).args(["--wit-path", "../../../wit/v0.1", "--world", "plugin", "componentize", source.entry, "--output"]);
        c.arg(out.join(format!("{}.wasm", source.name)));
        componentize(source, c, &inputs, "componentize-py")?;
    }
    Ok(())
}

/// Runs `command` unless the component is newer than all its `inputs`.
fn componentize(source: &Source, command: Command, inputs: &[PathBuf], tool: &str) -> Result {
    let out = target_dir().join("plugins").join(format!("{}.wasm", source.name));
    if is_fresh(&out, inputs) {
        return Ok(());
    }
    let started = Instant::now();
    status(command)?;
    eprintln!("xtask: {tool} built {} in {:.1?}", out.display(), started.elapsed());
    Ok(())
}

/// componentize-js from `node_modules/`, installed by `npm ci` when missing
/// or not the version package-lock.json pins.
fn componentize_js() -> Result<PathBuf> {
    let dir = root().join(JS_TOOL_DIR);
    require("node", "--version", "Node.js 18 or newer (e.g. `apt-get install nodejs npm`)")?;
    require("npm", "--version", "npm (e.g. `apt-get install npm`)")?;
    if !installed_js_tool_matches_lock(&dir)? {
        eprintln!("xtask: installing componentize-js from the npm registry (package-lock.json, about 30 s, once)");
        // `npm install` at the lock's exact versions, not `npm ci`: npm 11's `ci` refuses this
        // lock for the other platforms' optional binaries (jco-node-fs-win32-*, ...) the
        // registry lists without a version, which `install` skips as optional.
        status(npm(&dir, &["install", "--no-audit", "--no-fund", "--no-save"]))?;
    }
    Ok(dir.join("node_modules/.bin/componentize-js"))
}

fn npm(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("npm");
    c.current_dir(dir).args(args);
    c
}

/// True when `node_modules/` holds the componentize-js version package-lock.json pins.
fn installed_js_tool_matches_lock(dir: &Path) -> Result<bool> {
    let lock = read(&dir.join("package-lock.json"))?;
    let Ok(installed) = std::fs::read_to_string(dir.join("node_modules/@bytecodealliance/componentize-js/package.json")) else {
        return Ok(false);
    };
    let pinned = version_after(&lock, "\"node_modules/@bytecodealliance/componentize-js\"")
        .ok_or_else(|| format!("{}: no componentize-js entry", dir.join("package-lock.json").display()))?;
    Ok(version_after(&installed, "\"name\"").is_some_and(|v| v == pinned))
}

/// The first `"version": "X"` after `marker` in a JSON text.
fn version_after(text: &str, marker: &str) -> Option<String> {
    let rest = &text[text.find(marker)?..];
    let rest = &rest[rest.find("\"version\"")? + "\"version\"".len()..];
    let start = rest.find('"')? + 1;
    let len = rest[start..].find('"')?;
    Some(rest[start..start + len].to_string())
}

/// The componentize-py of `target/componentize-py-venv`, installed there from
/// PyPI at the version requirements.txt pins when it is missing or another.
fn componentize_py() -> Result<PathBuf> {
    let requirements = root().join(PY_REQUIREMENTS);
    let pinned = read(&requirements)?
        .lines()
        .find_map(|l| l.trim().strip_prefix("componentize-py==").map(str::to_string))
        .ok_or_else(|| format!("{}: no `componentize-py==VERSION` line", requirements.display()))?;
    let venv = target_dir().join("componentize-py-venv");
    let tool = venv.join("bin/componentize-py");
    let version = Command::new(&tool).arg("--version").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if version.as_deref() == Some(format!("componentize-py {pinned}").as_str()) {
        return Ok(tool);
    }
    require("python3", "--version", "Python 3.10 or newer with venv (e.g. `apt-get install python3 python3-venv`)")?;
    eprintln!("xtask: installing componentize-py {pinned} from PyPI into {} (about 15 s, once)", venv.display());
    let mut c = Command::new("python3");
    c.args(["-m", "venv"]).arg(&venv);
    status(c).map_err(|e| format!("{e}; is the python3 venv module installed (e.g. `apt-get install python3-venv`)?"))?;
    let mut c = Command::new(venv.join("bin/pip"));
    c.args(["install", "--disable-pip-version-check", "--quiet", "-r"]).arg(&requirements);
    status(c)?;
    Ok(tool)
}

/// Fails with what to install when `program` does not run.
fn require(program: &str, arg: &str, install: &str) -> Result {
    match Command::new(program).arg(arg).output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err(format!("`{program}` is needed to build the JavaScript and Python example plugins: install {install}")),
    }
}

/// True when `out` exists and is newer than every file under `inputs`.
fn is_fresh(out: &Path, inputs: &[PathBuf]) -> bool {
    let Some(built) = modified(out) else { return false };
    inputs.iter().all(|i| newest(i).is_some_and(|t| t < built))
}

fn newest(path: &Path) -> Option<SystemTime> {
    if path.is_dir() {
        std::fs::read_dir(path).ok()?.map(|e| newest(&e.ok()?.path())).try_fold(SystemTime::UNIX_EPOCH, |a, t| Some(a.max(t?)))
    } else {
        modified(path)
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))
}
