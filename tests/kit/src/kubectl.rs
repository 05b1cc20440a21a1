//! The real kubectl against one kubeconfig, as a user runs it: blocking for tests that drive
//! processes, async (tokio) for tests that hold a server in the same process.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// `/usr/bin/kubectl` (the real client the tests are written against), or `kubectl` on PATH.
pub fn system() -> PathBuf {
    let system = PathBuf::from("/usr/bin/kubectl");
    if system.exists() { system } else { PathBuf::from("kubectl") }
}

/// One kubectl binary and the kubeconfig it talks through.
#[derive(Clone, Debug)]
pub struct Kubectl {
    program: PathBuf,
    kubeconfig: PathBuf,
    home: Option<PathBuf>,
}

impl Kubectl {
    /// `program` with `--kubeconfig kubeconfig`.
    pub fn new(program: impl Into<PathBuf>, kubeconfig: impl Into<PathBuf>) -> Kubectl {
        Kubectl { program: program.into(), kubeconfig: kubeconfig.into(), home: None }
    }

    /// The same, with `dir` as HOME and its `cache` as kubectl's discovery cache, so that tests
    /// running at once do not share (and race on) `~/.kube/cache`.
    pub fn with_home(mut self, dir: impl Into<PathBuf>) -> Kubectl {
        self.home = Some(dir.into());
        self
    }

    /// The kubectl binary.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The kubeconfig it uses.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// kubectl with `args` after the kubeconfig (and home) flags, not started; stdio as the
    /// caller sets it.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.program);
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        if let Some(home) = &self.home {
            command.arg("--cache-dir").arg(home.join("cache")).env("HOME", home);
        }
        command.args(args);
        command
    }

    /// Runs kubectl with `args`, whatever the outcome.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_stdin(args, None)
    }

    /// Runs kubectl with `args` and `stdin` on its standard input, whatever the outcome.
    pub fn run_stdin(&self, args: &[&str], stdin: Option<&[u8]>) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.program.display()));
        let mut input = child.stdin.take().expect("piped stdin");
        if let Some(bytes) = stdin {
            input.write_all(bytes).expect("write kubectl's stdin");
        }
        drop(input);
        child.wait_with_output().expect("wait for kubectl")
    }

    /// kubectl that must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        self.stdout_of_success(args, self.run(args))
    }

    /// `kubectl apply -f -` of `yaml`, which must succeed; its stdout.
    pub fn apply(&self, yaml: &str) -> String {
        let out = self.run_stdin(&["apply", "-f", "-"], Some(yaml.as_bytes()));
        assert!(out.status.success(), "kubectl apply failed: {}\n{yaml}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl <args> -o json`, parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        parse(&self.ok(&with_json_output(args)))
    }

    /// The `items` of `kubectl get <args> -o json`.
    pub fn items(&self, args: &[&str]) -> Vec<Value> {
        items_of(self.json(args))
    }

    /// [`Kubectl::run`] on tokio's blocking-free process API (killed if the future is dropped).
    pub async fn run_async(&self, args: &[&str]) -> Output {
        let mut command = tokio::process::Command::from(self.command(args));
        command.kill_on_drop(true).output().await.unwrap_or_else(|e| panic!("run {}: {e}", self.program.display()))
    }

    /// [`Kubectl::ok`], async.
    pub async fn ok_async(&self, args: &[&str]) -> String {
        self.stdout_of_success(args, self.run_async(args).await)
    }

    /// [`Kubectl::json`], async.
    pub async fn json_async(&self, args: &[&str]) -> Value {
        parse(&self.ok_async(&with_json_output(args)).await)
    }

    /// [`Kubectl::items`], async.
    pub async fn items_async(&self, args: &[&str]) -> Vec<Value> {
        items_of(self.json_async(args).await)
    }

    fn stdout_of_success(&self, args: &[&str], out: Output) -> String {
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {} failed ({}, kubeconfig {}): {stdout}{}",
            args.join(" "),
            out.status,
            self.kubeconfig.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

fn with_json_output<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    all
}

fn parse(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("kubectl printed no JSON ({e}): {stdout}"))
}

fn items_of(list: Value) -> Vec<Value> {
    list["items"].as_array().cloned().unwrap_or_default()
}
