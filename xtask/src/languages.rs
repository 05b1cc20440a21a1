//! The example plugins written in JavaScript and Python, built with the
//! Bytecode Alliance componentize tools to `target/plugins/hello-js.wasm` and
//! `target/plugins/hello-py.wasm`.
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

/// Builds both plugins into `target/plugins/`.
pub fn build() -> Result {
    let out = target_dir().join("plugins");
    build_js(&out.join("hello-js.wasm"))?;
    build_py(&out.join("hello-py.wasm"))
}

fn build_js(out: &Path) -> Result {
    let dir = root().join("plugins/examples/hello-js");
    require("node", "--version", "Node.js 18 or newer (e.g. `apt-get install nodejs npm`)")?;
    require("npm", "--version", "npm (e.g. `apt-get install npm`)")?;
    if !installed_js_tool_matches_lock(&dir)? {
        eprintln!("xtask: installing componentize-js from the npm registry (package-lock.json, about 30 s, once)");
        status(npm(&dir, &["ci", "--no-audit", "--no-fund"]))?;
    }
    let inputs = [dir.join("hello.js"), dir.join("package-lock.json"), root().join("wit")];
    if is_fresh(out, &inputs) {
        return Ok(());
    }
    let started = Instant::now();
    // The package's `build` script is what an author runs by hand, too.
    status(npm(&dir, &["run", "build"]))?;
    copy(&dir.join("hello-js.wasm"), out)?;
    eprintln!("xtask: componentize-js built {} in {:.1?}", out.display(), started.elapsed());
    Ok(())
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

fn build_py(out: &Path) -> Result {
    let dir = root().join("plugins/examples/hello-py");
    let tool = componentize_py()?;
    let inputs = [dir.join("app.py"), dir.join("requirements.txt"), root().join("wit")];
    if is_fresh(out, &inputs) {
        return Ok(());
    }
    let started = Instant::now();
    let mut c = Command::new(&tool);
    c.current_dir(&dir).args(["--wit-path", "../../../wit", "--world", "plugin", "componentize", "app", "--output"]).arg(out);
    status(c)?;
    eprintln!("xtask: componentize-py built {} in {:.1?}", out.display(), started.elapsed());
    Ok(())
}

/// The componentize-py of `target/componentize-py-venv`, installed there from
/// PyPI at the version requirements.txt pins when it is missing or another.
fn componentize_py() -> Result<PathBuf> {
    let requirements = root().join("plugins/examples/hello-py/requirements.txt");
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

fn copy(from: &Path, to: &Path) -> Result {
    std::fs::copy(from, to).map(drop).map_err(|e| format!("copy {} to {}: {e}", from.display(), to.display()))
}
