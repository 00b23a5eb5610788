//! The simulator as its own process, as the payment API and the trials meet it: its API Pix
//! contract (a used `txid` or devolução id is refused, never a second charge or devolução), its
//! signed callbacks, its QA controls and its refusals of bad input.

use axum::body::Bytes;
use axum::http::HeaderMap;
use pagar_testkit::{PixProcess, PIX_SECRET as SECRET, PIX_TOKEN as TOKEN};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tokio::sync::mpsc;

const TXID: &str = "pagarTesteProvider0000000000001";

/// The simulator binary this package built, as its own process (stopped when dropped).
struct Provider {
    process: PixProcess,
    http: reqwest::Client,
    token: tokio::sync::OnceCell<String>,
}

impl Provider {
    fn start() -> Self {
        let process = PixProcess::start_binary(Path::new(env!("CARGO_BIN_EXE_pix-provider")), None);
        Self {
            http: process.client().clone(),
            process,
            token: tokio::sync::OnceCell::new(),
        }
    }

    /// The QA token for the QA controls, an OAuth2 token of the sandbox client for the API Pix.
    async fn bearer(&self, path: &str) -> String {
        if path.starts_with("/qa/") {
            return TOKEN.to_string();
        }
        self.token
            .get_or_init(|| pagar_testkit::pix_oauth_token(&self.http, self.process.url(), TOKEN))
            .await
            .clone()
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.process.url()))
            .bearer_auth(self.bearer(path).await);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    async fn put_cob(&self, txid: &str, valor: &str) -> (u16, Value) {
        let body = json!({"calendario": {"expiracao": 600}, "valor": {"original": valor}, "chave": "loja@pagar.dev"});
        self.send(reqwest::Method::PUT, &format!("/cob/{txid}"), Some(body))
            .await
    }
}

