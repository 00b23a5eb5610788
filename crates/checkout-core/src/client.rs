//! The payment API's client: sends an attempt's stored bytes with its stored key and says what
//! the answer means. It never retries by itself; the engine schedules every try.

use crate::config::Config;
use crate::domain::{AttemptState, Capture, Centavos, PixCharge, PixStatus, UnixMillis};
use crate::error::{CoreError, Result};
use crate::outbox::{CaptureJob, FinalAnswer, SendJob, Target};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::StatusCode;
use serde::Deserialize;
use std::time::{Duration, SystemTime};

/// What one try learned.
#[derive(Debug, Clone)]
pub enum Answer {
    /// `aprovado` (201) or `recusado` (402).
    Final(FinalAnswer),
    /// Worth retrying with the same key and bytes.
    Retry {
        /// What the server asked for, if it did.
        retry_after: Option<Duration>,
        /// What went wrong, for the cashier and QA: a sentence in pt-BR, no URL.
        error: String,
        /// How far the try got: whether the server was reached at all.
        reach: Reach,
    },
    /// A Pix the server made, not paid yet: the QR is shown, and the charge is read again.
    PixWaiting(PixCharge),
    /// The server refused the request as it is: a person must look.
    Review {
        /// Why.
        reason: String,
        /// HTTP status.
        status: u16,
        /// Body.
        body: Vec<u8>,
    },
}

/// How far a try got on its way to the payment API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The API answered (whatever it said).
    Answered,
    /// Nothing answered: refused, unreachable, DNS, timeouts, a connection cut before the answer.
    Unreachable,
    /// A server answered the TLS handshake with a certificate the till does not trust (unknown
    /// authority, expired, another host's name): not a cable problem, and waiting will not fix
    /// it; someone must configure `ca_cert` or the server.
    Untrusted,
}

/// A payment's or a refund's status as the server reports it in listings and look-ups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoteStatus {
    /// A refund still being executed.
    Pendente,
    /// Charged, or paid back.
    Aprovado,
    /// Declined.
    Recusado,
    /// Authorized on the card, not captured yet.
    Autorizado,
    /// An authorization undone: nothing taken.
    Desfeito,
    /// An authorization lapsed before capture: nothing taken.
    Expirado,
    /// A Pix paid after its charge was cancelled or expired: money in that is not a sale's
    /// payment (unless this till kept it as its sale's), to give back.
    #[serde(rename = "recebido_apos_cancelamento")]
    RecebidoAposCancelamento,
    /// A status this till does not know (a newer server): never taken as approved or declined.
    #[serde(other)]
    Desconhecido,
}

impl RemoteStatus {
    /// The wire form (`desconhecido` for one this till does not know).
    pub fn as_str(self) -> &'static str {
        match self {
            RemoteStatus::Pendente => "pendente",
            RemoteStatus::Aprovado => "aprovado",
            RemoteStatus::Recusado => "recusado",
            RemoteStatus::Autorizado => "autorizado",
            RemoteStatus::Desfeito => "desfeito",
            RemoteStatus::Expirado => "expirado",
            RemoteStatus::RecebidoAposCancelamento => "recebido_apos_cancelamento",
            RemoteStatus::Desconhecido => "desconhecido",
        }
    }

    /// Whether the till's final state says the same. A Pix received after its cancellation
    /// agrees with the attempt the till closed (`recusado`, the money listed apart until given
    /// back) and with one it kept as its sale's payment (`aprovado`).
    pub fn agrees_with(self, state: AttemptState) -> bool {
        matches!(
            (self, state),
            (
                RemoteStatus::Aprovado
                    | RemoteStatus::Autorizado
                    | RemoteStatus::Desfeito
                    | RemoteStatus::Expirado,
                AttemptState::Aprovado
            ) | (RemoteStatus::Recusado, AttemptState::Recusado)
                | (
                    RemoteStatus::RecebidoAposCancelamento,
                    AttemptState::Aprovado | AttemptState::Recusado
                )
        )
    }
}

impl std::fmt::Display for RemoteStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A payment as a listing returns it: what a closing compares.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct RemotePayment {
    /// `pay_…`
    pub id: String,
    /// `aprovado` or `recusado`.
    pub status: RemoteStatus,
    /// Amount in centavos.
    pub valor: Centavos,
    /// The attempt id the till sent.
    #[serde(default)]
    pub referencia: Option<String>,
    /// The till that sent it.
    #[serde(default)]
    pub terminal: Option<String>,
    /// Creation time, RFC 3339.
    pub criado_em: String,
    /// `debito`, `credito` or `voucher`, when the request named it.
    #[serde(default)]
    pub metodo: Option<String>,
    /// Installments, when the request named a method.
    #[serde(default)]
    pub parcelas: Option<u8>,
}

