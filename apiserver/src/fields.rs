//! Managed fields and server-side apply as upstream's field manager (kube-apiserver's
//! `managedfields` over structured-merge-diff) computes them, on the walks of [`crate::typed`]:
//! - an Update (create, PUT, PATCH) compares the object before and after the write: its manager
//!   gains every path added or modified (maps, structs and list items as well as leaves, the
//!   `.` entries of `fieldsV1`), and every manager loses what was modified, added or removed;
//! - an Apply owns the field set of its configuration; paths another manager owns and the apply
//!   changes conflict (409) unless forced, when they change hands; paths the applier applied
//!   before and no longer applies are removed unless another manager owns them;
//! - an entry's `time` moves when its manager changed something: an apply that changes no value
//!   (it only takes fields over) leaves it alone.

use crate::patch::{Lists, strategic_merge_with};
use crate::status::{ApiError, Cause};
use crate::typed::{self, Comparison, Node};
use serde_json::{Map, Value, json};

pub use crate::typed::{FieldPath, FieldSet, PathElem};

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion the fields were set with.
    pub api_version: String,
    /// Timestamp of the last change ("" = none: an apply that changed no value).
    pub time: String,
    /// `status` or "" for the main resource.
    pub subresource: String,
    /// Owned fields.
    pub fields: FieldSet,
}

impl Entry {
    /// Whether this is the entry `w` writes as `operation`: upstream identifies an Update
    /// manager by name, apiVersion and subresource, an applier by name and subresource.
    fn is(&self, w: &Writer<'_>, operation: &str) -> bool {
        self.manager == w.manager
            && self.operation == operation
            && self.subresource == w.subresource
            && (operation == "Apply" || self.api_version == w.api_version)
    }
}

/// The paths no manager owns, as upstream's `stripMetaManager`: identity and system metadata.
fn stripped(p: &[PathElem]) -> bool {
    const META: &[&str] =
        &["name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation", "managedFields", "resourceVersion"];
    match p {
        [PathElem::Field(f)] => matches!(&**f, "apiVersion" | "kind" | "metadata"),
        [PathElem::Field(m), PathElem::Field(f)] => &**m == "metadata" && META.contains(&&**f),
        _ => false,
    }
}

/// Render a field set as `fieldsV1`: a map per path prefix, `"."` marking
/// a list element that is itself owned.
///
/// Built from the set's sorted order (every path sharing a prefix is one
/// run, the prefix itself first), so each node is made once: walking every
/// path from the root formatted every element's key and looked it up again
/// at each level (~4% of the CPU of 10,000 CronJobs end to end: every write
/// records managed fields).
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let paths: Vec<&[PathElem]> = set.iter().map(Vec::as_slice).filter(|p| !p.is_empty()).collect();
    Value::Object(fields_below(&paths, 0))
}

/// The `fieldsV1` node below a prefix of `depth` elements that every path
/// in `paths` (sorted, each longer than `depth`) shares.
fn fields_below(paths: &[&[PathElem]], depth: usize) -> Map<String, Value> {
    let mut node = Map::new();
    let mut rest = paths;
    while let Some(first) = rest.first() {
        let elem = &first[depth];
        let run = rest.iter().take_while(|p| &p[depth] == elem).count();
        let (group, after) = rest.split_at(run);
        // The path that ends at this element sorts before its extensions.
        let ends_here = group[0].len() == depth + 1;
        let mut child = fields_below(if ends_here { &group[1..] } else { group }, depth + 1);
        // Upstream writes `.` for a path that is itself in the set and has paths below it.
        if ends_here && !child.is_empty() {
            child.insert(".".into(), json!({}));
        }
        let key = match elem {
            PathElem::Field(f) => format!("f:{f}"),
            PathElem::Key(k) => format!("k:{k}"),
            PathElem::Value(v) => format!("v:{v}"),
        };
        node.insert(key, Value::Object(child));
        rest = after;
    }
    node
}

/// Parse `fieldsV1` back into a set.
pub fn from_fields_v1(v: &Value) -> FieldSet {
    fn go(v: &Value, cur: &mut FieldPath, out: &mut FieldSet) {
        let Some(m) = v.as_object() else { return };
        if m.is_empty() && !cur.is_empty() {
            out.insert(cur.clone());
        }
        for (k, c) in m {
            if k == "." {
                out.insert(cur.clone());
                continue;
            }
            let e = if let Some(f) = k.strip_prefix("f:") {
                PathElem::Field(f.into())
            } else if let Some(f) = k.strip_prefix("k:") {
                PathElem::Key(f.into())
            } else if let Some(f) = k.strip_prefix("v:") {
                PathElem::Value(f.into())
            } else {
                continue;
            };
            cur.push(e);
            go(c, cur, out);
            cur.pop();
        }
    }
    let mut out = FieldSet::new();
    go(v, &mut vec![], &mut out);
    out
}

