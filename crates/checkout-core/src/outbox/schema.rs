//! The outbox's schema and the SQL every write and read shares: migrations (one file per
//! version under `migrations/`), the columns of an attempt and their mapping to [`Attempt`].

use super::records::{Attempt, QueueSummary};
use crate::domain::{
    AttemptId, AttemptKind, AttemptState, Capture, CardPlan, CardToken, Centavos, IdempotencyKey,
    MachineCharge, MachineStatus, Means, PaymentId, PixCharge, PixStatus, SaleId, UnixMillis,
};
use crate::error::{CoreError, Result};
use durable_sqlite::exec;
use rusqlite::{params, Connection, OptionalExtension, Row};
use rusqlite_migration::{Migrations, M};

/// The schema, one file per version; applied versions are tracked in `PRAGMA user_version`.
pub(super) fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(include_str!("../../migrations/V1__attempts.sql")),
        M::up(include_str!("../../migrations/V2__till.sql")),
        M::up(include_str!("../../migrations/V3__sales.sql")),
        M::up(include_str!("../../migrations/V4__refunds.sql")),
        M::up(include_str!(
            "../../migrations/V5__cancel_before_new_key.sql"
        )),
        M::up(include_str!("../../migrations/V6__pix.sql")),
        M::up(include_str!("../../migrations/V7__card_plans.sql")),
        M::up(include_str!("../../migrations/V8__split_sales.sql")),
        M::up(include_str!("../../migrations/V9__cash.sql")),
        M::up(include_str!("../../migrations/V10__authorizations.sql")),
        M::up(include_str!("../../migrations/V11__card_machine.sql")),
        M::up(include_str!("../../migrations/V12__nfce.sql")),
        M::up(include_str!("../../migrations/V13__nfce_envio.sql")),
        M::up(include_str!("../../migrations/V14__nfce_cancelamento.sql")),
    ])
}

/// The payment attempts that keep their sale from getting another one: it may still charge
/// (`pendente`), it did (`aprovado`, unless it was an authorization undone or lapsed), or nobody
/// has confirmed yet that it did not (`revisao` before the server was asked by `referencia`).
pub(super) const BLOCKS_SALE: &str = "(kind = 'pagamento' AND (state = 'pendente' \
     OR (state = 'aprovado' AND (captura IS NULL OR captura NOT IN ('desfeita', 'expirada'))) \
     OR (state = 'revisao' AND review_checked_at IS NULL)))";

/// The refund attempts that keep their payment from getting another refund: undecided ones
/// (`attempts_one_live_refund` enforces it).
pub(super) const LIVE_REFUND: &str = "(kind = 'estorno' AND (state = 'pendente' \
     OR (state = 'revisao' AND review_checked_at IS NULL)))";

pub(super) const ATTEMPT_COLUMNS: &str = "id, kind, refund_of, refund_payment, sale_id, idempotency_key, valor, cartao, state, tries, next_try_at, last_tried_at, \
                               last_error, response_status, payment_id, motivo, created_at, updated_at, review_checked_at, \
                               (SELECT number FROM sales WHERE sales.sale_id = attempts.sale_id) AS sale_number, \
                               (SELECT day FROM sales WHERE sales.sale_id = attempts.sale_id) AS sale_day, metodo, plano, recebido, captura, captura_por, \
                               (SELECT total FROM sales WHERE sales.sale_id = attempts.sale_id) AS sale_total, \
                               (SELECT json_object('payment_id', payment_id, 'txid', txid, 'copia_e_cola', copia_e_cola, \
                                       'expira_em', expira_em, 'status', status, 'e2eid', e2eid, 'pago_em', pago_em) \
                                  FROM pix WHERE pix.attempt_id = attempts.id) AS pix, \
                               (SELECT json_object('payment_id', payment_id, 'maquininha', maquininha, 'pedido', pedido, \
                                       'estado', estado, 'status', status, 'motivo', motivo, 'pago_com', pago_com) \
                                  FROM machine_orders m WHERE m.attempt_id = attempts.id) AS maquininha";

/// A column that a domain type refuses, reported as SQLite's own conversion error.
fn refused(column: &str, e: impl std::fmt::Display) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Text,
        format!("{column}: {e}").into(),
    )
}

