//! A plugin that misbehaves in the way `spec.mode` of the parent asks.
//! Modes that probe the sandbox (file, env, socket, clock, random) report
//! what they saw as an Event, so a test can assert the access failed.
//! Modes that try a forbidden action ([`forbidden`]) return an allowed create
//! first, so a test can see the whole batch is refused, not just one action.

wit_bindgen::generate!({ path: "../../../wit/v0.1", world: "plugin" });

use exports::operator::plugin::controller::{
    Action, Deletion, Event, EventType, FieldError, FieldErrorKind, GroupVersionKind, Guest, MergePatch, ObjectRef, PluginManifest, Propagation,
    ReconcileError,
};
use serde_json::{Value, json};

struct Hostile;

/// The Hostile CRD: any spec, with the status and scale subresources (a
/// `kubectl scale hostile` is how a test writes `spec.replicas` around the
/// object's own endpoint).
const HOSTILE_CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "hostiles.test.operator.dev"},
  "spec": {"group": "test.operator.dev", "scope": "Namespaced",
    "names": {"plural": "hostiles", "singular": "hostile", "kind": "Hostile", "listKind": "HostileList"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}"#;

fn event(message: String) -> Action {
    Action::Event(Event { event_type: EventType::Normal, reason: "Probe".into(), message })
}

fn probe(mode: &str, now: i64) -> Result<Vec<Action>, ReconcileError> {
    let report = match mode {
        "ok" => "fine".to_string(),
        "loop" => {
            let mut i: u64 = 0;
            loop {
                i = std::hint::black_box(i.wrapping_add(1));
            }
        }
        "memory" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "panic" => panic!("hostile plugin panicked on purpose"),
        "output" => {
            let chunk = "x".repeat(1 << 20);
            for _ in 0..100 {
                println!("{chunk}");
            }
            "wrote 100 MiB".into()
        }
        "log-flood" => {
            let chunk = "y".repeat(1 << 20);
            for _ in 0..100 {
                operator::plugin::log::log(operator::plugin::log::Level::Info, &chunk);
            }
            "logged 100 MiB".into()
        }
        "garbage" => return Ok(vec![Action::Create("{this is not json".into())]),
        "not-object" => return Ok(vec![Action::SetStatus("[1,2,3]".into())]),
        "file" => match std::fs::read_to_string("/etc/passwd") {
            Ok(_) => "ESCAPED: read /etc/passwd".into(),
            Err(e) => format!("denied: {e}"),
        },
        "env" => {
            let vars: Vec<_> = std::env::vars().collect();
            if vars.is_empty() { "denied: no environment".into() } else { format!("ESCAPED: {} env vars", vars.len()) }
        }
        "socket" => match std::net::TcpStream::connect("127.0.0.1:1") {
            Ok(_) => "ESCAPED: connected".into(),
            Err(e) => format!("denied: {e}"),
        },
        "clock" => {
            let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
            format!("clock={wall} now={now}")
        }
        "random" => {
            use std::collections::hash_map::RandomState;
            use std::hash::BuildHasher;
            format!("hash={}", RandomState::new().hash_one(42u64))
        }
        "remember" => {
            // One static initialised from the memory image (.data) and one
            // zeroed (.bss): a fresh instance sees 7 and 0 every call, even
            // though the host reuses the pool slot and keeps pages resident.
            use std::sync::atomic::{AtomicU64, Ordering};
            static IMAGE: AtomicU64 = AtomicU64::new(7);
            static ZEROED: AtomicU64 = AtomicU64::new(0);
            let seen = (IMAGE.fetch_add(1, Ordering::Relaxed), ZEROED.fetch_add(1, Ordering::Relaxed));
            // Dirty a few heap pages too, so the reset has more than statics to undo.
            std::hint::black_box(vec![0xAAu8; 256 << 10]);
            format!("image={} zeroed={}", seen.0, seen.1)
        }
        "many-actions" => return Ok((0..200_000).map(|i| event(format!("action {i}"))).collect()),
        "error" => return Err(ReconcileError { reason: "Refused".into(), message: "asked to fail".into(), retryable: false }),
        other => format!("unknown mode {other}"),
    };
    Ok(vec![event(report)])
}

fn config_map(name: &str) -> ObjectRef {
    ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: String::new(), name: name.into() }
}

