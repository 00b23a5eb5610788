//! The HTTP surface: the API Pix routes Pagar uses, and the QA controls.

use crate::problem::problem;
use crate::store::{now_ms, Cob, Devolucao, PixDb, PixRecebido, Refused};
use crate::webhook::{Dispatcher, Mode};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use pagar_rules::decimal as valor;
use provider_kit::rfc3339;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct Shared {
    pub(crate) store: Arc<PixDb>,
    pub(crate) clients: Arc<crate::oauth::Clients>,
    pub(crate) location_base: String,
    pub(crate) webhooks: Arc<Dispatcher>,
}

type St = State<Arc<Shared>>;

pub(crate) fn router(state: Arc<Shared>) -> Router {
    Router::new()
        .route("/cob/{txid}", put(create_cob).get(get_cob).patch(patch_cob))
        .route("/pix", get(list_pix))
        .route("/pix/{e2eid}", get(get_pix))
        .route(
            "/pix/{e2eid}/devolucao/{id}",
            put(create_devolucao).get(get_devolucao),
        )
        .route("/webhook/{chave}", put(put_webhook).get(get_webhook))
        .route("/qa/cob/{txid}/pagar", post(qa_pay))
        .route("/qa/contagens", get(qa_counts))
        .route("/qa/cobs", get(qa_ledger))
        .with_state(state.clone())
        .route(
            "/oauth/token",
            post(crate::oauth::token).with_state(state.clients.clone()),
        )
        .route(
            "/qa/tokens",
            get(crate::oauth::qa_tokens)
                .delete(crate::oauth::qa_revoke)
                .with_state(state.clients.clone()),
        )
        .layer(axum::middleware::from_fn_with_state(
            state.clients.clone(),
            crate::oauth::guard,
        ))
}

fn refused(e: Refused, name: &str) -> Response {
    match e {
        Refused::NotFound => problem(
            StatusCode::NOT_FOUND,
            "NaoEncontrado",
            "Recurso solicitado não foi encontrado.",
        ),
        Refused::Invalid(d) => problem(StatusCode::BAD_REQUEST, name, &d),
        Refused::Db(e) => {
            tracing::error!(error = %e, "simulator database");
            problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServicoIndisponivel",
                "Serviço não está disponível no momento.",
            )
        }
    }
}

