//! The till's notes (NFC-e), when the configuration names an [`Emissor`]. One loop, driven by
//! what the outbox holds, so a crash anywhere leaves nothing to remember:
//! - a sale paid in full with no note gets one: numbered, signed and stored before it is sent,
//!   then sent while the customer waits ([`Emissor::espera`]). An answer not heard (and not
//!   settled by the key) puts the till in contingência: the sale's note is issued again under
//!   the next number with `tpEmis` 9, in the transaction that sets the first aside, and printed;
//! - pending notes are sent with the same bytes, each on its own backoff (doubling to 15
//!   minutes), nothing at all while SEFAZ blocks the emitter (656) — and in contingência only
//!   once SEFAZ's status service says it works again; a wait longer than any the loop sets
//!   (a wall clock that ran ahead, then set right) is cut back to now;
//! - a note set aside is asked about by its key: SEFAZ never had it → its number is declared
//!   unused (inutilização, which also fences a late authorization out: SEFAZ answers 241 to a
//!   number it authorized); SEFAZ had it → `a_cancelar`, its cancellation by substitution
//!   (evento 110112, naming the note that replaced it) signed and stored in that write, then
//!   sent on its own backoff until SEFAZ registers it (`cancelada`; 573: it had it, and its
//!   protocol is asked for by key);
//! - the authorized note of a sale paid back in full is cancelled (110111) the same way.

use super::*;
use crate::fiscal::{
    agora, lote, Consultada, Emissor, Sefaz, Situacao, VendaPaga, Vigencia, REENVIO_MAX,
};
use crate::outbox::{Cancelamento, Desfecho, NotaRegistro};
use nfce::evento::{DesfechoEvento, Evento, TipoEvento};
use nfce::inutilizacao::Inutilizacao;
use nfce::soap::DesfechoInutilizacao;
use nfce::Emissao;
use rand::Rng;

/// How often the loop looks, when nothing wakes it.
const TICK: Duration = Duration::from_secs(5);
/// How long SEFAZ blocks an emitter for consumo indevido.
const BLOQUEIO: Duration = Duration::from_secs(3600);
/// The application that signs the till's events (`verAplic`).
const APLICATIVO: &str = concat!("Pagar ", env!("CARGO_PKG_VERSION"));
/// Notes sent per round.
const LOTE: u32 = 20;
/// Sales looked at per round (the latest paid first).
const VENDAS: u32 = 100;

/// Why the till is in contingência, and since when.
#[derive(Debug, Clone)]
struct Contingencia {
    desde: UnixMillis,
    motivo: String,
    sondada: UnixMillis,
}

pub(super) async fn notas(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    let Some(emissor) = inner.config.fiscal.clone() else {
        return;
    };
    let sefaz = Sefaz::new(
        &emissor.sefaz_url,
        emissor.ambiente.codigo(),
        emissor.espera,
    );
    let mut loop_ = Notas {
        inner,
        emissor,
        sefaz,
        contingencia: None,
    };
    // The loop looks at least as often as it may have something to probe or send again.
    let tick = TICK.min(loop_.emissor.sondagem).min(loop_.emissor.reenvio);
    loop {
        if let Err(e) = loop_.round().await {
            tracing::warn!(error = %e, "notas fiscais: a volta falhou; tenta de novo");
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = loop_.inner.notas_due.notified() => {}
            _ = tokio::time::sleep(tick) => {}
        }
    }
}

struct Notas {
    inner: Arc<Inner>,
    emissor: Emissor,
    sefaz: Sefaz,
    contingencia: Option<Contingencia>,
}

impl Notas {
    async fn round(&mut self) -> Result<()> {
        let inner = self.inner.clone();
        let outbox = &inner.outbox;
        let moved = outbox
            .corrigir_horario_fiscal(
                now_ms(),
                REENVIO_MAX.as_millis() as UnixMillis,
                BLOQUEIO.as_millis() as UnixMillis,
            )
            .await?;
        if moved > 0 {
            tracing::warn!(
                moved,
                "notas fiscais: o relógio voltou; as notas que esperavam além do maior intervalo vão agora"
            );
        }
        let fiscal = outbox.fiscal().await?;
        if now_ms() < fiscal.bloqueada_ate && self.contingencia.is_none() {
            self.enter(format!(
                "SEFAZ bloqueou o emitente por consumo indevido (656) ate {}",
                nfce::data_hora(agora(fiscal.bloqueada_ate, self.inner.config.utc_offset))
            ));
        }
        for sale in outbox
            .vendas_sem_nota(fiscal.apos_tentativa, VENDAS)
            .await?
        {
            let attempts = outbox.attempts_of(&sale).await?;
            if let Some(venda) = VendaPaga::of(&attempts) {
                self.issue(sale, venda).await?;
            }
        }
        if now_ms() < fiscal.bloqueada_ate || !self.sefaz_back().await {
            return Ok(());
        }
        self.send_due().await?;
        if self.contingencia.is_none() {
            self.settle_replaced().await?;
            self.cancel_paid_back().await?;
            self.cancel_due().await?;
        }
        Ok(())
    }

