//! The note's XML signature, exactly as the NF-e schema fixes it: an enveloped signature of
//! `infNFe` (`Reference URI="#NFe<chave>"`), its transforms the enveloped-signature and
//! Canonical XML 1.0 (without comments), digest SHA-1, signature RSA-SHA1, and the signer's
//! certificate in `KeyInfo/X509Data`. The merchant's A1 certificate is read from its PKCS#12
//! file; a sandbox makes a self-signed one of the same shape.

use crate::chave::Cnpj;
use crate::error::{NfceError, Result};
use crate::xml::Xml;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::hash::MessageDigest;
use openssl::pkcs12::Pkcs12;
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use openssl::sign::Signer;
use openssl::x509::{X509NameBuilder, X509};
use sha1::{Digest, Sha1};

const DSIG_NS: &str = "http://www.w3.org/2000/09/xmldsig#";
const C14N: &str = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315";
const ENVELOPED: &str = "http://www.w3.org/2000/09/xmldsig#enveloped-signature";
const RSA_SHA1: &str = "http://www.w3.org/2000/09/xmldsig#rsa-sha1";
const SHA1: &str = "http://www.w3.org/2000/09/xmldsig#sha1";

/// A signing certificate and its private key.
pub struct Certificado {
    key: PKey<Private>,
    cert: X509,
}

impl std::fmt::Debug for Certificado {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key never leaves in a log line.
        f.debug_struct("Certificado")
            .field("subject", &self.cert.subject_name())
            .finish_non_exhaustive()
    }
}

impl Certificado {
    /// Reads an A1 certificate: a PKCS#12 file (`.pfx`/`.p12`) and its password.
    pub fn from_pkcs12(der: &[u8], senha: &str) -> Result<Self> {
        let parsed = Pkcs12::from_der(der)?
            .parse2(senha)
            .map_err(|e| NfceError::Certificate(format!("senha ou arquivo inválido: {e}")))?;
        match (parsed.pkey, parsed.cert) {
            (Some(key), Some(cert)) => Ok(Certificado { key, cert }),
            _ => Err(NfceError::Certificate(
                "o arquivo não tem chave privada e certificado".to_string(),
            )),
        }
    }

    /// A self-signed certificate for the sandbox, in the shape of an e-CNPJ A1: RSA 2048, its
    /// subject `<razão social>:<CNPJ>`, valid for a year from now.
    pub fn sandbox(cnpj: &Cnpj, razao_social: &str) -> Result<Self> {
        let key = PKey::from_rsa(Rsa::generate(2048)?)?;
        let mut name = X509NameBuilder::new()?;
        name.append_entry_by_text("C", "BR")?;
        name.append_entry_by_text("O", "ICP-Brasil (simulado)")?;
        name.append_entry_by_text("CN", &format!("{razao_social}:{}", cnpj.as_ref()))?;
        let name = name.build();
        let mut serial = BigNum::new()?;
        serial.rand(64, MsbOption::MAYBE_ZERO, false)?;
        let mut b = X509::builder()?;
        b.set_version(2)?;
        let serial = serial.to_asn1_integer()?;
        let (from, until) = (Asn1Time::days_from_now(0)?, Asn1Time::days_from_now(365)?);
        b.set_serial_number(&serial)?;
        b.set_subject_name(&name)?;
        b.set_issuer_name(&name)?;
        b.set_pubkey(&key)?;
        b.set_not_before(&from)?;
        b.set_not_after(&until)?;
        b.sign(&key, MessageDigest::sha256())?;
        Ok(Certificado {
            key,
            cert: b.build(),
        })
    }

    /// It as a PKCS#12 file under `senha`.
    pub fn to_pkcs12(&self, senha: &str) -> Result<Vec<u8>> {
        let mut b = Pkcs12::builder();
        b.name("pagar").pkey(&self.key).cert(&self.cert);
        Ok(b.build2(senha)?.to_der()?)
    }

    /// True while it is still valid `days` days from now (a kept sandbox certificate is made
    /// again before it lapses).
    pub fn valid_for_days(&self, days: u32) -> Result<bool> {
        let then = Asn1Time::days_from_now(days)?;
        Ok(self.cert.not_after().compare(&then)? == std::cmp::Ordering::Greater)
    }

    /// The certificate (no key) in PEM, for whoever checks a signature.
    pub fn certificate_pem(&self) -> Result<Vec<u8>> {
        Ok(self.cert.to_pem()?)
    }

    /// RSA-SHA1 (PKCS#1 v1.5) of `data`.
    pub(crate) fn sign_sha1(&self, data: &[u8]) -> Result<Vec<u8>> {
        let mut s = Signer::new(MessageDigest::sha1(), &self.key)?;
        s.update(data)?;
        Ok(s.sign_to_vec()?)
    }
}

/// The `Signature` element of an `infNFe` whose canonical form is `canonical` (with the
/// namespace declaration C14N gives it as the apex of the signed subset) and whose `Id` is `id`.
pub(crate) fn signature(cert: &Certificado, id: &str, canonical: &str) -> Result<String> {
    let digest = B64.encode(Sha1::digest(canonical.as_bytes()));
    let signed_info = |x: &mut Xml, ns: bool| {
        let attrs: &[(&str, &str)] = if ns { &[("xmlns", DSIG_NS)] } else { &[] };
        x.open("SignedInfo", attrs)
            .open("CanonicalizationMethod", &[("Algorithm", C14N)])
            .close("CanonicalizationMethod")
            .open("SignatureMethod", &[("Algorithm", RSA_SHA1)])
            .close("SignatureMethod")
            .open("Reference", &[("URI", &format!("#{id}"))])
            .open("Transforms", &[])
            .open("Transform", &[("Algorithm", ENVELOPED)])
            .close("Transform")
            .open("Transform", &[("Algorithm", C14N)])
            .close("Transform")
            .close("Transforms")
            .open("DigestMethod", &[("Algorithm", SHA1)])
            .close("DigestMethod")
            .leaf("DigestValue", &digest)
            .close("Reference")
            .close("SignedInfo");
    };
    // SignedInfo is signed in its canonical form: as the apex of its subset it carries the
    // namespace it inherits from Signature.
    let mut canonical_info = Xml::default();
    signed_info(&mut canonical_info, true);
    let value = B64.encode(cert.sign_sha1(canonical_info.finish().as_bytes())?);
    let der = cert.cert.to_der()?;
    let mut x = Xml::default();
    x.open("Signature", &[("xmlns", DSIG_NS)]);
    signed_info(&mut x, false);
    x.leaf("SignatureValue", &value)
        .open("KeyInfo", &[])
        .open("X509Data", &[])
        .leaf("X509Certificate", &B64.encode(der))
        .close("X509Data")
        .close("KeyInfo")
        .close("Signature");
    Ok(x.finish())
}
