//! The `metav1.LabelSelector` of Kubernetes, as the API server reads one
//! (`LabelSelectorAsSelector`): parsed from its JSON form with the server's
//! wording for the same faults, and matched against an object's labels; the one
//! label [`Requirement`] matcher (also of selectors read from other forms, such as
//! the embedded API server's `?labelSelector=` query); the syntax of label keys and
//! values ([`label`]); and the DNS-1123 name checks ([`dns1123`]) that object names
//! and label keys share.

pub mod dns1123;
pub mod label;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// An object's labels, as a selector reads them.
pub trait LabelSet {
    /// The value of label `key`, if the object has it.
    fn get(&self, key: &str) -> Option<&str>;

    /// Whether the object has label `key`.
    fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl LabelSet for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }
}

/// `metadata.labels` as JSON; a value that is not a string is no label.
impl LabelSet for serde_json::Map<String, Value> {
    fn get(&self, key: &str) -> Option<&str> {
        serde_json::Map::get(self, key).and_then(Value::as_str)
    }
}

/// A `metav1.LabelSelector`, as the API server reads one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    match_labels: BTreeMap<String, String>,
    match_expressions: Vec<Requirement>,
}

/// One term of a selector: a key, an operator and, for `In` and `NotIn`, a set of values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: BTreeSet<String>,
}

/// How a [`Requirement`] tests its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    /// The label is set to one of the values.
    In,
    /// The label is not set to any of the values (or not set at all).
    NotIn,
    /// The label is set, to anything.
    Exists,
    /// The label is not set.
    DoesNotExist,
}

impl LabelSelector {
    /// Parses a selector; the errors are worded as the API server's
    /// (`LabelSelectorAsSelector`) for the same faults.
    pub fn parse(value: &Value) -> Result<Self, String> {
        let obj = value.as_object().ok_or("a label selector must be an object")?;
        let mut selector = LabelSelector::default();
        if let Some(labels) = obj.get("matchLabels").filter(|v| !v.is_null()) {
            let labels = labels.as_object().ok_or("matchLabels must be an object of strings")?;
            for (k, v) in labels {
                let v = v.as_str().ok_or_else(|| format!("matchLabels[{k}] must be a string"))?;
                selector.match_labels.insert(k.clone(), v.to_string());
            }
        }
        if let Some(exprs) = obj.get("matchExpressions").filter(|v| !v.is_null()) {
            let exprs = exprs.as_array().ok_or("matchExpressions must be a list")?;
            for (i, e) in exprs.iter().enumerate() {
                selector.match_expressions.push(Requirement::parse(e).map_err(|m| format!("matchExpressions[{i}]: {m}"))?);
            }
        }
        Ok(selector)
    }

    /// Whether an object with these labels is selected. An empty selector
    /// selects everything, as `metav1.LabelSelectorAsSelector` makes it.
    pub fn matches(&self, labels: &impl LabelSet) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v.as_str())) && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

/// The string form `labels.Selector.String()` prints for a selector made by
/// `LabelSelectorAsSelector` (what `status.selector` of the scale subresource and
/// `kubectl get -o wide`'s SELECTOR column show): requirements sorted by key (stable, so
/// several on one key keep their order), `k=v` for matchLabels, `k in (a,b)`,
/// `k notin (a,b)`, `k`, `!k` for expressions; empty for the empty selector.
impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut terms: Vec<(&str, String)> = self.match_labels.iter().map(|(k, v)| (k.as_str(), format!("{k}={v}"))).collect();
        terms.extend(self.match_expressions.iter().map(|r| (r.key.as_str(), r.to_string())));
        terms.sort_by_key(|(key, _)| *key);
        let rendered: Vec<String> = terms.into_iter().map(|(_, t)| t).collect();
        f.write_str(&rendered.join(","))
    }
}

impl std::fmt::Display for Requirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let values = self.values.iter().map(String::as_str).collect::<Vec<_>>().join(",");
        match self.operator {
            Operator::In => write!(f, "{} in ({values})", self.key),
            Operator::NotIn => write!(f, "{} notin ({values})", self.key),
            Operator::Exists => f.write_str(&self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
        }
    }
}

