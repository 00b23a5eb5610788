//! The reference of the app's memory figure in `make bench`: a bare Tauri window on the same stack
//! (tauri, wry, WebKitGTK, the same configuration) showing an empty page, with none of Pagar's code.
//! The page is a `data:` document, not `about:blank`: WebKitGTK renders `about:blank` without
//! starting a web process, and a reference without one would not be the same stack.

fn main() {
    let mut context = tauri::generate_context!();
    context.config_mut().app.windows.clear();
    tauri::Builder::default()
        .setup(|app| {
            let blank = "data:text/html,<!doctype html><title>blank</title><body></body>"
                .parse()
                .expect("a valid URL");
            tauri::WebviewWindowBuilder::new(app, "blank", tauri::WebviewUrl::External(blank))
                .title("blank")
                .inner_size(1180.0, 780.0)
                .build()?;
            Ok(())
        })
        .run(context)
        .expect("a blank Tauri window");
}