    fn enter(&mut self, motivo: String) {
        if self.contingencia.is_none() {
            tracing::warn!(%motivo, "NFC-e em contingência");
            self.contingencia = Some(Contingencia {
                desde: now_ms(),
                motivo,
                sondada: now_ms(),
            });
        }
    }

    /// Out of contingência, or SEFAZ's status service says it works again (asked at most every
    /// [`Emissor::sondagem`]); then every pending note is due at once.
    async fn sefaz_back(&mut self) -> bool {
        let Some(c) = &mut self.contingencia else {
            return true;
        };
        if now_ms() < c.sondada + self.emissor.sondagem.as_millis() as UnixMillis {
            return false;
        }
        c.sondada = now_ms();
        let uf = self.emissor.emitente.endereco.uf.codigo();
        match self.sefaz.em_operacao(uf).await {
            Ok(true) => {
                tracing::info!("SEFAZ de volta: a contingência acabou");
                self.contingencia = None;
                let _ = self.inner.outbox.notas_ja(now_ms()).await;
                true
            }
            Ok(false) | Err(_) => false,
        }
    }

    /// Issues the note of a sale paid in full and, out of contingência, sends it while the
    /// customer waits.
    async fn issue(&mut self, sale: SaleId, venda: VendaPaga) -> Result<()> {
        if let Some(c) = self.contingencia.clone() {
            let nota = self.emit(&sale, &venda, Some(&c), None).await?;
            self.announce(nota);
            return Ok(());
        }
        let nota = self.emit(&sale, &venda, None, None).await?;
        if nota.estado != crate::outbox::EstadoNota::Pendente {
            return Ok(());
        }
        match self.sefaz.autorizar(&nota.chave, &nota.xml, lote()).await {
            Situacao::SemResposta(why) => {
                // The customer cannot wait longer: the sale's note goes in contingência under the
                // next number, and this one is settled later by its key.
                self.enter(format!("SEFAZ sem resposta: {why}"));
                let c = self.contingencia.clone().expect("just entered");
                let replacement = self
                    .emit(&sale, &venda, Some(&c), Some(nota.chave.clone()))
                    .await?;
                self.announce(replacement);
            }
            situacao => {
                let nota = self.record(&nota, situacao).await?;
                self.announce(nota);
            }
        }
        Ok(())
    }

    async fn emit(
        &self,
        sale: &SaleId,
        venda: &VendaPaga,
        contingencia: Option<&Contingencia>,
        substitui: Option<String>,
    ) -> Result<NotaRegistro> {
        let offset = self.inner.config.utc_offset;
        let now = now_ms();
        let emissao = contingencia.map_or(Emissao::Normal, |c| Emissao::Contingencia {
            desde: agora(c.desde, offset),
            justificativa: justificativa(&c.motivo),
        });
        let (emissor, venda) = (self.emissor.clone(), venda.clone());
        // Drawn once: the key is made of it, and the note is stored with its key.
        let codigo = rand::thread_rng().gen_range(10_000_000..=99_999_999);
        self.inner
            .outbox
            .emitir_nota(sale.clone(), emissor.serie, now, substitui, move |numero| {
                emissor
                    .nota(&venda, numero, codigo, agora(now, offset), emissao)
                    .assinar(&emissor.certificado)
            })
            .await
    }

    async fn send_due(&mut self) -> Result<()> {
        for nota in self.inner.outbox.notas_a_enviar(now_ms(), LOTE).await? {
            let situacao = self.sefaz.autorizar(&nota.chave, &nota.xml, lote()).await;
            let unheard = matches!(situacao, Situacao::SemResposta(_));
            let blocked = situacao == Situacao::ConsumoIndevido;
            let nota = self.record(&nota, situacao).await?;
            self.announce(nota);
            if blocked {
                let ate = now_ms() + BLOQUEIO.as_millis() as UnixMillis;
                self.inner.outbox.bloquear_fiscal(ate).await?;
                return Ok(());
            }
            if unheard {
                // SEFAZ is not answering: the others wait for its status service.
                self.enter("SEFAZ sem resposta ao reenviar notas".to_string());
                return Ok(());
            }
        }
        Ok(())
    }

