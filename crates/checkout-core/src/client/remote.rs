//! What the payment API answers, as the till reads it: the outcome of a try, the payments and
//! refunds it lists, its health.

use super::*;

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
    /// A card-machine order the server made that no card has paid yet: the screen shows it at
    /// the machine, and the order is read again.
    MachineWaiting(crate::domain::MachineCharge),
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

pagar_rules::words! {
    /// A payment's or a refund's status as the server reports it in listings and look-ups.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum RemoteStatus / UnknownRemoteStatus("status do servidor desconhecido") {
        /// A refund still being executed.
        Pendente = "pendente",
        /// Charged, or paid back.
        Aprovado = "aprovado",
        /// Declined.
        Recusado = "recusado",
        /// Authorized on the card, not captured yet.
        Autorizado = "autorizado",
        /// An authorization undone: nothing taken.
        Desfeito = "desfeito",
        /// An authorization lapsed before capture: nothing taken.
        Expirado = "expirado",
        /// A Pix paid after its charge was cancelled or expired: money in that is not a sale's
        /// payment (unless this till kept it as its sale's), to give back.
        #[serde(rename = "recebido_apos_cancelamento")]
        RecebidoAposCancelamento = "recebido_apos_cancelamento",
        /// A status this till does not know (a newer server): never taken as approved or declined.
        #[serde(other)]
        Desconhecido = "desconhecido",
    }
}

impl RemoteStatus {
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
pub(super) struct RemotePage {
    pub(super) pagamentos: Vec<RemotePayment>,
    #[serde(default)]
    pub(super) proximo: Option<String>,
}

/// A payment or a refund as the server answers it: only what the engine records.
#[derive(Deserialize)]
pub(super) struct PaymentView {
    pub(super) id: String,
    pub(super) status: ServerStatus,
    /// A payment's decline reason (a refund's `motivo` is the merchant's own reason).
    pub(super) motivo: Option<String>,
    /// A refund's decline reason.
    #[serde(default)]
    pub(super) recusa: Option<String>,
}

/// The server's final statuses of a payment (an authorization — `autorizado`, and later
/// `desfeito` or `expirado` — is an approval whose capture is decided apart). Any other is not a
/// final answer the engine can record.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum ServerStatus {
    Aprovado,
    Recusado,
    Autorizado,
    Desfeito,
    Expirado,
}

/// A Pix payment as the server answers it (`"metodo": "pix"`).
#[derive(Deserialize)]
pub(super) struct PixView {
    pub(super) id: String,
    pub(super) metodo: String,
    pub(super) status: PixStatus,
    pub(super) pix: PixDetailView,
}

#[derive(Deserialize)]
pub(super) struct PixDetailView {
    pub(super) txid: String,
    pub(super) copia_e_cola: String,
    pub(super) expira_em: String,
    #[serde(default)]
    pub(super) e2eid: Option<String>,
    #[serde(default)]
    pub(super) pago_em: Option<String>,
}

pub(super) fn parse_time(s: &str) -> Option<UnixMillis> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// What a Pix answer (`status` the HTTP code) means for its attempt; `None` when the body is
/// not a Pix.
pub(super) fn pix_answer(status: u16, body: &[u8]) -> Option<Answer> {
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
            maquininha: None,
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
pub(super) struct PaymentList {
    pub(super) pagamentos: Vec<serde_json::Value>,
    #[serde(default)]
    pub(super) em_andamento: Vec<serde_json::Value>,
    /// Pix charges with this reference (a server without Pix sends none).
    #[serde(default)]
    pub(super) pix: Vec<serde_json::Value>,
    /// Card-machine orders with this reference (a server without a machine sends none).
    #[serde(default)]
    pub(super) maquininha: Vec<serde_json::Value>,
}

/// "Ask again": the server still executes a try of `what`, which may yet charge or pay back.
pub(super) fn still_executing(what: &str) -> Answer {
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
pub(super) struct CancelBody {
    pub(super) resultado: String,
    #[serde(default)]
    pub(super) pagamento: Option<serde_json::Value>,
}

/// `GET /pagamentos/{id}`: only its refunds (as the server answered each, or as a closing
/// compares them).
#[derive(Deserialize)]
pub(super) struct PaymentRefunds<T> {
    #[serde(default = "Vec::new")]
    pub(super) estornos: Vec<T>,
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
pub(super) struct HealthView {
    pub(super) key_retention_secs: Option<u64>,
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
pub(super) struct ServerProblem {
    /// `urn:pagar:problem:<slug>`.
    #[serde(rename = "type", default)]
    pub(super) kind: Option<String>,
    pub(super) detail: Option<String>,
    pub(super) title: Option<String>,
}
