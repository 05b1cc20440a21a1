//! Reading objects from files as users write them: YAML or JSON, one object,
//! a multi-document YAML stream, a JSON array, or a `List`.

use std::path::Path;

use serde_json::Value;

/// Reads exactly one object.
pub fn read_object(path: &Path) -> Result<Value, String> {
    let mut objects = read_objects(path)?;
    match objects.len() {
        1 => Ok(objects.remove(0)),
        0 => Err(format!("{}: no object found", path.display())),
        n => Err(format!("{}: expected one object, found {n}", path.display())),
    }
}

/// Reads any number of objects; an empty file gives none.
pub fn read_objects(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_objects(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses a YAML/JSON text into objects, flattening arrays and `*List`s.
pub fn parse_objects(text: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    for (i, value) in docs.into_iter().enumerate() {
        flatten(value, &mut out).map_err(|e| format!("document {}: {e}", i + 1))?;
    }
    Ok(out)
}

fn flatten(value: Value, out: &mut Vec<Value>) -> Result<(), String> {
    match value {
        Value::Null => Ok(()),
        Value::Array(items) => items.into_iter().try_for_each(|v| flatten(v, out)),
        Value::Object(map) if map.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List")) && map.contains_key("items") => {
            match map.get("items") {
                Some(Value::Array(items)) => items.iter().cloned().try_for_each(|v| flatten(v, out)),
                Some(Value::Null) => Ok(()),
                _ => Err("`items` of a List must be an array".into()),
            }
        }
        Value::Object(map) => {
            for field in ["apiVersion", "kind"] {
                if !map.get(field).is_some_and(Value::is_string) {
                    return Err(format!("object has no `{field}`"));
                }
            }
            out.push(Value::Object(map));
            Ok(())
        }
        other => Err(format!("expected an object, found {}", kind_of(&other))),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_json_arrays_and_lists_all_flatten() {
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n";
        assert_eq!(parse_objects(yaml).unwrap().len(), 2);
        let json = r#"[{"apiVersion":"v1","kind":"Pod"},{"apiVersion":"v1","kind":"Pod"}]"#;
        assert_eq!(parse_objects(json).unwrap().len(), 2);
        let list = r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"batch/v1","kind":"Job"}]}"#;
        assert_eq!(parse_objects(list).unwrap()[0]["kind"], "Job");
        assert!(parse_objects("").unwrap().is_empty());
    }

    #[test]
    fn scalars_and_objects_without_kind_are_refused_with_the_document_number() {
        assert_eq!(parse_objects("---\napiVersion: v1\nkind: Pod\n---\n42\n").unwrap_err(), "document 2: expected an object, found a number");
        assert_eq!(parse_objects("metadata: {}").unwrap_err(), "document 1: object has no `apiVersion`");
        assert!(parse_objects("a: [").is_err());
    }
}
