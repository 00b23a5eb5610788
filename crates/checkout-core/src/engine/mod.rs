//! The checkout engine: `pay` writes ahead, the dispatcher sends and retries, the prober watches
//! connectivity, the review checker settles attempts in doubt, and every change is announced as
//! an [`Event`]. This file is the facade ([`Checkout`]) and the state the loops share; each loop
//! has a file of its own: [`dispatch`] (sending and retrying), [`probe`] (connectivity),
//! [`reviews`] (looking up and cancelling attempts in `revisao`).

mod captures;
mod dispatch;
mod late_pix;
mod probe;
mod reviews;

pub use dispatch::retry_delay;
use reviews::ReviewCheck;

use crate::client::{Answer, PaymentClient, Reach, RemoteStatus};
use crate::closing::{reconcile, Closing, Evidence};
use crate::config::Config;
use crate::domain::{
    day_bounds, AttemptId, AttemptState, Capture, CardPlan, CardToken, Centavos, PayMethod,
    PaymentId, RefundReason, SaleId, Total, UnixMillis,
};
use crate::error::{CoreError, Result};
use crate::outbox::{Attempt, Outbox, Paid, PayOutcome, QueueSummary, RefundBalance, TryResult};
use crate::sale_view::SaleView;
use serde::Serialize;
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{broadcast, watch, Notify};
use tokio::task::JoinHandle;

/// Whether the payment API can be reached, as the engine last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Connectivity {
    /// Nothing has answered yet (the first probe is under way). Counts as offline for the caps.
    Unknown,
    /// The last request reached the server.
    Online,
    /// The server could not be reached; attempts wait and `/health` is probed.
    Offline,
    /// A server answered with a certificate the till does not trust (unknown authority, expired,
    /// another host's name): attempts wait with their keys as when offline, but the cause is a
    /// configuration to fix, not the network. Shown as `certificado`.
    #[serde(rename = "certificado")]
    Untrusted,
}

impl Connectivity {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => Connectivity::Online,
            2 => Connectivity::Offline,
            3 => Connectivity::Untrusted,
            _ => Connectivity::Unknown,
        }
    }

    fn as_u8(self) -> u8 {
        match self {
            Connectivity::Unknown => 0,
            Connectivity::Online => 1,
            Connectivity::Offline => 2,
            Connectivity::Untrusted => 3,
        }
    }

    /// The server cannot be used now: nothing is sent, and `/health` is probed until it answers.
    pub fn is_down(self) -> bool {
        matches!(self, Connectivity::Offline | Connectivity::Untrusted)
    }

    fn of(reach: Reach) -> Self {
        match reach {
            Reach::Answered => Connectivity::Online,
            Reach::Unreachable => Connectivity::Offline,
            Reach::Untrusted => Connectivity::Untrusted,
        }
    }
}

/// Everything the app is told, in order.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// An attempt was created or changed.
    AttemptChanged {
        /// It, as it is now.
        attempt: Box<Attempt>,
    },
    /// The queue of pending attempts changed.
    QueueChanged {
        /// Count and total.
        queue: QueueSummary,
    },
    /// Connectivity changed.
    ConnectivityChanged {
        /// The new state.
        connectivity: Connectivity,
        /// Why the server cannot be used, in pt-BR, while it cannot.
        problema: Option<String>,
    },
}

/// What the till shows: the open sale and the others still unsettled.
#[derive(Debug, Clone, Serialize)]
pub struct OpenSale {
    /// The sale open at the till.
    pub sale: SaleId,
    /// Its number that day (`42` is "Venda nº 0042").
    pub numero: Option<u32>,
    /// Its latest attempt, if it was paid.
    pub attempt: Option<Attempt>,
    /// The latest attempt of every other sale that is `pendente` or in `revisao`, oldest first.
    pub unfinished: Vec<Attempt>,
}

/// The engine. Cheap to clone; call [`Checkout::shutdown`] to stop it and release the outbox.
#[derive(Debug, Clone)]
pub struct Checkout {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    outbox: Outbox,
    client: PaymentClient,
    config: Config,
    events: broadcast::Sender<Event>,
    in_flight: Mutex<HashSet<AttemptId>>,
    wake: Notify,
    connectivity: AtomicU8,
    /// Why the server cannot be used (pt-BR), while it cannot.
    problem: Mutex<Option<String>>,
    went_offline: Notify,
    /// The server's key retention in seconds, as its `/health` said; 0 until it says.
    advertised_retention: AtomicU64,
    /// Attempts went to `revisao` unchecked, or the server came back: check them.
    reviews_due: Notify,
    /// A capture or undo was decided: send it.
    captures_due: Notify,
    /// True once the first `/health` probe has answered or failed: the dispatcher waits for it,
    /// so it knows the server's key retention before it decides to resend an old attempt.
    probed: watch::Sender<bool>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

fn now_ms() -> UnixMillis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as UnixMillis)
        .unwrap_or(0)
}