/// Read `metadata.managedFields`.
pub fn read_entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| Entry {
                    manager: e["manager"].as_str().unwrap_or_default().into(),
                    operation: e["operation"].as_str().unwrap_or("Update").into(),
                    api_version: e["apiVersion"].as_str().unwrap_or_default().into(),
                    time: e["time"].as_str().unwrap_or_default().into(),
                    subresource: e["subresource"].as_str().unwrap_or_default().into(),
                    fields: from_fields_v1(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Write `metadata.managedFields` (entries with no fields are dropped), in upstream's order:
/// appliers first, then by time, manager, apiVersion and subresource.
pub fn write_entries(obj: &mut Value, entries: &[Entry]) {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|a, b| {
        let seconds = |e: &Entry| e.time.get(..19).unwrap_or_default().to_string();
        (&a.operation, seconds(a), &a.manager, &a.api_version, &a.subresource).cmp(&(
            &b.operation,
            seconds(b),
            &b.manager,
            &b.api_version,
            &b.subresource,
        ))
    });
    let arr: Vec<Value> = sorted
        .into_iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.time.is_empty() {
                v["time"] = json!(e.time);
            }
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if arr.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(arr));
        }
    }
}

/// Who is writing: manager, apiVersion, subresource, time, and the schema of what is written.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    /// Field manager.
    pub manager: &'a str,
    /// apiVersion of the request.
    pub api_version: &'a str,
    /// "" or "status".
    pub subresource: &'a str,
    /// Timestamp to stamp.
    pub time: String,
    /// Whether the resource has a status subresource (main-resource writes then own no status).
    pub status_subresource: bool,
    /// The CRD schema, for `x-kubernetes-list-type` of a merge (None for built-ins).
    pub schema: Option<&'a Value>,
    /// The schema the field sets are walked along.
    pub root: Node<'a>,
}

impl Writer<'_> {
    fn lists(&self) -> Lists<'_> {
        Lists { schema: self.schema }
    }

    /// Whether this writer may own `path`: no manager owns identity metadata; a writer of the
    /// main resource owns no `status` when status is a subresource, and a status writer owns
    /// only `status` (upstream's reset fields of the two strategies).
    fn owns(&self, path: &[PathElem]) -> bool {
        if stripped(path) {
            return false;
        }
        if !self.status_subresource {
            return true;
        }
        let in_status = matches!(path.first(), Some(PathElem::Field(f)) if &**f == "status");
        if self.subresource.is_empty() {
            !in_status
        } else if self.subresource == "status" {
            in_status
        } else {
            true
        }
    }

    /// The paths of a comparison this writer's strategy does not reset.
    fn compare(&self, before: Option<&Value>, after: &Value) -> Result<Comparison, typed::TypeErrors> {
        let mut cmp = typed::compare(before, after, self.root)?;
        cmp.retain(|p| self.owns(p));
        Ok(cmp)
    }
}

/// How a conflict names the manager that owns the field, as upstream's
/// managedfields `printManager`: `"name"`, then ` with subresource "status"`
/// for a subresource's manager, then for an Update manager ` using v1` and
/// ` at <time>` when its entry has one (an applier is named alone).
fn conflicting_manager(e: &Entry) -> String {
    let mut out = format!("{:?}", e.manager);
    if !e.subresource.is_empty() {
        out += &format!(" with subresource {:?}", e.subresource);
    }
    if e.operation == "Update" {
        out += &format!(" using {}", e.api_version);
        if !e.time.is_empty() {
            out += &format!(" at {}", e.time);
        }
    }
    out
}

