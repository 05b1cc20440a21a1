//! Bad input to `host run` — flags, plugin files, kubeconfigs — stops at once
//! with exit code 2 and one clear line naming what is wrong, before anything
//! touches a cluster.

use crate::common;

use std::path::Path;
use std::process::Command;

struct Case {
    what: &'static str,
    args: Vec<String>,
    kubeconfig: Option<String>,
    /// Words stderr must contain.
    says: String,
}

fn run(case: &Case, cache: &Path) -> (Option<i32>, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_host"));
    c.arg("--plugin-cache-dir").arg(cache).env("HOST_LOG", "warn").env_remove("KUBECONFIG").env("HOME", cache);
    if let Some(k) = &case.kubeconfig {
        c.env("KUBECONFIG", k);
    }
    let out = c.arg("run").args(&case.args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn each_bad_input_exits_2_with_one_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).display().to_string();
    let cronjob = common::built_plugin("cronjob").display().to_string();
    let contract_v1 = common::wasm("contract-v1").display().to_string();
    std::fs::write(d("text.wasm"), "not a plugin").unwrap();
    std::fs::write(d("core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(d("broken.yaml"), "apiVersion: v1\nkind: Config\nclusters: [oops\n").unwrap();
    std::fs::write(d("no-context.yaml"), "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n").unwrap();
    std::fs::create_dir(d("a-directory")).unwrap();
    let plugin = |p: &str| vec!["--metrics-addr".to_string(), "0".into(), "--plugin".into(), p.to_string()];
    let with = |mut v: Vec<String>, extra: &[&str]| {
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let cases = vec![
        Case { what: "an unknown flag", args: with(plugin(&cronjob), &["--bogus"]), kubeconfig: None, says: "unexpected argument '--bogus'".into() },
        Case {
            what: "a bad duration",
            args: with(plugin(&cronjob), &["--resync", "forever"]),
            kubeconfig: None,
            says: "invalid value 'forever' for '--resync".into(),
        },
        Case {
            what: "a ConfigMap without a namespace",
            args: vec!["--plugin-configmap".into(), "plugins".into()],
            kubeconfig: None,
            says: "expected NAMESPACE/NAME, got \"plugins\"".into(),
        },
        Case { what: "zero concurrency", args: with(plugin(&cronjob), &["--concurrency", "0"]), kubeconfig: None, says: "--concurrency".into() },
        Case {
            what: "a missing plugin file",
            args: with(plugin(&d("missing.wasm")), &["--embedded"]),
            kubeconfig: None,
            says: format!("cannot read plugin file {}", d("missing.wasm")),
        },
        Case {
            what: "a text file as plugin",
            args: with(plugin(&d("text.wasm")), &["--embedded"]),
            kubeconfig: None,
            says: "do not start with the Wasm magic number".into(),
        },
        Case {
            what: "a core module as plugin",
            args: with(plugin(&d("core.wasm")), &["--embedded"]),
            kubeconfig: None,
            says: "it is a core Wasm module; build it as a component".into(),
        },
        Case {
            what: "a plugin of another contract major",
            args: with(plugin(&contract_v1), &["--embedded"]),
            kubeconfig: None,
            says: "was built against operator:plugin@1.0.0; this host supports operator:plugin@0.1.x".into(),
        },
        Case {
            what: "a kubeconfig that does not exist",
            args: plugin(&cronjob),
            kubeconfig: Some(d("missing.yaml")),
            says: format!("cannot read kubeconfig {}: No such file or directory", d("missing.yaml")),
        },
        Case {
            what: "a directory as kubeconfig",
            args: plugin(&cronjob),
            kubeconfig: Some(d("a-directory")),
            says: format!("cannot read kubeconfig {}: Is a directory", d("a-directory")),
        },
        Case {
            what: "a kubeconfig that is not YAML",
            args: plugin(&cronjob),
            kubeconfig: Some(d("broken.yaml")),
            says: format!("kubeconfig {} is not valid", d("broken.yaml")),
        },
        Case {
            what: "a kubeconfig without a context",
            args: plugin(&cronjob),
            kubeconfig: Some(d("no-context.yaml")),
            says: format!("kubeconfig {}: failed to determine current context", d("no-context.yaml")),
        },
    ];
    let mut wrong = Vec::new();
    for case in &cases {
        let (code, stderr) = run(case, dir.path());
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        let repeats = errors.first().is_some_and(|e| {
            let clauses: Vec<&str> = e.split(": ").collect();
            (1..clauses.len()).any(|i| clauses[..i].contains(&clauses[i]) && clauses[i].len() > 12)
        });
        if code != Some(2) || !stderr.contains(&case.says) || errors.len() != 1 || repeats {
            wrong.push(format!("{}: exit {code:?}, stderr:\n{stderr}", case.what));
        }
    }
    assert!(wrong.is_empty(), "{} of {} cases were not refused clearly:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
}
