//! The identifiers of a note: the emitter's CNPJ (numeric or, as the Receita issues them from
//! July 2026, alphanumeric), the state, and the 44-character chave de acesso with its módulo-11
//! digit. In both digits a character counts as its ASCII code minus 48: `0`–`9` are 0–9, `A` is
//! 17, `Z` 42 — the rule the alphanumeric CNPJ brought, which leaves every numeric key as it was.

use crate::error::{NfceError, Result};
use std::fmt;

/// What a character counts in a módulo-11 digit.
fn value(c: u8) -> u32 {
    u32::from(c) - 48
}

/// The módulo-11 digit of `chars` with weights 2, 3, …, 9 from the right, starting again at 2:
/// the chave de acesso's `cDV`.
fn modulo11_cycling(chars: &[u8]) -> u8 {
    let sum: u32 = chars
        .iter()
        .rev()
        .zip((2..=9).cycle())
        .map(|(&c, w)| value(c) * w)
        .sum();
    match sum % 11 {
        0 | 1 => 0,
        r => (11 - r) as u8,
    }
}

/// A CNPJ: twelve characters `0-9A-Z` (the root and the branch), then two check digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cnpj(String);

impl Cnpj {
    /// Parses a CNPJ, with or without its punctuation (`12.ABC.345/01DE-35`).
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || NfceError::Invalid("CNPJ", s.to_string());
        let plain: String = s
            .chars()
            .filter(|c| !matches!(c, '.' | '/' | '-'))
            .collect::<String>()
            .to_ascii_uppercase();
        let b = plain.as_bytes();
        let body_ok = b.len() == 14
            && b[..12]
                .iter()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
            && b[12..].iter().all(u8::is_ascii_digit);
        if !body_ok || b[..12].iter().all(|&c| c == b[0]) {
            return Err(bad());
        }
        let dv1 = Self::digit(&b[..12]);
        let dv2 = Self::digit(&b[..13]);
        if b[12] != b'0' + dv1 || b[13] != b'0' + dv2 {
            return Err(bad());
        }
        Ok(Cnpj(plain))
    }

    /// A check digit of the CNPJ: weights 2…9 from the right, starting again at 2.
    fn digit(chars: &[u8]) -> u8 {
        modulo11_cycling(chars)
    }
}

