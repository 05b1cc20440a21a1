//! Label and field selectors, parsed as upstream's `labels.Parse` and `fields.ParseSelector`.
//! A label selector is read here from its two forms, the `?labelSelector=` string and, leniently,
//! a stored `metav1.LabelSelector`; its requirements are `operator_selector`'s, which match them
//! (the one matcher the runtime and the plugins use too).

use operator_selector::{Operator, Requirement};
use serde_json::Value;

/// A parsed label selector (all requirements must hold): `k=v`, `k==v` and `k in (a,b)` are
/// `In`; `k!=v` and `k notin (a,b)` are `NotIn` (which also matches objects without the
/// label); `k` is `Exists`, `!k` `DoesNotExist`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector(pub Vec<Requirement>);

/// Selector parse error (answered as 400 BadRequest).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unable to parse requirement: {0}")]
pub struct ParseError(pub String);

fn split_top_level(s: &str) -> Vec<String> {
    let mut out = vec![];
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter().map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, ParseError> {
    let rest = rest.trim();
    if !rest.starts_with('(') || !rest.ends_with(')') {
        return Err(ParseError(format!("found '{whole}', expected: '('")));
    }
    Ok(rest[1..rest.len() - 1].split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
}

impl LabelSelector {
    /// Parse `a=b,c!=d,e in (f,g),!h`.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut reqs = vec![];
        for part in split_top_level(s) {
            let req = if let Some(k) = part.strip_prefix('!') {
                Requirement::new(k.trim(), Operator::DoesNotExist, [])
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::new(k.trim(), Operator::NotIn, [v.trim().into()])
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement::new(k.trim(), Operator::In, [v.trim().into()])
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement::new(k.trim(), Operator::In, [v.trim().into()])
            } else if let Some(idx) = part.find(" notin ") {
                Requirement::new(part[..idx].trim(), Operator::NotIn, parse_set(&part[idx + 7..], &part)?)
            } else if let Some(idx) = part.find(" in ") {
                Requirement::new(part[..idx].trim(), Operator::In, parse_set(&part[idx + 4..], &part)?)
            } else {
                Requirement::new(part.trim(), Operator::Exists, [])
            };
            let key = req.key();
            if !valid_key(key) {
                return Err(ParseError(format!("invalid label key \"{key}\"")));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Build from a `metav1.LabelSelector` object (matchLabels + matchExpressions).
    pub fn from_object(sel: &Value) -> Self {
        let mut reqs = vec![];
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                reqs.push(Requirement::new(k.clone(), Operator::In, [v.as_str().unwrap_or_default().to_string()]));
            }
        }
        if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default().to_string();
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|vs| vs.iter().filter_map(|v| v.as_str().map(String::from)).collect())
                    .unwrap_or_default();
                match e.get("operator").and_then(Value::as_str).unwrap_or_default() {
                    "In" => reqs.push(Requirement::new(key, Operator::In, values)),
                    "NotIn" => reqs.push(Requirement::new(key, Operator::NotIn, values)),
                    "Exists" => reqs.push(Requirement::new(key, Operator::Exists, [])),
                    "DoesNotExist" => reqs.push(Requirement::new(key, Operator::DoesNotExist, [])),
                    _ => {}
                }
            }
        }
        LabelSelector(reqs)
    }

    /// Whether an object's labels satisfy the selector.
    pub fn matches(&self, obj: &Value) -> bool {
        let none = serde_json::Map::new();
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object).unwrap_or(&none);
        self.0.iter().all(|r| r.matches(labels))
    }
}

impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|r| {
                let (k, vs) = (r.key(), r.values().collect::<Vec<_>>());
                match r.operator() {
                    Operator::In if vs.len() == 1 => format!("{k}={}", vs[0]),
                    Operator::In => format!("{k} in ({})", vs.join(",")),
                    Operator::NotIn if vs.len() == 1 => format!("{k}!={}", vs[0]),
                    Operator::NotIn => format!("{k} notin ({})", vs.join(",")),
                    Operator::Exists => k.to_string(),
                    Operator::DoesNotExist => format!("!{k}"),
                }
            })
            .collect();
        write!(f, "{}", parts.join(","))
    }
}

/// A parsed field selector: `metadata.name=x,status.phase!=Running`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSelector {
    /// (field, equals, value) terms; all must hold.
    pub terms: Vec<(String, bool, String)>,
    /// (group, plural) whose field label conversion reads the fields (see [`FieldSelector::for_resource`]).
    resource: Option<(String, String)>,
}

