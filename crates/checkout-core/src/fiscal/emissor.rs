//! What a till needs to issue its sales' notes, and the note of one sale made from its attempts.
//!
//! The till sells an amount, not a list of products: a sale's note has one line, the store's
//! configured [`ItemVenda`] (its code, NCM and CFOP), at the sale's amount. A till that rings up
//! products gives the note its lines instead; nothing else here changes.

use crate::domain::{CardMethod, Means};
use crate::outbox::Attempt;
use nfce::{
    Ambiente, Certificado, Emissao, Emitente, Forma, Item, Nota, Pagamento, ResponsavelTecnico,
    UrlsConsulta,
};
use std::sync::Arc;
use std::time::Duration;
use time::{OffsetDateTime, UtcOffset};

/// The line a sale by amount is sold as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemVenda {
    /// The store's code for it.
    pub codigo: String,
    /// Its description on the note.
    pub descricao: String,
    /// Its NCM (eight digits).
    pub ncm: String,
    /// The operation's CFOP (5102: a sale of goods bought for resale, inside the state).
    pub cfop: u16,
}

/// The store, its certificate and its state's rules: everything a till needs to issue notes.
#[derive(Debug, Clone)]
pub struct Emissor {
    /// SEFAZ's web services (`…/ws/<service>` below it).
    pub sefaz_url: String,
    /// The store.
    pub emitente: Emitente,
    /// Production or homologação.
    pub ambiente: Ambiente,
    /// This till's série (0–999; one série per till keeps two tills from sharing numbers).
    pub serie: u16,
    /// The store's A1 certificate.
    pub certificado: Arc<Certificado>,
    /// The state's consultation addresses.
    pub urls: UrlsConsulta,
    /// What a sale is sold as.
    pub item: ItemVenda,
    /// `infRespTec`, where the state asks for it.
    pub responsavel_tecnico: Option<ResponsavelTecnico>,
    /// How long a note issued in contingência may wait to be sent (the state's rule; 24 h in
    /// most states).
    pub prazo_contingencia: Duration,
    /// How long the customer waits for SEFAZ's authorization before the sale's note is issued
    /// in contingência instead.
    pub espera: Duration,
    /// In contingência, how often SEFAZ's status service is asked whether it is back.
    pub sondagem: Duration,
    /// The first wait before a note whose send was not answered is sent again; it doubles up to
    /// 15 minutes, so a key is never asked about ten times in an hour (SEFAZ's limit before 656).
    pub reenvio: Duration,
}

impl Emissor {
    /// The sandbox store (`nfce::exemplo`) in homologação, with a self-signed certificate, sending
    /// to the SEFAZ simulator at `sefaz_url`.
    pub fn sandbox(sefaz_url: &str) -> nfce::Result<Self> {
        Ok(Self::sandbox_signing(
            sefaz_url,
            nfce::exemplo::certificado()?,
        ))
    }

    /// [`Emissor::sandbox`] with its certificate kept in `cert_file` (made there on the first
    /// start, read on the next), as a till keeps its A1.
    pub fn sandbox_kept(sefaz_url: &str, cert_file: &std::path::Path) -> nfce::Result<Self> {
        Ok(Self::sandbox_signing(sefaz_url, certificado_em(cert_file)?))
    }

    fn sandbox_signing(sefaz_url: &str, certificado: Certificado) -> Self {
        Emissor {
            sefaz_url: sefaz_url.trim_end_matches('/').to_string(),
            emitente: nfce::exemplo::emitente(),
            ambiente: Ambiente::Homologacao,
            serie: 1,
            certificado: Arc::new(certificado),
            urls: nfce::exemplo::urls(),
            item: ItemVenda {
                codigo: "VENDA".to_string(),
                descricao: "Mercadorias".to_string(),
                ncm: "21069090".to_string(),
                cfop: 5102,
            },
            responsavel_tecnico: None,
            prazo_contingencia: Duration::from_secs(24 * 3600),
            espera: Duration::from_secs(6),
            // A simulator on loopback: asking every 10 s burdens no one (a real SEFAZ: 30 s or more).
            sondagem: Duration::from_secs(10),
            reenvio: Duration::from_secs(30),
        }
    }

    /// The note of a sale of `total` centavos paid by `pagamentos`, as number `numero` with key
    /// code `codigo_numerico`, issued at `agora` (the till's offset) as `emissao`.
    pub fn nota(
        &self,
        venda: &VendaPaga,
        numero: u32,
        codigo_numerico: u32,
        agora: OffsetDateTime,
        emissao: Emissao,
    ) -> Nota {
        Nota {
            emitente: self.emitente.clone(),
            ambiente: self.ambiente,
            serie: self.serie,
            numero,
            codigo_numerico,
            emitida_em: agora,
            emissao,
            itens: vec![Item {
                codigo: self.item.codigo.clone(),
                descricao: self.item.descricao.clone(),
                ncm: self.item.ncm.clone(),
                cfop: self.item.cfop,
                unidade: "UN".to_string(),
                quantidade_milesimos: 1_000,
                valor_unitario: venda.total,
            }],
            pagamentos: venda.pagamentos.clone(),
            consumidor: None,
            urls: self.urls.clone(),
            responsavel_tecnico: self.responsavel_tecnico.clone(),
            versao_processo: concat!("Pagar ", env!("CARGO_PKG_VERSION")).to_string(),
        }
    }
}

/// The longest wait between two sends of a note.
pub const REENVIO_MAX: Duration = Duration::from_secs(15 * 60);

impl Emissor {
    /// The wait before a note tried `tentativas` times is sent again.
    pub fn reenvio_apos(&self, tentativas: u32) -> Duration {
        self.reenvio
            .saturating_mul(1 << tentativas.saturating_sub(1).min(10))
            .min(REENVIO_MAX)
    }
}