fn valid_txid(txid: &str) -> bool {
    (26..=35).contains(&txid.len()) && txid.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn cob_json(c: &Cob) -> Value {
    let mut v = json!({
        "calendario": {"criacao": rfc3339(c.criacao), "expiracao": c.expiracao},
        "txid": c.txid,
        "revisao": c.revisao,
        "loc": {"id": c.loc_id, "location": c.location, "tipoCob": "cob"},
        "location": c.location,
        "status": c.status,
        "valor": {"original": valor::format(c.valor)},
        "chave": c.chave,
    });
    if let Some(s) = &c.solicitacao {
        v["solicitacaoPagador"] = json!(s);
    }
    if !c.pix.is_empty() {
        v["pix"] = c.pix.iter().map(pix_json).collect();
    }
    v
}

fn pix_json(p: &PixRecebido) -> Value {
    let mut v = json!({
        "endToEndId": p.e2eid,
        "txid": p.txid,
        "valor": valor::format(p.valor),
        "horario": rfc3339(p.horario),
    });
    if !p.devolucoes.is_empty() {
        v["devolucoes"] = p.devolucoes.iter().map(devolucao_json).collect();
    }
    v
}

fn devolucao_json(d: &Devolucao) -> Value {
    json!({
        "id": d.id,
        "rtrId": d.rtr_id,
        "valor": valor::format(d.valor),
        "horario": {"solicitacao": rfc3339(d.horario), "liquidacao": rfc3339(d.horario)},
        "status": d.status,
    })
}

#[derive(Deserialize)]
struct CobSolicitada {
    calendario: Option<Calendario>,
    valor: ValorOriginal,
    chave: String,
    #[serde(rename = "solicitacaoPagador")]
    solicitacao_pagador: Option<String>,
}

#[derive(Deserialize)]
struct Calendario {
    expiracao: Option<i64>,
}

#[derive(Deserialize)]
struct ValorOriginal {
    original: String,
}

async fn create_cob(State(s): St, Path(txid): Path<String>, body: axum::body::Bytes) -> Response {
    if !valid_txid(&txid) {
        return problem(
            StatusCode::BAD_REQUEST,
            "CobOperacaoInvalida",
            "O campo cob.txid não respeita o schema.",
        );
    }
    let Ok(req) = serde_json::from_slice::<CobSolicitada>(&body) else {
        return problem(StatusCode::BAD_REQUEST, "CobOperacaoInvalida", "A requisição que busca alterar ou criar uma cobrança para pagamento imediato não respeita o schema.");
    };
    let Some(centavos) = valor::parse(&req.valor.original).filter(|v| *v > 0) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "CobOperacaoInvalida",
            "O campo cob.valor.original não respeita o schema.",
        );
    };
    let expiracao = req.calendario.and_then(|c| c.expiracao).unwrap_or(86_400);
    if expiracao <= 0 || req.chave.trim().is_empty() {
        return problem(
            StatusCode::BAD_REQUEST,
            "CobOperacaoInvalida",
            "O campo cob.calendario.expiracao ou cob.chave não respeita o schema.",
        );
    }
    let cob = Cob {
        txid: txid.clone(),
        valor: centavos,
        chave: req.chave,
        expiracao,
        criacao: now_ms(),
        status: "ATIVA".into(),
        revisao: 0,
        location: format!(
            "{}/{}",
            s.location_base.trim_end_matches('/'),
            uuid::Uuid::new_v4().simple()
        ),
        solicitacao: req.solicitacao_pagador,
        loc_id: 0,
        pix: Vec::new(),
    };
    match s.store.create(&cob) {
        Ok(c) => {
            tracing::info!(txid = %c.txid, valor = c.valor, "cob created");
            (StatusCode::CREATED, Json(cob_json(&c))).into_response()
        }
        Err(e) => refused(e, "CobOperacaoInvalida"),
    }
}

async fn get_cob(State(s): St, Path(txid): Path<String>) -> Response {
    match s.store.cob(&txid) {
        Ok(Some(c)) => Json(cob_json(&c)).into_response(),
        Ok(None) => refused(Refused::NotFound, "CobNaoEncontrado"),
        Err(e) => refused(e, "CobNaoEncontrado"),
    }
}

async fn patch_cob(State(s): St, Path(txid): Path<String>, Json(body): Json<Value>) -> Response {
    if body.get("status").and_then(Value::as_str) != Some("REMOVIDA_PELO_USUARIO_RECEBEDOR") {
        return problem(
            StatusCode::BAD_REQUEST,
            "CobOperacaoInvalida",
            "Só a remoção (status REMOVIDA_PELO_USUARIO_RECEBEDOR) é aceita por este simulador.",
        );
    }
    match s.store.remove(&txid) {
        Ok(c) => Json(cob_json(&c)).into_response(),
        Err(e) => refused(e, "CobOperacaoInvalida"),
    }
}

async fn get_pix(State(s): St, Path(e2eid): Path<String>) -> Response {
    match s.store.pix(&e2eid) {
        Ok(Some(p)) => Json(pix_json(&p)).into_response(),
        Ok(None) => refused(Refused::NotFound, "PixNaoEncontrado"),
        Err(e) => refused(e, "PixNaoEncontrado"),
    }
}

/// The query of `GET /pix` (API Pix "Consultar Pix recebidos"); the CPF and CNPJ filters are not
/// offered (the simulator knows no payer).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsultaPix {
    inicio: String,
    fim: String,
    txid: Option<String>,
    #[serde(rename = "txIdPresente")]
    txid_presente: Option<bool>,
    #[serde(rename = "devolucaoPresente")]
    devolucao_presente: Option<bool>,
    #[serde(rename = "paginacao.paginaAtual", default)]
    pagina_atual: u32,
    #[serde(rename = "paginacao.itensPorPagina", default = "itens_por_pagina")]
    itens_por_pagina: u32,
}

