//! Tests of a plugin's CRD: the checked-in `crd.json` is the generated CRD,
//! and a generated CRD means what an older (hand-written) one did.

use std::fs;
use std::path::Path;

use serde_json::{Value, json};

/// Asserts the file at `path` holds `generated` (pretty JSON and a newline);
/// with `UPDATE_CRD=1` it writes it first. The file is what
/// [`embedded_crd!`](crate::embedded_crd) embeds in the Wasm build.
pub fn assert_crd_file_matches(generated: &Value, path: impl AsRef<Path>) {
    let path = path.as_ref();
    let text = serde_json::to_string_pretty(generated).expect("a CRD serializes") + "\n";
    if std::env::var_os("UPDATE_CRD").is_some_and(|v| v == "1") {
        fs::write(path, &text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
    let checked_in = fs::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == text,
        "{} is not the generated CRD (missing or stale): run `UPDATE_CRD=1 cargo test` and review the change",
        path.display()
    );
}

/// [`assert_crd_file_matches`] for a CRD whose types are all in the source
/// file `types_path`: the file also carries that source's stamp
/// ([`crate::crd::stamped`]), which a build script can check without
/// running the types (the `host new` scaffold's does, so a `crd.json` left
/// stale after an edit of the types fails the build, not only this test).
pub fn assert_crd_file_matches_types(generated: &Value, path: impl AsRef<Path>, types_path: impl AsRef<Path>) {
    let types_path = types_path.as_ref();
    let source = fs::read_to_string(types_path).unwrap_or_else(|e| panic!("cannot read {}: {e}", types_path.display()));
    assert_crd_file_matches(&crate::crd::stamped(generated.clone(), &source), path);
}

/// `crd` without what the derive legitimately writes differently from
/// controller-gen or a hand-written CRD: `nullable: true` on optional fields
/// and the `null` among an optional enum's values (kube's rewrite of
/// `Option`: an unset field may be sent as null); whole numbers written as
/// floats (`minimum: 0.0`); `title`; `type` inside `anyOf` (kube's
/// structural rewrite drops it beside `x-kubernetes-int-or-string`); the
/// root's `apiVersion`, `kind` and `metadata` properties, which the API
/// server implies for every object; and a root `required: [spec]`. The
/// order of `required` lists does not count.
pub fn normalised_crd(mut crd: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Number(n) => {
                if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1e15) {
                    *v = json!(f as i64);
                }
            }
            Value::Object(m) => {
                m.remove("nullable");
                m.remove("title");
                if let Some(Value::Array(values)) = m.get_mut("enum") {
                    values.retain(|x| !x.is_null());
                }
                if let Some(Value::Array(r)) = m.get_mut("required") {
                    r.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                }
                if let Some(Value::Array(any_of)) = m.get_mut("anyOf") {
                    any_of.iter_mut().filter_map(Value::as_object_mut).for_each(|alt| {
                        alt.remove("type");
                    });
                }
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut crd);
    for version in crd.pointer_mut("/spec/versions").and_then(Value::as_array_mut).into_iter().flatten() {
        let Some(root) = version.pointer_mut("/schema/openAPIV3Schema").and_then(Value::as_object_mut) else { continue };
        if let Some(Value::Object(properties)) = root.get_mut("properties") {
            for implied in ["apiVersion", "kind", "metadata"] {
                properties.remove(implied);
            }
        }
        if root.get("required") == Some(&json!(["spec"])) {
            root.remove("required");
        }
    }
    crd
}

/// Asserts `generated` means what `before` did, once both are
/// [normalised](normalised_crd); the failure names each difference by JSON
/// path ([`json_diff`](super::json_diff)).
pub fn assert_crds_mean_the_same(before: Value, generated: Value) {
    let (before, now) = (normalised_crd(before), normalised_crd(generated));
    if before != now {
        let n = serde_json::to_string_pretty(&now).expect("JSON");
        panic!(
            "the generated CRD differs from the earlier one (- earlier only, + generated only, ~ earlier -> generated):\n{}\n--- generated (normalised):\n{n}",
            super::json_diff(&before, &now)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_derives_legitimate_differences_are_normalised_away() {
        let crd = |root: Value| json!({"spec": {"versions": [{"schema": {"openAPIV3Schema": root}}]}});
        let hand = crd(json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["b", "a"], "properties": {"n": {"type": "integer", "minimum": 0}, "p": {"type": "string", "enum": ["A"]}}}
        }}));
        let derived = crd(json!({"type": "object", "title": "X", "required": ["spec"], "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
            "spec": {"type": "object", "required": ["a", "b"], "properties": {"n": {"type": "integer", "minimum": 0.0, "nullable": true}, "p": {"type": "string", "enum": ["A", null], "nullable": true}}}
        }}));
        assert_crds_mean_the_same(hand.clone(), derived);
        let mut changed = hand.clone();
        changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["n"]["minimum"] = json!(1);
        assert!(std::panic::catch_unwind(|| assert_crds_mean_the_same(hand, changed)).is_err());
    }

    #[test]
    fn a_stale_or_missing_crd_file_fails_and_names_the_fix() {
        if std::env::var_os("UPDATE_CRD").is_some() {
            return;
        }
        let dir = std::env::temp_dir().join(format!("sdk-crd-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("crd.json");
        let crd = json!({"kind": "CustomResourceDefinition"});
        let err = std::panic::catch_unwind(|| assert_crd_file_matches(&crd, &path)).unwrap_err();
        assert!(err.downcast_ref::<String>().unwrap().contains("UPDATE_CRD=1"));
        fs::write(&path, serde_json::to_string_pretty(&crd).unwrap() + "\n").unwrap();
        assert_crd_file_matches(&crd, &path);
        fs::remove_dir_all(&dir).unwrap();
    }
}
