//! A card at the card machine as the server answers it (`"metodo": "maquininha"`), as the till
//! reads it: waiting for a card, or how it ended.

use super::*;
use crate::domain::{MachineCharge, MachineStatus};

/// A card-machine payment as the server answers it.
#[derive(Deserialize)]
struct MachineView {
    id: String,
    metodo: String,
    status: MachineStatus,
    maquininha: MachineDetailView,
}

#[derive(Deserialize)]
struct MachineDetailView {
    id: String,
    pedido: String,
    estado: String,
    #[serde(default)]
    motivo: Option<String>,
    #[serde(default)]
    pago_com: Option<String>,
}

/// What a card-machine answer (`status` the HTTP code) means for its attempt; `None` when the
/// body is not one.
pub(super) fn machine_answer(status: u16, body: &[u8]) -> Option<Answer> {
    let v: MachineView = serde_json::from_slice(body).ok()?;
    if v.metodo != "maquininha" {
        return None;
    }
    let order = MachineCharge {
        payment_id: v.id.clone(),
        maquininha: v.maquininha.id,
        pedido: v.maquininha.pedido,
        estado: v.maquininha.estado,
        status: v.status,
        motivo: v.maquininha.motivo.clone(),
        pago_com: v
            .maquininha
            .pago_com
            .filter(|p| ["debito", "credito", "voucher"].contains(&p.as_str())),
    };
    let settled = |state: AttemptState, motivo: Option<String>| {
        Answer::Final(FinalAnswer {
            state,
            status,
            body: body.to_vec(),
            payment_id: Some(v.id.clone()),
            motivo,
            pix: None,
            maquininha: Some(Box::new(order.clone())),
            authorized: false,
        })
    };
    Some(match v.status {
        MachineStatus::Aguardando => Answer::MachineWaiting(order.clone()),
        MachineStatus::Aprovado => settled(AttemptState::Aprovado, None),
        MachineStatus::Recusado => settled(
            AttemptState::Recusado,
            Some(
                order
                    .motivo
                    .clone()
                    .unwrap_or_else(|| "maquininha_recusado".into()),
            ),
        ),
        MachineStatus::Cancelado => {
            settled(AttemptState::Recusado, Some("maquininha_cancelado".into()))
        }
        MachineStatus::Expirado => {
            settled(AttemptState::Recusado, Some("maquininha_expirado".into()))
        }
        MachineStatus::Desconhecido => Answer::Review {
            reason: format!("HTTP {status}: pagamento na maquininha com status desconhecido"),
            status,
            body: body.to_vec(),
        },
    })
}

/// A payment that answers *waiting* (a Pix, a card at the machine), read as its kind.
pub(super) fn waiting_answer(status: u16, body: &[u8]) -> Option<Answer> {
    pix_answer(status, body).or_else(|| machine_answer(status, body))
}
