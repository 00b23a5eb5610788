//! The reference of the app's memory figure in `make bench`: a bare Tauri window on the same stack
//! (tauri, wry, WebKitGTK, the same configuration) showing an empty page, with none of Pagar's code.
//! The page comes from a custom URI scheme, as Pagar's own pages do, not `about:blank`:
//! WebKitGTK renders `about:blank` without starting a web process, and a reference without one
//! would not be the same stack.

fn main() {
    let mut context = tauri::generate_context!();
    context.config_mut().app.windows.clear();
    tauri::Builder::default()
        .register_uri_scheme_protocol("blank", |_ctx, _request| {
            tauri::http::Response::builder()
                .header("Content-Type", "text/html")
                .body(b"<!doctype html><title>blank</title><body></body>".to_vec())
                .expect("a valid response")
        })
        .setup(|app| {
            let blank = "blank://localhost/".parse().expect("a valid URL");
            tauri::WebviewWindowBuilder::new(
                app,
                "blank",
                tauri::WebviewUrl::CustomProtocol(blank),
            )
            .title("blank")
            .inner_size(1180.0, 780.0)
            .build()?;
            Ok(())
        })
        .run(context)
        .expect("a blank Tauri window");
}