fn itens_por_pagina() -> u32 {
    100
}

/// `GET /pix?inicio&fim`: the Pix received with `horario` in `[inicio, fim]`, oldest first, a page
/// at a time (`paginacao.paginaAtual` from 0, `paginacao.itensPorPagina` 1–1000, 100 when not
/// given): what a receiver reconciles with when callbacks and consultas of single charges missed a
/// Pix.
async fn list_pix(
    State(s): St,
    q: Result<Query<ConsultaPix>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let invalid = |d: &str| problem(StatusCode::BAD_REQUEST, "ConsultaInvalida", d);
    let Ok(Query(q)) = q else {
        return invalid("Os parâmetros da consulta não respeitam o schema.");
    };
    let (Some(inicio), Some(fim)) = (parse_rfc3339(&q.inicio), parse_rfc3339(&q.fim)) else {
        return invalid("inicio e fim devem ser datas RFC 3339.");
    };
    if inicio > fim {
        return invalid("O timestamp representado pelo parâmetro fim é anterior ao timestamp representado pelo parâmetro inicio.");
    }
    if !(1..=1000).contains(&q.itens_por_pagina) {
        return invalid("O parâmetro paginacao.itensPorPagina deve estar entre 1 e 1000.");
    }
    let filtro = crate::store::FiltroPix {
        inicio,
        fim,
        txid: q.txid,
        txid_presente: q.txid_presente,
        devolucao_presente: q.devolucao_presente,
    };
    let per_page = i64::from(q.itens_por_pagina);
    match s
        .store
        .pix_between(&filtro, i64::from(q.pagina_atual) * per_page, per_page)
    {
        Ok((pix, total)) => Json(json!({
            "parametros": {
                "inicio": q.inicio,
                "fim": q.fim,
                "paginacao": {
                    "paginaAtual": q.pagina_atual,
                    "itensPorPagina": q.itens_por_pagina,
                    "quantidadeDePaginas": ((total + per_page - 1) / per_page).max(1),
                    "quantidadeTotalDeItens": total,
                },
            },
            "pix": pix.iter().map(pix_json).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(e) => refused(e, "ConsultaInvalida"),
    }
}

fn parse_rfc3339(s: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

async fn create_devolucao(
    State(s): St,
    Path((e2eid, id)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> Response {
    let valid_id = (1..=35).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric());
    let centavos = body
        .get("valor")
        .and_then(Value::as_str)
        .and_then(valor::parse);
    let (true, Some(centavos)) = (valid_id, centavos) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "PixDevolucaoInvalida",
            "O id ou o valor da devolução não respeita o schema.",
        );
    };
    match s.store.refund(&e2eid, &id, centavos) {
        Ok(d) => {
            tracing::info!(%e2eid, %id, valor = d.valor, "devolução made");
            (StatusCode::CREATED, Json(devolucao_json(&d))).into_response()
        }
        Err(e) => refused(e, "PixDevolucaoInvalida"),
    }
}

async fn get_devolucao(State(s): St, Path((e2eid, id)): Path<(String, String)>) -> Response {
    let found = s
        .store
        .pix(&e2eid)
        .map(|p| p.and_then(|p| p.devolucoes.into_iter().find(|d| d.id == id)));
    match found {
        Ok(Some(d)) => Json(devolucao_json(&d)).into_response(),
        Ok(None) => refused(Refused::NotFound, "PixDevolucaoNaoEncontrada"),
        Err(e) => refused(e, "PixDevolucaoNaoEncontrada"),
    }
}

async fn put_webhook(State(s): St, Path(chave): Path<String>, Json(body): Json<Value>) -> Response {
    let Some(url) = body.get("webhookUrl").and_then(Value::as_str) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "WebhookOperacaoInvalida",
            "O campo webhookUrl não respeita o schema.",
        );
    };
    match s.store.set_webhook(&chave, url) {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => refused(e, "WebhookOperacaoInvalida"),
    }
}

/// `GET /webhook/{chave}`: where the key's callbacks go (`{"webhookUrl", "chave"}`), or 404
/// while none is registered.
async fn get_webhook(State(s): St, Path(chave): Path<String>) -> Response {
    match s.store.webhook(&chave) {
        Ok(Some(url)) => Json(json!({"webhookUrl": url, "chave": chave})).into_response(),
        Ok(None) => refused(Refused::NotFound, "WebhookNaoEncontrado"),
        Err(e) => refused(e, "WebhookNaoEncontrado"),
    }
}

/// What the customer does, for QA.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Pagar {
    /// Pay after this many milliseconds (answered 202 at once).
    atraso_ms: u64,
    /// How the callback goes out.
    webhook: Mode,
    /// Send the callback this many milliseconds after the payment.
    webhook_atraso_ms: u64,
    /// Accept the payment even though the charge was removed or expired (a PSP that does not
    /// follow `bacen/pix-api#319`).
    aceitar_inativa: bool,
}

