//! The app's commands through Tauri's IPC with `tauri::test::mock_builder()`: input is parsed
//! into domain types, bad input is refused with a clear error, and nothing is stored for it.

use pagar_lib::error::AppError;
use pagar_lib::session::Session;
use pagar_lib::settings::{ApiTarget, Settings};
use serde_json::{json, Value};
use tauri::test::{get_ipc_response, mock_builder, mock_context, noop_assets, INVOKE_KEY};
use tauri::webview::InvokeRequest;
use tauri::Manager;

struct Mocked {
    webview: tauri::WebviewWindow<tauri::test::MockRuntime>,
    _dir: tempfile::TempDir,
}

fn app() -> Mocked {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        data_dir: dir.path().to_path_buf(),
        api: ApiTarget::Embedded,
        ca_cert: None,
        allow_insecure_http: false,
        qa: true,
        secrets_from: "config.json",
        notices: Vec::new(),
        terminal: "caixa-teste".into(),
        terminal_is_new: false,
        loja: "Loja de testes".into(),
        utc_offset: time::macros::offset!(-3),
        plans: checkout_core::PlanRules::default(),
        confirm_after_receipt: false,
        maquininha: None,
        nfce_xsd_dir: None,
    };
    let app = pagar_lib::with_commands(mock_builder())
        .build(mock_context(noop_assets()))
        .unwrap();
    let session = tauri::async_runtime::block_on(Session::start(Ok(settings)));
    app.manage(session);
    let webview = tauri::WebviewWindowBuilder::new(&app, "main", Default::default())
        .build()
        .unwrap();
    Mocked { webview, _dir: dir }
}

fn call(m: &Mocked, cmd: &str, body: Value) -> Result<Value, Value> {
    get_ipc_response(
        &m.webview,
        InvokeRequest {
            cmd: cmd.into(),
            callback: tauri::ipc::CallbackFn(0),
            error: tauri::ipc::CallbackFn(1),
            url: "tauri://localhost".parse().unwrap(),
            body: tauri::ipc::InvokeBody::Json(body),
            headers: Default::default(),
            invoke_key: INVOKE_KEY.to_string(),
        },
    )
    .map(|b| b.deserialize::<Value>().unwrap())
}

#[test]
fn pay_parses_the_amount_as_typed_and_a_second_call_returns_the_same_attempt() {
    let m = app();
    let sale = call(&m, "new_sale", json!({})).unwrap()["sale"].clone();
    let args = json!({"saleId": sale, "valor": "1.234,56", "cartao": "tok_aprovado"});
    let first = call(&m, "pay", args.clone()).unwrap();
    assert_eq!(first["existing"], false);
    assert_eq!(first["attempt"]["valor"], 123_456);
    assert_eq!(first["attempt"]["state"], "pendente");
    let again = call(&m, "pay", args).unwrap();
    assert_eq!(again["existing"], true);
    assert_eq!(
        again["attempt"]["idempotency_key"],
        first["attempt"]["idempotency_key"]
    );
}

#[test]
fn bad_input_is_refused_with_a_clear_message_and_nothing_is_stored() {
    let m = app();
    let sale = call(&m, "new_sale", json!({})).unwrap()["sale"].clone();
    for (valor, cartao) in [
        ("abc", "tok_aprovado"),
        ("0,00", "tok_aprovado"),
        ("10,999", "tok_aprovado"),
        ("10,00", "tok com espaço"),
    ] {
        let err = call(
            &m,
            "pay",
            json!({"saleId": sale, "valor": valor, "cartao": cartao}),
        )
        .unwrap_err();
        assert_eq!(err["kind"], "invalid", "{valor} {cartao}: {err}");
        assert!(!err["message"].as_str().unwrap().is_empty());
    }
    let err = call(
        &m,
        "pay",
        json!({"saleId": "", "valor": "1,00", "cartao": "tok_aprovado"}),
    )
    .unwrap_err();
    assert_eq!(err["kind"], "invalid");
    let snap = call(&m, "attempts", json!({})).unwrap();
    assert_eq!(snap["attempts"], json!([]));
    assert_eq!(snap["queue"]["count"], 0);
}

