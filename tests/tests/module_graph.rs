//! Every crate's modules form no import circle, at the top of the crate and inside every module
//! folder (between the files and folders of one module; a child naming its parent's items through
//! `super::` is the facade pattern, not a circle), and the layers named in ARCHITECTURE.md hold:
//! data flows one way. Read from the sources (code before `#[cfg(test)]`, not comments): an edge
//! `a -> b` is a `crate::b` path in module `a`, or, between siblings, `super::b` / `crate::m::b`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every library and app crate's `src` folder in the workspace.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let root = root();
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            (name, p.join("src"))
        })
        .collect();
    out.push(("pagar (src-tauri)".into(), root.join("src-tauri/src")));
    out.push(("pagar-e2e (tests)".into(), root.join("tests/src")));
    out.sort();
    out
}

/// The code of a file that is not a test.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module names a path after `prefix` names: `store::X` → store; `{a, b::c}` → a, b.
fn named_after(code: &str, prefix: &str) -> Vec<String> {
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        // `super::` inside `crate::x::super::`? Not Rust; but skip `self::super` and the like.
        if i > 0 && code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[i + prefix.len()..];
        match rest.strip_prefix('{') {
            Some(group) => out.extend(
                group
                    .split('}')
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(|p| word(p.trim()))
                    .filter(|w| !w.is_empty()),
            ),
            None => out.push(word(rest)),
        }
    }
    out
}

/// The children of a module folder: its `.rs` files (but `mod.rs`) and its folders, each with
/// every path of it — a module may be a file and a folder at once (`fiscal.rs` and `fiscal/`).
fn children(dir: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut out: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for p in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
        let kept = (p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
            && p.file_name().is_some_and(|n| n != "mod.rs" && n != "bin");
        if kept {
            let name = p.file_stem().unwrap().to_string_lossy().to_string();
            out.entry(name).or_default().push(p);
        }
    }
    out
}

/// Every `.rs` file under `path` (itself, when it is one).
fn files(path: &Path) -> Vec<PathBuf> {
    if !path.is_dir() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(path).unwrap() {
        out.extend(files(&e.unwrap().path()));
    }
    out.retain(|p| p.extension().is_some_and(|x| x == "rs"));
    out
}

/// The graph among the children of the module at `dir` whose path from the crate root is
/// `module` (empty: the crate itself).
fn graph_of(dir: &Path, module: &[String]) -> Graph {
    let kids = children(dir);
    let mut g = Graph::new();
    for (name, paths) in &kids {
        if module.is_empty() && (name == "lib" || name == "main") {
            continue;
        }
        let edges = g.entry(name.clone()).or_default();
        for file in paths.iter().flat_map(|p| files(p)) {
            let code = code_of(&file);
            let mut named = named_after(&code, &format!("crate::{}", prefix_of(module)));
            // Only a direct child's `super::` names a sibling.
            if file.parent() == Some(dir) && !module.is_empty() {
                named.extend(named_after(&code, "super::"));
            }
            edges.extend(
                named
                    .into_iter()
                    .filter(|n| n != name && kids.contains_key(n)),
            );
        }
    }
    g
}

fn prefix_of(module: &[String]) -> String {
    module.iter().map(|m| format!("{m}::")).collect()
}