/// `POST /oauth/token` as the API Pix's PSPs answer it, with `auth` as the Authorization header.
async fn ask_token(psp: &Provider, auth: Option<&str>, form: &[(&str, &str)]) -> (u16, Value) {
    let mut req = psp
        .http
        .post(format!("{}/oauth/token", psp.process.url()))
        .form(form);
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let res = req.send().await.unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn the_api_pix_wants_an_oauth2_token_with_the_routes_scope_and_only_the_client_gets_one() {
    use base64::Engine as _;
    let psp = Provider::start();
    let basic = |id: &str, secret: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
        )
    };
    let grant = [("grant_type", "client_credentials")];
    let cob = format!("{}/cob/{TXID}", psp.process.url());

    // No client certificate: refused in the TLS handshake, whatever the request.
    let ca = reqwest::Certificate::from_pem(&std::fs::read(psp.process.ca()).unwrap()).unwrap();
    let no_cert = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .unwrap();
    let refused = no_cert
        .post(format!("{}/oauth/token", psp.process.url()))
        .header("authorization", basic("pagar-sandbox", TOKEN))
        .form(&grant)
        .send()
        .await;
    assert!(refused.is_err(), "{refused:?}");

    // No token, an unknown one, or the QA token: 401 with the RFC 6750 challenge; nothing made.
    for bearer in [None, Some("pxt_desconhecido"), Some(TOKEN)] {
        let mut req = psp.http.get(&cob);
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 401, "{bearer:?}");
        let challenge = res.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(challenge.contains("invalid_token"), "{challenge}");
    }

    // The client is who it says, or no token: a wrong secret, no Basic, another grant.
    let (s, body) = ask_token(&psp, Some(&basic("pagar-sandbox", "errado")), &grant).await;
    assert_eq!((s, body["error"].as_str()), (401, Some("invalid_client")));
    let (s, _) = ask_token(&psp, None, &grant).await;
    assert_eq!(s, 401);
    let pw = [("grant_type", "password")];
    let (s, body) = ask_token(&psp, Some(&basic("pagar-sandbox", TOKEN)), &pw).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (400, Some("unsupported_grant_type"))
    );
    let bad_scope = [
        ("grant_type", "client_credentials"),
        ("scope", "cob.read cobv.write"),
    ];
    let (s, body) = ask_token(&psp, Some(&basic("pagar-sandbox", TOKEN)), &bad_scope).await;
    assert_eq!((s, body["error"].as_str()), (400, Some("invalid_scope")));

    // A token for cob.read only reads charges; making one needs cob.write.
    let read_only = [("grant_type", "client_credentials"), ("scope", "cob.read")];
    let (s, granted) = ask_token(&psp, Some(&basic("pagar-sandbox", TOKEN)), &read_only).await;
    assert_eq!(s, 200, "{granted}");
    assert_eq!(granted["token_type"], "Bearer");
    assert_eq!(granted["scope"], "cob.read");
    assert_eq!(granted["expires_in"], 3600);
    let reader = granted["access_token"].as_str().unwrap();
    let made = psp
        .http
        .put(&cob)
        .bearer_auth(reader)
        .json(&json!({"calendario": {"expiracao": 600}, "valor": {"original": "1.00"}, "chave": "loja@pagar.dev"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 403);
    let read = psp.http.get(&cob).bearer_auth(reader).send().await.unwrap();
    assert_eq!(read.status(), 404, "allowed in, and nothing was made");
    assert_eq!(psp.process.counts().await["cobrancas"], 0);

    // Revoked by the PSP: the token is refused from then on.
    let res = psp
        .http
        .delete(format!("{}/qa/tokens", psp.process.url()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let read = psp.http.get(&cob).bearer_auth(reader).send().await.unwrap();
    assert_eq!(read.status(), 401);
}

#[tokio::test]
async fn a_used_txid_is_refused_and_read_back_never_a_second_charge() {
    let psp = Provider::start();
    let (status, cob) = psp.put_cob(TXID, "12.34").await;
    assert_eq!(status, 201, "{cob}");
    assert_eq!(cob["status"], "ATIVA");
    assert_eq!(cob["valor"]["original"], "12.34");
    assert!(cob["location"].as_str().unwrap().starts_with("pix.sandbox"));

    let (again, problem) = psp.put_cob(TXID, "12.34").await;
    assert_eq!(again, 400, "a used txid is refused: {problem}");
    assert_eq!(problem["title"], "CobOperacaoInvalida");
    let (_, read) = psp
        .send(reqwest::Method::GET, &format!("/cob/{TXID}"), None)
        .await;
    assert_eq!(
        read["location"], cob["location"],
        "the charge read back is the first one"
    );
    assert_eq!(psp.process.counts().await["cobrancas"], 1);

    let (_, ledger) = psp.send(reqwest::Method::GET, "/qa/cobs", None).await;
    assert_eq!(ledger["cobs"].as_array().unwrap().len(), 1);
    assert_eq!(ledger["cobs"][0]["txid"], TXID);
    let (_, mine) = psp
        .send(reqwest::Method::GET, "/qa/cobs?chave=loja@pagar.dev", None)
        .await;
    assert_eq!(mine, ledger, "the ledger of one Pix key");
    let (_, other) = psp
        .send(reqwest::Method::GET, "/qa/cobs?chave=outra@pagar.dev", None)
        .await;
    assert_eq!(other["cobs"], json!([]));
}

#[tokio::test]
async fn a_removed_charge_is_not_paid_unless_the_bank_ignores_removal_and_a_paid_one_cannot_be_removed(
) {
    let psp = Provider::start();
    psp.put_cob(TXID, "25.00").await;
    let remove = json!({"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"});
    let (status, removed) = psp
        .send(
            reqwest::Method::PATCH,
            &format!("/cob/{TXID}"),
            Some(remove.clone()),
        )
        .await;
    assert_eq!(status, 200, "{removed}");
    assert_eq!(removed["status"], "REMOVIDA_PELO_USUARIO_RECEBEDOR");

    let (refused, _) = psp.process.customer_pays(TXID, json!({})).await;
    assert_eq!(
        refused, 409,
        "a PSP following bacen/pix-api#319 refuses a removed charge"
    );
    assert_eq!(psp.process.counts().await["pix"], 0);

    let (paid, pix) = psp
        .process
        .customer_pays(TXID, json!({"aceitar_inativa": true}))
        .await;
    assert_eq!(paid, 201, "{pix}");
    assert_eq!(pix["txid"], TXID);
    assert_eq!(pix["endToEndId"].as_str().unwrap().len(), 32);
    let (twice, _) = psp
        .process
        .customer_pays(TXID, json!({"aceitar_inativa": true}))
        .await;
    assert_eq!(twice, 409, "one Pix per charge");
    assert_eq!(psp.process.counts().await["pix"], 1);

    let other = "pagarTesteProvider0000000000002";
    psp.put_cob(other, "1.00").await;
    psp.process.customer_pays(other, json!({})).await;
    let (status, _) = psp
        .send(
            reqwest::Method::PATCH,
            &format!("/cob/{other}"),
            Some(remove),
        )
        .await;
    assert_eq!(status, 400, "a paid charge cannot be removed");
}

#[tokio::test]
async fn a_devolucao_id_is_used_once_and_the_devolucoes_never_exceed_the_pix() {
    let psp = Provider::start();
    psp.put_cob(TXID, "10.00").await;
    let (_, pix) = psp
        .process
        .customer_pays(TXID, json!({"webhook": "perdido"}))
        .await;
    let e2e = pix["endToEndId"].as_str().unwrap().to_string();
    let path = |id: &str| format!("/pix/{e2e}/devolucao/{id}");

    let (status, d) = psp
        .send(
            reqwest::Method::PUT,
            &path("D1"),
            Some(json!({"valor": "6.00"})),
        )
        .await;
    assert_eq!(status, 201, "{d}");
    assert_eq!(d["status"], "DEVOLVIDO");
    let (again, _) = psp
        .send(
            reqwest::Method::PUT,
            &path("D1"),
            Some(json!({"valor": "6.00"})),
        )
        .await;
    assert_eq!(again, 400, "a reused id is refused, not replayed");
    let (_, read) = psp.send(reqwest::Method::GET, &path("D1"), None).await;
    assert_eq!(
        read["rtrId"], d["rtrId"],
        "the client reads its devolução back"
    );

    let (over, problem) = psp
        .send(
            reqwest::Method::PUT,
            &path("D2"),
            Some(json!({"valor": "4.01"})),
        )
        .await;
    assert_eq!(over, 400, "more than what is left: {problem}");
    let (rest, _) = psp
        .send(
            reqwest::Method::PUT,
            &path("D3"),
            Some(json!({"valor": "4.00"})),
        )
        .await;
    assert_eq!(rest, 201);
    let counts = psp.process.counts().await;
    assert_eq!(
        (counts["devolucoes"].clone(), counts["devolvido"].clone()),
        (json!(2), json!(1000))
    );
}

#[tokio::test]
async fn the_pix_received_are_listed_by_time_window_a_page_at_a_time_and_bad_queries_are_refused() {
    // Arrange: three charges paid (one given back in part), one never paid.
    let psp = Provider::start();
    let txids: Vec<String> = (1..=4)
        .map(|n| format!("pagarTesteConsulta{n:013}"))
        .collect();
    let mut e2e = Vec::new();
    for (n, txid) in txids.iter().enumerate() {
        psp.put_cob(txid, "5.00").await;
        if n < 3 {
            let (_, pix) = psp
                .process
                .customer_pays(txid, json!({"webhook": "perdido"}))
                .await;
            e2e.push(pix["endToEndId"].as_str().unwrap().to_string());
        }
    }
    psp.send(
        reqwest::Method::PUT,
        &format!("/pix/{}/devolucao/D1", e2e[1]),
        Some(json!({"valor": "1.00"})),
    )
    .await;
    let list = |query: String| {
        let psp = &psp;
        async move {
            psp.send(reqwest::Method::GET, &format!("/pix?{query}"), None)
                .await
        }
    };
    let day = "inicio=2000-01-01T00:00:00Z&fim=2100-01-01T00:00:00Z";

    // Act + Assert: every Pix in the window, oldest first, as GET /pix/{e2eid} shows each.
    let (status, all) = list(day.to_string()).await;
    assert_eq!(status, 200, "{all}");
    let listed: Vec<&str> = all["pix"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["endToEndId"].as_str().unwrap())
        .collect();
    assert_eq!(listed, e2e.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(all["pix"][0]["txid"], txids[0].as_str());
    assert_eq!(all["pix"][0]["valor"], "5.00");
    assert_eq!(all["parametros"]["paginacao"]["quantidadeTotalDeItens"], 3);
    // Two a page: two pages, the second with the last one.
    let (_, second) = list(format!(
        "{day}&paginacao.paginaAtual=1&paginacao.itensPorPagina=2"
    ))
    .await;
    assert_eq!(second["parametros"]["paginacao"]["quantidadeDePaginas"], 2);
    assert_eq!(second["pix"][0]["endToEndId"], e2e[2].as_str());
    // Filters: one charge's; only those with a devolução; a window before any of them.
    let (_, one) = list(format!("{day}&txid={}", txids[2])).await;
    assert_eq!(one["pix"].as_array().unwrap().len(), 1);
    let (_, given_back) = list(format!("{day}&devolucaoPresente=true")).await;
    assert_eq!(given_back["pix"][0]["endToEndId"], e2e[1].as_str());
    assert_eq!(given_back["pix"][0]["devolucoes"][0]["valor"], "1.00");
    let (_, none) = list("inicio=2000-01-01T00:00:00Z&fim=2000-01-02T00:00:00Z".into()).await;
    assert_eq!(none["pix"], json!([]));
    assert_eq!(none["parametros"]["paginacao"]["quantidadeTotalDeItens"], 0);
    // Refused: no window, an end before the start, a page of 0 or 1 001 items, an unknown filter.
    for bad in [
        "fim=2100-01-01T00:00:00Z".to_string(),
        "inicio=2100-01-01T00:00:00Z&fim=2000-01-01T00:00:00Z".to_string(),
        "inicio=ontem&fim=hoje".to_string(),
        format!("{day}&paginacao.itensPorPagina=0"),
        format!("{day}&paginacao.itensPorPagina=1001"),
        format!("{day}&pagador=1"),
    ] {
        let (status, problem) = list(bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {problem}");
        assert_eq!(problem["title"], "ConsultaInvalida", "{bad}");
    }
}

#[tokio::test]
async fn callbacks_are_signed_for_every_secret_and_sent_as_many_times_as_qa_asks() {
    let psp = Provider::start();
    let (tx, mut rx) = mpsc::unbounded_channel::<(HeaderMap, Bytes)>();
    let receiver = axum::Router::new().route(
        "/hook/pix",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let tx = tx.clone();
            async move {
                let _ = tx.send((headers, body));
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, receiver).await });

    let (before, _) = psp
        .send(reqwest::Method::GET, "/webhook/loja@pagar.dev", None)
        .await;
    assert_eq!(before, 404, "no webhook registered yet");
    let (status, _) = psp
        .send(
            reqwest::Method::PUT,
            "/webhook/loja@pagar.dev",
            Some(json!({"webhookUrl": hook})),
        )
        .await;
    assert_eq!(status, 200);
    let (shown, registered) = psp
        .send(reqwest::Method::GET, "/webhook/loja@pagar.dev", None)
        .await;
    assert_eq!(shown, 200);
    assert_eq!(registered["webhookUrl"], hook.as_str());
    assert_eq!(registered["chave"], "loja@pagar.dev");
    psp.put_cob(TXID, "3.50").await;
    let (_, pix) = psp
        .process
        .customer_pays(TXID, json!({"webhook": "duplicado"}))
        .await;

    let verifier = standardwebhooks::Webhook::new(SECRET).unwrap();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (headers, body) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a callback within 10 s")
            .unwrap();
        verifier
            .verify(&body, &headers)
            .expect("signed with the configured secret");
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["pix"][0]["endToEndId"], pix["endToEndId"]);
        assert_eq!(v["pix"][0]["valor"], "3.50");
        ids.push(headers["webhook-id"].to_str().unwrap().to_string());
    }
    assert_eq!(ids[0], ids[1], "a copy carries the same webhook-id");
    assert!(
        tokio::time::timeout(Duration::from_millis(500), rx.recv())
            .await
            .is_err(),
        "two copies, not three"
    );
    assert_eq!(psp.process.counts().await["entregas_aceitas"], 2);
}

#[tokio::test]
async fn bad_input_is_refused_with_the_api_pix_problem_and_changes_nothing() {
    let psp = Provider::start();
    let (short, p) = psp.put_cob("curto", "1.00").await;
    assert_eq!(
        (short, p["title"].as_str()),
        (400, Some("CobOperacaoInvalida"))
    );
    let (zero, _) = psp.put_cob(TXID, "0.00").await;
    assert_eq!(zero, 400);
    let (float, _) = psp.put_cob(TXID, "1.5").await;
    assert_eq!(float, 400, "valor has exactly two decimals");
    let (unknown, _) = psp.process.customer_pays(TXID, json!({})).await;
    assert_eq!(unknown, 404);
    let (typo, _) = psp
        .process
        .customer_pays(TXID, json!({"webhok": "perdido"}))
        .await;
    assert_eq!(typo, 400, "a misspelt QA order is refused, not ignored");

    let anonymous = psp
        .http
        .get(format!("{}/cob/{TXID}", psp.process.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401, "no token: RFC 6750's 401");
    assert_eq!(psp.process.counts().await["cobrancas"], 0);
}

#[test]
fn a_secret_that_is_not_whsec_base64_stops_it_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pix-provider"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--webhook-secrets",
            "not-a-secret",
        ])
        .arg("--database")
        .arg(dir.path().join("psp.db"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("segredo de webhook inválido"), "{err}");
}