#[derive(Deserialize)]
struct RemotePage {
    pagamentos: Vec<RemotePayment>,
    #[serde(default)]
    proximo: Option<String>,
}

/// A payment or a refund as the server answers it: only what the engine records.
#[derive(Deserialize)]
struct PaymentView {
    id: String,
    status: ServerStatus,
    /// A payment's decline reason (a refund's `motivo` is the merchant's own reason).
    motivo: Option<String>,
    /// A refund's decline reason.
    #[serde(default)]
    recusa: Option<String>,
}

/// The server's final statuses of a payment (an authorization — `autorizado`, and later
/// `desfeito` or `expirado` — is an approval whose capture is decided apart). Any other is not a
/// final answer the engine can record.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum ServerStatus {
    Aprovado,
    Recusado,
    Autorizado,
    Desfeito,
    Expirado,
}

/// A Pix payment as the server answers it (`"metodo": "pix"`).
#[derive(Deserialize)]
struct PixView {
    id: String,
    metodo: String,
    status: PixStatus,
    pix: PixDetailView,
}

#[derive(Deserialize)]
struct PixDetailView {
    txid: String,
    copia_e_cola: String,
    expira_em: String,
    #[serde(default)]
    e2eid: Option<String>,
    #[serde(default)]
    pago_em: Option<String>,
}

fn parse_time(s: &str) -> Option<UnixMillis> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// What a Pix answer (`status` the HTTP code) means for its attempt; `None` when the body is
/// not a Pix.
fn pix_answer(status: u16, body: &[u8]) -> Option<Answer> {
    let v: PixView = serde_json::from_slice(body).ok()?;
    if v.metodo != "pix" {
        return None;
    }
    let unreadable = |why: &str| Answer::Review {
        reason: format!("HTTP {status}: Pix ilegível ({why})"),
        status,
        body: body.to_vec(),
    };
    let Some(expira_em) = parse_time(&v.pix.expira_em) else {
        return Some(unreadable("expira_em"));
    };
    let charge = PixCharge {
        payment_id: v.id.clone(),
        txid: v.pix.txid,
        copia_e_cola: v.pix.copia_e_cola,
        expira_em,
        status: v.status,
        e2eid: v.pix.e2eid,
        pago_em: v.pix.pago_em.as_deref().and_then(parse_time),
    };
    let settled = |state: AttemptState, motivo: Option<&str>| {
        Answer::Final(FinalAnswer {
            state,
            status,
            body: body.to_vec(),
            payment_id: Some(v.id.clone()),
            motivo: motivo.map(String::from),
            pix: Some(charge.clone()),
            authorized: false,
        })
    };
    Some(match v.status {
        PixStatus::Aguardando => Answer::PixWaiting(charge.clone()),
        PixStatus::Aprovado => settled(AttemptState::Aprovado, None),
        // The money arrived while this attempt still waited for it: it pays the sale.
        PixStatus::RecebidoAposCancelamento => {
            settled(AttemptState::Aprovado, Some("recebido_apos_cancelamento"))
        }
        PixStatus::Expirado => settled(AttemptState::Recusado, Some("pix_expirado")),
        PixStatus::Cancelado => settled(AttemptState::Recusado, Some("pix_cancelado")),
        PixStatus::Desconhecido => unreadable("status desconhecido"),
    })
}

/// A look-up by `referencia`: the payments, and the keys still executing for it (a server that
/// does not list them sends no `em_andamento`).
#[derive(Deserialize)]
struct PaymentList {
    pagamentos: Vec<serde_json::Value>,
    #[serde(default)]
    em_andamento: Vec<serde_json::Value>,
    /// Pix charges with this reference (a server without Pix sends none).
    #[serde(default)]
    pix: Vec<serde_json::Value>,
}

/// "Ask again": the server still executes a try of `what`, which may yet charge or pay back.
fn still_executing(what: &str) -> Answer {
    Answer::Retry {
        retry_after: None,
        error: format!("o servidor ainda está processando {what}"),
        reach: Reach::Answered,
    }
}

/// What the server said of a cancelled key.
#[derive(Debug, Clone)]
pub enum Cancelled {
    /// Nothing was charged under the key and nothing ever will be.
    NeverCharged,
    /// The key had made this payment (its final answer).
    Charged(Box<FinalAnswer>),
}

#[derive(Deserialize)]
struct CancelBody {
    resultado: String,
    #[serde(default)]
    pagamento: Option<serde_json::Value>,
}

/// `GET /pagamentos/{id}`: only its refunds (as the server answered each, or as a closing
/// compares them).
#[derive(Deserialize)]
struct PaymentRefunds<T> {
    #[serde(default = "Vec::new")]
    estornos: Vec<T>,
}