/// The `refund_payment` column of a row: the refunded payment's server id, for a refund.
pub(super) fn refund_payment(r: &Row<'_>) -> rusqlite::Result<Option<PaymentId>> {
    r.get::<_, Option<String>>("refund_payment")?
        .map(|p| PaymentId::parse(&p).map_err(|e| refused("refund_payment", e)))
        .transpose()
}

/// An attempt from its row: every column through its domain type, so a row the types refuse is
/// an error here rather than a wrong value later.
pub(super) fn attempt_from_row(r: &Row<'_>) -> rusqlite::Result<Attempt> {
    let state: String = r.get("state")?;
    let kind: String = r.get("kind")?;
    let metodo: String = r.get("metodo")?;
    let metodo = Means::parse(&metodo).map_err(|e| refused("metodo", e))?;
    Ok(Attempt {
        id: AttemptId::from_stored(r.get::<_, String>("id")?),
        kind: AttemptKind::parse(&kind).ok_or_else(|| refused("kind", &kind))?,
        refund_of: r
            .get::<_, Option<String>>("refund_of")?
            .map(AttemptId::from_stored),
        refund_payment: refund_payment(r)?,
        sale_id: SaleId::parse(&r.get::<_, String>("sale_id")?)
            .map_err(|e| refused("sale_id", e))?,
        idempotency_key: IdempotencyKey::from_stored(r.get("idempotency_key")?),
        valor: Centavos::new(r.get("valor")?).map_err(|e| refused("valor", e))?,
        cartao: match metodo {
            Means::Pix | Means::Dinheiro | Means::Maquininha => None,
            Means::Cartao => Some(
                CardToken::parse(&r.get::<_, String>("cartao")?)
                    .map_err(|e| refused("cartao", e))?,
            ),
        },
        metodo,
        recebido: r
            .get::<_, Option<i64>>("recebido")?
            .map(|v| Centavos::new(v).map_err(|e| refused("recebido", e)))
            .transpose()?,
        sale_total: r
            .get::<_, Option<i64>>("sale_total")?
            .map(|t| Centavos::new(t).map_err(|e| refused("sale_total", e)))
            .transpose()?,
        plano: r
            .get::<_, Option<String>>("plano")?
            .map(|p| CardPlan::parse_stored(&p).ok_or_else(|| refused("plano", &p)))
            .transpose()?,
        pix: r
            .get::<_, Option<String>>("pix")?
            .map(|j| pix_from_json(&j).ok_or_else(|| refused("pix", &j)))
            .transpose()?,
        maquininha: r
            .get::<_, Option<String>>("maquininha")?
            .map(|j| machine_from_json(&j).ok_or_else(|| refused("maquininha", &j)))
            .transpose()?,
        state: AttemptState::parse(&state).ok_or_else(|| refused("state", &state))?,
        tries: r.get("tries")?,
        next_try_at: r.get("next_try_at")?,
        last_tried_at: r.get("last_tried_at")?,
        last_error: r.get("last_error")?,
        response_status: r.get("response_status")?,
        payment_id: r.get("payment_id")?,
        motivo: r.get("motivo")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
        review_checked_at: r.get("review_checked_at")?,
        sale_number: r.get("sale_number")?,
        sale_day: r.get("sale_day")?,
        captura: r
            .get::<_, Option<String>>("captura")?
            .map(|c| Capture::parse(&c).map_err(|_| refused("captura", &c)))
            .transpose()?,
        captura_por: match r.get::<_, Option<String>>("captura_por")?.as_deref() {
            None => None,
            Some("confirmacao") => Some("confirmacao"),
            Some("cancelamento") => Some("cancelamento"),
            Some("reinicio") => Some("reinicio"),
            Some(other) => return Err(refused("captura_por", other)),
        },
    })
}

/// A Pix row, as the attempt query's `json_object` gives it.
fn pix_from_json(j: &str) -> Option<PixCharge> {
    let v: serde_json::Value = serde_json::from_str(j).ok()?;
    let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(String::from);
    Some(PixCharge {
        payment_id: text("payment_id")?,
        txid: text("txid")?,
        copia_e_cola: text("copia_e_cola")?,
        expira_em: v.get("expira_em")?.as_i64()?,
        status: PixStatus::parse(&text("status")?).ok()?,
        e2eid: text("e2eid"),
        pago_em: v.get("pago_em").and_then(|x| x.as_i64()),
    })
}

