//! The closing's refunds: the till's refund attempts against the server's refunds of the day's
//! payments.

use super::*;

/// Reconciles the refund attempts with the refunds the server has for their payments and the
/// day's payments, by `referencia`; returns their totals, the total paid back elsewhere that
/// day, and how many server refunds were compared. A refund made that day that no refund attempt
/// of this till knows (on any day) is reported too: the payment was paid back outside this till.
pub(super) fn reconcile_refunds(
    refunds: &[&Attempt],
    evidence: &Evidence<'_>,
    discrepancies: &mut Vec<Discrepancy>,
) -> (Totals, Tally, usize) {
    let server = evidence.refunds;
    let mut totals = Totals::default();
    let mut by_ref: HashMap<&str, &RemoteRefund> = HashMap::new();
    let mut seen = HashSet::new();
    for r in server.iter().filter(|r| seen.insert(r.id.as_str())) {
        if let Some(referencia) = r.referencia.as_deref() {
            by_ref.insert(referencia, r);
        }
    }
    for &a in refunds {
        totals.add(a.state, a.valor);
        if a.is_cash() {
            continue;
        }
        let found = by_ref.get(a.id.as_ref()).copied();
        let payment = a.refund_payment.as_ref().map_or("", |p| p.as_ref());
        let base = |kind: DiscrepancyKind, detail: String| Discrepancy {
            kind,
            label: kind.label(),
            venda: a.sale_number.map(sale_number),
            sale_id: Some(a.sale_id.to_string()),
            attempt_id: Some(a.id.to_string()),
            payment_ids: found.map(|r| r.id.clone()).into_iter().collect(),
            local_centavos: Some(a.valor.into()),
            server_centavos: found.map(|r| r.valor.into()),
            detail,
        };
        match (a.state, found) {
            (AttemptState::Aprovado, None) => discrepancies.push(base(
                DiscrepancyKind::ApprovedMissingOnServer,
                format!(
                    "o caixa registrou o estorno de {} do pagamento {payment} (estorno {}), o servidor não tem este estorno",
                    a.valor,
                    a.payment_id.as_deref().unwrap_or("sem id")
                ),
            )),
            (AttemptState::Pendente | AttemptState::Revisao, Some(r))
                if r.status == RemoteStatus::Aprovado =>
            {
                discrepancies.push(base(
                    DiscrepancyKind::RefundedNotFinalLocally,
                    format!(
                        "o servidor estornou {} do pagamento {payment}; no caixa o estorno está {}",
                        r.valor,
                        a.state.label()
                    ),
                ))
            }
            (AttemptState::Aprovado | AttemptState::Recusado, Some(r))
                if !r.status.agrees_with(a.state) =>
            {
                discrepancies.push(base(
                    DiscrepancyKind::StateMismatch,
                    format!("estorno: no caixa {}, no servidor {}", a.state.as_str(), r.status),
                ))
            }
            _ => {}
        }
        if let Some(r) = found.filter(|r| r.valor != a.valor) {
            discrepancies.push(base(
                DiscrepancyKind::AmountMismatch,
                format!("estorno: no caixa {}, no servidor {}", a.valor, r.valor),
            ));
        }
    }
    let known: HashSet<&str> = refunds.iter().map(|a| a.id.as_ref()).collect();
    let mut reported = HashSet::new();
    let mut elsewhere = Tally::default();
    let (from, to) = evidence.bounds;
    for r in server.iter().filter(|r| r.status != RemoteStatus::Recusado) {
        let unknown = r
            .referencia
            .as_deref()
            .is_none_or(|x| !known.contains(x) && !evidence.other_days.contains(x));
        // A refund made elsewhere counts on the day it was made (a server that does not say
        // when: on this one).
        let that_day = r
            .criado_em
            .as_deref()
            .and_then(epoch_ms)
            .is_none_or(|at| at >= from && at < to);
        if unknown && that_day && reported.insert(r.id.as_str()) {
            if r.status == RemoteStatus::Aprovado {
                elsewhere.count += 1;
                elsewhere.centavos += r.valor;
            }
            discrepancies.push(Discrepancy::unknown_on_server(
                r.referencia.clone(),
                &r.id,
                r.valor.into(),
                format!(
                    "estorno {} de {} de um pagamento deste caixa, feito fora deste caixa",
                    r.status, r.valor
                ),
            ));
        }
    }
    (totals, elsewhere, seen.len())
}

/// Epoch milliseconds of an RFC 3339 instant.
pub(super) fn epoch_ms(rfc3339: &str) -> Option<UnixMillis> {
    let t = time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .ok()?;
    UnixMillis::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}
