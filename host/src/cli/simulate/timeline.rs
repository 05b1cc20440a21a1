//! The timeline `host simulate` prints: what the user applied, what the host
//! wrote for its plugins (actions and Events), and how the parent and child
//! objects changed, each at its virtual time.
//!
//! Output is a pure function of the simulated run: no UIDs, resourceVersions
//! or managedFields; names the API server generated (`generateName`) are
//! replaced by the prefix and a counter in order of creation; entries of one
//! instant keep the order of the commits they describe, the Events the host
//! writes in the background last.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::Value;

/// What kind of entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// An object the user applied (`--apply`).
    Apply,
    /// A write the host made for a plugin (create, replace, patch, delete, status).
    Action,
    /// An Event the host recorded for a plugin.
    Event,
    /// A change of a parent or child object, whoever made it.
    State,
}

impl Category {
    fn label(self) -> &'static str {
        match self {
            Category::Apply => "apply",
            Category::Action => "action",
            Category::Event => "event",
            Category::State => "state",
        }
    }
}

/// Which object an entry is about.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    /// The reference an object's own fields give.
    pub fn of(obj: &Value) -> Self {
        let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
        Self { api_version: text("/apiVersion"), kind: text("/kind"), namespace: text("/metadata/namespace"), name: text("/metadata/name") }
    }

    fn path(&self) -> String {
        if self.namespace.is_empty() { self.name.clone() } else { format!("{}/{}", self.namespace, self.name) }
    }
}

/// One line of the timeline.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    /// Virtual time, RFC 3339 with milliseconds.
    pub time: String,
    #[serde(rename = "type")]
    pub category: Category,
    /// The verb (`create`, `status`, ...), the Event's `type reason`, or the
    /// change (`created`, `started`, `completed`, `ready`, `deleted`, ...).
    pub what: String,
    pub object: ObjectRef,
    /// The Event's note, a failed write's error, or a status write's content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What was written (the object for create/replace/apply, the patch for patch/status).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    #[serde(skip)]
    order: (i64, u64, Category, u64),
}

/// Entries as they are recorded, in any order; [`Timeline::entries`] sorts them.
#[derive(Debug, Default)]
pub struct Timeline {
    entries: Vec<Entry>,
    /// Generated name → display name, from objects created with `generateName`.
    generated: BTreeMap<String, String>,
    generated_counts: BTreeMap<String, usize>,
}

impl Timeline {
    /// Adds an entry at virtual time `at`, ordered among entries of the same
    /// millisecond by `rv`, the resourceVersion of the commit it describes
    /// (actions before the state change they cause). Events come after the
    /// other entries of their millisecond, in the order they were written:
    /// the host writes them in the background, so their commits interleave
    /// with the reconcile's writes differently from run to run.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        at: DateTime<Utc>,
        rv: u64,
        category: Category,
        what: impl Into<String>,
        object: ObjectRef,
        detail: Option<String>,
        body: Option<Value>,
    ) {
        let seq = self.entries.len() as u64;
        self.entries.push(Entry {
            time: at.to_rfc3339_opts(SecondsFormat::Millis, true),
            category,
            what: what.into(),
            object,
            detail,
            body: body.map(sanitize),
            order: (at.timestamp_millis(), if category == Category::Event { u64::MAX } else { rv }, category, seq),
        });
    }

    /// Notes an object the API server named from its `generateName`, so its
    /// name is shown as `<generateName><n>` (n counts per prefix, from 1).
    pub fn note_generated(&mut self, obj: &Value) {
        let prefix = obj.pointer("/metadata/generateName").and_then(Value::as_str).unwrap_or_default();
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        if prefix.is_empty() || !name.starts_with(prefix) || self.generated.contains_key(name) {
            return;
        }
        let n = self.generated_counts.entry(prefix.to_string()).or_insert(0);
        *n += 1;
        self.generated.insert(name.to_string(), format!("{prefix}{n}"));
    }

    /// The entries up to and including `end`, in time order.
    pub fn entries_until(mut self, end: DateTime<Utc>) -> Vec<Entry> {
        self.entries.retain(|e| e.order.0 <= end.timestamp_millis());
        self.entries.sort_by_key(|e| e.order);
        let generated = std::mem::take(&mut self.generated);
        let mut entries: Vec<Entry> = self.entries.into_iter().map(|e| rename_generated(e, &generated)).collect();
        // A cluster controller's pass changes many objects at one instant in the
        // order of their stored names, which for generated names is random: a run
        // of the same change at one instant is shown by name.
        for run in entries.chunk_by_mut(|a, b| a.time == b.time && a.category == Category::State && b.category == Category::State && a.what == b.what)
        {
            run.sort_by(|a, b| (&a.object.kind, &a.object.namespace, &a.object.name).cmp(&(&b.object.kind, &b.object.namespace, &b.object.name)));
        }
        entries
    }
}

