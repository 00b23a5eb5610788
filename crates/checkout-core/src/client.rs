//! The payment API's client: sends an attempt's stored bytes with its stored key and says what
//! the answer means. It never retries by itself; the engine schedules every try.

use crate::config::Config;
use crate::domain::AttemptState;
use crate::outbox::{FinalAnswer, SendJob};
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

#[derive(Deserialize)]
struct PaymentView {
    id: String,
    status: String,
    motivo: Option<String>,
}

#[derive(Deserialize)]
struct PaymentList {
    pagamentos: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct Problem {
    detail: Option<String>,
    title: Option<String>,
}

/// HTTP client of the payment API.
#[derive(Debug, Clone)]
pub struct PaymentClient {
    http: reqwest::Client,
    base: String,
    api_key: String,
}

impl PaymentClient {
    /// A client with the configured timeouts. No redirects, no automatic retries.
    pub fn new(config: &Config) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .expect("a client with plain settings always builds");
        Self {
            http,
            base: config.api_url.clone(),
            api_key: config.api_key.clone(),
        }
    }

    /// Sends the stored bytes under the stored key.
    pub async fn send(&self, job: &SendJob) -> Answer {
        let res = self
            .http
            .post(format!("{}/pagamentos", self.base))
            .bearer_auth(&self.api_key)
            .header("Idempotency-Key", &job.key)
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
        classify(status, retry_after, body)
    }

    /// Looks the attempt up by `referencia`: `Ok(Some(final answer))` when the server has a
    /// payment for it, `Ok(None)` when it has none, `Err(retry)` when it could not tell.
    pub async fn find_by_referencia(&self, referencia: &str) -> Result<Option<Answer>, Answer> {
        let res = self
            .http
            .get(format!("{}/pagamentos", self.base))
            .query(&[("referencia", referencia)])
            .bearer_auth(&self.api_key)
            .send()
            .await
            .map_err(|e| network_error(&e))?;
        let status = res.status();
        let retry_after = retry_after(res.headers());
        let body = res.bytes().await.map_err(|e| network_error(&e))?.to_vec();
        if status != StatusCode::OK {
            return Err(match classify(status, retry_after, body) {
                Answer::Review { reason, .. } => Answer::Retry {
                    retry_after: None,
                    error: format!("consulta por referência falhou: {reason}"),
                    offline: false,
                },
                other => other,
            });
        }
        let list: PaymentList = serde_json::from_slice(&body).map_err(|e| Answer::Retry {
            retry_after: None,
            error: format!("resposta de consulta ilegível: {e}"),
            offline: false,
        })?;
        let Some(found) = list.pagamentos.into_iter().next() else {
            return Ok(None);
        };
        let bytes = serde_json::to_vec(&found).expect("a JSON value serialises");
        let status = if found["status"] == "aprovado" {
            201
        } else {
            402
        };
        Ok(Some(classify(
            StatusCode::from_u16(status).expect("valid status"),
            None,
            bytes,
        )))
    }

    /// True when `GET /health` answers 200.
    pub async fn health(&self) -> bool {
        self.http
            .get(format!("{}/health", self.base))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    }
}

fn network_error(e: &reqwest::Error) -> Answer {
    // Only a connection that cannot be made says the server is out of reach; a slow answer on
    // an open connection is retried without calling the store offline.
    let offline = e.is_connect();
    let what = if e.is_connect() {
        "sem conexão com o servidor"
    } else if e.is_timeout() {
        "o servidor não respondeu a tempo"
    } else {
        "a conexão caiu antes da resposta"
    };
    Answer::Retry {
        retry_after: None,
        error: format!("{what} ({e})"),
        offline,
    }
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
    let detail = serde_json::from_slice::<Problem>(body)
        .ok()
        .and_then(|p| p.detail.or(p.title))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
    format!("HTTP {}: {detail}", status.as_u16())
}

fn classify(status: StatusCode, retry_after: Option<Duration>, body: Vec<u8>) -> Answer {
    match status.as_u16() {
        201 | 402 => match serde_json::from_slice::<PaymentView>(&body) {
            Ok(p) => Answer::Final(FinalAnswer {
                state: if p.status == "aprovado" && status == StatusCode::CREATED {
                    AttemptState::Aprovado
                } else {
                    AttemptState::Recusado
                },
                status: status.as_u16(),
                payment_id: Some(p.id),
                motivo: p.motivo,
                body,
            }),
            // A final status whose body we cannot read: the outcome is not safely known.
            Err(e) => Answer::Review {
                reason: format!("HTTP {}: resposta ilegível ({e})", status.as_u16()),
                status: status.as_u16(),
                body,
            },
        },
        409 | 429 | 500..=599 => Answer::Retry {
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
        for s in [409, 429, 500, 502, 503] {
            assert!(
                matches!(
                    classify(StatusCode::from_u16(s).unwrap(), None, vec![]),
                    Answer::Retry { .. }
                ),
                "{s}"
            );
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(
                matches!(
                    classify(StatusCode::from_u16(s).unwrap(), None, vec![]),
                    Answer::Review { .. }
                ),
                "{s}"
            );
        }
    }

    #[test]
    fn a_decline_is_final_with_its_reason() {
        let body = br#"{"id":"pay_1","status":"recusado","motivo":"saldo_insuficiente"}"#.to_vec();
        match classify(StatusCode::PAYMENT_REQUIRED, None, body) {
            Answer::Final(f) => {
                assert_eq!(f.state, AttemptState::Recusado);
                assert_eq!(f.motivo.as_deref(), Some("saldo_insuficiente"));
            }
            other => panic!("{other:?}"),
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
