fn main() {
    // Every command the UI may call is listed here; tauri-build turns each into an `allow-…`
    // permission, and capabilities/default.json grants exactly these and nothing else.
    tauri_build::try_build(
        tauri_build::Attributes::new()
            .app_manifest(tauri_build::AppManifest::new().commands(pagar_commands())),
    )
    .expect("tauri build script");
}

fn pagar_commands() -> &'static [&'static str] {
    &[
        "app_info",
        "ui_ready",
        "open_sale",
        "new_sale",
        "receipt",
        "close_day",
        "pay",
        "pay_pix",
        "pay_maquininha",
        "card_plans",
        "pay_cash",
        "drawer",
        "drawer_move",
        "abandon_sale",
        "confirm_sale",
        "cancel_pix",
        "cancel_maquininha",
        "keep_late_pix",
        "pix_qr",
        "qa_pix_pay",
        "refund_info",
        "refund_preview",
        "refund",
        "attempts",
        "subscribe",
        "events",
        "export_attempts",
        "retry_review",
        "qa_set_offline",
        "qa_get_faults",
        "qa_set_faults",
        "qa_export_log",
        "notas",
        "danfe",
        "qa_sefaz",
    ]
}