/// A card-machine row, as the attempt query's `json_object` gives it.
fn machine_from_json(j: &str) -> Option<MachineCharge> {
    let v: serde_json::Value = serde_json::from_str(j).ok()?;
    let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(String::from);
    Some(MachineCharge {
        payment_id: text("payment_id")?,
        maquininha: text("maquininha")?,
        pedido: text("pedido")?,
        estado: text("estado")?,
        status: MachineStatus::parse(&text("status")?).ok()?,
        motivo: text("motivo"),
        pago_com: text("pago_com"),
    })
}

/// Writes what the server said of an attempt's card-machine order.
pub(super) fn upsert_machine(
    c: &Connection,
    attempt: &AttemptId,
    m: &MachineCharge,
    now: UnixMillis,
) -> rusqlite::Result<()> {
    exec(
        c,
        "INSERT INTO machine_orders (attempt_id, payment_id, maquininha, pedido, estado, status, motivo, pago_com, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (attempt_id) DO UPDATE SET estado = excluded.estado, status = excluded.status,
             motivo = COALESCE(excluded.motivo, machine_orders.motivo),
             pago_com = COALESCE(excluded.pago_com, machine_orders.pago_com),
             updated_at = excluded.updated_at",
        params![
            attempt.as_ref(),
            m.payment_id,
            m.maquininha,
            m.pedido,
            m.estado,
            m.status.as_str(),
            m.motivo,
            m.pago_com,
            now
        ],
    )?;
    Ok(())
}

/// Writes what the server said of an attempt's Pix charge.
pub(super) fn upsert_pix(
    c: &Connection,
    attempt: &AttemptId,
    p: &PixCharge,
    now: UnixMillis,
) -> rusqlite::Result<()> {
    exec(
        c,
        "INSERT INTO pix (attempt_id, payment_id, txid, copia_e_cola, expira_em, status, e2eid, pago_em, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (attempt_id) DO UPDATE SET status = excluded.status,
             e2eid = COALESCE(excluded.e2eid, pix.e2eid), pago_em = COALESCE(excluded.pago_em, pix.pago_em),
             updated_at = excluded.updated_at",
        params![
            attempt.as_ref(),
            p.payment_id,
            p.txid,
            p.copia_e_cola,
            p.expira_em,
            p.status.as_str(),
            p.e2eid,
            p.pago_em,
            now
        ],
    )?;
    Ok(())
}

pub(super) fn get_attempt(c: &Connection, id: &AttemptId) -> rusqlite::Result<Option<Attempt>> {
    c.prepare_cached(&format!(
        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE id = ?1"
    ))?
    .query_row([id.as_ref()], attempt_from_row)
    .optional()
}

pub(super) fn queue(c: &Connection) -> rusqlite::Result<QueueSummary> {
    c.prepare_cached("SELECT count, total, refund_count, refund_total FROM queue WHERE id = 1")?
        .query_row([], |r| {
            Ok(QueueSummary {
                count: r.get::<_, i64>(0)?.max(0) as u64,
                total: r.get(1)?,
                refund_count: r.get::<_, i64>(2)?.max(0) as u64,
                refund_total: r.get(3)?,
            })
        })
}

/// Opens `sale` at the till and gives it the day's next number if it has none; returns its
/// number. `day` is the store day of `now`.
pub(super) fn set_till(
    c: &Connection,
    sale: &SaleId,
    now: UnixMillis,
    day: &str,
) -> rusqlite::Result<u32> {
    exec(
        c,
        "INSERT INTO till (id, sale_id, opened_at) VALUES (1, ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET sale_id = excluded.sale_id,
             opened_at = CASE WHEN till.sale_id = excluded.sale_id THEN till.opened_at ELSE excluded.opened_at END",
        params![sale.as_ref(), now],
    )?;
    exec(
        c,
        "INSERT INTO sales (sale_id, day, number, opened_at)
         SELECT ?1, ?2, COALESCE(MAX(number), 0) + 1, ?3 FROM sales WHERE day = ?2
         ON CONFLICT (sale_id) DO NOTHING",
        params![sale.as_ref(), day, now],
    )?;
    c.prepare_cached("SELECT number FROM sales WHERE sale_id = ?1")?
        .query_row([sale.as_ref()], |r| r.get(0))
}

