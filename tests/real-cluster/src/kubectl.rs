//! The real kubectl of the server's release, against one kubeconfig.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

#[derive(Clone, Debug)]
pub struct Kubectl {
    program: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Kubectl {
    pub fn new(program: PathBuf, kubeconfig: PathBuf) -> Kubectl {
        Kubectl { program, kubeconfig }
    }

    /// The kubectl binary.
    pub fn program(&self) -> &std::path::Path {
        &self.program
    }

    /// Runs kubectl with `args`, whatever the outcome.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_stdin(args, None)
    }

    pub fn run_stdin(&self, args: &[&str], stdin: Option<&[u8]>) -> Output {
        let mut child = Command::new(&self.program)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
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
        let out = self.run(args);
        assert!(out.status.success(), "kubectl {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl apply -f -` of `yaml`, which must succeed.
    pub fn apply(&self, yaml: &str) -> String {
        let out = self.run_stdin(&["apply", "-f", "-"], Some(yaml.as_bytes()));
        assert!(out.status.success(), "kubectl apply failed: {}\n{yaml}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl ... -o json`, parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all)).expect("kubectl printed JSON")
    }

    /// The `items` of `kubectl get ... -o json`.
    pub fn items(&self, args: &[&str]) -> Vec<Value> {
        self.json(args)["items"].as_array().cloned().unwrap_or_default()
    }
}