impl AsRef<str> for Cnpj {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A CPF (the consumer's, on a "CPF na nota"): eleven digits, the last two checking the rest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cpf(String);

impl Cpf {
    /// Parses a CPF, with or without its punctuation (`123.456.789-09`).
    pub fn parse(s: &str) -> Result<Self> {
        let plain: String = s.chars().filter(|c| !matches!(c, '.' | '-')).collect();
        let b = plain.as_bytes();
        let ok = b.len() == 11
            && b.iter().all(u8::is_ascii_digit)
            && !b.iter().all(|&c| c == b[0])
            && Self::digit(&b[..9]) == b[9] - b'0'
            && Self::digit(&b[..10]) == b[10] - b'0';
        if ok {
            Ok(Cpf(plain))
        } else {
            Err(NfceError::Invalid("CPF", s.to_string()))
        }
    }

    // The CPF's weights do not cycle: 10 (or 11) down to 2.
    fn digit(chars: &[u8]) -> u8 {
        let top = chars.len() as u32 + 1;
        let sum: u32 = chars
            .iter()
            .zip((2..=top).rev())
            .map(|(&c, w)| value(c) * w)
            .sum();
        match sum % 11 {
            0 | 1 => 0,
            r => (11 - r) as u8,
        }
    }
}

impl AsRef<str> for Cpf {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A state (unidade federativa), by its IBGE code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Uf {
    sigla: &'static str,
    codigo: u8,
}

const UFS: [(&str, u8); 27] = [
    ("RO", 11),
    ("AC", 12),
    ("AM", 13),
    ("RR", 14),
    ("PA", 15),
    ("AP", 16),
    ("TO", 17),
    ("MA", 21),
    ("PI", 22),
    ("CE", 23),
    ("RN", 24),
    ("PB", 25),
    ("PE", 26),
    ("AL", 27),
    ("SE", 28),
    ("BA", 29),
    ("MG", 31),
    ("ES", 32),
    ("RJ", 33),
    ("SP", 35),
    ("PR", 41),
    ("SC", 42),
    ("RS", 43),
    ("MS", 50),
    ("MT", 51),
    ("GO", 52),
    ("DF", 53),
];

impl Uf {
    /// A state by its abbreviation (`SP`).
    pub fn parse(sigla: &str) -> Result<Self> {
        UFS.iter()
            .find(|(s, _)| s.eq_ignore_ascii_case(sigla))
            .map(|&(sigla, codigo)| Uf { sigla, codigo })
            .ok_or_else(|| NfceError::Invalid("UF", sigla.to_string()))
    }

    /// Its abbreviation.
    pub fn sigla(self) -> &'static str {
        self.sigla
    }

    /// Its IBGE code (`cUF`).
    pub fn codigo(self) -> u8 {
        self.codigo
    }
}

/// How a note was issued (`tpEmis`): the type is part of its key, so a note issued in
/// contingência is another key, never the first one re-sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TipoEmissao {
    /// Authorized by SEFAZ before the customer leaves (1).
    Normal,
    /// Issued offline, signed by the till and sent within the state's deadline (9).
    ContingenciaOffline,
}

impl TipoEmissao {
    /// `tpEmis`.
    pub fn codigo(self) -> u8 {
        match self {
            TipoEmissao::Normal => 1,
            TipoEmissao::ContingenciaOffline => 9,
        }
    }
}

/// What a chave de acesso is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartesChave<'a> {
    /// The emitter's state.
    pub uf: Uf,
    /// Year (two digits) and month of issue.
    pub ano_mes: (u16, u8),
    /// The emitter.
    pub cnpj: &'a Cnpj,
    /// Série (0–999).
    pub serie: u16,
    /// Número (1–999 999 999).
    pub numero: u32,
    /// How it is issued.
    pub tipo: TipoEmissao,
    /// The code the emitter drew for it (eight digits).
    pub codigo_numerico: u32,
}

/// The 44-character chave de acesso of an NFC-e (modelo 65).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Chave(String);

impl Chave {
    /// The key of these parts, its digit computed.
    pub fn new(p: &PartesChave<'_>) -> Result<Self> {
        if p.serie > 999 {
            return Err(NfceError::Invalid("série", p.serie.to_string()));
        }
        if !(1..=999_999_999).contains(&p.numero) {
            return Err(NfceError::Invalid("número", p.numero.to_string()));
        }
        if p.codigo_numerico > 99_999_999 || !(1..=12).contains(&p.ano_mes.1) {
            return Err(NfceError::Invalid(
                "código numérico",
                p.codigo_numerico.to_string(),
            ));
        }
        let body = format!(
            "{:02}{:02}{:02}{}65{:03}{:09}{}{:08}",
            p.uf.codigo(),
            p.ano_mes.0 % 100,
            p.ano_mes.1,
            p.cnpj.as_ref(),
            p.serie,
            p.numero,
            p.tipo.codigo(),
            p.codigo_numerico
        );
        let dv = modulo11_cycling(body.as_bytes());
        Ok(Chave(format!("{body}{dv}")))
    }

    /// Parses a key, checking its length, its characters and its digit.
    pub fn parse(s: &str) -> Result<Self> {
        let b = s.as_bytes();
        let ok = b.len() == 44
            && b[..6].iter().all(u8::is_ascii_digit)
            && b[6..18]
                .iter()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
            && b[18..].iter().all(u8::is_ascii_digit)
            && modulo11_cycling(&b[..43]) == b[43] - b'0';
        if ok {
            Ok(Chave(s.to_string()))
        } else {
            Err(NfceError::Invalid("chave de acesso", s.to_string()))
        }
    }