impl FieldSelector {
    /// Parse; only `=`, `==` and `!=` exist for fields.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut out = vec![];
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ParseError(format!("invalid selector: '{part}'; can't understand '{part}'")));
            };
            out.push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector { terms: out, resource: None })
    }

    /// Read fields as the resource's registry does (its `...ToSelectableFields`): unset
    /// booleans and integers compare as Go's zero values, some labels name other fields.
    #[must_use]
    pub fn for_resource(mut self, group: &str, plural: &str) -> Self {
        self.resource = Some((group.to_string(), plural.to_string()));
        self
    }

    /// The fields named in the selector (for the "is not a known field selector" check).
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|(k, _, _)| k.as_str())
    }

    /// Whether the object matches.
    pub fn matches(&self, obj: &Value) -> bool {
        let (group, plural) = self.resource.as_ref().map(|(g, p)| (g.as_str(), p.as_str())).unwrap_or_default();
        self.terms.iter().all(|(k, eq, v)| (selectable_value(group, plural, k, obj) == *v) == *eq)
    }
}

/// The Go type of a selectable field, which decides how an unset field reads.
#[derive(Clone, Copy)]
enum Zero {
    /// `""`.
    Str,
    /// `strconv.FormatBool(false)`.
    Bool,
    /// `strconv.Itoa(0)`.
    Int,
}

/// The value upstream's field set holds for `field` of an object of (group, plural):
/// `fields.Set` entries are strings built from the typed object, so a missing bool is
/// `"false"` and a missing int `"0"`, never absent.
fn selectable_value(group: &str, plural: &str, field: &str, obj: &Value) -> String {
    let read = |ptr: &str, zero: Zero| match obj.pointer(ptr) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => match zero {
            Zero::Str => String::new(),
            Zero::Bool => "false".into(),
            Zero::Int => "0".into(),
        },
    };
    match (group, plural, field) {
        ("", "pods", "spec.hostNetwork") => read("/spec/hostNetwork", Zero::Bool),
        // podToSelectableFields: the first of status.podIPs.
        ("", "pods", "status.podIP") => match obj.pointer("/status/podIPs/0/ip") {
            Some(Value::String(ip)) => ip.clone(),
            _ => read("/status/podIP", Zero::Str),
        },
        ("", "nodes", "spec.unschedulable") => read("/spec/unschedulable", Zero::Bool),
        // JobToSelectableFields: "status.successful" is status.succeeded.
        ("batch", "jobs", "status.successful") => read("/status/succeeded", Zero::Int),
        ("apps", "replicasets", "status.replicas") => read("/status/replicas", Zero::Int),
        // Event ToSelectableFields: source.component, else reportingComponent.
        ("", "events", "source") => match read("/source/component", Zero::Str) {
            s if s.is_empty() => read("/reportingComponent", Zero::Str),
            s => s,
        },
        _ => read(&format!("/{}", field.replace('.', "/")), Zero::Str),
    }
}

/// Fields a resource may be selected by (upstream rejects others with 400).
pub fn supported_fields(group: &str, plural: &str) -> &'static [&'static str] {
    match (group, plural) {
        ("", "pods") => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "metadata.name",
            "metadata.namespace",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "secrets") => &["metadata.name", "metadata.namespace", "type"],
        ("", "namespaces") => &["metadata.name", "status.phase"],
        ("", "nodes") => &["metadata.name", "spec.unschedulable"],
        ("batch", "jobs") => &["metadata.name", "metadata.namespace", "status.successful"],
        ("apps", "replicasets") => &["metadata.name", "metadata.namespace", "status.replicas"],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "x", "namespace": "ns", "labels": labels}, "status": {"phase": "Running"}})
    }

    #[test]
    fn label_selector_operators_match_as_upstream() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web,db)", true),
            ("app notin (web,db)", false),
            ("tier notin (back)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&o), want, "{sel}");
        }
    }

    #[test]
    fn malformed_label_selector_is_an_error() {
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b c").is_err());
    }

    #[test]
    fn field_selector_reads_nested_fields() {
        let o = obj(json!({}));
        assert!(FieldSelector::parse("metadata.name=x").unwrap().matches(&o));
        assert!(FieldSelector::parse("status.phase!=Pending,metadata.namespace==ns").unwrap().matches(&o));
        assert!(!FieldSelector::parse("metadata.name=y").unwrap().matches(&o));
    }

    #[test]
    fn unset_bools_and_ints_compare_as_go_zero_values() {
        let node = json!({"metadata": {"name": "n"}, "spec": {}});
        let sel = |s: &str, g: &str, p: &str| FieldSelector::parse(s).unwrap().for_resource(g, p);
        assert!(sel("spec.unschedulable=false", "", "nodes").matches(&node));
        assert!(!sel("spec.unschedulable=true", "", "nodes").matches(&node));
        assert!(sel("spec.hostNetwork=false", "", "pods").matches(&json!({"spec": {}})));
        let job = json!({"status": {}});
        assert!(sel("status.successful=0", "batch", "jobs").matches(&job));
        assert!(sel("status.successful=2", "batch", "jobs").matches(&json!({"status": {"succeeded": 2}})));
        let ev = json!({"reportingComponent": "kubelet"});
        assert!(sel("source=kubelet", "", "events").matches(&ev));
    }

    #[test]
    fn label_selector_object_converts() {
        let s = LabelSelector::from_object(&json!({"matchLabels": {"app": "web"}}));
        assert_eq!(s.to_string(), "app=web");
    }
}
