//! The `pagar` binary as a person meets it on a command line: `--version`, `--help`, and no
//! display (a clear line, not a GTK backtrace), and its log is plain text when not a terminal.

use std::process::Command;

fn pagar() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pagar"))
}

#[test]
fn version_and_help_answer_without_a_window() {
    let out = pagar()
        .arg("--version")
        .env_remove("DISPLAY")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("Pagar {}", env!("CARGO_PKG_VERSION"))
    );
    let help = pagar()
        .arg("--help")
        .env_remove("DISPLAY")
        .output()
        .unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8(help.stdout)
        .unwrap()
        .contains("PAGAR_API_URL"));
    let unknown = pagar().arg("--abrir").output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8(unknown.stderr)
        .unwrap()
        .contains("pagar --help"));
}

#[test]
fn without_a_display_it_says_what_to_do_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = pagar()
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env("PAGAR_DATA_DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("xvfb-run pagar"), "{err}");
    assert!(!err.contains("panicked") && !err.contains("gtk"), "{err}");
}

#[test]
fn a_display_that_does_not_answer_is_one_clear_line_too() {
    let dir = tempfile::tempdir().unwrap();
    let out = pagar()
        .env("DISPLAY", ":93")
        .env_remove("WAYLAND_DISPLAY")
        .env("PAGAR_DATA_DIR", dir.path())
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("não foi possível abrir a tela"), "{err}");
    assert!(
        !err.contains("panicked at") && !err.contains("stack backtrace"),
        "{err}"
    );
    assert!(
        !err.contains('\u{1b}'),
        "no colour codes when not a terminal: {err:?}"
    );
}

#[test]
fn gtk_s_own_gl_is_turned_off_unless_the_environment_already_says_something() {
    assert_eq!(
        pagar_lib::gtk_gl_off(|_| false),
        Some(("GDK_GL", "disable"))
    );
    assert_eq!(pagar_lib::gtk_gl_off(|k| k == "GDK_GL"), None);
}

#[test]
fn the_pages_optimizing_compiler_is_turned_off_unless_the_environment_already_says_something() {
    assert_eq!(
        pagar_lib::jit_optimizer_off(|_| false),
        Some(("JSC_useDFGJIT", "false"))
    );
    assert_eq!(pagar_lib::jit_optimizer_off(|k| k == "JSC_useDFGJIT"), None);
}
