//! The QR Code of the DANFE NFC-e, versão 3 (NT 2025.001; the state's consultation address
//! followed by `?p=`). Online it only names the note: `<chave>|3|<tpAmb>`. Offline (contingência)
//! it also carries what the consumer can check before SEFAZ has the note — the day of issue,
//! the total, the consumer's document — and the emitter's RSA-SHA1 signature of those fields,
//! in base64: `<chave>|3|<tpAmb>|<dia>|<vNF>|<tp_idDest>|<cDest>|<assinatura>`. With no consumer
//! identified, `tp_idDest` and `cDest` are empty (the separators stay).

use crate::assinatura::Certificado;
use crate::chave::{Chave, Cpf};
use crate::error::Result;
use crate::nota::Ambiente;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use pagar_rules::decimal;

/// The QR Code of a note issued normally.
pub fn online(url: &str, chave: &Chave, ambiente: Ambiente) -> String {
    format!("{url}?p={chave}|3|{}", ambiente.codigo())
}

/// What an offline QR Code says of the note.
#[derive(Debug, Clone, Copy)]
pub struct Offline<'a> {
    /// The day of the month it was issued (`dhEmi`).
    pub dia: u8,
    /// Its total, in centavos.
    pub total: i64,
    /// The consumer, when identified.
    pub consumidor: Option<&'a Cpf>,
}

/// The QR Code of a note issued in contingência, signed with the emitter's certificate.
pub fn offline(
    url: &str,
    chave: &Chave,
    ambiente: Ambiente,
    what: Offline<'_>,
    cert: &Certificado,
) -> Result<String> {
    // Only a CPF is ever identified at this till (tp_idDest 2).
    let (tipo, documento) = match what.consumidor {
        Some(cpf) => ("2", cpf.as_ref()),
        None => ("", ""),
    };
    let fields = format!(
        "{chave}|3|{}|{:02}|{}|{tipo}|{documento}",
        ambiente.codigo(),
        what.dia,
        decimal::format(what.total)
    );
    let assinatura = B64.encode(cert.sign_sha1(fields.as_bytes())?);
    Ok(format!("{url}?p={fields}|{assinatura}"))
}