impl Requirement {
    /// A requirement as given, unchecked: the caller has read it from a form with rules of its
    /// own (a query string's syntax, an object stored after validation). Values given to
    /// `Exists` and `DoesNotExist` are kept but play no part in matching.
    pub fn new(key: impl Into<String>, operator: Operator, values: impl IntoIterator<Item = String>) -> Self {
        Self { key: key.into(), operator, values: values.into_iter().collect() }
    }

    /// The label key tested.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How the key is tested.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values of `In` and `NotIn`, sorted.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.values.iter().map(String::as_str)
    }

    /// Whether an object with these labels satisfies the requirement.
    pub fn matches(&self, labels: &impl LabelSet) -> bool {
        match self.operator {
            Operator::In => labels.get(&self.key).is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => labels.get(&self.key).is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => labels.contains_key(&self.key),
            Operator::DoesNotExist => !labels.contains_key(&self.key),
        }
    }

    fn parse(value: &Value) -> Result<Self, String> {
        let key = value["key"].as_str().filter(|k| !k.is_empty()).ok_or("key is required")?.to_string();
        let operator = match value["operator"].as_str() {
            Some("In") => Operator::In,
            Some("NotIn") => Operator::NotIn,
            Some("Exists") => Operator::Exists,
            Some("DoesNotExist") => Operator::DoesNotExist,
            Some(other) => return Err(format!("\"{other}\" is not a valid label selector operator")),
            None => return Err("operator is required".into()),
        };
        let values: BTreeSet<String> = match &value["values"] {
            Value::Null => BTreeSet::new(),
            Value::Array(vs) => vs.iter().map(|v| v.as_str().map(str::to_string).ok_or("values must be strings")).collect::<Result<_, _>>()?,
            _ => return Err("values must be a list".into()),
        };
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => Err("for 'in', 'notin' operators, values set can't be empty".into()),
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => Err("values set must be empty for exists and does not exist".into()),
            _ => Ok(Self { key, operator, values }),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_selector_matches_labels_and_expressions_as_the_api_server_reads_them() {
        let s = LabelSelector::parse(&json!({"matchLabels": {"app": "a"}, "matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["cache"]}, {"key": "zone", "operator": "Exists"}]}))
        .unwrap();
        assert!(s.matches(&labels(&[("app", "a"), ("zone", "z1")])));
        assert!(!s.matches(&labels(&[("app", "a"), ("zone", "z1"), ("tier", "cache")])));
        assert!(!s.matches(&labels(&[("app", "a")])), "Exists needs the key");
        assert!(!s.matches(&labels(&[("app", "b"), ("zone", "z1")])));
        let bad = LabelSelector::parse(&json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})).unwrap_err();
        assert!(bad.contains("values set must be empty"), "{bad}");
        assert_eq!(LabelSelector::parse(&json!([])).unwrap_err(), "a label selector must be an object");
    }

    #[test]
    fn a_requirement_given_unchecked_matches_json_labels_that_are_strings() {
        let labels = json!({"app": "web", "replicas": 3}).as_object().unwrap().clone();
        assert!(Requirement::new("app", Operator::In, ["db".into(), "web".into()]).matches(&labels));
        assert!(!Requirement::new("app", Operator::NotIn, ["web".into()]).matches(&labels));
        assert!(Requirement::new("zone", Operator::NotIn, ["a".into()]).matches(&labels), "NotIn matches a missing label");
        assert!(Requirement::new("replicas", Operator::DoesNotExist, []).matches(&labels), "a number is no label");
        assert!(Requirement::new("app", Operator::Exists, ["ignored".into()]).matches(&labels));
        assert_eq!(Requirement::new("app", Operator::In, ["b".into(), "a".into()]).values().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn the_string_form_sorts_terms_by_key_as_labels_selector_prints_them() {
        let s = LabelSelector::parse(&json!({"matchLabels": {"app": "nginx"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "edge"]}, {"key": "canary", "operator": "DoesNotExist"},
            {"key": "zone", "operator": "Exists"}, {"key": "env", "operator": "NotIn", "values": ["prod"]}]}))
        .unwrap();
        assert_eq!(s.to_string(), "app=nginx,!canary,env notin (prod),tier in (edge,web),zone");
        assert_eq!(LabelSelector::parse(&json!({})).unwrap().to_string(), "");
    }
}