/// The 409 of an apply that conflicts, worded as upstream's `NewConflictError`.
fn conflict_error(conflicts: &[(String, FieldPath)]) -> ApiError {
    let n = conflicts.len();
    let mut msg = format!("Apply failed with {n} conflict{}: ", if n == 1 { "" } else { "s" });
    let lines: Vec<String> = conflicts.iter().map(|(m, p)| format!("conflict with {m}: {}", typed::path_string(p))).collect();
    msg.push_str(&lines.join("\n"));
    let causes = conflicts.iter().map(|(m, p)| Cause::new("FieldManagerConflict", format!("conflict with {m}"), typed::path_string(p))).collect();
    let mut e = ApiError::conflict("", "", "", "");
    e.message = msg;
    e.causes = causes;
    // Upstream's errors.NewApplyConflict names no object: its details hold the causes only.
    (e.group, e.kind, e.name) = (None, None, None);
    e
}

/// A configuration the schema cannot type: upstream's field manager fails the apply with an
/// error that is no API status, answered as a 500 with its text (`failed to create typed patch
/// object (ns/name; /v1, Kind=Service): .spec.ports: element 1: ...`).
fn untyped_config(errors: &typed::TypeErrors, applied: &Value) -> ApiError {
    let text = |p: &str| applied.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let api_version = text("/apiVersion");
    let gv = if api_version.contains('/') { api_version.to_string() } else { format!("/{api_version}") };
    let (ns, name, kind) = (text("/metadata/namespace"), text("/metadata/name"), text("/kind"));
    ApiError::unknown(format!("failed to create typed patch object ({ns}/{name}; {gv}, Kind={kind}): {errors}"))
}

/// Whether `p` or a path below it is in `set`.
fn owned_at_or_below(set: &FieldSet, p: &FieldPath) -> bool {
    set.range(p.clone()..).next().is_some_and(|q| q.starts_with(p))
}

/// Server-side apply of `applied` onto `live` (None = create). Returns the new object, with
/// managedFields updated.
pub fn apply(live: Option<&Value>, applied: &Value, w: &Writer<'_>, force: bool) -> Result<Value, ApiError> {
    let mut applied = applied.clone();
    if let Some(m) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
        m.remove("resourceVersion");
    }
    let mut new_set = typed::field_set(&applied, w.root).map_err(|e| untyped_config(&e, &applied))?;
    new_set.retain(|p| w.owns(p));
    let mut entries = live.map(read_entries).unwrap_or_default();
    let last_set = entries.iter().find(|e| e.is(w, "Apply")).map(|e| e.fields.clone()).unwrap_or_default();

    // Merge, then prune what the applier applied before, no longer applies and nobody else owns.
    let mut merged = strategic_merge_with(&live.cloned().unwrap_or_else(|| json!({})), &applied, w.lists())?;
    let mut owned: FieldSet = entries.iter().filter(|e| !e.is(w, "Apply")).flat_map(|e| e.fields.iter().cloned()).collect();
    owned.extend(new_set.iter().cloned());
    let mut removed: Vec<&FieldPath> = last_set.iter().filter(|p| !owned_at_or_below(&owned, p)).collect();
    removed.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in removed {
        typed::edit::remove(&mut merged, w.root, p);
    }

    let cmp = w.compare(live, &merged).map_err(|e| ApiError::internal(format!("failed to compare objects: {e}")))?;
    let changed: FieldSet = cmp.modified.union(&cmp.added).cloned().collect();
    let conflicts: Vec<(String, FieldPath)> = entries
        .iter()
        .filter(|e| !e.is(w, "Apply"))
        .flat_map(|e| e.fields.intersection(&changed).map(move |p| (conflicting_manager(e), p.clone())))
        .collect();
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&conflicts));
    }
    for e in entries.iter_mut().filter(|e| !e.is(w, "Apply")) {
        e.fields.retain(|p| !changed.contains(p) && !cmp.removed.contains(p));
    }
    let previous_time = entries.iter().find(|e| e.is(w, "Apply")).map(|e| e.time.clone()).unwrap_or_default();
    entries.retain(|e| !e.is(w, "Apply"));
    let values_changed = live.is_none_or(|l| without_managed_fields(l) != without_managed_fields(&merged));
    entries.push(Entry {
        manager: w.manager.into(),
        operation: "Apply".into(),
        api_version: w.api_version.into(),
        time: if values_changed { w.time.clone() } else { previous_time },
        subresource: w.subresource.into(),
        fields: new_set,
    });
    write_entries(&mut merged, &entries);
    Ok(merged)
}