#[test]
fn the_forma_list_follows_the_amount_and_a_plan_the_store_does_not_offer_is_refused() {
    let m = app();
    let offers = call(&m, "card_plans", json!({"valor": "100,00"})).unwrap();
    let labels: Vec<&str> = offers
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["rotulo"].as_str().unwrap())
        .collect();
    assert_eq!(labels[..2], ["Dinheiro", "Débito"]);
    assert!(labels.contains(&"3× de R$ 33,34 sem juros"));
    // An amount not typed yet offers no parcelado.
    let bare = call(&m, "card_plans", json!({"valor": ""})).unwrap();
    assert!(bare
        .as_array()
        .unwrap()
        .iter()
        .all(|o| o["forma"] != "parcelado"));

    let sale = call(&m, "new_sale", json!({})).unwrap()["sale"].clone();
    for (valor, forma, parcelas, why) in [
        ("12,00", "parcelado", json!(3), "mínimo"),
        ("100,00", "parcelado", json!(13), "2 a 12"),
        ("100,00", "parcelado", json!(null), "parcelas"),
        ("100,00", "boleto", json!(null), "desconhecida"),
    ] {
        let err = call(
            &m,
            "pay",
            json!({"saleId": sale, "valor": valor, "cartao": "tok_aprovado", "forma": forma, "parcelas": parcelas}),
        )
        .unwrap_err();
        assert_eq!(err["kind"], "invalid", "{forma} {parcelas}: {err}");
        assert!(err["message"].as_str().unwrap().contains(why), "{err}");
    }
    assert_eq!(
        call(&m, "attempts", json!({})).unwrap()["attempts"],
        json!([])
    );
    let paid = call(
        &m,
        "pay",
        json!({"saleId": sale, "valor": "100,00", "cartao": "tok_aprovado", "forma": "parcelado", "parcelas": 3}),
    )
    .unwrap();
    assert_eq!(
        paid["attempt"]["plano"],
        json!({"metodo": "credito", "parcelas": 3, "parcelamento": "loja", "rotulo": "Crédito 3× sem juros"})
    );
}

#[test]
fn the_app_reports_its_embedded_mode_tokens_and_export_folder() {
    let m = app();
    let info = call(&m, "app_info", json!({})).unwrap();
    assert_eq!(info["modo"], "embutido");
    assert!(info["api_url"]
        .as_str()
        .unwrap()
        .starts_with("http://127.0.0.1:"));
    assert_eq!(info["cartoes"][0], "tok_aprovado");
    assert_eq!(info["faults_available"], true);
    let path = call(&m, "export_attempts", json!({"format": "json"})).unwrap();
    assert!(path.as_str().unwrap().contains("exports"));
    let err = call(&m, "export_attempts", json!({"format": "xml"})).unwrap_err();
    assert_eq!(err["kind"], "invalid");
}

#[test]
fn the_qa_fault_profile_is_validated_by_the_server() {
    let m = app();
    let ok = call(&m, "qa_set_faults", json!({"faults": {"latency_ms": 10}})).unwrap();
    assert_eq!(ok["latency_ms"], 10);
    let err = call(
        &m,
        "qa_set_faults",
        json!({"faults": {"drop_response_probability": 7}}),
    )
    .unwrap_err();
    assert_eq!(err["kind"], "qa");
    assert!(
        err["message"].as_str().unwrap().contains("entre 0 e 1"),
        "{err}"
    );
}

