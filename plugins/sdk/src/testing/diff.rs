//! Differences between an expected and an actual JSON answer, named by JSON
//! path (`[2].create.metadata.labels.app`), so that one inserted key or
//! action is one difference and not every line after it.

use std::fmt::Write as _;

use serde_json::Value;

/// One line per difference: `- path: want` for a key or element only the
/// expected answer has, `+ path: got` for one only the actual answer has,
/// `~ path: want -> got` for a changed value. Empty when the two are equal.
///
/// ```
/// use operator_plugin_sdk::testing::json_diff;
/// use serde_json::json;
///
/// let want = json!([{"create": {"metadata": {"name": "a"}}}, {"requeueAfterMs": 5}]);
/// let got = json!([{"event": {"reason": "X"}}, {"create": {"metadata": {"name": "a", "labels": {"k": "v"}}}}, {"requeueAfterMs": 5}]);
/// assert_eq!(
///     json_diff(&want, &got),
///     "+ [0]: {\"event\":{\"reason\":\"X\"}}\n+ [1].create.metadata.labels: {\"k\":\"v\"}\n"
/// );
/// ```
pub fn json_diff(want: &Value, got: &Value) -> String {
    let mut out = String::new();
    walk(want, got, "", &mut out);
    out
}

fn key_path(path: &str, key: &str) -> String {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (path.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
        (_, false) => format!("{path}[{key:?}]"),
    }
}

fn walk(want: &Value, got: &Value, path: &str, out: &mut String) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => walk(wv, gv, &key_path(path, k), out),
                    None => writeln!(out, "- {}: {wv}", key_path(path, k)).unwrap(),
                }
            }
            for (k, gv) in g.iter().filter(|(k, _)| !w.contains_key(*k)) {
                writeln!(out, "+ {}: {gv}", key_path(path, k)).unwrap();
            }
        }
        (Value::Array(w), Value::Array(g)) => arrays(w, g, path, out),
        _ if want != got => writeln!(out, "~ {}: {want} -> {got}", if path.is_empty() { "(root)" } else { path }).unwrap(),
        _ => {}
    }
}

/// Elements are matched by a longest common subsequence of equal elements;
/// between two matches, an element left on each side is compared as a
/// changed element when the two are alike (objects sharing a key, such as
/// two `create` actions, or two non-objects), and the rest are missing or
/// extra. Indexes are the actual answer's, or the expected one's for a
/// missing element.
fn arrays(w: &[Value], g: &[Value], path: &str, out: &mut String) {
    let (n, m) = (w.len(), g.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if w[i] == g[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j) = (0, 0);
    let (mut missing, mut extra) = (Vec::new(), Vec::new());
    while i < n || j < m {
        if i < n && j < m && w[i] == g[j] {
            unmatched(w, g, &missing, &extra, path, out);
            (missing, extra) = (Vec::new(), Vec::new());
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            extra.push(j);
            j += 1;
        } else {
            missing.push(i);
            i += 1;
        }
    }
    unmatched(w, g, &missing, &extra, path, out);
}

/// Elements between two matches: alike pairs compared, the rest listed.
fn unmatched(w: &[Value], g: &[Value], missing: &[usize], extra: &[usize], path: &str, out: &mut String) {
    let alike = |a: &Value, b: &Value| match (a, b) {
        (Value::Object(a), Value::Object(b)) => a.keys().any(|k| b.contains_key(k)),
        (Value::Object(_), _) | (_, Value::Object(_)) => false,
        _ => true,
    };
    let mut partner: Vec<Option<usize>> = vec![None; extra.len()];
    let mut alone = Vec::new();
    let mut next = 0;
    for &a in missing {
        match (next..extra.len()).find(|&e| alike(&w[a], &g[extra[e]])) {
            Some(e) => {
                partner[e] = Some(a);
                next = e + 1;
            }
            None => alone.push(a),
        }
    }
    for a in alone {
        writeln!(out, "- {path}[{a}]: {}", w[a]).unwrap();
    }
    for (e, &b) in extra.iter().enumerate() {
        match partner[e] {
            Some(a) => walk(&w[a], &g[b], &format!("{path}[{b}]"), out),
            None => writeln!(out, "+ {path}[{b}]: {}", g[b]).unwrap(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn one_inserted_key_is_one_difference() {
        let want = json!({"a": 1, "b": {"c": [1, 2, 3], "d": "x"}, "e": true});
        let mut got = want.clone();
        got["b"]["inserted"] = json!("new");
        assert_eq!(json_diff(&want, &got), "+ b.inserted: \"new\"\n");
        assert_eq!(json_diff(&want, &want), "");
    }

    #[test]
    fn array_elements_are_matched_not_paired_by_position() {
        let want = json!([1, 2, 3, 4]);
        assert_eq!(json_diff(&want, &json!([0, 1, 2, 3, 4])), "+ [0]: 0\n");
        assert_eq!(json_diff(&want, &json!([1, 3, 4])), "- [1]: 2\n");
        assert_eq!(json_diff(&want, &json!([1, 2, 30, 4])), "~ [2]: 3 -> 30\n");
    }

    #[test]
    fn keys_that_are_not_identifiers_are_quoted_and_types_compared() {
        let want = json!({"metadata": {"labels": {"app.kubernetes.io/name": "a"}}, "n": 1});
        let got = json!({"metadata": {"labels": {"app.kubernetes.io/name": "b"}}, "n": "1"});
        assert_eq!(json_diff(&want, &got), "~ metadata.labels[\"app.kubernetes.io/name\"]: \"a\" -> \"b\"\n~ n: 1 -> \"1\"\n");
    }
}
