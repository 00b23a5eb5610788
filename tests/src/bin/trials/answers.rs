//! (j) and (k): the answers a till received are still the server's, and what it stored is still
//! there.

use super::*;

/// An answer a till received: a card payment's or a refund's 201 or 402, with the request it
/// answered.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) till: usize,
    pub(crate) attempt: String,
    pub(crate) key: String,
    pub(crate) path: String,
    pub(crate) request: Vec<u8>,
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

/// The answers an outbox holds (see [`Answer`]); none before its schema was made.
pub(crate) fn answers_of(c: &rusqlite::Connection, till: usize) -> Vec<Answer> {
    c.prepare(
        "SELECT id, idempotency_key, kind, refund_payment, request_body, response_status, response_body
           FROM attempts
          WHERE state IN ('aprovado', 'recusado') AND metodo = 'cartao'
            AND response_status IN (201, 402) AND response_body IS NOT NULL",
    )
    .and_then(|mut st| {
        st.query_map([], |r| {
            let kind: String = r.get(2)?;
            let refund_of: Option<String> = r.get(3)?;
            Ok(Answer {
                till,
                attempt: r.get(0)?,
                key: r.get(1)?,
                path: match (kind.as_str(), refund_of) {
                    ("estorno", Some(payment)) => format!("/pagamentos/{payment}/estornos"),
                    _ => "/pagamentos".into(),
                },
                request: r.get(4)?,
                status: r.get(5)?,
                body: r.get(6)?,
            })
        })?
        .collect()
    })
    .unwrap_or_default()
}

/// The ids of an outbox's attempts `WHERE <filter>`; none before its schema was made.
pub(crate) fn attempt_ids(c: &rusqlite::Connection, filter: &str) -> BTreeSet<String> {
    c.prepare(&format!("SELECT id FROM attempts WHERE {filter}"))
        .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
        .unwrap_or_default()
}

/// (k): every attempt the till printed as stored (`stored`, `split-rest`, `another-card`,
/// `pix-cancelled … card`) across its runs is in its outbox.
pub(crate) fn check_stored(out: &mut Outcome, t: usize, log: &Path, kept: &BTreeSet<String>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let reported = text.lines().filter_map(|line| {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["stored" | "split-rest" | "another-card" | "refund", id] => Some(*id),
            ["pix-cancelled", _, "card", id] => Some(*id),
            _ => None,
        }
    });
    for id in reported {
        if !kept.contains(id) {
            out.violations[10] += 1;
            out.notes.push(format!(
                "(k) till {t}: attempt {id} was reported stored and is gone"
            ));
        }
    }
}

/// (j): each answer a till received is replayed with its key and its bytes, straight to a
/// server; the replay must answer what the till was answered.
pub(crate) async fn check_answers(
    out: &mut Outcome,
    http: &reqwest::Client,
    servers: &[ApiProcess],
    api_key: &str,
    answers: &[Answer],
) {
    let mut seen: BTreeSet<(&str, &[u8])> = BTreeSet::new();
    for (n, a) in answers.iter().enumerate() {
        if !seen.insert((a.key.as_str(), a.body.as_slice())) {
            continue; // the same answer, held before a cut and after it
        }
        let url = servers[n % servers.len()].url();
        match replay(http, &url, api_key, a).await {
            Ok((status, body)) => match same_answer(a, status, &body) {
                Ok(identical) => {
                    out.answers[0] += 1;
                    out.answers[1] += u32::from(identical);
                    out.answers[2] += u32::from(a.path.ends_with("/estornos"));
                }
                Err(e) => {
                    out.violations[9] += 1;
                    out.notes.push(format!(
                        "(j) till {} attempt {} key {}: {e}",
                        a.till, a.attempt, a.key
                    ));
                }
            },
            Err(e) => {
                out.violations[9] += 1;
                out.notes.push(format!(
                    "(j) till {} attempt {}: no replay: {e}",
                    a.till, a.attempt
                ));
            }
        }
    }
}

/// One replay of a till's answered request; tried again (a few seconds at most) while the
/// server is busy or starting.
pub(crate) async fn replay(
    http: &reqwest::Client,
    url: &str,
    api_key: &str,
    a: &Answer,
) -> Result<(u16, Vec<u8>), String> {
    let mut last = String::new();
    for _ in 0..25 {
        let sent = http
            .post(format!("{url}{}", a.path))
            .bearer_auth(api_key)
            .header("Idempotency-Key", &a.key)
            .header("Content-Type", "application/json")
            .body(a.request.clone())
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == 409 || r.status().is_server_error() => {
                last = format!("HTTP {}", r.status().as_u16());
            }
            Ok(r) => {
                let status = r.status().as_u16();
                let body = r.bytes().await.map_err(|e| e.to_string())?;
                return Ok((status, body.to_vec()));
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last)
}

/// Whether a replay answered what the till was answered: the same status and the same bytes
/// (`Ok(true)`); or, for an answer the till learnt by a look-up (re-serialised by the till), the
/// same status, payment and amount (`Ok(false)`).
pub(crate) fn same_answer(a: &Answer, status: u16, body: &[u8]) -> Result<bool, String> {
    if status != a.status {
        return Err(format!(
            "replayed HTTP {status}, the till was answered {}: {}",
            a.status,
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ));
    }
    if body == a.body.as_slice() {
        return Ok(true);
    }
    let parse = |b: &[u8]| serde_json::from_slice::<Value>(b).ok();
    match (parse(&a.body), parse(body)) {
        (Some(held), Some(now))
            if held.get("id").is_some()
                && ["id", "valor"].iter().all(|k| held.get(k) == now.get(k)) =>
        {
            Ok(false)
        }
        _ => Err(format!(
            "replayed other bytes: {} — the till holds {}",
            String::from_utf8_lossy(&body[..body.len().min(200)]),
            String::from_utf8_lossy(&a.body[..a.body.len().min(200)])
        )),
    }
}

/// True when every attempt of the outbox is settled (what the till waits for): a payment in
/// review counts only once its key was cancelled or its payment found; and no NFC-e waits to be
/// sent or settled.
pub(crate) fn drained(outbox: &Path) -> bool {
    let Ok(c) = rusqlite::Connection::open(outbox) else {
        return false;
    };
    c.query_row(
        "SELECT (SELECT count(*) FROM attempts WHERE state = 'pendente'
             OR (state = 'revisao' AND (review_checked_at IS NULL OR kind = 'pagamento'))
             OR captura IN ('pendente', 'capturar', 'desfazer'))
           + (SELECT count(*) FROM notas WHERE estado IN ('pendente', 'substituida'))",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n == 0)
    .unwrap_or(false)
}
