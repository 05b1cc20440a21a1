//! Label selectors: the label key and value checks of validation, and matching and the string
//! form `status.selector` carries for the scale subresource
//! (`metav1.LabelSelectorAsSelector(..).String()`), both by `operator_selector`.

use std::collections::BTreeMap;

use operator_selector::dns1123;

use crate::api::LabelSelector;

pub const OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

const NAME_FORMAT: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const MAX_NAME: usize = 63;

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, the name part of a label key
/// and a non-empty label value.
fn is_label_token(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `validation.IsQualifiedName`: what is wrong with a label key, in the API
/// server's words; empty when it is valid.
pub fn key_errors(key: &str) -> Vec<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut errors = Vec::new();
    if name.contains('/') {
        errors.push(format!("a qualified name {NAME_FORMAT} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
        return errors;
    }
    if name.is_empty() {
        errors.push("name part must be non-empty".into());
    } else if name.len() > MAX_NAME {
        errors.push(format!("name part must be no more than {MAX_NAME} characters"));
    } else if !is_label_token(name) {
        errors.push(format!("name part {NAME_FORMAT} (e.g. 'MyName',  or 'my.name',  or '123-abc')"));
    }
    match prefix {
        Some("") => errors.push("prefix part must be non-empty".into()),
        Some(p) if !dns1123::is_subdomain(p) => errors.push(
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')".into(),
        ),
        _ => {}
    }
    errors
}

/// `validation.IsValidLabelValue`; empty when valid.
pub fn value_errors(value: &str) -> Vec<String> {
    if value.len() > MAX_NAME {
        vec![format!("must be no more than {MAX_NAME} characters")]
    } else if !value.is_empty() && !is_label_token(value) {
        vec![format!("a valid label must be an empty string or {NAME_FORMAT} (e.g. 'MyValue',  or 'my_value',  or '12345')")]
    } else {
        Vec::new()
    }
}

impl LabelSelector {
    /// True when the selector selects nothing-in-particular: upstream refuses
    /// an empty selector for a Deployment, since it would match every Pod.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// The selector as the API server reads it (`LabelSelectorAsSelector`, in the crate the
    /// server and the runtime share); `None` when the server would refuse it.
    fn as_selector(&self) -> Option<operator_selector::LabelSelector> {
        serde_json::to_value(self).ok().and_then(|v| operator_selector::LabelSelector::parse(&v).ok())
    }

    /// Whether `labels` satisfy every term of the selector; a selector the server would refuse
    /// (validation reports it) matches nothing rather than everything. Values given to
    /// `Exists`/`DoesNotExist` are ignored here: validation reports them as forbidden once, and
    /// the template check judges those operators by the key alone, so the one fault is not
    /// reported a second time as a template mismatch.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let mut checked = self.clone();
        for r in &mut checked.match_expressions {
            if matches!(r.operator.as_str(), "Exists" | "DoesNotExist") {
                r.values.clear();
            }
        }
        checked.as_selector().is_some_and(|s| s.matches(labels))
    }
}

impl std::fmt::Display for LabelSelector {
    /// Requirements sorted by key, as `labels.Selector.String()` prints them:
    /// `app=nginx,tier in (a,b),!canary`; empty for a selector the server would refuse.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.as_selector() {
            Some(selector) => selector.fmt(f),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement { key: key.into(), operator: op.into(), values: values.iter().map(|v| v.to_string()).collect() }
    }

    #[test]
    fn match_labels_and_expressions_must_all_hold() {
        let sel = LabelSelector {
            match_labels: labels(&[("app", "nginx")]),
            match_expressions: vec![req("tier", "In", &["web", "edge"]), req("canary", "DoesNotExist", &[])],
        };
        assert!(sel.matches(&labels(&[("app", "nginx"), ("tier", "web")])));
        assert!(!sel.matches(&labels(&[("app", "nginx"), ("tier", "db")])));
        assert!(!sel.matches(&labels(&[("app", "nginx"), ("tier", "web"), ("canary", "1")])));
        assert!(!sel.matches(&labels(&[("tier", "web")])));
    }

    #[test]
    fn not_in_matches_a_missing_label_and_exists_does_not() {
        let not_in = LabelSelector { match_expressions: vec![req("env", "NotIn", &["prod"])], ..Default::default() };
        assert!(not_in.matches(&labels(&[])));
        assert!(!not_in.matches(&labels(&[("env", "prod")])));
        let exists = LabelSelector { match_expressions: vec![req("env", "Exists", &[])], ..Default::default() };
        assert!(!exists.matches(&labels(&[])));
    }

    #[test]
    fn string_form_sorts_terms_by_key_like_labels_selector() {
        let sel = LabelSelector {
            match_labels: labels(&[("app", "nginx")]),
            match_expressions: vec![req("tier", "In", &["web", "edge"]), req("canary", "DoesNotExist", &[]), req("zone", "Exists", &[])],
        };
        assert_eq!(sel.to_string(), "app=nginx,!canary,tier in (edge,web),zone");
    }

    #[test]
    fn label_keys_and_values_follow_the_api_server_syntax() {
        for good in ["app", "app.kubernetes.io/name", "a", "A-b_c.d", "example.com/x"] {
            assert_eq!(key_errors(good), Vec::<String>::new(), "{good}");
        }
        for bad in ["", "-app", "app-", "a/b/c", "/app", "Example.com/app", &"x".repeat(64)] {
            assert!(!key_errors(bad).is_empty(), "{bad:?}");
        }
        for good in ["", "nginx", "1.7.9", "my_value"] {
            assert_eq!(value_errors(good), Vec::<String>::new(), "{good}");
        }
        for bad in ["-x", "x y", &"v".repeat(64)] {
            assert!(!value_errors(bad).is_empty(), "{bad:?}");
        }
    }
}
