//! The checkout engine: `pay` writes ahead, the dispatcher sends and retries, the prober watches
//! connectivity, the review checker settles attempts in doubt, and every change is announced as
//! an [`Event`]. This file is the facade ([`Checkout`]) and the state the loops share; each loop
//! has a file of its own: [`dispatch`] (sending and retrying), [`probe`] (connectivity),
//! [`reviews`] (looking up and cancelling attempts in `revisao`).

mod captures;
mod close;
mod dispatch;
mod fiscal;
mod late_pix;
mod machine_sales;
mod pix_sales;
mod probe;
mod refunds;
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

mod events;

pub use events::*;

/// The tries the dispatcher started and not yet ended, and those that ended while it was reading
/// the outbox: that read may have seen their attempts before their outcome was recorded, still
/// due, and must not send them again (the server would only replay the answer, a request and a
/// record wasted; a sale's try is sent once per due time).
#[derive(Debug, Default)]
struct InFlight {
    ids: HashSet<AttemptId>,
    ended_during_read: Option<HashSet<AttemptId>>,
}

impl InFlight {
    /// The dispatcher is about to read the due attempts: a try that ends from now on may be in
    /// that read, still due. One that ended before recorded its outcome first, which the read sees.
    fn read_starts(&mut self) {
        self.ended_during_read = Some(HashSet::new());
    }

    /// The read is over: the tries that ended during it, whose attempts it must not send.
    fn read_ends(&mut self) -> HashSet<AttemptId> {
        self.ended_during_read.take().unwrap_or_default()
    }

    /// A try ended, its outcome recorded.
    fn try_ended(&mut self, id: AttemptId) {
        self.ids.remove(&id);
        if let Some(ended) = self.ended_during_read.as_mut() {
            ended.insert(id);
        }
    }
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
    in_flight: Mutex<InFlight>,
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
    /// A payment was approved: its sale may be paid in full and need its note.
    notas_due: Notify,
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
        if config.fiscal.is_some() {
            // Where notes begin, fixed before anything can be paid: every sale paid from now on
            // gets its note.
            outbox.iniciar_fiscal().await?;
        }
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
            in_flight: Mutex::new(InFlight::default()),
            wake: Notify::new(),
            connectivity: AtomicU8::new(Connectivity::Unknown.as_u8()),
            problem: Mutex::new(None),
            went_offline: Notify::new(),
            advertised_retention: AtomicU64::new(0),
            reviews_due: Notify::new(),
            captures_due: Notify::new(),
            notas_due: Notify::new(),
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
            tokio::spawn(fiscal::notas(inner.clone(), inner.stop.subscribe())),
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
    pub(super) fn store_day(&self, at: UnixMillis) -> (String, (UnixMillis, UnixMillis)) {
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

    pub(super) async fn pay_with(
        &self,
        sale: SaleId,
        valor: Centavos,
        cartao: PayMethod,
        sale_total: Option<Centavos>,
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
                sale_total,
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
                    .pay_unless(sale, valor, cartao, sale_total, caps, now_ms(), false)
                    .await?
                    .done()
            }
        };
        if let PayOutcome::Created(a) = &outcome {
            tracing::info!(attempt = %a.id, key = %a.idempotency_key, valor = a.valor.get(), "attempt stored");
            self.inner.announce(a.clone(), queue);
            self.inner.wake.notify_one();
        }
        Ok(outcome)
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

    /// The sale's notes (NFC-e), oldest first: the live one last; a note issued normally and set
    /// aside for one in contingência before it.
    pub async fn notas_da_venda(&self, sale: &SaleId) -> Result<Vec<crate::outbox::NotaRegistro>> {
        self.inner.outbox.notas_da_venda(sale).await
    }

    /// The sale's live note (pending or authorized), with its signed XML.
    pub async fn nota_da_venda(
        &self,
        sale: &SaleId,
    ) -> Result<Option<crate::outbox::NotaRegistro>> {
        self.inner.outbox.nota_da_venda(sale).await
    }

    /// How long a note in contingência may wait to reach SEFAZ (the state's rule), when this
    /// till issues notes.
    pub fn prazo_contingencia(&self) -> Option<Duration> {
        self.inner
            .config
            .fiscal
            .as_ref()
            .map(|f| f.prazo_contingencia)
    }

    /// The DANFE NFC-e of the sale's live note (one HTML page, 80 mm wide), made from the note's
    /// own signed XML and SEFAZ's protocol once it is authorized. `None`: no note yet.
    pub async fn danfe(&self, sale: &SaleId) -> Result<Option<String>> {
        let Some(nota) = self.inner.outbox.nota_da_venda(sale).await? else {
            return Ok(None);
        };
        let unreadable =
            |e: nfce::NfceError| CoreError::Invalid(format!("NFC-e {}: {e}", nota.chave));
        let (lida, assinada) = nfce::ler(&nota.xml).map_err(unreadable)?;
        let protocolo =
            (nota.estado == crate::outbox::EstadoNota::Autorizada).then(|| nfce::soap::Protocolo {
                chave: nota.chave.clone(),
                c_stat: nota.c_stat.unwrap_or(100),
                x_motivo: String::new(),
                n_prot: nota.protocolo.clone(),
                dh_recbto: nota.autorizada_em.clone().unwrap_or_default(),
                dig_val: None,
            });
        nfce::danfe::html(&lida, &assinada, protocolo.as_ref())
            .map(Some)
            .map_err(unreadable)
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
        if attempt.state == AttemptState::Aprovado {
            self.notas_due.notify_one();
        }
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
