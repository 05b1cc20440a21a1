//! Upstream's field validation (`fieldValidation=Ignore|Warn|Strict`): what a write does with
//! the unknown and duplicate fields its body has. Warn is the default when a request names
//! none, as upstream's since 1.27; kubectl sends Strict (`--validate=strict`, its default) or
//! Warn (`--validate=warn`). Unknown fields are found by pruning (`builtin_schema`, `schema`);
//! duplicate ones by [`duplicate_fields`] on the request's JSON body.

use crate::status::{ApiError, Cause, Result};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::collections::HashSet;
use std::fmt;

/// The `fieldValidation` directive of a write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop unknown fields, keep the last of duplicates, say nothing.
    Ignore,
    /// As Ignore, with a `Warning` header per field (upstream's default).
    #[default]
    Warn,
    /// Refuse the write (400) naming every such field.
    Strict,
}

impl FieldValidation {
    /// The query parameter's value (absent or empty: Warn); anything else is refused as
    /// upstream's `ValidateCreateOptions` (and update/patch) refuse it, naming `options`
    /// (`CreateOptions`, `UpdateOptions` or `PatchOptions`).
    pub fn parse(value: Option<&str>, options: &str) -> Result<FieldValidation> {
        match value {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::invalid(
                "meta.k8s.io",
                options,
                "",
                vec![Cause::new(
                    "FieldValueNotSupported",
                    format!("Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""),
                    "fieldValidation",
                )],
            )),
        }
    }
}

/// How the write got its object, which decides the wording of a strict refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A create or update body: 400 `Pod in version "v1" cannot be handled as a Pod: strict decoding error: ...`.
    Body,
    /// A merge or JSON patch's result: 422 `"" is invalid: patch: Invalid value: "<the patched
    /// object as JSON>": strict decoding error: ...`.
    Patched,
    /// A strategic merge patch (this patch): the same 422, showing the patch as Go prints a map.
    Strategic(&'a Value),
}

/// Applies `directive` to the strict decoding errors of a write (`duplicate field "a.b"`,
/// `unknown field "a.c"`, in that order): warnings under Warn, a refusal under Strict worded as
/// `decoded` says (`object`: what the write decoded, before unknown fields were dropped).
pub fn enforce(directive: FieldValidation, errors: &[String], decoded: Decoded<'_>, object: &Value, kind: &str, version: &str) -> Result<()> {
    if errors.is_empty() {
        return Ok(());
    }
    match directive {
        FieldValidation::Ignore => Ok(()),
        FieldValidation::Warn => {
            errors.iter().for_each(|e| crate::warning::add(e.clone()));
            Ok(())
        }
        FieldValidation::Strict => {
            let list = format!("strict decoding error: {}", errors.join(", "));
            let shown = match decoded {
                Decoded::Body => return Err(ApiError::bad_request(format!("{kind} in version {version:?} cannot be handled as a {kind}: {list}"))),
                Decoded::Patched => String::from_utf8_lossy(&crate::wire::patched_object(object)).into_owned(),
                Decoded::Strategic(patch) => go_print(patch),
            };
            let mut e = ApiError::invalid("", "", "", vec![Cause::new("FieldValueInvalid", format!("Invalid value: {shown:?}: {list}"), "patch")]);
            (e.group, e.kind, e.name) = (None, None, None);
            Err(e)
        }
    }
}

/// A JSON value as Go's `fmt` prints the `map[string]interface{}` it decodes to:
/// `map[spec:map[foo:1]]`, keys sorted, lists `[a b]`, null `<nil>`.
fn go_print(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => {
            n.as_f64().map(|f| if f.fract() == 0.0 && f.abs() < 1e21 { format!("{f:.0}") } else { f.to_string() }).unwrap_or_default()
        }
        Value::String(s) => s.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(go_print).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            format!("map[{}]", keys.into_iter().map(|k| format!("{k}:{}", go_print(&m[k]))).collect::<Vec<_>>().join(" "))
        }
    }
}