/// Every module folder of a crate, with its path from the crate root.
fn module_dirs(dir: &Path, module: Vec<String>, out: &mut Vec<(Vec<String>, PathBuf)>) {
    out.push((module.clone(), dir.to_path_buf()));
    for (name, paths) in children(dir) {
        for path in paths.into_iter().filter(|p| p.is_dir()) {
            let mut m = module.clone();
            m.push(name.clone());
            module_dirs(&path, m, out);
        }
    }
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

fn top_graph(krate: &str) -> Graph {
    graph_of(&root().join("crates").join(krate).join("src"), &[])
}

#[test]
fn no_crate_has_an_import_circle_at_its_top_or_inside_any_module_folder() {
    let mut circles = Vec::new();
    let mut modules = 0;
    for (krate, src) in crate_sources() {
        let mut dirs = Vec::new();
        module_dirs(&src, Vec::new(), &mut dirs);
        for (module, dir) in dirs {
            let g = graph_of(&dir, &module);
            modules += g.len();
            for m in g.keys() {
                if let Some(c) = circle_through(&g, m) {
                    circles.push(format!("{krate}::{}{}", prefix_of(&module), c.join(" -> ")));
                }
            }
        }
    }
    assert!(
        modules > 100,
        "the source trees were read ({modules} modules)"
    );
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_payment_api_flows_from_http_through_the_operations_to_the_stores() {
    let g = top_graph("payment-api");
    let uses = |a: &str, b: &str| g.get(a).is_some_and(|e| e.contains(b));
    let operations = [
        "payments",
        "refunds",
        "cancel",
        "captures",
        "pix",
        "maquininha",
        "tenders",
    ];
    for a in operations {
        for b in operations {
            // Cancel by key voids a card payment's key through the payment operation, a tender's
            // hold is the first step of the payments, the Pix and the card machine, and a
            // received Pix or a card paid at the machine is paid back through its provider: the
            // only sanctioned uses.
            let sanctioned = matches!(
                (a, b),
                ("cancel", "payments")
                    | ("payments", "tenders")
                    | ("pix", "tenders")
                    | ("maquininha", "tenders")
                    | ("refunds", "pix")
                    | ("refunds", "maquininha")
            );
            assert!(sanctioned || a == b || !uses(a, b), "{a} imports {b}");
        }
    }
    for lower in ["store", "domain", "idempotency", "settlement"] {
        for upper in operations.iter().chain(&["http", "state", "server"]) {
            assert!(!uses(lower, upper), "{lower} imports {upper}");
        }
    }
    assert!(!uses("store", "idempotency") && !uses("store", "gateway"));
    assert!(
        !uses("server", "pix") && !uses("server", "captures") && !uses("server", "maquininha"),
        "server.rs knows no operation's settlement by name"
    );
}

#[test]
fn the_till_flows_from_the_engine_to_the_outbox_and_the_client_and_the_domain_knows_neither() {
    let g = top_graph("checkout-core");
    let uses = |a: &str, b: &str| g.get(a).is_some_and(|e| e.contains(b));
    for other in [
        "outbox", "client", "engine", "closing", "drawer", "export", "config", "fiscal",
    ] {
        assert!(!uses("domain", other), "domain imports {other}");
    }
    for lower in ["outbox", "client", "closing", "drawer", "export", "fiscal"] {
        assert!(!uses(lower, "engine"), "{lower} imports engine");
    }
    // The NFC-e: the fiscal client and emitter read the outbox's attempts; the outbox never
    // reaches up to them.
    assert!(!uses("outbox", "fiscal"), "outbox imports fiscal");
    assert!(!uses("outbox", "client") && !uses("outbox", "closing"));
    assert!(!uses("drawer", "closing") && !uses("drawer", "outbox"));
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
        named_after("use crate::{store::X, gateway}::y;", "crate::"),
        vec!["store", "gateway"]
    );
    assert_eq!(
        named_after("use super::dispatch::retry;", "super::"),
        vec!["dispatch"]
    );
}

#[test]
fn circles_are_found_in_a_source_tree_at_the_top_and_between_the_files_of_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |p: &str, code: &str| {
        let path = src.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, code).unwrap();
    };
    write("lib.rs", "mod a; mod b; mod m;");
    write("a.rs", "use crate::b::Thing;");
    write(
        "b.rs",
        "use crate::{a::Other, m};\n#[cfg(test)]\nuse crate::m::x::Y;",
    );
    write("m/mod.rs", "mod x; mod y; use x::Z;");
    write("m/x.rs", "use super::{y::W, Parent};");
    write("m/y.rs", "fn f() { crate::m::x::g() } // crate::a::nothing");
    let top = graph_of(src, &[]);
    assert_eq!(
        circle_through(&top, "a"),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
    assert_eq!(
        top["b"],
        BTreeSet::from(["a".into(), "m".into()]),
        "tests and comments are not edges"
    );
    let m = graph_of(&src.join("m"), &["m".into()]);
    assert_eq!(
        circle_through(&m, "x"),
        Some(vec!["x".into(), "y".into(), "x".into()])
    );
    assert_eq!(
        m["x"],
        BTreeSet::from(["y".into()]),
        "the parent's items are not a sibling"
    );
    // A module that is a file and a folder at once: both are read.
    write("c.rs", "mod inner;");
    write("c/inner.rs", "use crate::d::Thing;");
    write("d.rs", "use crate::c::Other;");
    let top = graph_of(src, &[]);
    assert_eq!(
        circle_through(&top, "c"),
        Some(vec!["c".into(), "d".into(), "c".into()])
    );
}
