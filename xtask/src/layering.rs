//! The shape the workspace keeps, checked: (a) no crate depends on one in its own or a higher
//! layer of [`LAYERS`], nor across [`APART`] (read from `cargo metadata`, normal and build
//! dependencies; a test may use what it likes); (b) no import circle between the modules of a
//! crate (`use crate::` and `super::` paths per file, strongly connected components of the module
//! graph), neither between files nor between top-level modules (a module's files taken as one).
//! It prints the crate layers and, per library crate, its top-level modules in layers (a module
//! imports only from the layers left of its own). `cargo xtask layering` runs it alone; `cargo
//! xtask test` runs it with the lints.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Bottom first. A crate may depend only on crates of lower layers; the host is on top. The
/// runtime is the crates under runtime/crates (sandbox, controller, manager, plugin sources, ...)
/// with `operator-runtime` as their facade.
const LAYERS: &[&[&str]] = &[
    &["operator-clock", "workload-math", "operator-plugin-sdk", "operator-sharding", "operator-selector"],
    &["apiserver", "operator-api", "operator-oci", "operator-metrics"],
    &["operator-sandbox"],
    &["operator-controller"],
    &["operator-webhook", "operator-manager"],
    &["operator-plugin-sources"],
    &["operator-runtime"],
    &["simulated-cluster"],
    &["embedded-cluster"],
    &["host"],
];

/// Groups that link none of each other whatever their layers: the runtime never links the API
/// server (it runs against any), and the API server knows nothing of the runtime.
const APART: &[(&[&str], &[&str])] = &[(
    &["apiserver"],
    &[
        "operator-api",
        "operator-oci",
        "operator-metrics",
        "operator-sandbox",
        "operator-controller",
        "operator-webhook",
        "operator-manager",
        "operator-plugin-sources",
        "operator-runtime",
    ],
)];

pub fn check() -> crate::Result {
    let started = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata output: {e}"))?;
    let layer = |name: &str| LAYERS.iter().position(|l| l.contains(&name));
    let apart = |a: &str, b: &str| APART.iter().any(|(x, y)| (x.contains(&a) && y.contains(&b)) || (y.contains(&a) && x.contains(&b)));
    let mut problems = vec![];
    let mut edges = 0;
    let packages = meta["packages"].as_array().cloned().unwrap_or_default();
    for p in &packages {
        let name = p["name"].as_str().unwrap_or_default();
        let Some(own) = layer(name) else { continue };
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let dep = d["name"].as_str().unwrap_or_default();
            if d["kind"].as_str() == Some("dev") {
                continue;
            }
            if let Some(theirs) = layer(dep) {
                edges += 1;
                if theirs >= own {
                    problems.push(format!("{name} (layer {own}) depends on {dep} (layer {theirs})"));
                }
                if apart(name, dep) {
                    problems.push(format!("{name} depends on {dep}, which it is kept apart from"));
                }
            }
        }
    }
    println!("xtask: layering: crate layers, bottom first ({edges} dependencies between the {} layered crates checked):", LAYERS.concat().len());
    for (i, l) in LAYERS.iter().enumerate() {
        println!("  {i}: {}", l.join(", "));
    }
    let mut modules = 0;
    println!("xtask: layering: top-level modules of each library crate, in layers (a module imports only from layers left of its own):");
    for p in &packages {
        let name = p["name"].as_str().unwrap_or_default();
        for t in p["targets"].as_array().into_iter().flatten() {
            if !t["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "lib")) {
                continue;
            }
            let root = PathBuf::from(t["src_path"].as_str().unwrap_or_default());
            let graph = module_graph(&root);
            modules += graph.len();
            for circle in circles(&graph) {
                let text = circle.join(" ⇄ ");
                problems.push(format!("{name}: import circle {text}"));
            }
            let top = top_level(&graph);
            let top_circles = circles(&top);
            for circle in &top_circles {
                problems.push(format!("{name}: import circle between top-level modules {}", circle.join(" ⇄ ")));
            }
            if top_circles.is_empty() && !top.is_empty() {
                let layers: Vec<String> = module_layers(&top).iter().map(|l| l.join(" ")).collect();
                println!("  {name}: {}", layers.join(" < "));
            }
        }
    }
    println!("xtask: layering: {modules} modules of every library crate checked for import circles ({:.1?})", started.elapsed());
    if problems.is_empty() { Ok(()) } else { Err(format!("layering:\n  {}", problems.join("\n  "))) }
}

/// The module graph with each top-level module's files taken as one (`a::b` is `a`); the crate
/// root (`lib.rs`), which declares them all, is left out.
fn top_level(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &str| m.split("::").next().unwrap_or_default().to_string();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, deps) in graph.iter().filter(|(m, _)| !m.is_empty()) {
        let me = top(m);
        let entry = out.entry(me.clone()).or_default();
        entry.extend(deps.iter().filter(|d| !d.is_empty()).map(|d| top(d)).filter(|d| *d != me));
    }
    out
}

