//! Structural-schema handling for custom resources, in upstream's order: prune unknown fields,
//! apply defaults, then validate (type, required, enum, bounds, lengths, pattern, formats, items,
//! properties, additionalProperties, nullable and the `x-kubernetes-*` extensions). Errors are
//! worded as kube-openapi's validator words them.

use crate::status::Cause;
use serde_json::{Map, Value};

fn render(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "\"null\"".into(),
        Value::Object(_) => "map[string]interface {}{...}".into(),
        Value::Array(_) => "[]interface {}{...}".into(),
        other => other.to_string(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// Remove fields the schema does not know, unless preserved (`x-kubernetes-preserve-unknown-fields`
/// or embedded resources' apiVersion/kind/metadata). `root` keeps apiVersion/kind/metadata.
/// Returns the paths pruned (for `fieldValidation=Strict`).
pub fn prune(schema: &Value, value: &mut Value, root: bool) -> Vec<String> {
    let mut pruned = vec![];
    prune_at(schema, value, root, &mut String::new(), &mut pruned);
    pruned
}

/// `path` is a buffer (the dotted path of `value`), restored on return: the walk formats no
/// path and copies no key unless a field is dropped.
fn prune_at(schema: &Value, value: &mut Value, keep_meta: bool, path: &mut String, pruned: &mut Vec<String>) {
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let embedded = keep_meta || flag(schema, "x-kubernetes-embedded-resource");
    match value {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let mut unknown = Vec::new();
            for (k, child) in m.iter_mut() {
                let meta_key = matches!(k.as_str(), "apiVersion" | "kind" | "metadata");
                // At the root, ObjectMeta is the API server's, never pruned by
                // the CRD schema (kubebuilder emits `metadata: {type: object}`).
                if meta_key && (keep_meta || (embedded && props.is_none_or(|p| !p.contains_key(k)))) {
                    continue;
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                if let Some(s) = props.and_then(|p| p.get(k)) {
                    prune_at(s, child, false, path, pruned);
                } else if let Some(s @ Value::Object(_)) = additional {
                    prune_at(s, child, false, path, pruned);
                } else if additional == Some(&Value::Bool(true)) || preserve {
                    // kept as is
                } else {
                    unknown.push(k.clone());
                    pruned.push(path.clone());
                }
                path.truncate(len);
            }
            for k in unknown {
                m.remove(&k);
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    prune_at(s, item, false, path, pruned);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// Fill in `default`s for absent properties (recursively, including inside defaulted objects).
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, s) in props {
                    if !m.contains_key(k)
                        && let Some(d) = s.get("default")
                    {
                        m.insert(k.clone(), d.clone());
                    }
                    if let Some(child) = m.get_mut(k) {
                        apply_defaults(s, child);
                    }
                }
            }
            if let Some(s @ Value::Object(_)) = schema.get("additionalProperties") {
                for (_, child) in m.iter_mut() {
                    apply_defaults(s, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for item in items {
                    apply_defaults(s, item);
                }
            }
        }
        _ => {}
    }
}

/// A schema bound as the API server prints it: the CRD holds bounds as
/// float64 and Go's `%v` prints a whole float without a fraction (`10`, where
/// a schema generated from Rust types says `10.0`).
fn go_number(bound: &Value) -> String {
    match bound.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{}", f as i64),
        Some(f) => f.to_string(),
        None => bound.to_string(),
    }
}

/// Validate `value` against `schema`; causes name field paths as upstream (`spec.replicas`).
pub fn validate(schema: &Value, value: &Value) -> Vec<Cause> {
    let mut causes = vec![];
    validate_at(schema, value, "", &mut causes);
    causes
}

fn invalid(causes: &mut Vec<Cause>, path: &str, v: &Value, msg: String) {
    causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: {}: {msg}", render(v)), path));
}

fn validate_at(schema: &Value, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    let shown = if path.is_empty() { "body".to_string() } else { path.to_string() };
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    if value.is_null() {
        if flag(schema, "nullable") {
            return;
        }
        if let Some(t) = schema.get("type").and_then(Value::as_str) {
            causes.push(Cause::new("FieldValueTypeInvalid", format!("Invalid value: \"null\": {shown} in body must be of type {t}: \"null\""), path));
        }
        return;
    }
    if int_or_string {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            causes.push(Cause::new(
                "FieldValueTypeInvalid",
                format!("Invalid value: {}: {shown} in body must be of type integer,string: {:?}", render(value), type_name(value)),
                path,
            ));
            return;
        }
    } else if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let actual = type_name(value);
        let ok = actual == t || (t == "number" && actual == "integer");
        if !ok {
            causes.push(Cause::new(
                "FieldValueTypeInvalid",
                format!("Invalid value: \"{actual}\": {shown} in body must be of type {t}: \"{actual}\""),
                path,
            ));
            return;
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(value)
    {
        let list: Vec<String> = e.iter().map(render).collect();
        causes.push(Cause::new(
            "FieldValueNotSupported",
            format!("Unsupported value: {}: supported values: {}", render(value), list.join(", ")),
            path,
        ));
    }
    if let Some(n) = value.as_f64() {
        let excl_min = flag(schema, "exclusiveMinimum");
        let excl_max = flag(schema, "exclusiveMaximum");
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && (n < min || (excl_min && n == min))
        {
            let word = if excl_min { "greater than" } else { "greater than or equal to" };
            invalid(causes, path, value, format!("{shown} in body should be {word} {}", go_number(&schema["minimum"])));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && (n > max || (excl_max && n == max))
        {
            let word = if excl_max { "less than" } else { "less than or equal to" };
            invalid(causes, path, value, format!("{shown} in body should be {word} {}", go_number(&schema["maximum"])));
        }
        if let Some(m) = schema.get("multipleOf").and_then(Value::as_f64)
            && m != 0.0
            && (n / m).fract() != 0.0
        {
            invalid(causes, path, value, format!("{shown} in body should be a multiple of {}", go_number(&schema["multipleOf"])));
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            invalid(causes, path, value, format!("{shown} in body should be at least {min} chars long"));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            causes.push(Cause::new("FieldValueTooLong", format!("Too long: may not be more than {max} bytes"), path));
        }
        if let Some(p) = schema.get("pattern").and_then(Value::as_str)
            && let Ok(re) = regex::Regex::new(p)
            && !re.is_match(s)
        {
            invalid(causes, path, value, format!("{shown} in body should match '{p}'"));
        }
        if let Some(f) = schema.get("format").and_then(Value::as_str) {
            let ok = match f {
                "date-time" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
                "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
                "int32" | "int64" => true,
                _ => true,
            };
            if !ok {
                invalid(causes, path, value, format!("{shown} in body must be of type {f}: {s:?}"));
            }
        }
    }
    if let Some(items) = value.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < min
        {
            invalid(causes, path, value, format!("{shown} in body should have at least {min} items"));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && items.len() as u64 > max
        {
            causes.push(Cause::new("FieldValueTooMany", format!("Too many: {}: must have at most {max} items", items.len()), path));
        }
        if let Some(s) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                validate_at(s, item, &format!("{path}[{i}]"), causes);
            }
        }
    }
    if let Some(m) = value.as_object() {
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for r in req.iter().filter_map(Value::as_str) {
                if !m.contains_key(r) {
                    let p = if path.is_empty() { r.to_string() } else { format!("{path}.{r}") };
                    causes.push(Cause::new("FieldValueRequired", "Required value", p));
                }
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, v) in m {
            let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
            if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                // Root metadata is validated as ObjectMeta, not by the CRD schema.
                continue;
            }
            if let Some(s) = props.and_then(|pp| pp.get(k)) {
                validate_at(s, v, &p, causes);
            } else if let Some(s @ Value::Object(_)) = schema.get("additionalProperties") {
                validate_at(s, v, &p, causes);
            }
        }
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && (m.len() as u64) < min
        {
            invalid(causes, path, value, format!("{shown} in body should have at least {min} properties"));
        }
    }
}