/// `obj` without `metadata.managedFields`, to compare values alone.
fn without_managed_fields(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

/// Whether `managed` (a new `metadata.managedFields`) gives every manager of
/// `old` the same fields by the same operation: the entries' times aside,
/// nothing to store.
pub fn same_ownership(old: &Value, managed: Option<&Value>) -> bool {
    let key = |entries: Vec<Entry>| {
        let mut keys: Vec<_> =
            entries.into_iter().filter(|e| !e.fields.is_empty()).map(|e| (e.manager, e.operation, e.api_version, e.subresource, e.fields)).collect();
        keys.sort();
        keys
    };
    let new = json!({"metadata": {"managedFields": managed.cloned().unwrap_or(Value::Null)}});
    key(read_entries(old)) == key(read_entries(&new))
}

/// Record a non-apply write (`old` None = create), as upstream's Update: every manager loses
/// what the write modified, added or removed; the writer gains what it modified or added, and
/// its entry's time moves when it gained anything.
pub fn record_update(old: Option<&Value>, new: &mut Value, w: &Writer<'_>) {
    let mut entries = old.map(read_entries).unwrap_or_default();
    // An object the schema cannot type loses its managed fields, as upstream's
    // `UpdateNoErrors` drops them rather than keep garbage (validation refuses most such
    // objects anyway).
    let Ok(cmp) = w.compare(old, new) else {
        write_entries(new, &[]);
        return;
    };
    let changed: FieldSet = cmp.modified.union(&cmp.added).cloned().collect();
    for e in entries.iter_mut() {
        e.fields.retain(|p| !changed.contains(p) && !cmp.removed.contains(p));
    }
    if !changed.is_empty() {
        match entries.iter_mut().find(|e| e.is(w, "Update")) {
            Some(e) => {
                e.fields.extend(changed);
                e.time = w.time.clone();
            }
            None => entries.push(Entry {
                manager: w.manager.into(),
                operation: "Update".into(),
                api_version: w.api_version.into(),
                time: w.time.clone(),
                subresource: w.subresource.into(),
                fields: changed,
            }),
        }
    }
    cap_update_managers(&mut entries);
    write_entries(new, &entries);
}

/// At most this many Update managers keep entries of their own (upstream's
/// `DefaultMaxUpdateManagers`).
const MAX_UPDATE_MANAGERS: usize = 10;

/// Fold the oldest Update managers past [`MAX_UPDATE_MANAGERS`] into one `ancient-changes`
/// entry per apiVersion, as upstream's `capManagersManager`: the first oldest of a version is
/// kept until a second one of that version needs the bucket.
fn cap_update_managers(entries: &mut Vec<Entry>) {
    const BUCKET: &str = "ancient-changes";
    let mut updaters: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].operation == "Update").collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    let seconds = |e: &Entry| e.time.get(..19).unwrap_or_default().to_string();
    updaters.sort_by(|&a, &b| (seconds(&entries[a]), &entries[a].manager).cmp(&(seconds(&entries[b]), &entries[b].manager)));
    let mut first_of_version: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut length = updaters.len();
    let mut gone = Vec::new();
    for i in updaters {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let version = entries[i].api_version.clone();
        match first_of_version.get(&version) {
            Some(&first) => {
                let is_bucket = |e: &Entry| e.manager == BUCKET && e.operation == "Update" && e.subresource.is_empty() && e.api_version == version;
                let bucket = match entries.iter().position(is_bucket) {
                    Some(b) => b,
                    None => {
                        let e = &mut entries[first];
                        (e.manager, e.subresource) = (BUCKET.into(), String::new());
                        first
                    }
                };
                let moved = std::mem::take(&mut entries[i].fields);
                entries[bucket].fields.extend(moved);
                entries[bucket].time = entries[i].time.clone();
                gone.push(i);
                length -= 1;
            }
            None => {
                first_of_version.insert(version, i);
            }
        }
    }
    let mut index = 0;
    entries.retain(|_| {
        index += 1;
        !gone.contains(&(index - 1))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(m: &str) -> Writer<'_> {
        Writer {
            manager: m,
            api_version: "v1",
            subresource: "",
            time: "2024-01-01T00:00:00Z".into(),
            status_subresource: true,
            schema: None,
            root: Node::builtin("", "v1", "ConfigMap").unwrap(),
        }
    }

    fn leaves(obj: &Value) -> FieldSet {
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("Pod");
        let group = if kind == "Job" { "batch" } else { "" };
        typed::field_set(obj, Node::builtin(group, "v1", kind).unwrap()).unwrap()
    }

    #[test]
    fn fields_v1_round_trips() {
        let obj = json!({"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let set = leaves(&obj);
        let v1 = to_fields_v1(&set);
        assert_eq!(v1["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:image"], json!({}));
        assert_eq!(from_fields_v1(&v1), set);
    }

    /// The rendering as it was first written: every path walked from the root.
    fn fields_v1_path_by_path(set: &FieldSet) -> Value {
        let mut root = Map::new();
        for path in set {
            let mut cur = &mut root;
            for e in path {
                let k = match e {
                    PathElem::Field(f) => format!("f:{f}"),
                    PathElem::Key(k) => format!("k:{k}"),
                    PathElem::Value(v) => format!("v:{v}"),
                };
                cur = cur.entry(k).or_insert_with(|| json!({})).as_object_mut().unwrap();
            }
            if !path.is_empty() && set.iter().any(|q| q.len() > path.len() && q.starts_with(path)) {
                cur.insert(".".into(), json!({}));
            }
        }
        Value::Object(root)
    }

    #[test]
    fn fields_v1_built_by_prefix_runs_equals_the_path_by_path_rendering() {
        let job = json!({"kind": "Job", "metadata": {"name": "j", "labels": {"a": "b", "c": "d"}, "finalizers": ["x", "y"],
            "ownerReferences": [{"uid": "u1", "kind": "CronJob", "controller": true}, {"uid": "u2", "kind": "X"}]},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i", "args": ["a", "b"],
                "ports": [{"containerPort": 80, "protocol": "TCP"}], "env": [{"name": "E", "value": "1"}]},
                {"name": "d", "image": "j"}], "restartPolicy": "OnFailure", "volumes": []}}},
            "status": {"active": 1, "conditions": []}});
        let mut sets = vec![leaves(&job), FieldSet::new()];
        // Prefixes owned as well as what lies below them, and a lone empty path.
        let mut odd = leaves(&job);
        odd.insert(vec![PathElem::Field("spec".into())]);
        odd.insert(vec![PathElem::Field("spec".into()), PathElem::Field("template".into())]);
        odd.insert(vec![]);
        sets.push(odd);
        let mut keys_only = FieldSet::new();
        keys_only.insert(vec![PathElem::Field("l".into()), PathElem::Key(r#"{"name":"a"}"#.into()), PathElem::Field("v".into())]);
        sets.push(keys_only);
        for set in &sets {
            assert_eq!(to_fields_v1(set), fields_v1_path_by_path(set), "{set:?}");
        }
    }

    #[test]
    fn apply_conflicts_with_another_manager_unless_forced() {
        let mut live = json!({"metadata": {"name": "x"}, "data": {"a": "1"}});
        record_update(None, &mut live, &w("kubectl-create"));
        let applied = json!({"metadata": {"name": "x"}, "data": {"a": "2"}});
        let e = apply(Some(&live), &applied, &w("mgr"), false).unwrap_err();
        assert_eq!(e.code, 409);
        assert!(e.message.contains("conflict with \"kubectl-create\" using v1 at "), "{}", e.message);
        let out = apply(Some(&live), &applied, &w("mgr"), true).unwrap();
        assert_eq!(out["data"]["a"], "2");
    }

    #[test]
    fn a_conflict_names_an_applier_alone_as_upstream_does() {
        let live = apply(None, &json!({"metadata": {"name": "x"}, "data": {"a": "1"}}), &w("alice"), false).unwrap();
        let e = apply(Some(&live), &json!({"metadata": {"name": "x"}, "data": {"a": "2"}}), &w("bob"), false).unwrap_err();
        assert_eq!(e.message, "Apply failed with 1 conflict: conflict with \"alice\": .data.a");
        assert_eq!(e.causes[0].message, "conflict with \"alice\"");
        assert_eq!((e.group, e.kind, e.name), (None, None, None), "an apply conflict's details hold only its causes");
    }

    #[test]
    fn ownership_compares_managers_and_fields_but_not_times() {
        let live = apply(None, &json!({"metadata": {"name": "x"}, "data": {"a": "1"}}), &w("mgr"), false).unwrap();
        let mut later = w("mgr");
        later.time = "2025-01-01T00:00:00Z".into();
        let again = apply(Some(&live), &json!({"metadata": {"name": "x"}, "data": {"a": "1"}}), &later, false).unwrap();
        assert!(same_ownership(&live, again.pointer("/metadata/managedFields")), "the same intent applied later owns the same");
        let other = apply(Some(&live), &json!({"metadata": {"name": "x"}, "data": {"a": "1"}}), &w("bob"), false).unwrap();
        assert!(!same_ownership(&live, other.pointer("/metadata/managedFields")), "a second applier shares the field");
    }

    #[test]
    fn a_create_records_the_added_data_map_with_its_dot_entry() {
        let mut cm = json!({"metadata": {"name": "x", "labels": {"a": "b"}}, "data": {"k": "v"}});
        record_update(None, &mut cm, &w("kubectl-create"));
        let f = &cm["metadata"]["managedFields"][0]["fieldsV1"];
        assert_eq!(f["f:data"], json!({".": {}, "f:k": {}}));
        assert_eq!(f["f:metadata"], json!({"f:labels": {".": {}, "f:a": {}}}), "metadata itself and its name are nobody's");
    }

    #[test]
    fn an_update_takes_a_modified_field_from_its_owner_and_leaves_the_rest() {
        let mut cm = json!({"metadata": {"name": "x"}, "data": {"a": "1", "b": "2"}});
        record_update(None, &mut cm, &w("creator"));
        let old = cm.clone();
        cm["data"]["a"] = json!("3");
        record_update(Some(&old), &mut cm, &w("patcher"));
        let entries = read_entries(&cm);
        let of = |m: &str| entries.iter().find(|e| e.manager == m).map(|e| to_fields_v1(&e.fields)).unwrap();
        assert_eq!(of("creator")["f:data"], json!({".": {}, "f:b": {}}));
        assert_eq!(of("patcher")["f:data"], json!({"f:a": {}}));
    }

    #[test]
    fn an_apply_that_only_takes_fields_over_records_no_time() {
        let mut live = json!({"metadata": {"name": "x"}, "data": {"a": "1"}});
        record_update(None, &mut live, &w("kubectl-create"));
        let out = apply(Some(&live), &json!({"metadata": {"name": "x"}, "data": {"a": "1"}}), &w("mgr"), false).unwrap();
        let applier = read_entries(&out).into_iter().find(|e| e.operation == "Apply").unwrap();
        assert_eq!(applier.time, "", "no value changed");
        assert_eq!(out["metadata"]["managedFields"][0].get("time"), None);
    }

    #[test]
    fn update_managers_past_ten_fold_into_ancient_changes() {
        let mut obj = json!({"metadata": {"name": "x"}, "data": {}});
        for i in 0..12 {
            let old = obj.clone();
            obj["data"][format!("k{i}")] = json!("v");
            let mut writer = w("m");
            let name = format!("m{i:02}");
            writer.manager = &name;
            writer.time = format!("2024-01-01T00:00:{i:02}Z");
            record_update(Some(&old), &mut obj, &writer);
        }
        let entries = read_entries(&obj);
        assert_eq!(entries.len(), 10);
        let ancient = entries.iter().find(|e| e.manager == "ancient-changes").expect("a bucket");
        assert_eq!(ancient.fields.len(), 3, "the three oldest managers' fields: {:?}", ancient.fields);
        assert!(!entries.iter().any(|e| ["m00", "m01", "m02"].contains(&e.manager.as_str())));
    }

    #[test]
    fn apply_removes_fields_it_no_longer_applies() {
        let applied = json!({"metadata": {"name": "x"}, "data": {"a": "1", "b": "2"}});
        let live = apply(None, &applied, &w("mgr"), false).unwrap();
        let applied2 = json!({"metadata": {"name": "x"}, "data": {"a": "1"}});
        let out = apply(Some(&live), &applied2, &w("mgr"), false).unwrap();
        assert_eq!(out["data"], json!({"a": "1"}));
    }
}

#[cfg(test)]
mod crd_list_tests {
    use super::*;

    #[test]
    fn apply_merges_crd_list_maps_by_their_keys() {
        let schema = json!({"type": "object", "properties": {"status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}}
        }}}});
        let w = |m: &'static str| Writer {
            manager: m,
            api_version: "x/v1",
            subresource: "status",
            time: "t".into(),
            status_subresource: true,
            schema: Some(&schema),
            root: Node::custom(&schema),
        };
        let a = apply(None, &json!({"status": {"conditions": [{"type": "A", "status": "True"}]}}), &w("a"), false).unwrap();
        let b = apply(Some(&a), &json!({"status": {"conditions": [{"type": "B", "status": "False"}]}}), &w("b"), false).unwrap();
        let types: Vec<&str> = b["status"]["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["A", "B"], "each manager keeps its own list-map entry");
    }
}
