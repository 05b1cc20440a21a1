//! YAML request bodies (`application/yaml`, apply patches), read as JSON values.

use serde_json::Value;

/// Decodes one YAML document; the error is its first line (the parser adds
/// a source snippet below), as the API server's `error decoding YAML: ...`
/// answers are one line.
pub fn from_slice(body: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    serde_saphyr::from_str(text).map_err(|e| e.to_string().lines().next().unwrap_or_default().to_string())
}
