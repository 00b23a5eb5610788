//! The crate's one error type. Every error leaves the server through [`ApiError::into_response`]
//! as `application/problem+json` (RFC 9457) with a stable `type`, a `title` and `retryable`.

use crate::domain::{CaptureState, FieldError, KeyError};
use crate::schema::Problem;
#[cfg(feature = "postgres")]
pub use crate::store::describe_postgres;
pub use crate::store::StoreError;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// Result alias for the crate.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// Every way a request can fail.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No or unknown API key.
    #[error("credenciais ausentes ou inválidas")]
    Unauthorized,
    /// Admin route with a wrong token.
    #[error("token de administrador ausente ou inválido")]
    AdminUnauthorized,
    /// The Idempotency-Key header is missing or malformed.
    #[error(transparent)]
    InvalidKey(#[from] KeyError),
    /// Body is not JSON.
    #[error("o corpo não é JSON válido: {0}")]
    MalformedJson(String),
    /// Content-Type is not JSON.
    #[error("Content-Type deve ser application/json")]
    UnsupportedMediaType,
    /// A header that must appear once appeared more than once.
    #[error("o cabeçalho {0} aparece mais de uma vez")]
    DuplicateHeader(&'static str),
    /// The body did not arrive in time.
    #[error("o corpo não chegou inteiro em {0} ms")]
    RequestTimeout(u64),
    /// Body over the limit.
    #[error("o corpo passa de {0} bytes")]
    PayloadTooLarge(usize),
    /// Headers over the limit.
    #[error("os cabeçalhos passam de {0} bytes")]
    HeadersTooLarge(usize),
    /// Body is JSON but some field is invalid.
    #[error("a requisição tem campos inválidos")]
    Validation(Vec<FieldError>),
    /// Query parameters are wrong.
    #[error("{0}")]
    BadQuery(String),
    /// Same key, different request.
    #[error("esta Idempotency-Key já foi usada com outra requisição")]
    FingerprintMismatch,
    /// A concurrent request holds the key.
    #[error("outra requisição com esta Idempotency-Key está em andamento")]
    KeyInProgress {
        /// Seconds until the holder's lease ends.
        retry_after_secs: u64,
    },
    /// The key was cancelled (`POST /pagamentos/cancelamentos`): it can never charge.
    #[error("esta Idempotency-Key foi cancelada e não pode mais cobrar; use uma chave nova")]
    KeyCancelled,
    /// A cancellation asked for a key that executes something other than a charge.
    #[error(
        "esta Idempotency-Key não é de um pagamento; só a chave de um pagamento pode ser cancelada"
    )]
    NotAPaymentKey,
    /// A cancellation by key asked for a Pix charge the customer can still pay.
    #[error(
        "esta chave é de um Pix que ainda pode ser pago: cancele o Pix e aguarde a confirmação"
    )]
    PixWaiting,
    /// A cancellation by key asked for a card-machine order a card can still pay.
    #[error(
        "esta chave é de um pedido na maquininha que ainda pode ser pago: cancele o pedido e aguarde a confirmação"
    )]
    MachineWaiting,
    /// The cashier cancelled an order the machine already took: only the machine ends it now.
    #[error(
        "a maquininha já está com o pedido: cancele na maquininha ou aguarde o cliente; o pedido ainda pode ser pago"
    )]
    MachineAtTerminal,
    /// This worker's lease was taken over while it executed.
    #[error("a execução desta chave foi assumida por outra requisição; tente de novo")]
    LeaseLost,
    /// Fault injection: rate limited before execution.
    #[error("muitas requisições; tente de novo em instantes")]
    RateLimited,
    /// Fault injection: 5xx before execution.
    #[error("falha injetada antes da execução")]
    InjectedFault,
    /// A refund of a payment that was declined.
    #[error("só um pagamento aprovado pode ser estornado; este foi recusado")]
    NotRefundable,
    /// A refund of more than what is left of the payment (`left` centavos).
    #[error("o estorno passa do que resta estornar deste pagamento: restam {} ({left} centavos)", brl(*.left))]
    RefundExceeds {
        /// What could still be refunded, in centavos.
        left: i64,
    },
    /// A tender that would take its sale's tenders above the sale's total.
    #[error("o pagamento passaria do total da venda: total {}, já pago ou em andamento {}, falta {}", brl(*.total), brl(*.held), brl(*.total - *.held))]
    SaleExceeded {
        /// The sale's total, in centavos.
        total: i64,
        /// What its other tenders hold now, in centavos.
        held: i64,
    },
    /// A tender of a sale the server knows with another total.
    #[error("esta venda foi aberta com outro total ({})", brl(*.total))]
    SaleTotalMismatch {
        /// The sale's total, in centavos.
        total: i64,
    },
    /// A capture or undo of a payment that was captured with its charge, or declined.
    #[error("este pagamento não é uma autorização: foi capturado ao ser aprovado (para devolver, estorne) ou recusado")]
    NotAnAuthorization,
    /// A capture or undo the authorization no longer allows, as the gateway decided: captured
    /// already (undo refused: refund it), undone, or lapsed (capture refused: nothing was taken).
    #[error("{}", settled_detail(*.0))]
    AuthorizationSettled(CaptureState),
    /// A refund of an authorization that was not captured: nothing was taken to give back.
    #[error("esta autorização não foi capturada: nada foi cobrado; desfaça-a em vez de estornar")]
    NotCaptured,
    /// No such payment for this merchant, or no such route.
    #[error("pagamento não encontrado")]
    NotFound,
    /// The route exists, not with this method.
    #[error("método não permitido neste caminho")]
    MethodNotAllowed,
    /// The store failed.
    #[error("armazenamento indisponível")]
    Store(#[from] StoreError),
    /// The gateway could not be asked; nothing is known to have happened there (its downstream
    /// key makes the retry safe): 503 `gateway-unavailable`, retry with the same key.
    #[error("gateway indisponível")]
    GatewayUnavailable(String),
    /// A Pix webhook whose signature or timestamp does not check out; nothing recorded.
    #[error("webhook recusado: {0}")]
    WebhookRejected(String),
    /// A Pix asked of a server with no Pix provider configured.
    #[error("este servidor não tem provedor Pix configurado; pague com cartão")]
    PixUnavailable,
    /// A card-machine payment asked of a server with no machine provider configured.
    #[error("este servidor não tem maquininha configurada; use outra forma de pagamento")]
    MachineUnavailable,
    /// A bug or a lost task: the request may be retried with the same key.
    #[error("erro interno: {0}")]
    Internal(String),
    /// The server could not start (bad configuration, port taken, database unreadable).
    #[error("{0}")]
    Startup(String),
}

