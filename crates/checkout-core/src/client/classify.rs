//! What an answer or a failure means: a try's outcome from its status and body, a transport
//! failure's reach and pt-BR text.

use super::*;

/// Whether a payment the server answered for a key is the one this attempt asked for.
pub(super) fn is_ours(
    payment: &serde_json::Value,
    referencia: &str,
    valor: crate::domain::Centavos,
) -> bool {
    match payment["referencia"].as_str() {
        Some(r) => r == referencia,
        None => payment["valor"].as_i64() == Some(valor.get()),
    }
}

pub(super) fn network_error(e: &reqwest::Error) -> Answer {
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
pub(super) fn tls_error(e: &reqwest::Error) -> Option<&rustls::Error> {
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
pub(super) fn certificate_text(e: &rustls::Error) -> String {
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
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
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

pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
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

pub(super) fn capture_answer(
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &[u8],
) -> CaptureAnswer {
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

pub(super) fn problem_text(status: StatusCode, body: &[u8]) -> String {
    let detail = serde_json::from_slice::<ServerProblem>(body)
        .ok()
        .and_then(|p| p.detail.or(p.title))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
    format!("HTTP {}: {detail}", status.as_u16())
}

pub(super) fn classify(
    target: &Target,
    status: StatusCode,
    retry_after: Option<Duration>,
    body: Vec<u8>,
) -> Answer {
    if status == StatusCode::CREATED {
        if let Some(answer) = super::machine::waiting_answer(201, &body) {
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
                    maquininha: None,
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
