//! Lists that must be written in more than one place, checked to agree.
//!
//! The app's commands are named in four places Tauri needs separately: the functions
//! (`src/commands.rs`), the handler (`src/lib.rs`), the permissions tauri-build generates
//! (`build.rs`) and the window's grant (`capabilities/default.json`); the window calls them by
//! name (`ui/*.js`). The attempt states are checkout-core's `AttemptState::ALL` and the window's
//! `STATES` (`ui/state.js`). These tests fail, naming what is missing where, so adding or
//! removing a command or a state is one change checked in every place.

use std::collections::BTreeSet;
use std::path::Path;

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Identifier characters from the start of `s`.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The text between `open` (after `start`) and the next `close`.
fn between<'a>(text: &'a str, start: &str, close: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} not found"))
        + start.len();
    let to = text[from..].find(close).expect("closing delimiter") + from;
    &text[from..to]
}

/// `#[tauri::command]` functions in commands.rs and its modules (`src/commands/*.rs`).
fn defined() -> BTreeSet<String> {
    let mut src = read("src/commands.rs");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands");
    for entry in std::fs::read_dir(&dir).expect("src/commands") {
        let path = entry.expect("entry").path();
        src.push_str(&std::fs::read_to_string(&path).expect("a commands module"));
    }
    src.split("#[tauri::command]")
        .skip(1)
        .map(|after| {
            let f = after.find("fn ").expect("a command is a function") + 3;
            ident(&after[f..]).to_string()
        })
        .collect()
}

/// `commands::x` inside `generate_handler![…]` in lib.rs.
fn handled() -> BTreeSet<String> {
    let src = read("src/lib.rs");
    between(&src, "generate_handler![", "]")
        .split("commands::")
        .skip(1)
        .map(|s| ident(s).to_string())
        .collect()
}

/// The quoted names build.rs gives tauri-build.
fn built() -> BTreeSet<String> {
    let src = read("build.rs");
    between(&src, "fn pagar_commands()", "}")
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// `allow-…` permissions the main window is granted, as command names.
fn granted() -> BTreeSet<String> {
    let json: serde_json::Value =
        serde_json::from_str(&read("capabilities/default.json")).expect("valid JSON");
    json["permissions"]
        .as_array()
        .expect("a permissions list")
        .iter()
        .map(|p| {
            let p = p.as_str().expect("a permission name");
            p.strip_prefix("allow-")
                .unwrap_or_else(|| panic!("{p}: only the app's own allow- permissions"))
                .replace('-', "_")
        })
        .collect()
}

/// Names the window's scripts pass to `invoke("…")`.
fn invoked() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui");
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("ui folder") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "js") {
            let src = std::fs::read_to_string(&path).expect("script");
            for after in src.split("invoke(\"").skip(1) {
                names.insert(ident(after).to_string());
            }
        }
    }
    names
}

#[test]
fn every_place_that_names_a_command_names_the_same_ones() {
    let defined = defined();
    assert!(defined.len() >= 10, "parsed too few commands: {defined:?}");
    for (place, names) in [
        ("src/lib.rs generate_handler!", handled()),
        ("build.rs pagar_commands()", built()),
        ("capabilities/default.json", granted()),
    ] {
        let missing: Vec<_> = defined.difference(&names).collect();
        let extra: Vec<_> = names.difference(&defined).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{place} disagrees with src/commands.rs: missing {missing:?}, unknown {extra:?}"
        );
    }
}

#[test]
fn the_window_calls_only_commands_that_exist() {
    let defined = defined();
    let invoked = invoked();
    assert!(!invoked.is_empty(), "found no invoke(\"…\") in ui/*.js");
    let unknown: Vec<_> = invoked.difference(&defined).collect();
    assert!(
        unknown.is_empty(),
        "ui/*.js invokes {unknown:?}, which no command defines"
    );
}

#[test]
fn the_window_allows_the_danfe_stylesheet_by_its_hash_and_no_other_inline_style() {
    let conf: serde_json::Value =
        serde_json::from_str(&read("tauri.conf.json")).expect("valid JSON");
    let csp = conf["app"]["security"]["csp"].as_str().expect("a csp");
    let style_src = csp
        .split(';')
        .map(str::trim)
        .find(|d| d.starts_with("style-src"))
        .expect("a style-src");
    assert_eq!(
        style_src,
        format!("style-src 'self' {}", nfce::danfe::estilo_csp()),
        "tauri.conf.json's style-src must allow exactly nfce::danfe::STYLE (its hash changes with it)"
    );
}

#[test]
fn the_window_knows_every_attempt_state_and_no_other() {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui/state.js"))
        .expect("ui/state.js");
    // Each entry is one line: `name: { pill: "…", final: true|false },`.
    let states: BTreeSet<(String, bool)> = between(&src, "export const STATES = {", "};")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .map(|l| (ident(l).to_string(), l.contains("final: true")))
        .collect();
    let engine: BTreeSet<(String, bool)> = checkout_core::AttemptState::ALL
        .iter()
        .map(|s| (s.as_str().to_string(), s.is_final()))
        .collect();
    assert_eq!(
        states, engine,
        "ui/state.js STATES must list exactly checkout-core's AttemptState::ALL, each final as the engine says"
    );
}
