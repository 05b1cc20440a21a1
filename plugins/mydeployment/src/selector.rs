//! Label selectors: matching and the string form `status.selector` carries for the scale
//! subresource (`metav1.LabelSelectorAsSelector(..).String()`), both by `operator_selector`,
//! which also checks label keys and values for validation.

use std::collections::BTreeMap;

use crate::api::LabelSelector;

pub const OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

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
}