/// Strips what differs between runs of the same simulation: UIDs,
/// resourceVersions, managedFields.
pub fn sanitize(mut value: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for key in ["uid", "resourceVersion", "managedFields", "selfLink"] {
                    map.remove(key);
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

fn rename_generated(mut e: Entry, generated: &BTreeMap<String, String>) -> Entry {
    if generated.is_empty() {
        return e;
    }
    let swap = |s: &mut String| {
        // Longest first, so a name that extends another is replaced whole.
        for (real, shown) in generated.iter().rev() {
            if s.contains(real.as_str()) {
                *s = s.replace(real.as_str(), shown);
            }
        }
    };
    swap(&mut e.object.name);
    if let Some(d) = e.detail.as_mut() {
        swap(d);
    }
    if let Some(b) = e.body.take() {
        let mut text = b.to_string();
        swap(&mut text);
        e.body = serde_json::from_str(&text).ok();
    }
    e
}

/// How an object changed, in words: `created`, `deleted`, `deleting`,
/// `spec changed`, and per kind `started`/`completed`/`failed` (Job),
/// `scheduled`/`running`/`ready`/`not ready`/phase (Pod), `ready replicas N`
/// (anything with `status.readyReplicas`).
pub fn changes(prev: Option<&Value>, obj: &Value, deleted: bool) -> Vec<String> {
    if deleted {
        return vec!["deleted".into()];
    }
    let Some(prev) = prev else { return vec!["created".into()] };
    let mut out = Vec::new();
    let got = |p: &str| obj.pointer(p).filter(|v| !v.is_null());
    let had = |p: &str| prev.pointer(p).filter(|v| !v.is_null());
    if got("/metadata/deletionTimestamp").is_some() && had("/metadata/deletionTimestamp").is_none() {
        out.push("deleting".into());
    }
    if got("/metadata/generation") != had("/metadata/generation") && had("/metadata/generation").is_some() {
        out.push("spec changed".into());
    }
    match obj.get("kind").and_then(Value::as_str).unwrap_or_default() {
        "Job" => {
            if got("/status/startTime").is_some() && had("/status/startTime").is_none() {
                out.push("started".into());
            }
            for (condition, word) in [("Complete", "completed"), ("Failed", "failed"), ("Suspended", "suspended")] {
                if condition_true(obj, condition) && !condition_true(prev, condition) {
                    out.push(word.into());
                }
            }
        }
        "Pod" => {
            if got("/spec/nodeName").is_some() && had("/spec/nodeName").is_none() {
                out.push(format!("scheduled on {}", got("/spec/nodeName").and_then(Value::as_str).unwrap_or_default()));
            }
            let phase = |o: &Value| o.pointer("/status/phase").and_then(Value::as_str).map(str::to_lowercase);
            if phase(obj) != phase(prev)
                && let Some(p) = phase(obj)
            {
                out.push(p);
            }
            match (condition_true(prev, "Ready"), condition_true(obj, "Ready")) {
                (false, true) => out.push("ready".into()),
                (true, false) => out.push("not ready".into()),
                _ => {}
            }
        }
        _ => {
            let ready = |o: &Value| o.pointer("/status/readyReplicas").and_then(Value::as_i64);
            if ready(obj) != ready(prev) && (ready(obj).is_some() || ready(prev).is_some()) {
                out.push(format!("ready replicas {}", ready(obj).unwrap_or(0)));
            }
        }
    }
    out
}

fn condition_true(obj: &Value, type_: &str) -> bool {
    obj.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| cs.iter().any(|c| c["type"] == type_ && c["status"] == "True"))
}

/// One line per entry: time, type, what, kind namespace/name, detail.
pub fn text(entries: &[Entry]) -> String {
    let mut out = String::new();
    for e in entries {
        let mut line = format!("{}  {:<6}  {:<28} {} {}", e.time, e.category.label(), e.what, e.object.kind, e.object.path());
        if let Some(d) = &e.detail {
            line.push_str(": ");
            line.push_str(d);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The entries as a JSON array.
pub fn json(entries: &[Entry]) -> String {
    let mut text = serde_json::to_string_pretty(entries).expect("entries serialize");
    text.push('\n');
    text
}

/// A compact, sanitized rendering of a status write for the text line.
pub fn status_detail(patch: &Value) -> Option<String> {
    let status = patch.get("status")?;
    let mut status = sanitize(status.clone());
    // The host's own Reconciled condition is noise in a timeline; keep the plugin's.
    if let Some(Value::Array(cs)) = status.get_mut("conditions") {
        cs.retain(|c| c["type"] != "Reconciled");
        if cs.is_empty()
            && let Some(m) = status.as_object_mut()
        {
            m.remove("conditions");
        }
    }
    match &status {
        Value::Object(m) if m.is_empty() => None,
        _ => Some(status.to_string()),
    }
}

/// An object with the fields a reader of the timeline cares about: no
/// status, no bookkeeping.
pub fn written_object(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(m) = obj.as_object_mut() {
        m.remove("status");
        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
            for key in ["creationTimestamp", "generation"] {
                meta.remove(key);
            }
        }
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn entries_sort_by_time_then_commit_then_actions_before_states() {
        let mut t = Timeline::default();
        let job = ObjectRef { api_version: "batch/v1".into(), kind: "Job".into(), namespace: "ns".into(), name: "j".into() };
        t.push(at("2026-01-01T00:05:00Z"), 9, Category::State, "created", job.clone(), None, None);
        t.push(at("2026-01-01T00:05:00Z"), 9, Category::Action, "create", job.clone(), None, None);
        t.push(at("2026-01-01T00:00:00Z"), 20, Category::State, "created", job.clone(), None, None);
        let whats: Vec<_> = t.entries_until(at("2027-01-01T00:00:00Z")).into_iter().map(|e| (e.time, e.what)).collect();
        assert_eq!(
            whats,
            [
                ("2026-01-01T00:00:00.000Z".to_string(), "created".to_string()),
                ("2026-01-01T00:05:00.000Z".to_string(), "create".to_string()),
                ("2026-01-01T00:05:00.000Z".to_string(), "created".to_string()),
            ]
        );
    }

    #[test]
    fn events_follow_the_other_entries_of_their_millisecond_whatever_their_commit() {
        let mut t = Timeline::default();
        let cj = ObjectRef { api_version: "v1".into(), kind: "CronJob".into(), namespace: "ns".into(), name: "c".into() };
        t.push(at("2026-01-01T00:05:00Z"), 10, Category::Event, "Normal SuccessfulCreate", cj.clone(), None, None);
        t.push(at("2026-01-01T00:05:00Z"), 12, Category::Action, "status", cj.clone(), None, None);
        t.push(at("2026-01-01T00:05:00Z"), 11, Category::Action, "create", cj.clone(), None, None);
        t.push(at("2026-01-01T00:05:01Z"), 13, Category::State, "changed", cj.clone(), None, None);
        let whats: Vec<_> = t.entries_until(at("2027-01-01T00:00:00Z")).into_iter().map(|e| e.what).collect();
        assert_eq!(whats, ["create", "status", "Normal SuccessfulCreate", "changed"]);
    }

    #[test]
    fn one_change_to_many_objects_at_one_instant_is_listed_by_name() {
        let mut t = Timeline::default();
        let pod = |n: &str| ObjectRef { api_version: "v1".into(), kind: "Pod".into(), namespace: "ns".into(), name: n.into() };
        for (rv, name) in [(5, "web-3"), (6, "web-1"), (7, "web-2")] {
            t.push(at("2026-01-01T00:00:01Z"), rv, Category::State, "ready", pod(name), None, None);
        }
        t.push(at("2026-01-01T00:00:01Z"), 8, Category::Action, "status", pod("web-0"), None, None);
        let names: Vec<_> = t.entries_until(at("2027-01-01T00:00:00Z")).into_iter().map(|e| e.object.name).collect();
        assert_eq!(names, ["web-1", "web-2", "web-3", "web-0"]);
    }

    #[test]
    fn uids_and_resource_versions_never_reach_the_output() {
        let v = sanitize(json!({"metadata": {"uid": "x", "resourceVersion": "7", "managedFields": [], "name": "n"},
            "status": {"active": [{"name": "j", "uid": "y"}]}}));
        assert_eq!(v, json!({"metadata": {"name": "n"}, "status": {"active": [{"name": "j"}]}}));
    }

    #[test]
    fn generated_names_are_shown_by_prefix_and_creation_order() {
        let mut t = Timeline::default();
        for name in ["web-abc-x7k2p", "web-abc-q9zzt"] {
            t.note_generated(&json!({"metadata": {"name": name, "generateName": "web-abc-"}}));
        }
        let pod = |n: &str| ObjectRef { api_version: "v1".into(), kind: "Pod".into(), namespace: "ns".into(), name: n.into() };
        t.push(at("2026-01-01T00:00:00Z"), 1, Category::State, "created", pod("web-abc-q9zzt"), Some("after web-abc-x7k2p".into()), None);
        let e = &t.entries_until(at("2027-01-01T00:00:00Z"))[0];
        assert_eq!(e.object.name, "web-abc-2");
        assert_eq!(e.detail.as_deref(), Some("after web-abc-1"));
    }

    #[test]
    fn a_job_starts_and_completes_and_a_pod_becomes_ready() {
        let job0 = json!({"kind": "Job", "metadata": {"name": "j"}});
        let job1 = json!({"kind": "Job", "metadata": {"name": "j"}, "status": {"startTime": "t"}});
        let job2 = json!({"kind": "Job", "metadata": {"name": "j"}, "status": {"startTime": "t",
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}});
        assert_eq!(changes(None, &job0, false), ["created"]);
        assert_eq!(changes(Some(&job0), &job1, false), ["started"]);
        assert_eq!(changes(Some(&job1), &job2, false), ["completed"]);
        assert_eq!(changes(Some(&job2), &job2, true), ["deleted"]);
        let pod0 = json!({"kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Pending"}});
        let pod1 = json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"nodeName": "node-1"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(changes(Some(&pod0), &pod1, false), ["scheduled on node-1", "running", "ready"]);
        assert!(changes(Some(&pod1), &pod1, false).is_empty());
    }

    #[test]
    fn a_status_line_leaves_out_the_hosts_condition() {
        let patch = json!({"status": {"lastScheduleTime": "2026-01-01T00:05:00Z",
            "conditions": [{"type": "Reconciled", "status": "True"}]}});
        assert_eq!(status_detail(&patch).as_deref(), Some(r#"{"lastScheduleTime":"2026-01-01T00:05:00Z"}"#));
        assert_eq!(status_detail(&json!({"status": {"conditions": [{"type": "Reconciled"}]}})), None);
    }
}