#[test]
fn a_second_app_on_the_same_data_folder_says_why_it_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    let settings = || {
        Ok(Settings {
            data_dir: dir.path().to_path_buf(),
            api: ApiTarget::Embedded,
            ca_cert: None,
            allow_insecure_http: false,
            qa: true,
            secrets_from: "config.json",
            notices: Vec::new(),
            terminal: "caixa-teste".into(),
            terminal_is_new: false,
            loja: "Loja de testes".into(),
            utc_offset: time::macros::offset!(-3),
            plans: checkout_core::PlanRules::default(),
            confirm_after_receipt: false,
            maquininha: None,
            nfce_xsd_dir: None,
        })
    };
    let first = tauri::async_runtime::block_on(Session::start(settings()));
    assert!(first.get().is_ok());
    let second = tauri::async_runtime::block_on(Session::start(settings()));
    let err = second.get().err().unwrap();
    assert!(matches!(err, AppError::OtherWindow(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("outra janela"), "{text}");
    assert_eq!(
        serde_json::to_value(&err).unwrap()["kind"],
        "other_window",
        "the window tells it apart from a configuration to correct"
    );
}

#[test]
fn plain_http_to_a_host_that_is_not_loopback_is_refused_at_start_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let settings = || {
        Ok(Settings {
            data_dir: dir.path().to_path_buf(),
            api: ApiTarget::External {
                // Never contacted: the address is refused before anything is opened.
                url: "http://192.0.2.10:8080".into(),
                key: "sk_qualquer".into(),
                admin_token: None,
            },
            ca_cert: None,
            allow_insecure_http: false,
            qa: false,
            secrets_from: "config.json",
            notices: Vec::new(),
            terminal: "caixa-teste".into(),
            terminal_is_new: false,
            loja: "Loja de testes".into(),
            utc_offset: time::macros::offset!(-3),
            plans: checkout_core::PlanRules::default(),
            confirm_after_receipt: false,
            maquininha: None,
            nfce_xsd_dir: None,
        })
    };
    let refused = tauri::async_runtime::block_on(Session::start(settings()));
    let err = refused.get().err().expect("refused").to_string();
    assert!(err.contains("sem criptografia"), "{err}");
    assert!(
        !dir.path().join("outbox.db").exists(),
        "nothing is opened for a refused address"
    );
    // The opt-in (`allow_insecure_http`) is covered by checkout-core's `Config::validate` tests,
    // which connect nowhere; a session started with it would probe that address.
}

#[test]
fn the_till_keeps_the_open_sale_and_a_new_sale_waits_for_the_payment_online() {
    let m = app();
    let till = call(&m, "open_sale", json!({})).unwrap();
    let sale = till["sale"].clone();
    assert!(sale.as_str().unwrap().starts_with("venda-"));
    assert!(till["attempt"].is_null());
    assert_eq!(
        call(&m, "open_sale", json!({})).unwrap()["sale"],
        sale,
        "the same sale until a new one"
    );
    // A slow card keeps the payment pending for seconds with the sandbox online.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while call(&m, "attempts", json!({})).unwrap()["connectivity"] != "online" {
        assert!(
            std::time::Instant::now() < deadline,
            "the sandbox is online"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let paid = call(
        &m,
        "pay",
        json!({"saleId": sale, "valor": "5,00", "cartao": "tok_lento"}),
    )
    .unwrap();
    let refused = call(&m, "new_sale", json!({})).unwrap_err();
    assert_eq!(refused["kind"], "sale_open", "{refused}");
    let till = call(&m, "open_sale", json!({})).unwrap();
    assert_eq!(till["sale"], sale);
    assert_eq!(till["attempt"]["id"], paid["attempt"]["id"]);
}

#[test]
fn the_data_folder_known_before_the_app_is_built_is_the_one_tauri_resolves() {
    let app = mock_builder().build(mock_context(noop_assets())).unwrap();
    let identifier = app.config().identifier.clone();
    assert_eq!(
        pagar_lib::default_data_dir(&identifier),
        app.path().app_data_dir().unwrap()
    );
}