    async fn record(&self, nota: &NotaRegistro, situacao: Situacao) -> Result<NotaRegistro> {
        self.inner
            .outbox
            .registrar_envio(&nota.chave, situacao, self.proxima(nota))
            .await
    }

    /// When `nota`, tried once more now, is due again.
    fn proxima(&self, nota: &NotaRegistro) -> UnixMillis {
        now_ms() + self.emissor.reenvio_apos(nota.tentativas + 1).as_millis() as UnixMillis
    }

    /// Settles each note set aside: authorized after all, or its number declared unused.
    async fn settle_replaced(&mut self) -> Result<()> {
        let outbox = &self.inner.outbox;
        for nota in outbox.notas_substituidas(now_ms()).await? {
            let desfecho = match self.sefaz.consultar(&nota.chave).await {
                // Cancelled by someone already: the event is sent all the same, and SEFAZ's
                // 218 ("já cancelada") settles it as registered.
                Ok(Some(c)) => self.substitution_of(&nota, c.protocolo.n_prot.unwrap_or_default()),
                Ok(None) => self.declare_unused(&nota).await,
                Err(e) => Err(e),
            };
            let nota = match desfecho {
                Ok(d) => {
                    if let Desfecho::Autorizada { .. } = d {
                        tracing::warn!(chave = %nota.chave,
                            "NFC-e substituída foi autorizada: a venda tem duas notas até o cancelamento por substituição");
                    }
                    outbox.resolver_substituida(&nota.chave, d).await?
                }
                Err(why) => {
                    outbox
                        .adiar_nota(&nota.chave, why, self.proxima(&nota))
                        .await?
                }
            };
            self.announce(nota);
        }
        Ok(())
    }

    /// A replaced note SEFAZ authorized under `protocolo`: its cancellation by substitution,
    /// naming the note that replaced it, signed now and stored with it before it is sent.
    fn substitution_of(
        &self,
        nota: &NotaRegistro,
        protocolo: String,
    ) -> std::result::Result<Desfecho, String> {
        let substituta = nota
            .substituta
            .as_deref()
            .ok_or_else(|| format!("nota {} substituída sem substituta", nota.chave))?;
        let tipo = TipoEvento::CancelamentoPorSubstituicao {
            substituta: nfce::Chave::parse(substituta).map_err(|e| e.to_string())?,
        };
        let justificativa = format!(
            "Nota {} sem resposta da SEFAZ, substituida pela nota emitida em contingencia",
            nota.numero
        );
        let evento = self.event(nota, tipo, &protocolo, justificativa)?;
        Ok(Desfecho::Autorizada { protocolo, evento })
    }

    /// The signed cancellation of `nota`, authorized under `protocolo`.
    fn event(
        &self,
        nota: &NotaRegistro,
        tipo: TipoEvento,
        protocolo: &str,
        justificativa: String,
    ) -> std::result::Result<String, String> {
        Evento {
            tipo,
            chave: nfce::Chave::parse(&nota.chave).map_err(|e| e.to_string())?,
            cnpj: self.emissor.emitente.cnpj.clone(),
            ambiente: self.emissor.ambiente,
            protocolo: protocolo.to_string(),
            justificativa,
            quando: nfce::data_hora(agora(now_ms(), self.inner.config.utc_offset)),
            aplicativo: APLICATIVO.to_string(),
        }
        .assinar(&self.emissor.certificado)
        .map_err(|e| e.to_string())
    }

    /// Cancels the authorized note of each sale paid back in full (110111): the event signed
    /// and stored with the note before it is sent. A sale paid back in part keeps its note.
    async fn cancel_paid_back(&mut self) -> Result<()> {
        let outbox = &self.inner.outbox;
        for nota in outbox.notas_com_devolucao(LOTE).await? {
            if !VendaPaga::devolvida(&outbox.sale_attempts(&nota.sale_id).await?) {
                continue;
            }
            let protocolo = nota.protocolo.clone().unwrap_or_default();
            let justificativa =
                format!("Venda devolvida ao cliente: nota {} cancelada", nota.numero);
            match self.event(&nota, TipoEvento::Cancelamento, &protocolo, justificativa) {
                Ok(evento) => {
                    tracing::info!(chave = %nota.chave, "venda devolvida: NFC-e a cancelar");
                    let nota = outbox.cancelar_nota(&nota.chave, evento).await?;
                    self.announce(nota);
                }
                Err(why) => {
                    tracing::error!(chave = %nota.chave, %why, "cancelamento da NFC-e não assinado")
                }
            }
        }
        Ok(())
    }

