//! The payment API's top-level modules form no import circle: data flows one way, from the HTTP
//! layer through the operations and the idempotency runner to the stores. Read from the sources
//! (code, not comments or tests): an edge `a -> b` is a `crate::b` path in module `a`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut g = Graph::new();
    for entry in walkdir(&src) {
        let rel = entry.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&entry).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let edges = g.entry(top.clone()).or_default();
        for line in code.lines() {
            let line = line.split("//").next().unwrap_or_default();
            for (i, _) in line.match_indices("crate::") {
                for name in referenced(&line[i + "crate::".len()..]) {
                    if name != top {
                        edges.insert(name);
                    }
                }
            }
        }
    }
    g
}

/// The modules a path after `crate::` names: `store::X` → store; `{a, b::c}` → a, b.
fn referenced(rest: &str) -> Vec<String> {
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    match rest.strip_prefix('{') {
        Some(group) => group
            .split('}')
            .next()
            .unwrap_or_default()
            .split(',')
            .map(|p| word(p.trim()))
            .filter(|w| !w.is_empty())
            .collect(),
        None => vec![word(rest)],
    }
}

fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walkdir(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// A circle through `start`, if there is one (depth-first search).
fn circle_through(g: &Graph, start: &str) -> Option<Vec<String>> {
    fn dfs(
        g: &Graph,
        at: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in g.get(at).into_iter().flatten() {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if dfs(g, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    dfs(g, start, start, &mut path, &mut BTreeSet::new()).then(|| {
        path.push(start.to_string());
        path
    })
}

#[test]
fn the_modules_of_the_payment_api_form_no_import_circle() {
    let g = graph();
    assert!(g.len() > 10, "the source tree was read: {g:?}");
    let circles: Vec<String> = g
        .keys()
        .filter_map(|m| circle_through(&g, m))
        .map(|c| c.join(" -> "))
        .collect();
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_operations_do_not_know_each_other_and_the_stores_know_no_use_case() {
    let g = graph();
    let uses = |a: &str, b: &str| g.get(a).is_some_and(|e| e.contains(b));
    assert!(!uses("payments", "refunds") && !uses("refunds", "payments"));
    for lower in ["store", "domain", "idempotency"] {
        for upper in ["payments", "refunds", "cancel", "http", "state", "server"] {
            assert!(!uses(lower, upper), "{lower} imports {upper}");
        }
    }
    assert!(!uses("store", "idempotency") && !uses("store", "gateway"));
}

#[test]
fn a_circle_is_found_when_there_is_one() {
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        circle_through(&g, "a"),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    g.get_mut("c").unwrap().clear();
    assert_eq!(circle_through(&g, "a"), None);
    assert_eq!(
        referenced("{store::X, gateway}::y"),
        vec!["store", "gateway"]
    );
}