/// A refund as `GET /pagamentos/{id}` lists it: what a closing compares.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct RemoteRefund {
    /// `est_…`
    pub id: String,
    /// `pendente`, `aprovado` or `recusado`.
    pub status: RemoteStatus,
    /// Amount in centavos.
    pub valor: Centavos,
    /// The attempt id the till sent.
    #[serde(default)]
    pub referencia: Option<String>,
    /// When the server made it, RFC 3339.
    #[serde(default)]
    pub criado_em: Option<String>,
}

#[derive(Deserialize)]
struct HealthView {
    key_retention_secs: Option<u64>,
}

/// What a `GET /health` probe learned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// How far the probe got (`Answered` only for a 200).
    pub reach: Reach,
    /// Why it did not get an answer: a pt-BR sentence.
    pub problem: Option<String>,
    /// How long it keeps idempotency keys, when it says.
    pub key_retention: Option<Duration>,
}

/// The parts of the server's problem+json the engine reads and shows.
#[derive(Deserialize)]
struct ServerProblem {
    /// `urn:pagar:problem:<slug>`.
    #[serde(rename = "type", default)]
    kind: Option<String>,
    detail: Option<String>,
    title: Option<String>,
}

/// HTTP client of the payment API. Its `Debug` never shows the API key.
#[derive(Clone)]
pub struct PaymentClient {
    http: reqwest::Client,
    base: String,
    api_key: String,
    probe_timeout: Duration,
}

impl std::fmt::Debug for PaymentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaymentClient")
            .field("base", &self.base)
            .field("api_key", &"***")
            .field("probe_timeout", &self.probe_timeout)
            .finish_non_exhaustive()
    }
}