/// `unknown field "PATH"` for each pruned path.
pub fn unknown(paths: &[String]) -> impl Iterator<Item = String> + '_ {
    paths.iter().map(|p| format!("unknown field {p:?}"))
}

/// `duplicate field "PATH"` for each member a JSON document names twice in one object (paths as
/// the pruning reports them: `spec.containers[0].name`). Not JSON: none (the body's own parse
/// reports that).
pub fn duplicate_fields(json: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(json);
    if (Walk { path: String::new(), found: &mut found }).deserialize(&mut de).is_err() {
        return Vec::new();
    }
    found.into_iter().map(|p| format!("duplicate field {p:?}")).collect()
}

/// One JSON value at `path`, recording duplicate members below it.
struct Walk<'a> {
    path: String,
    found: &'a mut Vec<String>,
}

impl Walk<'_> {
    fn child(&mut self, step: &str, index: bool) -> Walk<'_> {
        let path = match (index, self.path.is_empty()) {
            (true, _) => format!("{}[{step}]", self.path),
            (false, true) => step.to_string(),
            (false, false) => format!("{}.{step}", self.path),
        };
        Walk { path, found: self.found }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> std::result::Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let walk = self.child(&key, false);
            if !seen.insert(key) {
                walk.found.push(walk.path.clone());
            }
            map.next_value_seed(walk)?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> std::result::Result<(), A::Error> {
        let mut i = 0usize;
        while seq.next_element_seed(self.child(&i.to_string(), true))?.is_some() {
            i += 1;
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_members_are_named_by_their_path() {
        let body = br#"{"metadata": {"name": "a", "name": "b"}, "spec": {"containers": [{"name": "x", "image": "i", "image": "j"}]}}"#;
        assert_eq!(duplicate_fields(body), [r#"duplicate field "metadata.name""#, r#"duplicate field "spec.containers[0].image""#]);
        assert!(duplicate_fields(br#"{"a": 1, "b": [1, 2]}"#).is_empty());
        assert!(duplicate_fields(b"not json").is_empty());
    }

    #[test]
    fn strict_refusals_are_worded_per_decoding_and_warn_passes() {
        let errors = [r#"unknown field "spec""#.to_string()];
        let object = serde_json::json!({"metadata": {"name": "a"}, "kind": "ConfigMap", "spec": {"foo": 1}});
        let body = enforce(FieldValidation::Strict, &errors, Decoded::Body, &object, "ConfigMap", "v1").unwrap_err();
        assert_eq!(body.message, r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "spec""#);
        let patched = enforce(FieldValidation::Strict, &errors, Decoded::Patched, &object, "ConfigMap", "v1").unwrap_err();
        assert_eq!(
            patched.message,
            r#" "" is invalid: patch: Invalid value: "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"},\"spec\":{\"foo\":1}}": strict decoding error: unknown field "spec""#
        );
        assert_eq!((patched.code, patched.causes[0].field.as_str()), (422, "patch"));
        let patch = serde_json::json!({"spec": {"foo": 1, "bar": [true, null, "x"]}});
        let strategic = enforce(FieldValidation::Strict, &errors, Decoded::Strategic(&patch), &object, "ConfigMap", "v1").unwrap_err();
        assert_eq!(
            strategic.causes[0].message,
            r#"Invalid value: "map[spec:map[bar:[true <nil> x] foo:1]]": strict decoding error: unknown field "spec""#
        );
        assert!(enforce(FieldValidation::Warn, &errors, Decoded::Body, &object, "ConfigMap", "v1").is_ok());
        assert!(enforce(FieldValidation::Ignore, &errors, Decoded::Body, &object, "ConfigMap", "v1").is_ok());
        let bad = FieldValidation::parse(Some("Loose"), "CreateOptions").unwrap_err();
        assert_eq!(
            bad.message,
            r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": supported values: "", "Ignore", "Strict", "Warn""#
        );
        assert_eq!(FieldValidation::parse(None, "CreateOptions").unwrap(), FieldValidation::Warn);
    }
}