/// The whole pipeline for a custom resource: prune, default, validate. Returns the pruned paths
/// (for strict field validation) or the validation causes. The server runs these steps apart
/// (admission webhooks sit between them); the tests run them as one.
#[cfg(test)]
pub fn admit(schema: &Value, obj: &mut Value) -> Result<Vec<String>, Vec<Cause>> {
    let pruned = prune(schema, obj, true);
    apply_defaults(schema, obj);
    let causes = validate(schema, obj);
    if causes.is_empty() { Ok(pruned) } else { Err(causes) }
}

/// Ensure a value is an object map (helper for callers building objects).
pub fn as_map(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut().expect("object")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["image"], "properties": {
                "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                "image": {"type": "string", "minLength": 1, "pattern": "^[a-z]"},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "port": {"x-kubernetes-int-or-string": true},
                "when": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "opt": {"type": "string", "nullable": true}
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }})
    }

    #[test]
    fn minimum_violation_is_worded_as_upstream() {
        let c = validate(&schema(), &json!({"spec": {"image": "x", "replicas": -1}}));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "spec.replicas");
        assert_eq!(c[0].message, "Invalid value: -1: spec.replicas in body should be greater than or equal to 0");
        // Bounds as a schema generated from Rust types writes them (`10.0`)
        // print as the real API server prints them.
        let generated = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "minimum": 0.0, "maximum": 10.0}
        }}}});
        let c = validate(&generated, &json!({"spec": {"replicas": 20}}));
        assert_eq!(c[0].message, "Invalid value: 20: spec.replicas in body should be less than or equal to 10");
    }

    #[test]
    fn type_enum_required_and_format_are_checked() {
        let c = validate(&schema(), &json!({"spec": {"replicas": "x", "mode": "c", "when": "nope", "tags": ["a", 1, "c"]}}));
        let fields: Vec<&str> = c.iter().map(|c| c.field.as_str()).collect();
        assert!(fields.contains(&"spec.image"), "{c:?}");
        assert!(fields.contains(&"spec.replicas"));
        assert!(fields.contains(&"spec.mode"));
        assert!(fields.contains(&"spec.when"));
        assert!(fields.contains(&"spec.tags"));
        assert!(fields.contains(&"spec.tags[1]"));
        let t = c.iter().find(|c| c.field == "spec.replicas").unwrap();
        assert_eq!(t.message, "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"");
    }

    #[test]
    fn unknown_fields_are_pruned_unless_preserved_and_defaults_applied() {
        let mut o = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
            "spec": {"image": "x", "bogus": 1, "extra": {"any": {"thing": 1}}, "port": "http", "opt": null}, "junk": true});
        let mut pruned = admit(&schema(), &mut o).unwrap();
        pruned.sort();
        assert_eq!(pruned, vec!["junk".to_string(), "spec.bogus".to_string()]);
        assert_eq!(o["spec"]["replicas"], 1);
        assert_eq!(o["spec"]["extra"]["any"]["thing"], 1);
        assert_eq!(o["metadata"]["name"], "n");
    }

    #[test]
    fn a_plain_root_metadata_schema_does_not_prune_object_meta() {
        // Regression: kubebuilder-generated CRDs declare `metadata: {type: object}`;
        // the server pruned metadata.name away and then refused the object.
        let schema = json!({"type": "object", "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}}});
        let mut o = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {}});
        assert!(prune(&schema, &mut o, true).is_empty());
        assert_eq!(o["metadata"]["name"], "n");
    }
}
