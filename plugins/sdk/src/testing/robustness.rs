//! Robustness against bad input (feature `testing`): a plugin must answer
//! malformed and invalid objects with field errors or a clean
//! [`ReconcileError`](crate::ReconcileError), never a panic (in Wasm a panic
//! is a trap). [`check_robustness`] takes the plugin's own fixtures as seeds,
//! breaks them at random places (a value replaced by one of another type or
//! an extreme one, a field removed, the text cut short), and runs each
//! through `default`, `validate` and `reconcile` exactly as the host does.
//! proptest shrinks a failure to a small mutation and prints it.
//!
//! `ROBUSTNESS_CASES=N` raises the number of cases (default 256) for a soak.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value};

use super::Fixture;
use crate::{Plugin, plugin};

/// One change to a document.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// The value at the `n`-th path (pre-order, modulo the count) becomes `value`.
    Replace(usize, Value),
    /// The member at the `n`-th path is removed (array items too).
    Remove(usize),
}

/// JSON values of every type, with the extremes that break parsers and
/// arithmetic: huge and negative numbers, empty and odd strings, deep nesting.
pub fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(-1i64), Just(0i64), Just(2147483648i64), any::<i64>()].prop_map(Value::from),
        prop_oneof![Just(f64::MAX), Just(-0.5f64), Just(1e-300f64), any::<f64>().prop_filter("finite", |f| f.is_finite())].prop_map(Value::from),
        prop_oneof![
            Just(String::new()),
            Just("-1".to_string()),
            Just("*/5 * * * *".to_string()),
            Just("999999999999999999999".to_string()),
            Just("100%".to_string()),
            Just("Ω≈ç√ 🚀".to_string()),
            "[ -~]{0,40}",
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-zA-Z]{1,12}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![3 => (any::<usize>(), any_json()).prop_map(|(n, v)| Mutation::Replace(n, v)), 1 => any::<usize>().prop_map(Mutation::Remove)]
}

/// JSON pointers of every value in `doc`, pre-order, the root excluded.
fn paths(doc: &Value) -> Vec<String> {
    fn walk(v: &Value, at: &str, out: &mut Vec<String>) {
        let children: Vec<(String, &Value)> = match v {
            Value::Object(m) => m.iter().map(|(k, v)| (k.replace('~', "~0").replace('/', "~1"), v)).collect(),
            Value::Array(a) => a.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
            _ => return,
        };
        for (key, child) in children {
            let path = format!("{at}/{key}");
            out.push(path.clone());
            walk(child, &path, out);
        }
    }
    let mut out = Vec::new();
    walk(doc, "", &mut out);
    out
}

/// Applies `m` to `doc` (a no-op on a document without members).
pub fn apply(doc: &mut Value, m: &Mutation) {
    let all = paths(doc);
    if all.is_empty() {
        return;
    }
    let (n, replacement) = match m {
        Mutation::Replace(n, v) => (*n, Some(v.clone())),
        Mutation::Remove(n) => (*n, None),
    };
    let path = &all[n % all.len()];
    match replacement {
        Some(v) => *doc.pointer_mut(path).expect("path from this document") = v,
        None => {
            let (parent, key) = path.rsplit_once('/').expect("non-root path");
            let key = key.replace("~1", "/").replace("~0", "~");
            match doc.pointer_mut(parent).expect("parent path from this document") {
                Value::Object(map) => {
                    map.remove(&key);
                }
                Value::Array(items) => {
                    items.remove(key.parse::<usize>().expect("array index"));
                }
                _ => unreachable!("only containers have members"),
            }
        }
    }
}

/// One generated case: which fixture, what to break in its parent and in
/// one of its children, whether to cut the parent's text, and a shift of `now`.
#[derive(Clone, Debug)]
struct Case {
    fixture: usize,
    parent: Vec<Mutation>,
    child: Option<(usize, Vec<Mutation>)>,
    truncate: Option<usize>,
    now_shift_s: i64,
}

fn case(fixtures: usize) -> impl Strategy<Value = Case> {
    (
        0..fixtures,
        prop::collection::vec(mutation(), 1..4),
        prop::option::of((any::<usize>(), prop::collection::vec(mutation(), 1..3))),
        prop::option::weighted(0.1, any::<usize>()),
        prop_oneof![Just(0i64), -86_400i64..86_400, Just(i64::from(i32::MAX))],
    )
        .prop_map(|(fixture, parent, child, truncate, now_shift_s)| Case { fixture, parent, child, truncate, now_shift_s })
}