/// The attempts `tail` (a `WHERE … ORDER BY …`) selects.
pub(super) fn select_attempts(
    c: &Connection,
    tail: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<Attempt>> {
    c.prepare_cached(&format!("SELECT {ATTEMPT_COLUMNS} FROM attempts {tail}"))?
        .query_map(params, attempt_from_row)?
        .collect()
}

/// An attempt as a write left it, with the queue: what every change announces.
pub(super) fn after_change(c: &Connection, id: &AttemptId) -> Result<(Attempt, QueueSummary)> {
    let attempt = get_attempt(c, id)?.ok_or_else(|| CoreError::NotFound(id.to_string()))?;
    Ok((attempt, queue(c)?))
}

/// A stored sum (a queue's total, a refund balance): a negative one is a corrupt row.
impl rusqlite::types::FromSql for crate::domain::Total {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let n = i64::column_result(v)?;
        crate::domain::Total::new(n).map_err(|_| rusqlite::types::FromSqlError::OutOfRange(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The states the `CHECK` constraint of `attempts.state` allows, read from the schema SQLite
    /// actually holds after every migration.
    fn checked_states() -> Vec<String> {
        let mut c = Connection::open_in_memory().unwrap();
        migrations().to_latest(&mut c).unwrap();
        let sql: String = c
            .query_row(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'attempts'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let list = sql
            .split_once("state IN (")
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(list, _)| list)
            .expect("attempts.state has a CHECK (state IN (…))");
        list.split(',')
            .map(|s| s.trim().trim_matches('\'').to_string())
            .collect()
    }

    #[test]
    fn the_schema_allows_exactly_the_attempt_states_of_the_domain() {
        let mut schema = checked_states();
        let mut domain: Vec<String> = AttemptState::ALL
            .iter()
            .map(|s| s.as_str().to_string())
            .collect();
        schema.sort();
        domain.sort();
        assert_eq!(
            schema, domain,
            "a new AttemptState needs a migration that widens the CHECK (and a look at the \
             triggers and partial indexes that name states)"
        );
    }

    #[test]
    fn the_schema_allows_exactly_the_attempt_kinds_and_a_refund_names_its_payment() {
        let mut c = Connection::open_in_memory().unwrap();
        migrations().to_latest(&mut c).unwrap();
        let insert = |id: &str, kind: &str, of: Option<&str>| {
            c.execute(
                "INSERT INTO attempts (id, kind, refund_of, refund_payment, sale_id, idempotency_key,
                                       valor, cartao, request_body, state, next_try_at, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?3, 's', ?1, 100, 'tok_aprovado', x'7b7d', 'aprovado', 0, 0, 0)",
                params![id, kind, of],
            )
        };
        for k in AttemptKind::ALL {
            let of = (k == AttemptKind::Estorno).then_some("pay_1");
            insert(&format!("att_{}", k.as_str()), k.as_str(), of).unwrap();
        }
        assert!(
            insert("x1", "cancelamento", None).is_err(),
            "an unknown kind"
        );
        assert!(
            insert("x2", "estorno", None).is_err(),
            "a refund of nothing"
        );
        assert!(
            insert("x3", "pagamento", Some("pay_1")).is_err(),
            "a payment that refunds"
        );
    }

    /// The attempt the `pix` table names, and the queue's count and total.
    fn pix_and_queue(c: &Connection) -> (String, (i64, i64)) {
        let pix = c
            .query_row("SELECT attempt_id FROM pix", [], |r| r.get(0))
            .unwrap();
        let queue = c
            .query_row("SELECT count, total FROM queue", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        (pix, queue)
    }

    #[test]
    fn rebuilding_attempts_for_the_card_machine_keeps_every_row_its_pix_and_its_rules() {
        let mut c = Connection::open_in_memory().unwrap();
        c.pragma_update(None, "foreign_keys", "ON").unwrap();
        migrations().to_version(&mut c, 10).unwrap();
        c.execute_batch(
            "INSERT INTO attempts (id, sale_id, idempotency_key, valor, cartao, request_body, state,
                                   next_try_at, created_at, updated_at, metodo)
             VALUES ('att_pix', 'venda-1', 'k1', 100, '', x'7b7d', 'pendente', 0, 0, 0, 'pix');
             INSERT INTO attempts (id, sale_id, idempotency_key, valor, cartao, request_body, state,
                                   next_try_at, created_at, updated_at, metodo, captura, captura_key)
             VALUES ('att_card', 'venda-2', 'k2', 200, 'tok_aprovado', x'7b7d', 'aprovado', 0, 0, 0,
                     'cartao', 'capturar', 'ck-1');
             INSERT INTO pix (attempt_id, payment_id, txid, copia_e_cola, expira_em, status, updated_at)
             VALUES ('att_pix', 'pay_1', 'tx1', '000201', 0, 'aguardando', 0);",
        )
        .unwrap();
        migrations().to_latest(&mut c).unwrap();
        let (rows, key): (i64, String) = c
            .query_row("SELECT count(*), max(captura_key) FROM attempts", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        let (pix, queue) = pix_and_queue(&c);
        assert_eq!(
            (rows, key.as_str(), pix.as_str(), queue),
            (2, "ck-1", "att_pix", (1, 100))
        );
        // The rules came with the rows: a decided capture stays decided, an unknown means is
        // refused on its way in and on an update, and the queue still follows the states.
        assert!(c
            .execute(
                "UPDATE attempts SET captura = 'desfazer' WHERE id = 'att_card'",
                []
            )
            .is_err());
        assert!(c
            .execute(
                "UPDATE attempts SET metodo = 'boleto' WHERE id = 'att_card'",
                []
            )
            .is_err());
        c.execute(
            "UPDATE attempts SET state = 'aprovado' WHERE id = 'att_pix'",
            [],
        )
        .unwrap();
        let after: i64 = c
            .query_row("SELECT count FROM queue", [], |r| r.get(0))
            .unwrap();
        assert_eq!(after, 0);
        // And an order of the machine is kept beside its attempt.
        c.execute_batch(
            "INSERT INTO attempts (id, sale_id, idempotency_key, valor, cartao, request_body, state,
                                   next_try_at, created_at, updated_at, metodo)
             VALUES ('att_maq', 'venda-3', 'k3', 300, '', x'7b7d', 'pendente', 0, 0, 0, 'maquininha');
             INSERT INTO machine_orders (attempt_id, payment_id, maquininha, pedido, estado, status, updated_at)
             VALUES ('att_maq', 'pay_3', 'POS-1', 'ORD1', 'created', 'aguardando', 0);",
        )
        .unwrap();
        assert!(c
            .execute(
                "INSERT INTO machine_orders (attempt_id, payment_id, maquininha, pedido, estado, status, updated_at)
                 VALUES ('att_nobody', 'pay_4', 'POS-1', 'ORD2', 'created', 'aguardando', 0)",
                []
            )
            .is_err(), "an order of no attempt");
    }

    #[test]
    fn rebuilding_attempts_for_cash_keeps_every_row_and_its_pix() {
        let mut c = Connection::open_in_memory().unwrap();
        c.pragma_update(None, "foreign_keys", "ON").unwrap();
        migrations().to_version(&mut c, 8).unwrap();
        c.execute_batch(
            "INSERT INTO attempts (id, sale_id, idempotency_key, valor, cartao, request_body, state,
                                   next_try_at, created_at, updated_at, metodo)
             VALUES ('att_pix', 'venda-1', 'k1', 100, '', x'7b7d', 'pendente', 0, 0, 0, 'pix'),
                    ('att_card', 'venda-2', 'k2', 200, 'tok_aprovado', x'7b7d', 'aprovado', 0, 0, 0, 'cartao');
             INSERT INTO pix (attempt_id, payment_id, txid, copia_e_cola, expira_em, status, updated_at)
             VALUES ('att_pix', 'pay_1', 'tx1', '000201', 0, 'aguardando', 0);",
        )
        .unwrap();
        migrations().to_latest(&mut c).unwrap();
        let rows: i64 = c
            .query_row("SELECT count(*) FROM attempts", [], |r| r.get(0))
            .unwrap();
        let (pix, queue) = pix_and_queue(&c);
        assert_eq!((rows, pix.as_str(), queue), (2, "att_pix", (1, 100)));
        // The queue's triggers came back with the table.
        c.execute(
            "UPDATE attempts SET state = 'aprovado' WHERE id = 'att_pix'",
            [],
        )
        .unwrap();
        let queue: i64 = c
            .query_row("SELECT count FROM queue", [], |r| r.get(0))
            .unwrap();
        assert_eq!(queue, 0);
        // Cash with less than the amount handed over, or cash not approved, is refused.
        for (recebido, state) in [(50, "aprovado"), (150, "pendente")] {
            let refused = c.execute(
                "INSERT INTO attempts (id, sale_id, idempotency_key, valor, cartao, request_body, state,
                                       next_try_at, created_at, updated_at, metodo, recebido)
                 VALUES ('att_cash', 'venda-3', 'k3', 100, '', x'', ?2, 0, 0, 0, 'dinheiro', ?1)",
                params![recebido, state],
            );
            assert!(refused.is_err(), "{recebido} {state}");
        }
        // The foreign key from pix still holds.
        assert!(c
            .execute(
                "INSERT INTO pix (attempt_id, payment_id, txid, copia_e_cola, expira_em, status, updated_at)
                 VALUES ('att_nenhum', 'pay_2', 'tx2', '000201', 0, 'aguardando', 0)",
                [],
            )
            .is_err());
    }

    #[test]
    fn the_schema_leaves_room_for_payments_under_the_smallest_outbox_cap() {
        // A till at the smallest cap must still take payments: the schema's own pages stay
        // under the size past which new attempts are refused, with a third of it to spare.
        let dir = tempfile::tempdir().unwrap();
        let mut c = Connection::open(dir.path().join("o.db")).unwrap();
        migrations().to_latest(&mut c).unwrap();
        let pages: u64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
        let page: u64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
        let soft = crate::config::MIN_OUTBOX_BYTES;
        assert!(
            pages * page * 3 / 2 <= soft,
            "schema {} KiB: raise MIN_OUTBOX_BYTES",
            pages * page / 1024
        );
    }

    #[test]
    fn migrations_are_valid_and_each_state_can_be_stored() {
        let mut c = Connection::open_in_memory().unwrap();
        migrations().validate().unwrap();
        migrations().to_latest(&mut c).unwrap();
        for (i, s) in AttemptState::ALL.iter().enumerate() {
            c.execute(
                "INSERT INTO attempts (id, sale_id, idempotency_key, valor, cartao, request_body,
                                       state, next_try_at, created_at, updated_at)
                 VALUES (?1, ?1, ?1, 100, 'tok_aprovado', x'7b7d', ?2, 0, 0, 0)",
                params![format!("att_{i}"), s.as_str()],
            )
            .unwrap();
        }
        let refused = c.execute(
            "INSERT INTO attempts (id, sale_id, idempotency_key, valor, cartao, request_body,
                                   state, next_try_at, created_at, updated_at)
             VALUES ('x', 'x', 'x', 100, 'tok_aprovado', x'7b7d', 'estornado', 0, 0, 0)",
            [],
        );
        assert!(
            refused.is_err(),
            "an unknown state is refused by the schema"
        );
    }

    #[test]
    fn every_means_can_be_stored_and_no_other() {
        let mut c = Connection::open_in_memory().unwrap();
        migrations().to_latest(&mut c).unwrap();
        let store = |c: &Connection, i: usize, metodo: &str| {
            // Cash is approved when made, with what was handed over; the others wait.
            let (state, recebido) = if metodo == "dinheiro" {
                ("aprovado", Some(100))
            } else {
                ("pendente", None)
            };
            c.execute(
                "INSERT INTO attempts (id, sale_id, idempotency_key, valor, cartao, request_body,
                                       state, next_try_at, created_at, updated_at, metodo, recebido)
                 VALUES (?1, ?1, ?1, 100, '', x'7b7d', ?2, 0, 0, 0, ?3, ?4)",
                params![format!("att_m{i}"), state, metodo, recebido],
            )
        };
        for (i, m) in Means::ALL.into_iter().enumerate() {
            store(&c, i, m.as_str()).unwrap_or_else(|e| {
                panic!("{m} is a means the outbox's CHECK refuses: a migration must add it ({e})")
            });
        }
        assert!(
            store(&c, 99, "boleto").is_err(),
            "the CHECK lets an unknown means in"
        );
    }
}
