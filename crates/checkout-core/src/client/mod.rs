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

mod classify;
mod machine;
mod remote;
#[cfg(test)]
mod tests;

pub use classify::*;
pub use remote::*;

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

    /// Reads a payment that waits for the customer (a Pix, a card at the machine:
    /// `GET /pagamentos/{id}?aguardar=…`): the server answers as soon as it changes, or after
    /// `wait` unchanged.
    pub async fn waiting_status(&self, payment_id: &str, wait: Duration) -> Answer {
        let query = [("aguardar", wait.as_secs().max(1).to_string())];
        match self.get(&format!("/pagamentos/{payment_id}"), &query).await {
            Ok((StatusCode::OK, _, body)) => machine::waiting_answer(200, &body)
                .unwrap_or(Answer::Review {
                reason:
                    "HTTP 200: o servidor não descreve este pagamento como Pix nem como maquininha"
                        .into(),
                status: 200,
                body,
            }),
            Ok((status, retry_after, body)) => {
                classify(&Target::Payment, status, retry_after, body)
            }
            Err(e) => network_error(&e),
        }
    }

    /// Cancels a Pix or a card-machine order the customer has not paid
    /// (`POST /pagamentos/{id}/cancelamento`): what the server answers is the payment as it now
    /// stands (cancelled, or paid when the customer was faster). A machine that already took the
    /// order is not cancelled (409 `maquininha-com-o-pedido`): the answer is then the order as it
    /// stands, still waiting.
    pub async fn cancel_waiting(&self, payment_id: &str) -> Answer {
        let req = self.http.post(format!(
            "{}/pagamentos/{payment_id}/cancelamento",
            self.base
        ));
        let (status, retry_after, body) = match self.answer_of(req).await {
            Ok(answer) => answer,
            Err(no_answer) => return no_answer,
        };
        if status == StatusCode::OK {
            if let Some(answer) = machine::waiting_answer(200, &body) {
                return answer;
            }
        }
        let problem = serde_json::from_slice::<ServerProblem>(&body).ok();
        if status == StatusCode::CONFLICT
            && problem.and_then(|p| p.kind).as_deref()
                == Some("urn:pagar:problem:maquininha-com-o-pedido")
        {
            return self.waiting_status(payment_id, Duration::ZERO).await;
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
                // A Pix or a card-machine order made for this attempt is its answer, waiting or
                // settled.
                if let Some(waiting) = list.pix.first().or(list.maquininha.first()) {
                    let bytes = serde_json::to_vec(waiting).unwrap_or_default();
                    return machine::waiting_answer(200, &bytes)
                        .map(Some)
                        .ok_or_else(|| {
                            unreadable(serde_json::Error::io(std::io::Error::other(
                                "pagamento em espera ilegível",
                            )))
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
        let (status, retry_after, body) = self
            .answer_of(
                self.http
                    .post(format!("{}/pagamentos/cancelamentos", self.base))
                    .json(&serde_json::json!({ "idempotency_key": key.as_ref() })),
            )
            .await?;
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
