//! The payment API's client: sends an attempt's stored bytes with its stored key and says what
//! the answer means. It never retries by itself; the engine schedules every try.

use crate::config::Config;
use crate::domain::AttemptState;
use crate::error::{CoreError, Result};
use crate::outbox::{FinalAnswer, SendJob, Target};
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
        /// What went wrong, for the cashier and QA.
        error: String,
        /// True when the server could not be reached at all.
        offline: bool,
    },
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

/// A payment as a listing returns it: what a closing compares.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct RemotePayment {
    /// `pay_…`
    pub id: String,
    /// `aprovado` or `recusado`.
    pub status: String,
    /// Amount in centavos.
    pub valor: i64,
    /// The attempt id the till sent.
    #[serde(default)]
    pub referencia: Option<String>,
    /// The till that sent it.
    #[serde(default)]
    pub terminal: Option<String>,
    /// Creation time, RFC 3339.
    pub criado_em: String,
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

/// The server's two final statuses. Any other is not a final answer the engine can record.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum ServerStatus {
    Aprovado,
    Recusado,
}

/// A look-up by `referencia`: the payments, and the keys still executing for it (a server that
/// does not list them sends no `em_andamento`).
#[derive(Deserialize)]
struct PaymentList {
    pagamentos: Vec<serde_json::Value>,
    #[serde(default)]
    em_andamento: Vec<serde_json::Value>,
}

/// What the server said of a cancelled key.
#[derive(Debug, Clone)]
pub enum Cancelled {
    /// Nothing was charged under the key and nothing ever will be.
    NeverCharged,
    /// The key had made this payment (its final answer).
    Charged(FinalAnswer),
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
    estornos: Vec<T>,
}

/// A refund as `GET /pagamentos/{id}` lists it: what a closing compares.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct RemoteRefund {
    /// `est_…`
    pub id: String,
    /// `pendente`, `aprovado` or `recusado`.
    pub status: String,
    /// Amount in centavos.
    pub valor: i64,
    /// The attempt id the till sent.
    #[serde(default)]
    pub referencia: Option<String>,
}

#[derive(Deserialize)]
struct HealthView {
    key_retention_secs: Option<u64>,
}

/// What a `GET /health` probe learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Health {
    /// The server answered 200.
    pub reachable: bool,
    /// How long it keeps idempotency keys, when it says.
    pub key_retention: Option<Duration>,
}

/// The parts of the server's problem+json the engine shows.
#[derive(Deserialize)]
struct ServerProblem {
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
        let res = self
            .http
            .post(format!("{}{}", self.base, job.target.path()))
            .bearer_auth(&self.api_key)
            .header("Idempotency-Key", job.key.as_ref())
            .header("Content-Type", "application/json")
            .body(job.body.clone())
            .send()
            .await;
        let res = match res {
            Ok(r) => r,
            Err(e) => return network_error(&e),
        };
        let status = res.status();
        let retry_after = retry_after(res.headers());
        let body = match res.bytes().await {
            Ok(b) => b.to_vec(),
            Err(e) => return network_error(&e),
        };
        classify(&job.target, status, retry_after, body)
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
            .map_err(|e| CoreError::Unreachable(format!("servidor de pagamentos: {e}")))?;
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
            .map_err(|e| CoreError::Unreachable(format!("servidor de pagamentos: {e}")))?;
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
            offline: false,
        };
        let found = match target {
            Target::Payment => {
                let query = [("referencia", referencia.to_string())];
                let Some(body) = self.lookup("/pagamentos", &query, false).await? else {
                    return Ok(None);
                };
                let list: PaymentList = serde_json::from_slice(&body).map_err(unreadable)?;
                match list.pagamentos.into_iter().next() {
                    Some(found) => Some(found),
                    // No payment yet is not "no payment" while a try of it still executes: it
                    // may charge when it ends.
                    None if !list.em_andamento.is_empty() => {
                        return Err(Answer::Retry {
                            retry_after: None,
                            error: "o servidor ainda está processando uma tentativa desta venda"
                                .into(),
                            offline: false,
                        })
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
                detail
                    .estornos
                    .into_iter()
                    .find(|r| r["referencia"] == referencia)
            }
        };
        let Some(found) = found else {
            return Ok(None);
        };
        let status = match found["status"].as_str() {
            Some("aprovado") => 201,
            Some("recusado") => 402,
            other => {
                return Err(Answer::Retry {
                    retry_after: None,
                    error: format!(
                        "o servidor ainda não decidiu este pedido ({})",
                        other.unwrap_or("sem status")
                    ),
                    offline: false,
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
            offline: false,
        };
        let answer: CancelBody =
            serde_json::from_slice(&body).map_err(|e| unreadable(e.to_string()))?;
        match (answer.resultado.as_str(), answer.pagamento) {
            ("cancelada", None) => Ok(Cancelled::NeverCharged),
            ("pagamento", Some(payment)) if payment["referencia"] != referencia => {
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
                    Answer::Final(f) => Ok(Cancelled::Charged(f)),
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
                    offline: false,
                },
                other => other,
            },
        )
    }

    /// Probes `GET /health` within the probe timeout.
    pub async fn health(&self) -> Health {
        let unreachable = Health {
            reachable: false,
            key_retention: None,
        };
        let res = self
            .http
            .get(format!("{}/health", self.base))
            .timeout(self.probe_timeout)
            .send()
            .await;
        let Ok(res) = res.map_err(|e| tracing::debug!(error = %e, "health probe failed")) else {
            return unreachable;
        };
        if !res.status().is_success() {
            return unreachable;
        }
        let view = res.json::<HealthView>().await.ok();
        Health {
            reachable: true,
            key_retention: view
                .and_then(|v| v.key_retention_secs)
                .map(Duration::from_secs),
        }
    }
}

fn network_error(e: &reqwest::Error) -> Answer {
    // Every way of not getting an answer means the server is out of reach as far as the till
    // can tell: refused, unreachable, DNS, connect timeout, a reset or a close before the
    // answer, no answer in time. Each is retried with the same key; the prober says when the
    // server answers again.
    let what = if e.is_connect() {
        "sem conexão com o servidor"
    } else if e.is_timeout() {
        "o servidor não respondeu a tempo"
    } else {
        "a conexão caiu antes da resposta"
    };
    Answer::Retry {
        retry_after: None,
        error: format!("{what} ({})", error_chain(e)),
        offline: true,
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
    match status.as_u16() {
        201 | 402 => match serde_json::from_slice::<PaymentView>(&body) {
            Ok(p) => {
                let state = match (status.as_u16(), p.status) {
                    (201, ServerStatus::Aprovado) => AttemptState::Aprovado,
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
            offline: false,
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