/// Layers of an acyclic module graph, bottom first: a module's layer is one above the highest
/// layer of what it imports (none: layer 0).
fn module_layers(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn depth(m: &str, graph: &BTreeMap<String, BTreeSet<String>>, memo: &mut BTreeMap<String, usize>) -> usize {
        if let Some(d) = memo.get(m) {
            return *d;
        }
        let d = graph.get(m).into_iter().flatten().map(|d| depth(d, graph, memo) + 1).max().unwrap_or(0);
        memo.insert(m.to_string(), d);
        d
    }
    let mut memo = BTreeMap::new();
    let mut layers: Vec<Vec<String>> = vec![];
    for m in graph.keys() {
        let d = depth(m, graph, &mut memo);
        if layers.len() <= d {
            layers.resize(d + 1, vec![]);
        }
        layers[d].push(m.clone());
    }
    layers
}

/// Module path (`a::b`) -> the top-level-relative modules it imports. Each module is one file
/// (`x.rs` or `x/mod.rs`); inline `mod tests` blocks belong to their file.
fn module_graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let dir = root.parent().unwrap_or(Path::new("."));
    let mut files = vec![];
    collect(dir, &mut files);
    let module_of = |f: &Path| -> String {
        let rel = f.strip_prefix(dir).unwrap_or(f).with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
        if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            parts.pop();
        }
        parts.join("::")
    };
    let known: BTreeSet<String> = files.iter().map(|f| module_of(f)).collect();
    let mut graph = BTreeMap::new();
    for f in &files {
        let me = module_of(f);
        let text = std::fs::read_to_string(f).unwrap_or_default();
        // Comments (doc links among them) import nothing, and neither does
        // code built for tests only: tests may import anything.
        let code: String = without_test_code(&text).lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        let mut deps = BTreeSet::new();
        for (i, _) in code
            .match_indices("crate::")
            .chain(code.match_indices("super::"))
            .filter(|(i, _)| !code[..*i].ends_with("::") && !code[..*i].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        {
            let path: String = code[i..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            let mut base: Vec<String> = if segs.first() == Some(&"crate") {
                segs.remove(0);
                vec![]
            } else {
                let mut b: Vec<String> = me.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
                // `super` of a file module `a::b` is `a` (for `mod.rs`, its parent's too).
                while segs.first() == Some(&"super") {
                    segs.remove(0);
                    b.pop();
                }
                b
            };
            // The longest prefix that is a module of this crate.
            let mut target = None;
            for s in segs {
                base.push(s.to_string());
                let m = base.join("::");
                if known.contains(&m) {
                    target = Some(m);
                } else {
                    break;
                }
            }
            if let Some(t) = target
                && t != me
                && !me.starts_with(&format!("{t}::"))
                && !t.starts_with(&format!("{me}::"))
            {
                deps.insert(t);
            }
        }
        graph.insert(me, deps);
    }
    graph
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Strongly connected components of more than one module (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = vec![];
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: vec![], on_stack: BTreeSet::new(), out: vec![] };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// `text` without what `#[cfg(test)]` marks: an inline test module (written
/// last in a file, so everything from it on) or the one line of any other
/// item (`#[cfg(test)] mod footprint;`, a test-only `use`). Cutting at the
/// first `#[cfg(test)]` would hide the imports of the code after such a line.
fn without_test_code(text: &str) -> String {
    let mut kept = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            let rest = line.trim_start().trim_start_matches("#[cfg(test)]").trim();
            let item = if rest.is_empty() { lines.next().unwrap_or("") } else { rest };
            let item = item.trim_start();
            if (item.starts_with("mod ") || item.starts_with("pub mod ") || item.starts_with("pub(crate) mod ")) && item.trim_end().ends_with('{') {
                break;
            }
            continue;
        }
        kept.push_str(line);
        kept.push('\n');
    }
    kept
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::without_test_code;

    #[test]
    fn a_test_only_item_hides_its_own_line_and_an_inline_test_module_the_rest() {
        let text = "use crate::a;\n#[cfg(test)]\nmod footprint;\nuse crate::b;\n#[cfg(test)] use crate::c;\n#[cfg(test)]\nmod tests {\n    use crate::d;\n}\n";
        let kept = without_test_code(text);
        assert!(kept.contains("crate::a") && kept.contains("crate::b"), "{kept}");
        assert!(!kept.contains("footprint") && !kept.contains("crate::c") && !kept.contains("crate::d"), "{kept}");
    }

    #[test]
    fn files_of_one_top_level_module_count_as_one_and_layers_follow_imports() {
        let graph: BTreeMap<String, BTreeSet<String>> =
            [("", vec!["a", "b"]), ("a", vec!["a::x"]), ("a::x", vec!["b::y"]), ("b", vec![]), ("b::y", vec!["c"]), ("c", vec![])]
                .into_iter()
                .map(|(m, d)| (m.to_string(), d.into_iter().map(String::from).collect()))
                .collect();
        let top = super::top_level(&graph);
        assert_eq!(super::module_layers(&top), vec![vec!["c".to_string()], vec!["b".to_string()], vec!["a".to_string()]]);
        let mut circular = top.clone();
        circular.get_mut("c").unwrap().insert("a".into());
        assert_eq!(super::circles(&circular), vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]);
    }
}