impl PaymentClient {
    /// A client for the configured API: TLS through rustls (the system's roots, the bundled
    /// web roots and `ca_cert`), a fresh DNS lookup for every new connection, the configured
    /// timeouts, no redirects, no automatic retries and no proxy from the environment. Fails
    /// with [`CoreError::Config`] for an address [`Config::validate`] refuses or an unreadable
    /// certificate file.
    pub fn new(config: &Config) -> Result<Self> {
        config.validate()?;
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(Duration::from_secs(30));
        if let Some(path) = &config.ca_cert {
            let pem = std::fs::read(path).map_err(|e| {
                CoreError::Config(format!("certificado da CA {}: {e}", path.display()))
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                CoreError::Config(format!("certificado da CA {}: {e}", path.display()))
            })?;
            if certs.is_empty() {
                return Err(CoreError::Config(format!(
                    "certificado da CA {}: nenhum certificado PEM no arquivo",
                    path.display()
                )));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        builder = match config.socks_relay {
            // socks5h: the relay resolves the name, so DNS still happens per connection.
            Some(relay) => builder.proxy(
                reqwest::Proxy::all(format!("socks5h://{relay}"))
                    .map_err(|e| CoreError::Config(format!("relé de QA {relay}: {e}")))?,
            ),
            None => builder.no_proxy(),
        };
        let http = builder
            .build()
            .map_err(|e| CoreError::Config(format!("cliente HTTP: {e}")))?;
        Ok(Self {
            http,
            base: config.api_url.clone(),
            api_key: config.api_key.clone(),
            probe_timeout: config.probe_timeout,
        })
    }

    /// Sends the stored bytes under the stored key to the attempt's target.
    pub async fn send(&self, job: &SendJob) -> Answer {
        let req = self
            .http
            .post(format!("{}{}", self.base, job.target.path()))
            .header("Idempotency-Key", job.key.as_ref())
            .header("Content-Type", "application/json")
            .body(job.body.clone());
        match self.answer_of(req).await {
            Ok((status, retry_after, body)) => classify(&job.target, status, retry_after, body),
            Err(no_answer) => no_answer,
        }
    }

    /// Sends a request with the API key and reads the whole answer: its status, `Retry-After`
    /// and body, or what not getting one means.
    async fn answer_of(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<(StatusCode, Option<Duration>, Vec<u8>), Answer> {
        let res = req
            .bearer_auth(&self.api_key)
            .send()
            .await
            .map_err(|e| network_error(&e))?;
        let status = res.status();
        let retry_after = retry_after(res.headers());
        let body = res.bytes().await.map_err(|e| network_error(&e))?.to_vec();
        Ok((status, retry_after, body))
    }

    /// Sends a capture or undo (`POST /pagamentos/{id}/captura` or `/desfazimento`, body `{}`)
    /// under its own key, and says where the authorization stands: the server's word (captured,
    /// undone or lapsed — a step the authorization no longer allowed answers the state that
    /// stopped it, 422), or why to try again with the same key.
    pub async fn settle_authorization(&self, job: &CaptureJob) -> CaptureAnswer {
        let Some(step) = job.step.step_path() else {
            return CaptureAnswer::Retry {
                retry_after: None,
                error: "nada decidido para esta autorização".into(),
                reach: Reach::Answered,
            };
        };
        let req = self
            .http
            .post(format!(
                "{}/pagamentos/{}/{step}",
                self.base, job.payment_id
            ))
            .header("Idempotency-Key", job.key.as_ref())
            .header("Content-Type", "application/json")
            .body("{}");
        let (status, retry_after, body) = match self.answer_of(req).await {
            Ok(answer) => answer,
            Err(Answer::Retry {
                retry_after,
                error,
                reach,
            }) => {
                return CaptureAnswer::Retry {
                    retry_after,
                    error,
                    reach,
                }
            }
            Err(_) => unreachable!("answer_of fails only with Answer::Retry"),
        };
        capture_answer(status, retry_after, &body)
    }

    /// Reads a Pix the server made (`GET /pagamentos/{id}?aguardar=…`): the server answers as
    /// soon as it changes, or after `wait` unchanged.
    pub async fn pix_status(&self, payment_id: &str, wait: Duration) -> Answer {
        let query = [("aguardar", wait.as_secs().max(1).to_string())];
        match self.get(&format!("/pagamentos/{payment_id}"), &query).await {
            Ok((StatusCode::OK, _, body)) => pix_answer(200, &body).unwrap_or(Answer::Review {
                reason: "HTTP 200: o servidor não descreve este pagamento como Pix".into(),
                status: 200,
                body,
            }),
            Ok((status, retry_after, body)) => {
                classify(&Target::Payment, status, retry_after, body)
            }
            Err(e) => network_error(&e),
        }
    }

    /// Cancels a Pix the customer has not paid (`POST /pagamentos/{id}/cancelamento`): what the
    /// server answers is the charge as it now stands (cancelled, or paid when the customer was
    /// faster).
    pub async fn cancel_pix(&self, payment_id: &str) -> Answer {
        let req = self.http.post(format!(
            "{}/pagamentos/{payment_id}/cancelamento",
            self.base
        ));
        let (status, retry_after, body) = match self.answer_of(req).await {
            Ok(answer) => answer,
            Err(no_answer) => return no_answer,
        };
        if status == StatusCode::OK {
            if let Some(answer) = pix_answer(200, &body) {
                return answer;
            }
        }
        classify(&Target::Payment, status, retry_after, body)
    }

    /// Every payment the server has for this merchant between `from` and `to` (epoch ms),
    /// only this till's when `terminal` is given, following the pages to the end. For the
    /// till's closing; fails with [`CoreError::Unreachable`] when the server cannot be asked.
    pub async fn payments_between(
        &self,
        from: i64,
        to: i64,
        terminal: Option<&str>,
    ) -> Result<Vec<RemotePayment>> {
        let rfc = |ms: i64| {
            time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
                .ok()
                .and_then(|t| {
                    t.format(&time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .ok_or_else(|| CoreError::Invalid(format!("instante fora do calendário: {ms}")))
        };
        let (desde, ate) = (rfc(from)?, rfc(to)?);
        let mut found = Vec::new();
        let mut cursor: Option<String> = None;
        // Bounded: 1 000 a page, and a closing covers days, not years.
        for _ in 0..10_000 {
            let mut query = vec![
                ("desde", desde.clone()),
                ("ate", ate.clone()),
                ("limite", "1000".to_string()),
            ];
            if let Some(t) = terminal {
                query.push(("terminal", t.to_string()));
            }
            if let Some(c) = &cursor {
                query.push(("cursor", c.clone()));
            }
            let page: RemotePage = self.get_json("/pagamentos", &query).await?;
            found.extend(page.pagamentos);
            match page.proximo {
                Some(next) => cursor = Some(next),
                None => return Ok(found),
            }
        }
        Err(CoreError::Unreachable(
            "a listagem de pagamentos não terminou".into(),
        ))
    }

    /// Every payment the server has under one `referencia` (usually one).
    pub async fn payments_by_referencia(&self, referencia: &str) -> Result<Vec<RemotePayment>> {
        let page: RemotePage = self
            .get_json("/pagamentos", &[("referencia", referencia.to_string())])
            .await?;
        Ok(page.pagamentos)
    }

    /// One `GET` with the merchant's key: the status, `Retry-After` and the body.
    async fn get(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> reqwest::Result<(StatusCode, Option<Duration>, Vec<u8>)> {
        let res = self
            .http
            .get(format!("{}{path}", self.base))
            .query(query)
            .bearer_auth(&self.api_key)
            .send()
            .await?;
        let status = res.status();
        let retry_after = retry_after(res.headers());
        Ok((status, retry_after, res.bytes().await?.to_vec()))
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T> {
        let (status, _, body) = self
            .get(path, query)
            .await
            .map_err(|e| CoreError::Unreachable(transport_problem(&e).1))?;
        if !status.is_success() {
            return Err(CoreError::Unreachable(problem_text(status, &body)));
        }
        serde_json::from_slice(&body)
            .map_err(|e| CoreError::Unreachable(format!("resposta ilegível do servidor: {e}")))
    }

    /// The refunds the server has for payment `payment` (none when it does not know it). For
    /// the till's closing; fails with [`CoreError::Unreachable`] when the server cannot be asked.
    pub async fn refunds_of(
        &self,
        payment: &crate::domain::PaymentId,
    ) -> Result<Vec<RemoteRefund>> {
        let (status, _, body) = self
            .get(&format!("/pagamentos/{payment}"), &[])
            .await
            .map_err(|e| CoreError::Unreachable(transport_problem(&e).1))?;
        if status == StatusCode::NOT_FOUND {
            return Ok(Vec::new());
        }
        if !status.is_success() {
            return Err(CoreError::Unreachable(problem_text(status, &body)));
        }
        serde_json::from_slice::<PaymentRefunds<RemoteRefund>>(&body)
            .map(|d| d.estornos)
            .map_err(|e| CoreError::Unreachable(format!("resposta ilegível do servidor: {e}")))
    }

    /// Looks an attempt up by its `referencia` where its target keeps it: a payment among the
    /// payments, a refund among its payment's refunds. `Ok(Some(final answer))` when the server
    /// has it, `Ok(None)` when it has none, `Err(retry)` when it could not tell (a refund still
    /// in progress on the server is retried).
    pub async fn find(&self, target: &Target, referencia: &str) -> Result<Option<Answer>, Answer> {
        let unreadable = |e: serde_json::Error| Answer::Retry {
            retry_after: None,
            error: format!("resposta de consulta ilegível: {e}"),
            reach: Reach::Answered,
        };
        let found = match target {
            Target::Payment => {
                let query = [("referencia", referencia.to_string())];
                let Some(body) = self.lookup("/pagamentos", &query, false).await? else {
                    return Ok(None);
                };
                let list: PaymentList = serde_json::from_slice(&body).map_err(unreadable)?;
                // A Pix made for this attempt is its answer, waiting or settled.
                if let Some(pix) = list.pix.first() {
                    let bytes = serde_json::to_vec(pix).unwrap_or_default();
                    return pix_answer(200, &bytes).map(Some).ok_or_else(|| {
                        unreadable(serde_json::Error::io(std::io::Error::other("Pix ilegível")))
                    });
                }
                match list.pagamentos.into_iter().next() {
                    Some(found) => Some(found),
                    // No payment yet is not "no payment" while a try of it still executes: it
                    // may charge when it ends.
                    None if !list.em_andamento.is_empty() => {
                        return Err(still_executing("uma tentativa desta venda"))
                    }
                    None => None,
                }
            }
            Target::Refund(payment) => {
                // A payment unknown to this merchant has no refund either.
                let path = format!("/pagamentos/{payment}");
                let Some(body) = self.lookup(&path, &[], true).await? else {
                    return Ok(None);
                };
                let detail: PaymentRefunds<serde_json::Value> =
                    serde_json::from_slice(&body).map_err(unreadable)?;
                let found = detail
                    .estornos
                    .into_iter()
                    .find(|r| r["referencia"] == referencia);
                // Not paid back yet is not "no refund" while a try of it still executes (its
                // key is listed by its `referencia` from its claim on).
                if found.is_none() {
                    let query = [("referencia", referencia.to_string())];
                    if let Some(body) = self.lookup("/pagamentos", &query, false).await? {
                        let list: PaymentList =
                            serde_json::from_slice(&body).map_err(unreadable)?;
                        if !list.em_andamento.is_empty() {
                            return Err(still_executing("este estorno"));
                        }
                    }
                }
                found
            }
        };
        let Some(found) = found else {
            return Ok(None);
        };
        let status = match found["status"].as_str() {
            Some("aprovado" | "autorizado" | "desfeito" | "expirado") => 201,
            Some("recusado") => 402,
            other => {
                return Err(Answer::Retry {
                    retry_after: None,
                    error: format!(
                        "o servidor ainda não decidiu este pedido ({})",
                        other.unwrap_or("sem status")
                    ),
                    reach: Reach::Answered,
                })
            }
        };
        let bytes = serde_json::to_vec(&found).expect("a JSON value serialises");
        Ok(Some(classify(
            target,
            StatusCode::from_u16(status).expect("valid status"),
            None,
            bytes,
        )))
    }

    /// Cancels a payment attempt's key on the server (`POST /pagamentos/cancelamentos`): the
    /// payment it made for the attempt whose `referencia` this is, or the certainty that it never
    /// charges for it (a payment another request made under the key is not this attempt's: the
    /// server refuses this attempt's bytes under that key for good). `Err` with what to do
    /// otherwise (a key still executing answers a retry).
    pub async fn cancel(
        &self,
        key: &crate::domain::IdempotencyKey,
        referencia: &str,
        valor: crate::domain::Centavos,
    ) -> Result<Cancelled, Answer> {
        let res = self
            .http
            .post(format!("{}/pagamentos/cancelamentos", self.base))
            .bearer_auth(&self.api_key)
            .json(&serde_json::json!({ "idempotency_key": key.as_ref() }))
            .send()
            .await
            .map_err(|e| network_error(&e))?;
        let status = res.status();
        let retry_after = retry_after(res.headers());
        let body = res.bytes().await.map_err(|e| network_error(&e))?.to_vec();
        if status != StatusCode::OK {
            return Err(classify(&Target::Payment, status, retry_after, body));
        }
        let unreadable = |e: String| Answer::Retry {
            retry_after: None,
            error: format!("resposta de cancelamento ilegível: {e}"),
            reach: Reach::Answered,
        };
        let answer: CancelBody =
            serde_json::from_slice(&body).map_err(|e| unreadable(e.to_string()))?;
        match (answer.resultado.as_str(), answer.pagamento) {
            ("cancelada", None) => Ok(Cancelled::NeverCharged),
            // The key's payment is another request's (the key was used with another body):
            // this attempt's bytes never charged under it and never will (the server refuses
            // them 422). A payment without a reference (rebuilt from the gateway's record) is
            // this attempt's when its amount is.
            ("pagamento", Some(payment)) if !is_ours(&payment, referencia, valor) => {
                Ok(Cancelled::NeverCharged)
            }
            ("pagamento", Some(payment)) => {
                let code = match payment["status"].as_str() {
                    Some("aprovado") => StatusCode::CREATED,
                    Some("recusado") => StatusCode::PAYMENT_REQUIRED,
                    other => return Err(unreadable(format!("status {other:?}"))),
                };
                let bytes = serde_json::to_vec(&payment).expect("a JSON value serialises");
                match classify(&Target::Payment, code, None, bytes) {
                    Answer::Final(f) => Ok(Cancelled::Charged(Box::new(f))),
                    other => Err(other),
                }
            }
            (other, _) => Err(unreadable(format!("resultado {other:?}"))),
        }
    }

    /// One lookup `GET`: the body of a 200, nothing for a 404 when `missing_is_none`; otherwise
    /// what the answer means as a retry (a refusal of the lookup says nothing of the attempt).
    async fn lookup(
        &self,
        path: &str,
        query: &[(&str, String)],
        missing_is_none: bool,
    ) -> Result<Option<Vec<u8>>, Answer> {
        let (status, retry_after, body) =
            self.get(path, query).await.map_err(|e| network_error(&e))?;
        match status {
            StatusCode::OK => return Ok(Some(body)),
            StatusCode::NOT_FOUND if missing_is_none => return Ok(None),
            _ => {}
        }
        Err(
            match classify(&Target::Payment, status, retry_after, body) {
                Answer::Review { reason, .. } => Answer::Retry {
                    retry_after: None,
                    error: format!("consulta por referência falhou: {reason}"),
                    reach: Reach::Answered,
                },
                other => other,
            },
        )
    }

    /// Probes `GET /health` within the probe timeout.
    pub async fn health(&self) -> Health {
        let res = self
            .http
            .get(format!("{}/health", self.base))
            .timeout(self.probe_timeout)
            .send()
            .await;
        let res = match res {
            Ok(res) => res,
            Err(e) => {
                let (reach, problem) = transport_problem(&e);
                tracing::debug!(error = %error_chain(&e), "health probe failed");
                return Health {
                    reach,
                    problem: Some(problem),
                    key_retention: None,
                };
            }
        };
        if !res.status().is_success() {
            return Health {
                reach: Reach::Unreachable,
                problem: Some(format!(
                    "o servidor de pagamentos respondeu HTTP {} à verificação de saúde",
                    res.status().as_u16()
                )),
                key_retention: None,
            };
        }
        let view = res.json::<HealthView>().await.ok();
        Health {
            reach: Reach::Answered,
            problem: None,
            key_retention: view
                .and_then(|v| v.key_retention_secs)
                .map(Duration::from_secs),
        }
    }
}

/// Whether a payment the server answered for a key is the one this attempt asked for.
fn is_ours(payment: &serde_json::Value, referencia: &str, valor: crate::domain::Centavos) -> bool {
    match payment["referencia"].as_str() {
        Some(r) => r == referencia,
        None => payment["valor"].as_i64() == Some(valor.get()),
    }
}

fn network_error(e: &reqwest::Error) -> Answer {
    // Every way of not getting an answer means the server is out of reach as far as the till
    // can tell: refused, unreachable, DNS, connect timeout, a reset or a close before the
    // answer, no answer in time. Each is retried with the same key; the prober says when the
    // server answers again. A refused certificate is told apart: it is not the network.
    let (reach, error) = transport_problem(e);
    tracing::debug!(error = %error_chain(e), "request failed before an answer");
    Answer::Retry {
        retry_after: None,
        error,
        reach,
    }
}

/// Why a request got no answer, as a cashier can read it (pt-BR, no URL, no library text), and
/// whether that was a refused certificate.
pub fn transport_problem(e: &reqwest::Error) -> (Reach, String) {
    if let Some(tls) = tls_error(e) {
        return (Reach::Untrusted, certificate_text(tls));
    }
    let chain = error_chain(e).to_ascii_lowercase();
    let text = if e.is_timeout() {
        "o servidor de pagamentos não respondeu a tempo"
    } else if e.is_connect()
        && (chain.contains("dns") || chain.contains("lookup") || chain.contains("name or service"))
    {
        "o endereço do servidor de pagamentos não foi encontrado (DNS)"
    } else if e.is_connect() && chain.contains("refused") {
        "sem conexão com o servidor: a conexão foi recusada"
    } else if e.is_connect() {
        "sem conexão com o servidor"
    } else {
        "a conexão caiu antes da resposta"
    };
    (Reach::Unreachable, text.to_string())
}

/// The rustls error inside a transport error, if the TLS handshake is what failed. rustls's
/// error travels inside `io::Error`s (nested), whose `source()` skips what they wrap, so each
/// link is opened as well as followed.
fn tls_error(e: &reqwest::Error) -> Option<&rustls::Error> {
    let mut link: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = link {
        let mut inner = Some(err);
        while let Some(wrapped) = inner {
            if let Some(tls) = wrapped.downcast_ref::<rustls::Error>() {
                return Some(tls);
            }
            inner = wrapped
                .downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
                .map(|e| e as &(dyn std::error::Error + 'static));
        }
        link = err.source();
    }
    None
}

/// A refused certificate, in words that say what to do.
fn certificate_text(e: &rustls::Error) -> String {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => {
            "o certificado do servidor de pagamentos não é de uma autoridade em que este caixa confia: configure ca_cert com a CA que o emitiu".into()
        }
        rustls::Error::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
            "o certificado do servidor de pagamentos expirou: o servidor precisa de um certificado novo".into()
        }
        rustls::Error::InvalidCertificate(C::NotValidYet | C::NotValidYetContext { .. }) => {
            "o certificado do servidor de pagamentos ainda não vale: confira o relógio deste caixa e o do servidor".into()
        }
        rustls::Error::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
            "o certificado do servidor de pagamentos é de outro nome: confira o endereço da API (api_url)".into()
        }
        rustls::Error::InvalidCertificate(C::Revoked) => {
            "o certificado do servidor de pagamentos foi revogado".into()
        }
        other => format!("a conexão segura (TLS) com o servidor de pagamentos falhou: {other}"),
    }
}

/// The error with its causes, so "error sending request" says what actually happened.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

/// What a capture's or undo's answer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaptureAnswer {
    /// Where the authorization stands now, as the server said.
    Settled(Capture),
    /// Worth trying again with the same key.
    Retry {
        /// What the server asked for, if it did.
        retry_after: Option<Duration>,
        /// What went wrong (pt-BR, no URL).
        error: String,
        /// How far the try got.
        reach: Reach,
    },
}

fn capture_answer(status: StatusCode, retry_after: Option<Duration>, body: &[u8]) -> CaptureAnswer {
    #[derive(Deserialize)]
    struct Captured {
        captura: Option<String>,
    }
    let settled = match status.as_u16() {
        200 => serde_json::from_slice::<Captured>(body)
            .ok()
            .and_then(|c| c.captura)
            .and_then(|c| match c.as_str() {
                "capturada" => Some(Capture::Capturada),
                "desfeita" => Some(Capture::Desfeita),
                "expirada" => Some(Capture::Expirada),
                _ => None,
            }),
        422 => serde_json::from_slice::<ServerProblem>(body)
            .ok()
            .and_then(|p| match p.kind?.as_str() {
                "urn:pagar:problem:pagamento-capturado" => Some(Capture::Capturada),
                "urn:pagar:problem:autorizacao-desfeita" => Some(Capture::Desfeita),
                "urn:pagar:problem:autorizacao-expirada" => Some(Capture::Expirada),
                _ => None,
            }),
        _ => None,
    };
    match settled {
        Some(state) => CaptureAnswer::Settled(state),
        // Anything else (409, 5xx, a refusal a person must read) is tried again later with the
        // same key: the step is idempotent at the server and at the gateway.
        None => CaptureAnswer::Retry {
            retry_after,
            error: problem_text(status, body),
            reach: Reach::Answered,
        },
    }
}

fn problem_text(status: StatusCode, body: &[u8]) -> String {
    let detail = serde_json::from_slice::<ServerProblem>(body)
        .ok()
        .and_then(|p| p.detail.or(p.title))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
    format!("HTTP {}: {detail}", status.as_u16())
}

fn classify(
    target: &Target,
    status: StatusCode,
    retry_after: Option<Duration>,
    body: Vec<u8>,
) -> Answer {
    if status == StatusCode::CREATED {
        if let Some(answer) = pix_answer(201, &body) {
            return answer;
        }
    }
    match status.as_u16() {
        201 | 402 => match serde_json::from_slice::<PaymentView>(&body) {
            Ok(p) => {
                let authorized = matches!(
                    p.status,
                    ServerStatus::Autorizado | ServerStatus::Desfeito | ServerStatus::Expirado
                ) && *target == Target::Payment;
                let state = match (status.as_u16(), p.status) {
                    (201, ServerStatus::Aprovado) => AttemptState::Aprovado,
                    (201, _) if authorized => AttemptState::Aprovado,
                    (402, ServerStatus::Recusado) => AttemptState::Recusado,
                    // A status that contradicts its HTTP code: not safely known.
                    _ => {
                        return Answer::Review {
                            reason: format!("HTTP {}: resposta incoerente", status.as_u16()),
                            status: status.as_u16(),
                            body,
                        }
                    }
                };
                Answer::Final(FinalAnswer {
                    state,
                    status: status.as_u16(),
                    payment_id: Some(p.id),
                    motivo: match target {
                        Target::Payment => p.motivo,
                        Target::Refund(_) => p.recusa,
                    },
                    body,
                    pix: None,
                    authorized,
                })
            }
            // A final status whose body we cannot read: the outcome is not safely known.
            Err(e) => Answer::Review {
                reason: format!("HTTP {}: resposta ilegível ({e})", status.as_u16()),
                status: status.as_u16(),
                body,
            },
        },
        // 408: the request did not arrive whole (the server marks it retryable); 3xx: something
        // between us and the API answered (a captive portal, a proxy), not the API itself.
        300..=399 | 408 | 409 | 429 | 500..=599 => Answer::Retry {
            retry_after,
            error: problem_text(status, &body),
            reach: Reach::Answered,
        },
        _ => Answer::Review {
            reason: problem_text(status, &body),
            status: status.as_u16(),
            body,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_status_this_till_does_not_know_is_never_approved_or_declined() {
        let p: RemotePayment = serde_json::from_str(
            r#"{"id":"pay_1","status":"aguardando","valor":100,"criado_em":"2026-12-01T12:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(p.status, RemoteStatus::Desconhecido);
        for state in AttemptState::ALL {
            assert!(!p.status.agrees_with(state), "{state:?}");
        }
        assert!(RemoteStatus::Aprovado.agrees_with(AttemptState::Aprovado));
        assert!(!RemoteStatus::Aprovado.agrees_with(AttemptState::Recusado));
    }

    #[test]
    fn retryable_statuses_keep_the_attempt_pending_and_others_need_review() {
        for s in [301, 302, 307, 408, 409, 429, 500, 502, 503] {
            assert!(
                matches!(
                    classify(
                        &Target::Payment,
                        StatusCode::from_u16(s).unwrap(),
                        None,
                        vec![]
                    ),
                    Answer::Retry { .. }
                ),
                "{s}"
            );
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(
                matches!(
                    classify(
                        &Target::Payment,
                        StatusCode::from_u16(s).unwrap(),
                        None,
                        vec![]
                    ),
                    Answer::Review { .. }
                ),
                "{s}"
            );
        }
    }

    #[test]
    fn a_decline_is_final_with_its_reason() {
        let body = br#"{"id":"pay_1","status":"recusado","motivo":"saldo_insuficiente"}"#.to_vec();
        match classify(&Target::Payment, StatusCode::PAYMENT_REQUIRED, None, body) {
            Answer::Final(f) => {
                assert_eq!(f.state, AttemptState::Recusado);
                assert_eq!(f.motivo.as_deref(), Some("saldo_insuficiente"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_status_that_contradicts_its_http_code_or_is_unknown_needs_review() {
        for (code, body) in [
            (StatusCode::CREATED, r#"{"id":"pay_1","status":"recusado"}"#),
            (
                StatusCode::PAYMENT_REQUIRED,
                r#"{"id":"pay_1","status":"aprovado"}"#,
            ),
            (
                StatusCode::CREATED,
                r#"{"id":"pay_1","status":"estornado"}"#,
            ),
        ] {
            assert!(
                matches!(
                    classify(&Target::Payment, code, None, body.as_bytes().to_vec()),
                    Answer::Review { .. }
                ),
                "{code} {body}"
            );
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_as_a_date() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        h.insert(RETRY_AFTER, later.parse().unwrap());
        let d = retry_after(&h).unwrap();
        assert!(
            d > Duration::from_secs(100) && d <= Duration::from_secs(120),
            "{d:?}"
        );
    }
}