    /// Its check digit (`cDV`).
    pub fn digito(&self) -> u8 {
        self.0.as_bytes()[43] - b'0'
    }

    /// How it was issued (`tpEmis`, inside the key).
    pub fn tipo(&self) -> TipoEmissao {
        match self.0.as_bytes()[34] {
            b'9' => TipoEmissao::ContingenciaOffline,
            _ => TipoEmissao::Normal,
        }
    }
}

impl AsRef<str> for Chave {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Chave {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partes<'a>(cnpj: &'a Cnpj, uf: &str, serie: u16, numero: u32) -> PartesChave<'a> {
        PartesChave {
            uf: Uf::parse(uf).unwrap(),
            ano_mes: (2026, 12),
            cnpj,
            serie,
            numero,
            tipo: TipoEmissao::Normal,
            codigo_numerico: 12_345_678,
        }
    }

    #[test]
    fn the_digit_of_published_keys_is_the_one_they_carry() {
        // Notes of the NF-e project's public samples (nfelib's test data) and one authorized
        // note of RO: each key's last digit, computed again from the other 43.
        for key in [
            "35180834128745000152550010000474281920007498",
            "26180875335849000115550010000016871192213331",
            "41240200000000000100650010000000101000000104",
            "11210205883509000224550020000063421000657553",
        ] {
            assert!(Chave::parse(key).is_ok(), "{key}");
            let mut wrong = key.to_string();
            let d = (key.as_bytes()[43] - b'0' + 1) % 10;
            wrong.replace_range(43.., &d.to_string());
            assert!(Chave::parse(&wrong).is_err(), "{wrong}");
        }
    }

    #[test]
    fn a_key_is_made_of_its_parts_in_order_and_its_type_of_issue_is_inside_it() {
        let cnpj = Cnpj::parse("11.222.333/0001-81").unwrap();
        let mut partes = partes(&cnpj, "SP", 1, 42);
        let normal = Chave::new(&partes).unwrap();
        assert_eq!(
            &normal.as_ref()[..43],
            "3526121122233300018165001000000042112345678"
        );
        assert_eq!(normal.tipo(), TipoEmissao::Normal);
        partes.tipo = TipoEmissao::ContingenciaOffline;
        let offline = Chave::new(&partes).unwrap();
        assert_eq!(offline.tipo(), TipoEmissao::ContingenciaOffline);
        assert_ne!(normal, offline);
        assert!(Chave::parse(offline.as_ref()).is_ok());
    }

    #[test]
    fn an_alphanumeric_cnpj_counts_its_letters_as_ascii_minus_48() {
        // The Receita's published example of the alphanumeric CNPJ.
        assert!(Cnpj::parse("12.ABC.345/01DE-35").is_ok());
        assert!(Cnpj::parse("12ABC34501DE36").is_err());
        let cnpj = Cnpj::parse("12ABC34501DE35").unwrap();
        let key = Chave::new(&partes(&cnpj, "PR", 2, 7)).unwrap();
        assert!(Chave::parse(key.as_ref()).is_ok());
        assert_eq!(&key.as_ref()[6..20], "12ABC34501DE35");
    }

    #[test]
    fn numeric_cnpjs_and_cpfs_check_their_digits() {
        assert!(Cnpj::parse("11222333000181").is_ok());
        assert!(Cnpj::parse("11222333000182").is_err());
        assert!(Cnpj::parse("00000000000000").is_err());
        assert!(Cpf::parse("529.982.247-25").is_ok());
        assert!(Cpf::parse("52998224726").is_err());
        assert!(Cpf::parse("11111111111").is_err());
    }

    #[test]
    fn a_number_or_serie_out_of_range_makes_no_key() {
        let cnpj = Cnpj::parse("11222333000181").unwrap();
        assert!(Chave::new(&partes(&cnpj, "SP", 1000, 1)).is_err());
        assert!(Chave::new(&partes(&cnpj, "SP", 1, 0)).is_err());
        assert!(Chave::new(&partes(&cnpj, "SP", 1, 1_000_000_000)).is_err());
    }
}