impl ApiError {
    /// Status code, stable problem type slug, title, and whether a retry with the same key may succeed.
    pub fn describe(&self) -> (StatusCode, &'static str, &'static str, bool) {
        use ApiError::*;
        match self {
            Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "Não autorizado",
                false,
            ),
            AdminUnauthorized => (
                StatusCode::UNAUTHORIZED,
                "admin-unauthorized",
                "Não autorizado",
                false,
            ),
            InvalidKey(_) => (
                StatusCode::BAD_REQUEST,
                "invalid-idempotency-key",
                "Idempotency-Key inválida",
                false,
            ),
            MalformedJson(_) => (
                StatusCode::BAD_REQUEST,
                "malformed-json",
                "JSON malformado",
                false,
            ),
            UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Tipo de conteúdo não suportado",
                false,
            ),
            DuplicateHeader(_) => (
                StatusCode::BAD_REQUEST,
                "duplicate-header",
                "Cabeçalho repetido",
                false,
            ),
            RequestTimeout(_) => (
                StatusCode::REQUEST_TIMEOUT,
                "request-timeout",
                "Corpo não recebido a tempo",
                true,
            ),
            PayloadTooLarge(_) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload-too-large",
                "Corpo grande demais",
                false,
            ),
            HeadersTooLarge(_) => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers-too-large",
                "Cabeçalhos grandes demais",
                false,
            ),
            Validation(_) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation",
                "Requisição inválida",
                false,
            ),
            BadQuery(_) => (
                StatusCode::BAD_REQUEST,
                "bad-query",
                "Consulta inválida",
                false,
            ),
            FingerprintMismatch => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency-key-reused",
                "Idempotency-Key reutilizada com outra requisição",
                false,
            ),
            KeyInProgress { .. } => (
                StatusCode::CONFLICT,
                "key-in-progress",
                "Requisição em andamento",
                true,
            ),
            KeyCancelled => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency-key-cancelled",
                "Idempotency-Key cancelada",
                false,
            ),
            NotAPaymentKey => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "not-a-payment-key",
                "A chave não é de um pagamento",
                false,
            ),
            PixWaiting => (
                StatusCode::CONFLICT,
                "pix-aguardando",
                "Pix aguardando: cancele o Pix e aguarde a confirmação",
                false,
            ),
            MachineWaiting => (
                StatusCode::CONFLICT,
                "maquininha-aguardando",
                "Pedido na maquininha: cancele o pedido e aguarde a confirmação",
                false,
            ),
            MachineAtTerminal => (
                StatusCode::CONFLICT,
                "maquininha-com-o-pedido",
                "A maquininha está com o pedido",
                false,
            ),
            LeaseLost => (
                StatusCode::CONFLICT,
                "lease-lost",
                "Execução assumida por outra requisição",
                true,
            ),
            RateLimited => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate-limited",
                "Muitas requisições",
                true,
            ),
            InjectedFault => (
                StatusCode::SERVICE_UNAVAILABLE,
                "injected-fault",
                "Falha injetada",
                true,
            ),
            NotFound => (StatusCode::NOT_FOUND, "not-found", "Não encontrado", false),
            NotRefundable => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "pagamento-nao-estornavel",
                "Pagamento não pode ser estornado",
                false,
            ),
            RefundExceeds { .. } => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "estorno-excede-saldo",
                "Estorno maior que o saldo do pagamento",
                false,
            ),
            SaleExceeded { .. } => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "venda-excedida",
                "Pagamento maior que o que falta da venda",
                false,
            ),
            SaleTotalMismatch { .. } => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "venda-total-diferente",
                "Venda com outro total",
                false,
            ),
            NotAnAuthorization => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "nao-e-autorizacao",
                "Pagamento sem captura posterior",
                false,
            ),
            AuthorizationSettled(state) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                match state {
                    CaptureState::Capturada => "pagamento-capturado",
                    CaptureState::Desfeita => "autorizacao-desfeita",
                    CaptureState::Expirada => "autorizacao-expirada",
                    CaptureState::Pendente => "autorizacao-pendente",
                },
                match state {
                    CaptureState::Capturada => "Autorização já capturada",
                    CaptureState::Desfeita => "Autorização desfeita",
                    CaptureState::Expirada => "Autorização expirada",
                    CaptureState::Pendente => "Autorização pendente",
                },
                false,
            ),
            NotCaptured => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "pagamento-nao-capturado",
                "Autorização não capturada",
                false,
            ),
            MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method-not-allowed",
                "Método não permitido",
                false,
            ),
            Store(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "store-unavailable",
                "Armazenamento indisponível",
                true,
            ),
            GatewayUnavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "gateway-unavailable",
                "Adquirente indisponível",
                true,
            ),
            WebhookRejected(_) => (
                StatusCode::UNAUTHORIZED,
                "webhook-nao-autenticado",
                "Webhook não autenticado",
                false,
            ),
            PixUnavailable => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "pix-indisponivel",
                "Pix indisponível",
                false,
            ),
            MachineUnavailable => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "maquininha-indisponivel",
                "Maquininha indisponível",
                false,
            ),
            Startup(_) | Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "Erro interno",
                true,
            ),
        }
    }

    /// The full problem type URI for a slug.
    pub fn type_uri(slug: &str) -> String {
        format!("urn:pagar:problem:{slug}")
    }
}