/// The forbidden action `mode` names, after an allowed create of
/// `<parent>-allowed`; `None` for other modes. `spec.target` names the
/// object to steal for the modes that change an existing one.
fn forbidden(mode: &str, parent: &Value) -> Option<Vec<Action>> {
    let name = parent["metadata"]["name"].as_str().unwrap_or("hostile");
    let target = parent["spec"]["target"].as_str().unwrap_or("");
    let allowed = Action::Create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("{name}-allowed")}}).to_string());
    let attempt = match mode {
        "keep" => return Some(vec![allowed]),
        "create-elsewhere" => Action::Create(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("{name}-elsewhere"), "namespace": "kube-system"}})
                .to_string(),
        ),
        "create-undeclared" => {
            Action::Create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("{name}-secret")}}).to_string())
        }
        "create-cluster-scoped" => {
            Action::Create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("{name}-ns")}}).to_string())
        }
        "replace-unowned" => {
            Action::Replace(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": target}, "data": {"stolen": "yes"}}).to_string())
        }
        "patch-unowned" => Action::Patch(MergePatch { target: config_map(target), patch: json!({"data": {"stolen": "yes"}}).to_string() }),
        "delete-unowned" => Action::Delete(Deletion { target: config_map(target), propagation: Propagation::Background }),
        "delete-parent" => Action::Delete(Deletion {
            target: ObjectRef {
                api_version: parent["apiVersion"].as_str().unwrap_or_default().into(),
                kind: parent["kind"].as_str().unwrap_or_default().into(),
                namespace: parent["metadata"]["namespace"].as_str().unwrap_or_default().into(),
                name: name.into(),
            },
            propagation: Propagation::Background,
        }),
        _ => return None,
    };
    Some(vec![allowed, attempt])
}

impl Guest for Hostile {
    fn manifest() -> PluginManifest {
        PluginManifest {
            name: "hostile".into(),
            version: "0.0.1".into(),
            parent: GroupVersionKind { group: "test.operator.dev".into(), version: "v1".into(), kind: "Hostile".into() },
            // Namespace is declared so that the scope rule, not the
            // declared-kinds rule, is what refuses a cluster-scoped child.
            children: vec![
                GroupVersionKind { group: "".into(), version: "v1".into(), kind: "ConfigMap".into() },
                GroupVersionKind { group: "".into(), version: "v1".into(), kind: "Namespace".into() },
            ],
            crds: vec![HOSTILE_CRD.into()],
            finalizer: None,
        }
    }

    fn reconcile(parent: String, _children: Vec<String>, now: i64) -> Result<Vec<Action>, ReconcileError> {
        let parent: Value = serde_json::from_str(&parent).unwrap_or_default();
        let mode = parent["spec"]["mode"].as_str().unwrap_or("ok");
        match forbidden(mode, &parent) {
            Some(actions) => Ok(actions),
            None => probe(mode, now),
        }
    }

    /// `spec.mode: validate-loop` spins until the sandbox's deadline stops
    /// the call: an admission call as slow as a call can be. `spec.mode:
    /// odd-replicas` refuses an even `spec.replicas`, a rule no schema
    /// states (the one `kubectl scale` must not go around).
    fn validate(object: String, _old: Option<String>) -> Vec<FieldError> {
        let object: Value = serde_json::from_str(&object).unwrap_or_default();
        match object["spec"]["mode"].as_str() {
            Some("validate-loop") => {
                let mut i: u64 = 0;
                loop {
                    i = std::hint::black_box(i.wrapping_add(1));
                }
            }
            Some("odd-replicas") => match object["spec"]["replicas"].as_i64() {
                Some(n) if n % 2 == 0 => {
                    vec![FieldError {
                        field: "spec.replicas".into(),
                        kind: FieldErrorKind::Invalid,
                        value: Some(n.to_string()),
                        detail: "must be odd".into(),
                    }]
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    fn default(object: String) -> Result<String, ReconcileError> {
        Ok(object)
    }
}

export!(Hostile);
