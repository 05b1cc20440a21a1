//! Label selectors: matching, and the string form `status.selector` carries
//! for the scale subresource (`metav1.LabelSelectorAsSelector(..).String()`).

use std::collections::BTreeMap;

use crate::api::{LabelSelector, LabelSelectorRequirement};

pub const OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

impl LabelSelector {
    /// True when the selector selects nothing-in-particular: upstream refuses
    /// an empty selector for a Deployment, since it would match every Pod.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Whether `labels` satisfy every term of the selector.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

impl LabelSelectorRequirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator.as_str() {
            "In" => value.is_some_and(|v| self.values.contains(v)),
            "NotIn" => value.is_none_or(|v| !self.values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            // Validation refuses other operators; match nothing rather than everything.
            _ => false,
        }
    }

    fn render(&self) -> String {
        let mut values = self.values.clone();
        values.sort();
        match self.operator.as_str() {
            "In" => format!("{} in ({})", self.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", self.key, values.join(",")),
            "Exists" => self.key.clone(),
            "DoesNotExist" => format!("!{}", self.key),
            other => format!("{} {other} ({})", self.key, values.join(",")),
        }
    }
}

impl std::fmt::Display for LabelSelector {
    /// Requirements sorted by key, as `labels.Selector.String()` prints them:
    /// `app=nginx,tier in (a,b),!canary`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut terms: Vec<(String, String)> = self
            .match_labels
            .iter()
            .map(|(k, v)| (k.clone(), format!("{k}={v}")))
            .collect();
        terms.extend(
            self.match_expressions
                .iter()
                .map(|r| (r.key.clone(), r.render())),
        );
        // Stable sort: several terms on one key keep their written order.
        terms.sort_by(|a, b| a.0.cmp(&b.0));
        let rendered: Vec<String> = terms.into_iter().map(|(_, t)| t).collect();
        f.write_str(&rendered.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn match_labels_and_expressions_must_all_hold() {
        let sel = LabelSelector {
            match_labels: labels(&[("app", "nginx")]),
            match_expressions: vec![
                req("tier", "In", &["web", "edge"]),
                req("canary", "DoesNotExist", &[]),
            ],
        };
        assert!(sel.matches(&labels(&[("app", "nginx"), ("tier", "web")])));
        assert!(!sel.matches(&labels(&[("app", "nginx"), ("tier", "db")])));
        assert!(!sel.matches(&labels(&[
            ("app", "nginx"),
            ("tier", "web"),
            ("canary", "1")
        ])));
        assert!(!sel.matches(&labels(&[("tier", "web")])));
    }

    #[test]
    fn not_in_matches_a_missing_label_and_exists_does_not() {
        let not_in = LabelSelector {
            match_expressions: vec![req("env", "NotIn", &["prod"])],
            ..Default::default()
        };
        assert!(not_in.matches(&labels(&[])));
        assert!(!not_in.matches(&labels(&[("env", "prod")])));
        let exists = LabelSelector {
            match_expressions: vec![req("env", "Exists", &[])],
            ..Default::default()
        };
        assert!(!exists.matches(&labels(&[])));
    }

    #[test]
    fn string_form_sorts_terms_by_key_like_labels_selector() {
        let sel = LabelSelector {
            match_labels: labels(&[("app", "nginx")]),
            match_expressions: vec![
                req("tier", "In", &["web", "edge"]),
                req("canary", "DoesNotExist", &[]),
                req("zone", "Exists", &[]),
            ],
        };
        assert_eq!(sel.to_string(), "app=nginx,!canary,tier in (edge,web),zone");
    }
}