    /// Sends each due cancellation (by substitution, or of a sale paid back), the same signed
    /// event every time.
    async fn cancel_due(&mut self) -> Result<()> {
        let outbox = &self.inner.outbox;
        for nota in outbox.notas_a_cancelar(now_ms(), LOTE).await? {
            let Some(evento) = nota.evento.as_deref() else {
                continue;
            };
            let mut blocked = false;
            let desfecho = match self.sefaz.registrar_evento(evento).await {
                Ok(DesfechoEvento::Registrado(p)) => Cancelamento::Registrado(p),
                Ok(DesfechoEvento::JaRegistrado(code)) => {
                    Cancelamento::Registrado(self.registered_before(&nota.chave, code).await)
                }
                Ok(DesfechoEvento::ConsumoIndevido) => {
                    let ate = now_ms() + BLOQUEIO.as_millis() as UnixMillis;
                    outbox.bloquear_fiscal(ate).await?;
                    blocked = true;
                    Cancelamento::Adiado("SEFAZ bloqueou o emitente (656)".to_string())
                }
                Ok(DesfechoEvento::Rejeitado(code, why)) => {
                    tracing::error!(chave = %nota.chave, code, %why,
                        "cancelamento por substituição recusado: a venda tem duas notas autorizadas");
                    Cancelamento::Recusado(code, why)
                }
                Err(why) => Cancelamento::Adiado(why),
            };
            let nota = outbox
                .registrar_cancelamento(&nota.chave, desfecho, self.proxima(&nota))
                .await?;
            self.announce(nota);
            if blocked {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The protocol of a cancellation SEFAZ had registered before (`code` 573 or 218: an answer
    /// lost), asked for once by the note's key; what SEFAZ said when the consulta does not show
    /// it.
    async fn registered_before(&self, chave: &str, code: u16) -> String {
        match self.sefaz.consultar(chave).await {
            Ok(Some(Consultada {
                vigencia: Vigencia::Cancelada(Some(protocolo)),
                ..
            })) => protocolo,
            _ => format!("registrado antes ({code})"),
        }
    }

    async fn declare_unused(&self, nota: &NotaRegistro) -> std::result::Result<Desfecho, String> {
        let ano = agora(nota.emitida_em, self.inner.config.utc_offset).year() as u16;
        let pedido = Inutilizacao {
            emitente: self.emissor.emitente.clone(),
            ambiente: self.emissor.ambiente,
            ano,
            serie: nota.serie,
            inicio: nota.numero,
            fim: nota.numero,
            justificativa: format!(
                "Nota {} sem resposta da SEFAZ, substituida pela nota emitida em contingencia",
                nota.numero
            ),
        }
        .assinar(&self.emissor.certificado)
        .map_err(|e| e.to_string())?;
        match self.sefaz.inutilizar(&pedido).await? {
            DesfechoInutilizacao::Homologada(protocolo) => Ok(Desfecho::Inutilizada(protocolo)),
            DesfechoInutilizacao::JaPedida => Ok(Desfecho::Inutilizada(
                "inutilização já homologada (563)".to_string(),
            )),
            DesfechoInutilizacao::NumeroUsado => {
                Err("a SEFAZ diz que o número foi usado (241): consultar de novo".to_string())
            }
            other => Err(format!("inutilização recusada: {other:?}")),
        }
    }

    fn announce(&self, nota: NotaRegistro) {
        let enviar_ate = nota.enviar_ate(self.emissor.prazo_contingencia);
        let _ = self.inner.events.send(Event::NotaChanged {
            nota: Box::new(nota),
            enviar_ate,
        });
    }
}

/// `xJust` (15 to 256 characters, plain text).
fn justificativa(motivo: &str) -> String {
    let text: String = format!("Contingencia offline: {motivo}")
        .chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                ' '
            }
        })
        .take(256)
        .collect();
    text.trim().to_string()
}