/// What a capture or undo that could not take effect says of the authorization.
fn settled_detail(state: CaptureState) -> &'static str {
    match state {
        CaptureState::Capturada => {
            "esta autorização já foi capturada: o valor foi cobrado; para devolver, estorne"
        }
        CaptureState::Desfeita => {
            "esta autorização foi desfeita: nada foi cobrado e nada pode mais ser capturado"
        }
        CaptureState::Expirada => {
            "esta autorização expirou sem captura: nada foi cobrado e nada pode mais ser capturado"
        }
        CaptureState::Pendente => "esta autorização ainda espera captura ou desfazimento",
    }
}

/// `R$ 1.234,56` for an amount in centavos.
fn brl(centavos: i64) -> String {
    let (reais, cents) = (centavos / 100, centavos % 100);
    let digits = reais.to_string();
    let mut grouped = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push('.');
        }
        grouped.push(ch);
    }
    format!("R$ {grouped},{cents:02}")
}

impl From<crate::gateway::GatewayError> for ApiError {
    fn from(e: crate::gateway::GatewayError) -> Self {
        match e {
            crate::gateway::GatewayError::Voided => ApiError::KeyCancelled,
            crate::gateway::GatewayError::NotAnAuthorization => ApiError::NotAnAuthorization,
            crate::gateway::GatewayError::Unavailable(e) => ApiError::GatewayUnavailable(e),
        }
    }
}

impl ApiError {
    /// The problem+json bytes of this error, and its status.
    pub fn problem_bytes(&self) -> (StatusCode, Vec<u8>) {
        let (status, slug, title, retryable) = self.describe();
        let kind = Self::type_uri(slug);
        let problem = Problem {
            kind: &kind,
            title,
            status: status.as_u16(),
            detail: self.to_string(),
            retryable,
            errors: match self {
                ApiError::Validation(errs) => Some(errs),
                _ => None,
            },
        };
        (
            status,
            serde_json::to_vec(&problem).expect("a problem always serialises"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match &self {
            ApiError::Store(e) => tracing::error!(error = %e, "store failure"),
            ApiError::GatewayUnavailable(e) => tracing::error!(error = %e, "gateway failure"),
            _ => {}
        }
        let (status, body) = self.problem_bytes();
        let mut res = (status, body).into_response();
        let h = res.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        let retry_after = match &self {
            ApiError::KeyInProgress { retry_after_secs } => Some(*retry_after_secs),
            ApiError::LeaseLost
            | ApiError::InjectedFault
            | ApiError::Store(_)
            | ApiError::GatewayUnavailable(_) => Some(1),
            ApiError::RateLimited => Some(2),
            _ => None,
        };
        if let Some(secs) = retry_after {
            h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}
