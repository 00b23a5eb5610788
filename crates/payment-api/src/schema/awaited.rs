//! What the body of every payment paid later says alike.

use crate::clock::rfc3339;
use crate::store::AwaitedHead;
use serde::Serialize;

/// What the body of every payment paid later (a Pix, a card-machine order) says beside its
/// status and its means' own part, in this order on the wire.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct AwaitedHeadBody {
    /// Amount in centavos.
    pub valor: i64,
    /// Always `BRL`.
    pub moeda: &'static str,
    /// Free text from the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub descricao: Option<String>,
    /// Client reference from the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub referencia: Option<String>,
    /// The idempotency key that created it.
    pub idempotency_key: String,
    /// Creation time, RFC 3339.
    pub criado_em: String,
    /// The till that sent it, when it said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<String>,
}

impl From<&AwaitedHead> for AwaitedHeadBody {
    fn from(h: &AwaitedHead) -> Self {
        Self {
            valor: h.valor.get(),
            moeda: "BRL",
            descricao: h.descricao.clone(),
            referencia: h.referencia.clone(),
            idempotency_key: h.idempotency_key.as_ref().to_string(),
            criado_em: rfc3339(h.created_at),
            terminal: h.terminal.as_ref().map(ToString::to_string),
        }
    }
}
