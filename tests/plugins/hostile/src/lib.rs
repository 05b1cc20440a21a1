//! A plugin that misbehaves in the way `spec.mode` of the parent asks.
//! Modes that probe the sandbox (file, env, socket, clock, random) report
//! what they saw as an Event, so a test can assert the access failed.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::operator::plugin::controller::{Action, Event, EventType, FieldError, Guest, GroupVersionKind, PluginManifest, ReconcileError};

struct Hostile;

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
        "many-actions" => return Ok((0..200_000).map(|i| event(format!("action {i}"))).collect()),
        "error" => return Err(ReconcileError { reason: "Refused".into(), message: "asked to fail".into(), retryable: false }),
        other => format!("unknown mode {other}"),
    };
    Ok(vec![event(report)])
}

impl Guest for Hostile {
    fn manifest() -> PluginManifest {
        PluginManifest {
            name: "hostile".into(),
            version: "0.0.1".into(),
            parent: GroupVersionKind { group: "test.operator.dev".into(), version: "v1".into(), kind: "Hostile".into() },
            children: vec![GroupVersionKind { group: "".into(), version: "v1".into(), kind: "ConfigMap".into() }],
            crds: vec![],
            finalizer: None,
        }
    }

    fn reconcile(parent: String, _children: Vec<String>, now: i64) -> Result<Vec<Action>, ReconcileError> {
        let parent: serde_json::Value = serde_json::from_str(&parent).unwrap_or_default();
        probe(parent["spec"]["mode"].as_str().unwrap_or("ok"), now)
    }

    fn validate(_object: String, _old: Option<String>) -> Vec<FieldError> {
        Vec::new()
    }

    fn default(object: String) -> Result<String, ReconcileError> {
        Ok(object)
    }
}

export!(Hostile);