/// What runs the plugin: natively ([`Native`]) or, in the host's tests,
/// the built `.wasm` in the sandbox. Each call returns `Err` only for what
/// must never happen (a panic, a trap); a plugin's own errors are answers.
pub trait Subject {
    /// `default`; `Ok(None)` when the plugin refused the object cleanly.
    fn default(&self, object: &str) -> Result<Option<String>, String>;
    /// Runs `validate` on an object (and its old version); `Err` is a crash, not a refusal.
    fn validate(&self, object: &str, old: Option<&str>) -> Result<(), String>;
    /// Runs `reconcile`; `Err` is a crash, not a reconcile error.
    fn reconcile(&self, parent: &str, children: &[String], now_ms: i64) -> Result<(), String>;
}

/// `P` called natively; a panic is the failure.
pub struct Native<P>(std::marker::PhantomData<fn() -> P>);

impl<P> Native<P> {
    /// Runs the plugin `P` natively.
    pub fn new() -> Self {
        Native(std::marker::PhantomData)
    }
}

impl<P> Default for Native<P> {
    fn default() -> Self {
        Self::new()
    }
}

fn no_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|panic| panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default())
}

impl<P: Plugin> Subject for Native<P> {
    fn default(&self, object: &str) -> Result<Option<String>, String> {
        no_panic(|| plugin::default::<P>(object).ok())
    }
    fn validate(&self, object: &str, old: Option<&str>) -> Result<(), String> {
        no_panic(|| drop(plugin::validate::<P>(object, old)))
    }
    fn reconcile(&self, parent: &str, children: &[String], now_ms: i64) -> Result<(), String> {
        no_panic(|| drop(plugin::reconcile::<P>(parent, children, now_ms)))
    }
}

/// Runs `default`, `validate` and `reconcile` on one broken input, as the
/// host would: defaulting first, validation against the original as the old
/// object, and reconcile of whatever defaulting left.
fn exercise(subject: &dyn Subject, f: &Fixture, c: &Case) -> Result<(), String> {
    let mut parent: Value = serde_json::from_str(&f.parent).expect("fixture parents are JSON");
    for m in &c.parent {
        apply(&mut parent, m);
    }
    let mut text = parent.to_string();
    if let Some(cut) = c.truncate {
        let mut at = cut % (text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
    }
    let mut children = f.children.clone();
    if let Some((i, ms)) = &c.child
        && !children.is_empty()
    {
        let i = i % children.len();
        let mut child: Value = serde_json::from_str(&children[i]).expect("fixture children are JSON");
        for m in ms {
            apply(&mut child, m);
        }
        children[i] = child.to_string();
    }
    let now = f.now.0.timestamp_millis().saturating_add(c.now_shift_s.saturating_mul(1000));
    let run = || -> Result<(), String> {
        let defaulted = subject.default(&text)?.unwrap_or_else(|| text.clone());
        subject.validate(&defaulted, Some(&f.parent))?;
        subject.validate(&defaulted, None)?;
        subject.reconcile(&defaulted, &children, now)
    };
    run().map_err(|why| format!("{why}\n  fixture {}\n  parent {text}\n  children {children:?}\n  now_ms {now}", f.name()))
}

/// Checks that `P` never panics on broken versions of the fixtures under
/// `root` (see the module doc). Panics with the shrunk failing case.
pub fn check_robustness<P: Plugin>(root: impl AsRef<std::path::Path>) {
    let cases = std::env::var("ROBUSTNESS_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256);
    // The plugin's panics are the failures we look for; keep their default
    // message off stderr for the cases proptest runs while shrinking.
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = run(&Native::<P>::new(), root.as_ref(), cases);
    std::panic::set_hook(quiet);
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// [`check_robustness`] for any [`Subject`], `cases` cases; the error names
/// the smallest failing input proptest found.
pub fn run(subject: &dyn Subject, root: &std::path::Path, cases: u32) -> Result<(), String> {
    let fixtures = super::fixtures_in(root);
    assert!(!fixtures.is_empty(), "no fixtures to start from in {}", root.display());
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    runner.run(&case(fixtures.len()), |c| exercise(subject, &fixtures[c.fixture], &c).map_err(TestCaseError::fail)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mutations_reach_every_value_and_keep_the_document_json() {
        let doc = json!({"a": {"b": [1, {"c": 2}]}, "d/e": 3});
        assert_eq!(paths(&doc), ["/a", "/a/b", "/a/b/0", "/a/b/1", "/a/b/1/c", "/d~1e"]);
        let mut d = doc.clone();
        apply(&mut d, &Mutation::Remove(5));
        assert_eq!(d, json!({"a": {"b": [1, {"c": 2}]}}));
        let mut d = doc.clone();
        apply(&mut d, &Mutation::Remove(2));
        assert_eq!(d["a"]["b"], json!([{"c": 2}]));
        let mut d = doc;
        apply(&mut d, &Mutation::Replace(1, json!("x")));
        assert_eq!(d["a"]["b"], "x");
    }
}
