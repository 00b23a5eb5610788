//! The reference of the app's memory figure in `make bench`: a bare Tauri window on the same stack
//! (tauri, wry, WebKitGTK, the same configuration) showing an empty page, with none of Pagar's code.

fn main() {
    let mut context = tauri::generate_context!();
    context.config_mut().app.windows.clear();
    tauri::Builder::default()
        .setup(|app| {
            let blank = "about:blank".parse().expect("a valid URL");
            tauri::WebviewWindowBuilder::new(app, "blank", tauri::WebviewUrl::External(blank))
                .title("blank")
                .inner_size(1180.0, 780.0)
                .build()?;
            Ok(())
        })
        .run(context)
        .expect("a blank Tauri window");
}