async fn qa_pay(State(s): St, Path(txid): Path<String>, body: axum::body::Bytes) -> Response {
    let order: Pagar = if body.is_empty() {
        Pagar::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(o) => o,
            Err(e) => {
                return problem(
                    StatusCode::BAD_REQUEST,
                    "RequisicaoInvalida",
                    &e.to_string(),
                )
            }
        }
    };
    let e2eid = crate::store::end_to_end_id();
    if order.atraso_ms > 0 {
        let s = s.clone();
        let e2 = e2eid.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(order.atraso_ms)).await;
            if let Err(e) = pay_now(&s, &txid, &e2, &order) {
                tracing::warn!(%txid, "scheduled payment refused: {e}");
            }
        });
        return (StatusCode::ACCEPTED, Json(json!({"endToEndId": e2eid}))).into_response();
    }
    match pay_now(&s, &txid, &e2eid, &order) {
        Ok(p) => (StatusCode::CREATED, Json(pix_json(&p))).into_response(),
        Err(Refused::Invalid(d)) => problem(StatusCode::CONFLICT, "CobOperacaoInvalida", &d),
        Err(e) => refused(e, "CobOperacaoInvalida"),
    }
}

fn pay_now(
    s: &Arc<Shared>,
    txid: &str,
    e2eid: &str,
    order: &Pagar,
) -> Result<PixRecebido, Refused> {
    let pix = s.store.pay(txid, e2eid, order.aceitar_inativa)?;
    tracing::info!(%txid, %e2eid, valor = pix.valor, "Pix received");
    let chave = s.store.cob(txid).ok().flatten().map(|c| c.chave);
    let url = chave.and_then(|k| s.store.webhook(&k).ok().flatten());
    match url {
        Some(url) => s.webhooks.send(
            s.store.clone(),
            url,
            json!({"pix": [pix_json(&pix)]}),
            order.webhook,
            Duration::from_millis(order.webhook_atraso_ms),
        ),
        None => {
            tracing::warn!(%txid, "no webhook registered for the key: only a poll will find this Pix")
        }
    }
    Ok(pix)
}

async fn qa_counts(State(s): St) -> Response {
    match s.store.counts() {
        Ok(c) => Json(c).into_response(),
        Err(e) => refused(e, "ServicoIndisponivel"),
    }
}

#[derive(Deserialize)]
struct LedgerQuery {
    chave: Option<String>,
}

/// `GET /qa/cobs[?chave=…]`: every charge (to that key) as `GET /cob/{txid}` shows it, in
/// creation order.
async fn qa_ledger(State(s): St, Query(q): Query<LedgerQuery>) -> Response {
    match s.store.ledger(q.chave.as_deref()) {
        Ok(cobs) => {
            Json(json!({"cobs": cobs.iter().map(cob_json).collect::<Vec<_>>()})).into_response()
        }
        Err(e) => refused(e, "ServicoIndisponivel"),
    }
}