/// A sale paid in full: what its note says it came to and how it was paid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendaPaga {
    /// What the sale came to, in centavos.
    pub total: i64,
    /// Its payments (cash: what was handed over; the change is worked out by the note).
    pub pagamentos: Vec<Pagamento>,
}

impl VendaPaga {
    /// The sale of `attempts` (all of one sale) if it is paid in full and nothing of it is still
    /// being decided: every payment final, no card authorization waiting for its capture, and
    /// what was paid (less what was paid back) covering the sale. `None`: not (yet) a sale a
    /// note can be issued for.
    pub fn of(attempts: &[Attempt]) -> Option<Self> {
        if attempts.iter().any(|a| {
            a.is_undecided()
                || (a.state == crate::domain::AttemptState::Aprovado
                    && a.captura
                        .is_some_and(|c| c != crate::domain::Capture::Capturada && c.pays()))
        }) {
            return None;
        }
        let paying: Vec<&Attempt> = attempts
            .iter()
            .filter(|a| !a.is_refund() && a.pays())
            .collect();
        let paid = crate::outbox::paid_of(attempts.iter());
        let total = match attempts.iter().find_map(|a| a.sale_total) {
            Some(t) => t.get(),
            None => paying.iter().map(|a| a.valor.get()).sum(),
        };
        if paying.is_empty() || total <= 0 || paid < total {
            return None;
        }
        let pagamentos = paying
            .iter()
            .map(|a| Pagamento {
                forma: forma(a),
                valor: a.recebido.map_or(a.valor.get(), |r| r.get()),
            })
            .collect();
        Some(VendaPaga { total, pagamentos })
    }

    /// Whether the sale of `attempts` (all of one sale, its refunds included) was paid back in
    /// full: nothing of it still being decided, a refund approved, and nothing left paid. Its
    /// note is then cancelled; a sale paid back in part keeps its note.
    pub fn devolvida(attempts: &[Attempt]) -> bool {
        !attempts.iter().any(Attempt::is_undecided)
            && attempts
                .iter()
                .any(|a| a.is_refund() && a.state == crate::domain::AttemptState::Aprovado)
            && crate::outbox::paid_of(attempts.iter()) <= 0
    }
}

/// `tPag` of a payment.
fn forma(a: &Attempt) -> Forma {
    let card = |m: CardMethod| match m {
        CardMethod::Debito => Forma::Debito,
        CardMethod::Credito => Forma::Credito,
        CardMethod::Voucher => Forma::ValeAlimentacao,
    };
    match a.metodo {
        Means::Dinheiro => Forma::Dinheiro,
        Means::Pix => Forma::Pix,
        Means::Cartao => card(a.plano.map_or(CardMethod::Credito, |p| p.method)),
        Means::Maquininha => match a.maquininha.as_ref().and_then(|m| m.pago_com.as_deref()) {
            Some("debito") => Forma::Debito,
            Some("voucher") => Forma::ValeAlimentacao,
            _ => Forma::Credito,
        },
    }
}

/// `agora` at the till's offset, to the second (`dhEmi` has no fraction).
pub fn agora(now_ms: i64, offset: UtcOffset) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(now_ms.div_euclid(1000))
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
        .to_offset(offset)
}

/// The password of the sandbox's kept certificate: it guards nothing (the file is the owner's
/// alone, 0600) and says what the file is.
const SENHA_SANDBOX: &str = "pagar-sandbox";

/// The sandbox store's certificate kept in `file`, as a merchant's A1 is a file the till reads on
/// every start: read from it while it is valid for another week, otherwise made
/// ([`nfce::exemplo::certificado`]) and written there whole (a PKCS#12 under [`SENHA_SANDBOX`],
/// 0600, renamed into place). Making an RSA 2048 key takes from a fifth of a second to most of
/// one on a till's CPU, and the window's first frame waits for the emitter: made once, not on
/// every start.
fn certificado_em(file: &std::path::Path) -> nfce::Result<Certificado> {
    let io = |what: &str, e: std::io::Error| {
        nfce::NfceError::Certificate(format!("{what} {}: {e}", file.display()))
    };
    match std::fs::read(file) {
        // One this function did not write whole (or another sandbox's) is made again: it is
        // the sandbox's own file, and no note of a real store was signed with it.
        Ok(der) => {
            if let Ok(kept) = Certificado::from_pkcs12(&der, SENHA_SANDBOX) {
                if kept.valid_for_days(7)? {
                    return Ok(kept);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("ler", e)),
    }
    let made = nfce::exemplo::certificado()?;
    let der = made.to_pkcs12(SENHA_SANDBOX)?;
    durable_sqlite::private::write_file(file, &der).map_err(|e| io("gravar", e))?;
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_certificate_kept_in_a_file_is_made_once_read_again_and_made_anew_when_unreadable(
    ) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sandbox.p12");
        let first = certificado_em(&file).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "the key is the owner's alone");
        }
        let again = certificado_em(&file).unwrap();
        assert_eq!(
            again.certificate_pem().unwrap(),
            first.certificate_pem().unwrap(),
            "read from the file, not made again"
        );
        assert!(again.valid_for_days(300).unwrap() && !again.valid_for_days(400).unwrap());
        // A file that is no certificate of the sandbox: a new one replaces it.
        std::fs::write(&file, b"not a PKCS#12").unwrap();
        let remade = certificado_em(&file).unwrap();
        assert_ne!(
            remade.certificate_pem().unwrap(),
            first.certificate_pem().unwrap()
        );
        assert_eq!(
            certificado_em(&file).unwrap().certificate_pem().unwrap(),
            remade.certificate_pem().unwrap()
        );
        assert!(!dir.path().join("sandbox.p12.tmp").exists());
    }
}