impl Checkout {
    /// Opens the outbox at `db` (only one process may) and starts the engine. Every attempt still
    /// `pendente` is replayed at once with its stored key.
    /// The API address is checked first (see [`Config::validate`]): a refused address fails
    /// here with [`CoreError::Config`] and nothing is opened.
    pub async fn open(db: impl AsRef<Path>, config: Config) -> Result<Self> {
        let client = PaymentClient::new(&config)?;
        let outbox = Outbox::open(db.as_ref(), config.busy_timeout, config.max_outbox_bytes)?
            .with_utc_offset(config.utc_offset)
            .with_terminal(config.terminal.as_deref())
            .with_authorize_cards(config.confirm_after_receipt);
        outbox.make_all_due(now_ms()).await?;
        // An authorization nobody confirmed before the till stopped belongs to a sale that was
        // not finished: it is undone, never captured silently.
        let undone = outbox.undo_unconfirmed(now_ms()).await?;
        if !undone.is_empty() {
            tracing::warn!(
                count = undone.len(),
                "authorizations of unfinished sales found at start: being undone"
            );
        }
        let (events, _) = broadcast::channel(4096);
        let (stop, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            outbox,
            client,
            config,
            events,
            in_flight: Mutex::new(HashSet::new()),
            wake: Notify::new(),
            connectivity: AtomicU8::new(Connectivity::Unknown.as_u8()),
            problem: Mutex::new(None),
            went_offline: Notify::new(),
            advertised_retention: AtomicU64::new(0),
            reviews_due: Notify::new(),
            captures_due: Notify::new(),
            probed: watch::channel(false).0,
            stop,
            tasks: Mutex::new(Vec::new()),
        });
        // Subscribe before spawning: a shutdown that comes before a task first runs must still reach it.
        let tasks = vec![
            tokio::spawn(dispatch::dispatch(inner.clone(), inner.stop.subscribe())),
            tokio::spawn(probe::probe(inner.clone(), inner.stop.subscribe())),
            tokio::spawn(reviews::check_reviews(
                inner.clone(),
                inner.stop.subscribe(),
            )),
            tokio::spawn(late_pix::watch_late_pix(
                inner.clone(),
                inner.stop.subscribe(),
            )),
            tokio::spawn(captures::settle_authorizations(
                inner.clone(),
                inner.stop.subscribe(),
            )),
        ];
        inner.tasks.lock().expect("tasks lock").extend(tasks);
        Ok(Self { inner })
    }

    /// Pays `valor` for `sale`: returns the sale's live (or approved) attempt if it has one, or
    /// creates one with a fresh key, durable before anything is sent. The sale becomes the one
    /// open at the till. Unless the engine knows the server is online, payments above the
    /// configured offline caps are refused rather than queued.
    ///
    /// A sale with an attempt in `revisao` is first looked up on the server by `referencia`: a
    /// payment found settles the sale (returned as `Existing`), and a new attempt (a new key) is
    /// made only once the old key can no longer charge: the server found no payment and nothing
    /// in progress for it, and then cancelled its key (or answered the payment it had made).
    pub async fn pay(
        &self,
        sale: SaleId,
        valor: Centavos,
        cartao: CardToken,
    ) -> Result<PayOutcome> {
        self.pay_with(sale, valor, PayMethod::Card(cartao, None), None)
            .await
    }

    /// Pays `valor` of `sale` in cash: `recebido` is what the customer handed over (at least
    /// `valor`; the change is the rest). Local: approved as it is stored, never sent, and not
    /// held to the offline caps; the sale's other rules hold (one payment unless paid in parts —
    /// then `total` is the sale's total and this is one tender — and none while a card payment
    /// of it is in review).
    pub async fn pay_cash(
        &self,
        sale: SaleId,
        valor: Centavos,
        recebido: Centavos,
        total: Option<Centavos>,
    ) -> Result<PayOutcome> {
        self.pay_with(sale, valor, PayMethod::Cash { recebido }, total)
            .await
    }

    /// Records a movement of today's cash drawer (abertura, sangria, suprimento, or a count) and
    /// returns the drawer after it.
    pub async fn drawer_move(
        &self,
        kind: crate::drawer::DrawerKind,
        valor: Total,
        motivo: Option<String>,
    ) -> Result<crate::drawer::Drawer> {
        let now = now_ms();
        let (day, bounds) = self.store_day(now);
        let drawer = self
            .inner
            .outbox
            .drawer_move(&day, bounds, kind, valor, motivo, now)
            .await?;
        tracing::info!(
            kind = kind.as_str(),
            valor = valor.get(),
            "drawer movement recorded"
        );
        Ok(drawer)
    }

    /// Today's cash drawer.
    pub async fn drawer(&self) -> Result<crate::drawer::Drawer> {
        let (day, bounds) = self.store_day(now_ms());
        self.inner.outbox.drawer(&day, bounds).await
    }

    /// The store day `at` falls on, and the instants it covers.
    fn store_day(&self, at: UnixMillis) -> (String, (UnixMillis, UnixMillis)) {
        let day = self.inner.outbox.day_of(at);
        let bounds = day_bounds(&day, self.inner.config.utc_offset)
            .expect("a day the outbox made is a valid day");
        (day, bounds)
    }

    /// Pays one part of a sale paid in parts ("pagamento misto"): `valor` of the sale's `total`,
    /// by card with the cashier's plan, as its own attempt with its own key. The sale takes its
    /// total at its first tender; one tender at a time; refused
    /// ([`CoreError::TenderExceeds`]) when the approved tenders plus this one would pass the
    /// total. The request names the sale and its total, so the server holds every till's
    /// tenders of it to that total too.
    pub async fn pay_tender(
        &self,
        sale: SaleId,
        total: Centavos,
        valor: Centavos,
        cartao: CardToken,
        plano: CardPlan,
    ) -> Result<PayOutcome> {
        self.pay_with(
            sale,
            valor,
            PayMethod::Card(cartao, Some(plano)),
            Some(total),
        )
        .await
    }

    /// Pays `valor` for `sale` by card with the method and installments the cashier chose
    /// (débito, crédito à vista or parcelado, voucher), like [`Checkout::pay`]: the plan is in
    /// the stored request, so every retry asks for the same one, and the receipt and the
    /// closing show it.
    pub async fn pay_card(
        &self,
        sale: SaleId,
        valor: Centavos,
        cartao: CardToken,
        plano: CardPlan,
    ) -> Result<PayOutcome> {
        self.pay_with(sale, valor, PayMethod::Card(cartao, Some(plano)), None)
            .await
    }

    /// Pays `valor` for `sale` by Pix, like [`Checkout::pay`]: the attempt is written ahead, then
    /// the server makes the charge and answers its QR; the attempt stays `pendente` until the
    /// customer pays (`aprovado`), the charge expires or is cancelled (`recusado`). Refused while
    /// the server is not known to be reachable: a Pix cannot be shown without it.
    pub async fn pay_pix(&self, sale: SaleId, valor: Centavos) -> Result<PayOutcome> {
        self.pay_pix_with(sale, valor, None).await
    }

    /// One part of a divided sale (total `total`) by Pix, like [`Checkout::pay_pix`]: its QR
    /// holds its part of the sale at the server while the customer has it, and frees it if it is
    /// cancelled or expires unpaid.
    pub async fn pay_pix_tender(
        &self,
        sale: SaleId,
        total: Centavos,
        valor: Centavos,
    ) -> Result<PayOutcome> {
        self.pay_pix_with(sale, valor, Some(total)).await
    }

    async fn pay_pix_with(
        &self,
        sale: SaleId,
        valor: Centavos,
        split: Option<Centavos>,
    ) -> Result<PayOutcome> {
        // What the last request knew is not enough either way (online then, or nothing known yet
        // just after start, or offline until the next periodic probe): the QR must come now. One
        // health probe (within the probe timeout) says whether the server answers.
        self.inner.probe_once().await;
        if self.connectivity() != Connectivity::Online {
            return Err(CoreError::PixOffline);
        }
        self.pay_with(sale, valor, PayMethod::Pix, split).await
    }

    /// Cancels a Pix the customer has not paid: the server removes the charge at the provider,
    /// and the attempt ends `recusado` (`pix_cancelado`), or `aprovado` when the customer paid
    /// first. Needs the server; while it cannot be asked, the Pix keeps waiting. A cancel whose
    /// answer is lost is followed by a question: what the server says of the charge is recorded
    /// (cancelled, paid), or [`CoreError::PixNotCancelled`] when it still waits (the cancel never
    /// reached it); with no answer to either, [`CoreError::PixCancelUnknown`] — the attempt
    /// stays `pendente` and the dispatcher follows the charge to its end once the server answers.
    pub async fn cancel_pix(&self, id: &AttemptId) -> Result<Attempt> {
        let attempt = self.attempt(id).await?;
        if !attempt.is_pix() || attempt.state != AttemptState::Pendente {
            return Ok(attempt);
        }
        let Some(pix) = &attempt.pix else {
            return Err(CoreError::Invalid(
                "o Pix ainda está sendo gerado no servidor; aguarde o QR para cancelar".into(),
            ));
        };
        let answer = match self.inner.client.cancel_pix(&pix.payment_id).await {
            // No answer: the cancel may have been executed and its answer lost, or never have
            // arrived. The server says which, by the charge as it stands.
            Answer::Retry { error, .. } => {
                match self
                    .inner
                    .client
                    .pix_status(&pix.payment_id, Duration::ZERO)
                    .await
                {
                    Answer::PixWaiting(_) => {
                        tracing::warn!(attempt = %id, "Pix cancel lost on its way: the Pix still waits");
                        return Err(CoreError::PixNotCancelled);
                    }
                    Answer::Retry { reach, .. } => {
                        self.inner
                            .observe(Connectivity::of(reach), Some(error.clone()))
                            .await;
                        tracing::warn!(attempt = %id, %error, "Pix cancel unanswered");
                        return Err(CoreError::PixCancelUnknown(error));
                    }
                    settled => settled,
                }
            }
            answer => answer,
        };
        let result = match answer {
            Answer::Final(f) => TryResult::Final(f),
            Answer::PixWaiting(c) => TryResult::PixWaiting(c),
            Answer::Review { reason, .. } => return Err(CoreError::Invalid(reason)),
            Answer::Retry { error, .. } => return Err(CoreError::PixCancelUnknown(error)),
        };
        let (attempt, queue) = self.inner.outbox.record(id, result, now_ms()).await?;
        tracing::info!(attempt = %attempt.id, state = attempt.state.as_str(), "Pix cancel answered");
        self.inner.announce(attempt.clone(), queue);
        Ok(attempt)
    }

    /// Asks the server now (not at the next periodic check) whether any Pix this till closed
    /// unpaid in the last day was paid after all, and records each one that was, so the screen
    /// and the closing show it to give back. How many it recorded; [`CoreError::Unreachable`]
    /// when the server could not be asked about every one (those it could are recorded, the rest
    /// are asked about again at the next periodic check).
    pub async fn check_late_pix(&self) -> Result<usize> {
        late_pix::check_wide(&self.inner).await
    }

    /// Keeps a Pix the customer paid after the till closed it as its sale's payment, when the
    /// sale was not paid another way: the sale is paid by that Pix (its receipt carries the
    /// end-to-end id) and nothing is given back. Local: the server already has the money as a
    /// payment of this attempt, so the closing then agrees with it.
    pub async fn keep_late_pix(&self, id: &AttemptId) -> Result<Attempt> {
        let (attempt, queue) = self.inner.outbox.keep_late_pix(id, now_ms()).await?;
        tracing::info!(attempt = %attempt.id, "late Pix kept as the sale's payment");
        self.inner.announce(attempt.clone(), queue);
        Ok(attempt)
    }

    async fn pay_with(
        &self,
        sale: SaleId,
        valor: Centavos,
        cartao: PayMethod,
        split: Option<Centavos>,
    ) -> Result<PayOutcome> {
        // Cash waits for nothing: the offline caps are for payments queued for the server.
        let queued = !matches!(cartao, PayMethod::Cash { .. });
        let caps = (queued && self.connectivity() != Connectivity::Online)
            .then_some(self.inner.config.offline_caps);
        let outbox = &self.inner.outbox;
        let paid = outbox
            .pay_unless(
                sale.clone(),
                valor,
                cartao.clone(),
                split,
                caps,
                now_ms(),
                true,
            )
            .await?;
        let (outcome, queue) = match paid {
            Paid::Done(outcome, queue) => (outcome, queue),
            Paid::ReviewFirst(reviews) => {
                for review in reviews {
                    match self.inner.settle_doubt(&review).await {
                        ReviewCheck::Settled(a) => return Ok(PayOutcome::Existing(*a)),
                        ReviewCheck::NoPayment | ReviewCheck::Cancelled => {}
                        ReviewCheck::Unknown(why) => {
                            return Err(CoreError::ReviewUnresolved {
                                attempt: review.id,
                                why,
                            })
                        }
                    }
                }
                outbox
                    .pay_in(sale, valor, cartao, split, caps, now_ms())
                    .await?
            }
        };
        if let PayOutcome::Created(a) = &outcome {
            tracing::info!(attempt = %a.id, key = %a.idempotency_key, valor = a.valor.get(), "attempt stored");
            self.inner.announce(a.clone(), queue);
            self.inner.wake.notify_one();
        }
        Ok(outcome)
    }

    /// Refunds `valor` of an approved payment attempt (all that is left when `None`): returns the
    /// payment's undecided refund if it has one, or creates a refund attempt with a fresh key,
    /// durable before anything is sent. It is sent, retried, replayed after a crash and looked
    /// up like a payment; while offline it waits in the queue (counted apart from payments).
    /// Refused when the payment is not approved or `valor` is more than what is left of it.
    pub async fn refund(
        &self,
        payment: &AttemptId,
        valor: Option<Centavos>,
        motivo: Option<RefundReason>,
    ) -> Result<PayOutcome> {
        let (outcome, queue) = self
            .inner
            .outbox
            .refund(payment, valor, motivo, now_ms())
            .await?;
        if let PayOutcome::Created(a) = &outcome {
            tracing::info!(attempt = %a.id, key = %a.idempotency_key, valor = a.valor.get(), payment = ?a.refund_payment, "refund stored");
            self.inner.announce(a.clone(), queue);
            self.inner.wake.notify_one();
        }
        Ok(outcome)
    }

    /// Cancels a sale the customer gave up on ("Cancelar venda"): every approved payment of it is
    /// refunded in full — each a refund attempt with its own key, sent and retried like any
    /// (cash given back from the drawer at once) — and the refunds are returned, including any
    /// already on their way. Refused while a payment of the sale is still undecided: it could
    /// still charge, and is refunded once it is known.
    pub async fn abandon_sale(&self, sale: &SaleId) -> Result<Vec<Attempt>> {
        let attempts = self.inner.outbox.attempts_of(sale).await?;
        if attempts.iter().any(|a| !a.is_refund() && a.is_undecided()) {
            return Err(CoreError::Invalid(
                "um pagamento desta venda ainda está em andamento: espere o resultado antes de cancelar a venda".into(),
            ));
        }
        if attempts
            .iter()
            .any(|a| a.captura == Some(Capture::Capturar))
        {
            return Err(CoreError::Invalid(
                "a captura desta venda já foi pedida: espere a confirmação e então estorne".into(),
            ));
        }
        // Authorized parts are undone (nothing was taken); the rest are refunded.
        let mut refunds = self
            .inner
            .outbox
            .decide_captures(sale, Capture::Desfazer, now_ms())
            .await?;
        if !refunds.is_empty() {
            self.inner.captures_due.notify_one();
        }
        let reason = RefundReason::parse("venda cancelada").expect("a valid reason");
        for paid in attempts.iter().filter(|a| {
            !a.is_refund()
                && a.state == AttemptState::Aprovado
                && a.captura.is_none_or(|c| c == Capture::Capturada)
        }) {
            match self.refund(&paid.id, None, reason.clone()).await {
                Ok(PayOutcome::Created(r) | PayOutcome::Existing(r)) => refunds.push(r),
                Err(CoreError::NothingToRefund) => {}
                Err(e) => return Err(e),
            }
        }
        tracing::info!(sale = %sale, refunds = refunds.len(), "sale cancelled: its payments are being refunded");
        Ok(refunds)
    }

    /// Confirms a sale whose receipt was shown (paid in parts, or at once when the store confirms
    /// after the receipt): every authorized payment of it is captured, each under a key of its own written ahead before it is sent. Refused while the
    /// sale is not fully paid. Returns the tenders decided now (none when it was confirmed
    /// before: asking again changes nothing).
    pub async fn confirm_sale(&self, sale: &SaleId) -> Result<Vec<Attempt>> {
        let attempts = self.inner.outbox.attempts_of(sale).await?;
        // A sale paid at once: its one payment is its total.
        let total = match attempts.iter().find_map(|a| a.sale_total) {
            Some(total) => total,
            None => match attempts.iter().find(|a| !a.is_refund() && a.pays()) {
                Some(paid) => paid.valor,
                None => {
                    return Err(CoreError::Invalid(
                        "a venda ainda não tem pagamento aprovado".into(),
                    ))
                }
            },
        };
        let paid = crate::outbox::paid_of(&attempts);
        if paid < total.get() {
            return Err(CoreError::Invalid(format!(
                "a venda ainda não está paga: faltam {}",
                crate::domain::format_brl(total.get() - paid)
            )));
        }
        let decided = self
            .inner
            .outbox
            .decide_captures(sale, Capture::Capturar, now_ms())
            .await?;
        if !decided.is_empty() {
            tracing::info!(sale = %sale, tenders = decided.len(), "sale confirmed: its authorizations are being captured");
            self.inner.captures_due.notify_one();
        }
        Ok(decided)
    }

    /// What an approved payment attempt has had paid back, has on its way back and has left;
    /// refused for anything but an approved payment.
    pub async fn refund_balance(&self, payment: &AttemptId) -> Result<RefundBalance> {
        self.inner.outbox.refund_balance(payment).await
    }

    /// The refunds of a payment attempt, oldest first.
    pub async fn refunds_of(&self, payment: &AttemptId) -> Result<Vec<Attempt>> {
        self.inner.outbox.refunds_of(payment).await
    }

    /// Puts an attempt in `revisao` back in the queue, with its same key and bytes (after a person
    /// fixed what the server refused, for example the API key).
    pub async fn retry_review(&self, attempt_id: &AttemptId) -> Result<Attempt> {
        let (a, queue) = self.inner.outbox.retry_review(attempt_id, now_ms()).await?;
        self.inner.announce(a.clone(), queue);
        self.inner.wake.notify_one();
        Ok(a)
    }

    /// The sale open at the till (opening a fresh one if none ever was) with its attempts, and
    /// every other sale whose latest attempt is not settled. What a window shows after a start,
    /// a crash or a reload.
    pub async fn open_sale(&self) -> Result<OpenSale> {
        let (sale, numero) = match self.inner.outbox.current_sale().await? {
            Some(open) => open,
            None => {
                let sale = SaleId::generate();
                let numero = self.inner.outbox.start_sale(sale.clone(), now_ms()).await?;
                (sale, Some(numero))
            }
        };
        let attempts = self.inner.outbox.attempts_of(&sale).await?;
        let others = self
            .inner
            .outbox
            .unfinished()
            .await?
            .into_iter()
            .filter(|a| a.sale_id != sale)
            .collect();
        Ok(OpenSale {
            sale,
            numero,
            attempt: attempts.into_iter().last(),
            unfinished: others,
        })
    }

    /// Opens a new sale at the till. Refused while the open sale's payment is being decided
    /// with the server online (the customer is still at the counter: a new sale there invites a
    /// second charge) or sits in `revisao` unchecked. A sale in `revisao` that the server found
    /// no payment for is given up only through a cancellation of its key (the sale is then
    /// settled as not charged, or as the payment the key had made), so nothing left behind can
    /// charge later. A payment waiting offline does not block: it was accepted under the
    /// offline caps and is sent by itself.
    pub async fn new_sale(&self) -> Result<SaleId> {
        if let Some((current, _)) = self.inner.outbox.current_sale().await? {
            let latest = self.inner.outbox.attempts_of(&current).await?.pop();
            if let Some(a) = latest {
                let blocks = match a.state {
                    AttemptState::Pendente => self.connectivity() == Connectivity::Online,
                    AttemptState::Revisao => a.review_checked_at.is_none(),
                    AttemptState::Aprovado | AttemptState::Recusado => false,
                };
                if blocks {
                    return Err(CoreError::SaleOpen(current.as_ref().to_string()));
                }
                if a.state == AttemptState::Revisao {
                    if let ReviewCheck::Unknown(why) = self.inner.settle_doubt(&a).await {
                        return Err(CoreError::ReviewUnresolved { attempt: a.id, why });
                    }
                }
            }
        }
        let sale = SaleId::generate();
        self.inner.outbox.start_sale(sale.clone(), now_ms()).await?;
        Ok(sale)
    }

    /// Closes the till for `day` (today when `None`, in the store's time zone): reconciles every
    /// attempt of the day with the server's payments by `referencia` and keeps the result. Refused
    /// with [`CoreError::PendingAtClose`] while attempts are pending, unless `anyway` (then they
    /// are listed in the closing). Needs the server: [`CoreError::Unreachable`] otherwise.
    pub async fn close_day(&self, day: Option<&str>, anyway: bool) -> Result<Closing> {
        let now = now_ms();
        let outbox = &self.inner.outbox;
        let day = day.map_or_else(|| outbox.day_of(now), str::to_string);
        let bounds = day_bounds(&day, self.inner.config.utc_offset)
            .ok_or_else(|| CoreError::Invalid(format!("dia inválido: {day:?} (use AAAA-MM-DD)")))?;
        // A Pix paid after the till closed it is recorded before the day is read, so the closing
        // lists it to give back rather than as a mismatch with the server.
        if let Err(e) = late_pix::check_wide(&self.inner).await {
            tracing::warn!(error = %e, "closing without asking about late Pix");
        }
        let attempts = outbox.attempts_of_day(&day, bounds).await?;
        let pending = |refunds: bool| {
            attempts
                .iter()
                .filter(move |a| a.state == AttemptState::Pendente && a.is_refund() == refunds)
        };
        let (count, refunds) = (pending(false).count(), pending(true).count());
        if count + refunds > 0 && !anyway {
            return Err(CoreError::PendingAtClose {
                count,
                total: pending(false).map(|a| a.valor).sum(),
                refunds,
            });
        }
        // A payment queued offline may reach the server after the day ended: list up to now (a
        // closing a long time later stops at the server's longest range).
        let to = bounds.1.max(now + 60_000).min(bounds.0 + 92 * 86_400_000);
        let terminal = self.inner.config.terminal.as_deref();
        let mut server = self
            .inner
            .client
            .payments_between(bounds.0, to, terminal)
            .await?;
        let listed: HashSet<String> = server.iter().filter_map(|p| p.referencia.clone()).collect();
        for a in attempts.iter().filter(|a| !a.is_refund()) {
            // Sent without this till's name, or after the range: asked for one by one.
            if !listed.contains(a.id.as_ref()) {
                server.extend(
                    self.inner
                        .client
                        .payments_by_referencia(a.id.as_ref())
                        .await?,
                );
            }
        }
        // Refunds are listed with their payment: each payment refunded today by this till, and
        // each of the day's approved payments (it may have been paid back elsewhere), is asked
        // for once.
        let today: HashSet<&str> = attempts.iter().map(|a| a.id.as_ref()).collect();
        let mut refunded: Vec<PaymentId> = Vec::new();
        let day_payments = server
            .iter()
            .filter(|p| p.status == RemoteStatus::Aprovado)
            .filter(|p| p.referencia.as_deref().is_some_and(|r| today.contains(r)))
            .filter_map(|p| PaymentId::parse(&p.id).ok());
        for p in attempts
            .iter()
            .filter_map(|a| a.refund_payment.clone())
            .chain(day_payments)
        {
            if !refunded.contains(&p) {
                refunded.push(p);
            }
        }
        let mut server_refunds = Vec::new();
        for p in &refunded {
            server_refunds.extend(self.inner.client.refunds_of(p).await?);
        }
        // What the server lists that this till made on another day is that day's business.
        let mut other_days = HashSet::new();
        let strangers = server
            .iter()
            .filter_map(|p| p.referencia.as_deref())
            .chain(
                server_refunds
                    .iter()
                    .filter_map(|r| r.referencia.as_deref()),
            )
            .filter(|r| !today.contains(r));
        for r in strangers {
            if !other_days.contains(r) && outbox.get(&AttemptId::from_stored(r)).await?.is_some() {
                other_days.insert(r.to_string());
            }
        }
        let evidence = Evidence {
            payments: &server,
            refunds: &server_refunds,
            other_days: &other_days,
            bounds,
        };
        let drawer = outbox.drawer(&day, bounds).await?;
        let closing = reconcile(&day, now, terminal, &attempts, &evidence).with_drawer(drawer);
        let report = serde_json::to_string(&closing).expect("a closing serialises");
        outbox.save_closing(&day, now, report).await?;
        tracing::info!(
            day = %closing.day,
            discrepancies = closing.discrepancies.len(),
            pending = closing.pending.len(),
            "till closed"
        );
        Ok(closing)
    }

    /// Subscribes to events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.events.subscribe()
    }

    /// Connectivity as last seen.
    pub fn connectivity(&self) -> Connectivity {
        self.inner.connectivity()
    }

    /// Why the payment API cannot be used (a pt-BR sentence), while it cannot.
    pub fn connectivity_problem(&self) -> Option<String> {
        self.inner.problem.lock().expect("problem lock").clone()
    }

    /// The server's key retention, once its `/health` said it.
    pub fn advertised_retention(&self) -> Option<Duration> {
        self.inner.advertised_retention()
    }

    /// One attempt.
    pub async fn attempt(&self, id: &AttemptId) -> Result<Attempt> {
        self.inner
            .outbox
            .get(id)
            .await?
            .ok_or_else(|| CoreError::NotFound(id.to_string()))
    }

    /// Every attempt, oldest first.
    pub async fn attempts(&self) -> Result<Vec<Attempt>> {
        self.inner.outbox.list().await
    }

    /// What the window may show and offer for `sale` ([`SaleView`]), from its attempts now.
    pub async fn sale_view(&self, sale: &SaleId) -> Result<SaleView> {
        let attempts = self.inner.outbox.sale_attempts(sale).await?;
        Ok(SaleView::of(sale.clone(), &attempts))
    }

    /// The newest `limit` attempts and every unsettled one, oldest first (see [`Outbox::recent`]).
    pub async fn recent_attempts(&self, limit: usize) -> Result<Vec<Attempt>> {
        self.inner.outbox.recent(limit).await
    }

    /// The queue now.
    pub async fn queue(&self) -> Result<QueueSummary> {
        self.inner.outbox.queue().await
    }

    /// The outbox (exports, request bytes).
    pub fn outbox(&self) -> &Outbox {
        &self.inner.outbox
    }

    /// Waits until the attempt leaves `pendente`, for at most `limit`.
    pub async fn wait_final(&self, id: &AttemptId, limit: Duration) -> Result<Attempt> {
        let mut events = self.subscribe();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let a = self.attempt(id).await?;
            if a.state.is_final() {
                return Ok(a);
            }
            loop {
                match tokio::time::timeout_at(deadline, events.recv()).await {
                    Err(_) => return Err(CoreError::StillPending),
                    Ok(Ok(Event::AttemptChanged { attempt })) if attempt.id == *id => break,
                    Ok(Ok(_)) => continue,
                    Ok(Err(broadcast::error::RecvError::Lagged(_))) => break,
                    Ok(Err(broadcast::error::RecvError::Closed)) => return Err(CoreError::Closed),
                }
            }
        }
    }

    /// Stops sending, waits for the engine's tasks, and releases the outbox.
    pub async fn shutdown(self) {
        let _ = self.inner.stop.send(true);
        self.inner.wake.notify_one();
        let tasks: Vec<_> = std::mem::take(&mut *self.inner.tasks.lock().expect("tasks lock"));
        for t in tasks {
            let _ = t.await;
        }
        self.inner.outbox.close();
    }
}

impl Inner {
    fn emit(&self, e: Event) {
        // No subscriber is fine: the outbox, not the event stream, is the record.
        let _ = self.events.send(e);
    }

    /// Tells the app that `attempt` changed and what the queue is now.
    fn announce(&self, attempt: Attempt, queue: QueueSummary) {
        self.emit(Event::AttemptChanged {
            attempt: Box::new(attempt),
        });
        self.emit(Event::QueueChanged { queue });
    }

    fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    fn connectivity(&self) -> Connectivity {
        Connectivity::from_u8(self.connectivity.load(Ordering::SeqCst))
    }

    fn advertised_retention(&self) -> Option<Duration> {
        match self.advertised_retention.load(Ordering::SeqCst) {
            0 => None,
            secs => Some(Duration::from_secs(secs)),
        }
    }

    /// Records a connectivity observation and why the server could not be used; on a change,
    /// tells the app, and going down starts the prober while coming back makes the whole queue
    /// due.
    async fn observe(&self, now: Connectivity, problem: Option<String>) {
        let problem = problem.filter(|_| now.is_down());
        let changed_problem = {
            let mut kept = self.problem.lock().expect("problem lock");
            let changed = *kept != problem;
            kept.clone_from(&problem);
            changed
        };
        let before = Connectivity::from_u8(self.connectivity.swap(now.as_u8(), Ordering::SeqCst));
        if before == now && !changed_problem {
            return;
        }
        if now == Connectivity::Untrusted && before != now {
            tracing::warn!(
                problem = problem.as_deref().unwrap_or(""),
                "the payment API's certificate is not trusted: payments wait with their keys"
            );
        } else {
            tracing::info!(?before, ?now, "connectivity changed");
        }
        self.emit(Event::ConnectivityChanged {
            connectivity: now,
            problema: problem,
        });
        if before == now {
            return;
        }
        match now {
            Connectivity::Offline | Connectivity::Untrusted => self.went_offline.notify_one(),
            Connectivity::Online if before.is_down() => {
                if let Err(e) = self.outbox.make_all_due(now_ms()).await {
                    tracing::warn!(error = %e, "could not reschedule the queue");
                }
                self.wake.notify_one();
                self.reviews_due.notify_one();
                self.captures_due.notify_one();
            }
            _ => {}
        }
    }
}
