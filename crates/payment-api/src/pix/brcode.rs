//! The BR Code of a dynamic Pix charge: the EMV QRCPS-MPM payload the customer's bank app reads
//! from the QR or from "Pix copia e cola" (Manual de Padrões para Iniciação do Pix, BR Code).
//!
//! Each field is `ID` (2 digits), length (2 digits) and value. A dynamic charge carries, in the
//! merchant account information (ID 26), the Pix GUI `br.gov.bcb.pix` and the provider's
//! `location` URL (without scheme); the amount (54), the merchant's name (59) and city (60), the
//! reference label `***` (62/05: the txid travels in the location's payload) and, last, the
//! CRC16-CCITT (poly 0x1021, init 0xFFFF) of everything before it including `6304` (63).

use crate::domain::Centavos;
use crc::{Crc, CRC_16_IBM_3740};

/// CRC16-CCITT-FALSE, the checksum the BR Code specifies.
const CRC16: Crc<u16> = Crc::<u16>::new(&CRC_16_IBM_3740);

/// Most characters of the merchant name (ID 59) and city (ID 60).
const MAX_NAME: usize = 25;
const MAX_CITY: usize = 15;

/// The receiver printed on the charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merchant {
    /// Name (shown in the payer's app).
    pub name: String,
    /// City.
    pub city: String,
}

/// The BR Code for a dynamic charge at `location`, of `centavos`.
pub fn dynamic(location: &str, valor: Centavos, merchant: &Merchant) -> String {
    let location = location
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let account = field("00", "br.gov.bcb.pix") + &field("25", location);
    let mut out = String::new();
    out += &field("00", "01");
    out += &field("01", "12"); // dynamic: one payment per QR
    out += &field("26", &account);
    out += &field("52", "0000");
    out += &field("53", "986"); // BRL
    out += &field("54", &valor.as_reais());
    out += &field("58", "BR");
    out += &field("59", &plain(&merchant.name, MAX_NAME));
    out += &field("60", &plain(&merchant.city, MAX_CITY));
    out += &field("62", &field("05", "***"));
    out += "6304";
    let crc = CRC16.checksum(out.as_bytes());
    out + &format!("{crc:04X}")
}

fn field(id: &str, value: &str) -> String {
    format!("{id}{:02}{value}", value.len())
}

/// Upper-case ASCII without accents, at most `max` characters: what every payer's app shows.
fn plain(s: &str, max: usize) -> String {
    let folded: String = s
        .chars()
        .map(|c| match c {
            'á' | 'à' | 'â' | 'ã' | 'ä' | 'Á' | 'À' | 'Â' | 'Ã' | 'Ä' => 'A',
            'é' | 'è' | 'ê' | 'ë' | 'É' | 'È' | 'Ê' | 'Ë' => 'E',
            'í' | 'ì' | 'î' | 'ï' | 'Í' | 'Ì' | 'Î' | 'Ï' => 'I',
            'ó' | 'ò' | 'ô' | 'õ' | 'ö' | 'Ó' | 'Ò' | 'Ô' | 'Õ' | 'Ö' => 'O',
            'ú' | 'ù' | 'û' | 'ü' | 'Ú' | 'Ù' | 'Û' | 'Ü' => 'U',
            'ç' | 'Ç' => 'C',
            'ñ' | 'Ñ' => 'N',
            c if c.is_ascii_alphanumeric() || c == ' ' => c.to_ascii_uppercase(),
            _ => ' ',
        })
        .collect();
    let trimmed = folded.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = trimmed.chars().take(max).collect();
    if cut.is_empty() {
        "PAGAR".to_string()
    } else {
        cut.trim_end().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loja() -> Merchant {
        Merchant {
            name: "Padaria São João da Esquina Ltda".into(),
            city: "São Paulo".into(),
        }
    }

    #[test]
    fn an_outside_parser_reads_every_field_and_the_crc_is_right() {
        for centavos in [1, 99, 100, 1234, 9_999_999] {
            let code = dynamic(
                "https://pix.sandbox.pagar.dev/qr/v2/9d36b84fc70b478fb95c12729b90ca25",
                Centavos::new(centavos).unwrap(),
                &loja(),
            );
            // `brcode` (crates.io) parses EMV QRCPS-MPM independently of this module.
            let parsed = brcode::str_to_brcode(&code);
            assert!(parsed.is_pix(), "{code}");
            assert_eq!(parsed.payload_version, 1);
            assert_eq!(parsed.initiation_method, Some(12));
            assert_eq!(parsed.currency, "986");
            assert_eq!(parsed.country_code, "BR");
            assert_eq!(parsed.merchant_name, "PADARIA SAO JOAO DA ESQUI");
            assert_eq!(parsed.merchant_city, "SAO PAULO");
            assert_eq!(parsed.amount, Some(centavos as f64 / 100.0), "{code}");
            let info = &parsed.merchant_information[0];
            assert_eq!(info.id, 26);
            let url = info
                .info
                .iter()
                .find(|i| i.id == 25)
                .map(|i| i.info.clone());
            assert_eq!(
                url.as_deref(),
                Some("pix.sandbox.pagar.dev/qr/v2/9d36b84fc70b478fb95c12729b90ca25")
            );
            // The CRC is the last four characters, over everything before them.
            let (body, crc) = code.split_at(code.len() - 4);
            assert_eq!(brcode::crc16_ccitt(body), crc, "{code}");
        }
    }

    #[test]
    fn a_known_payload_from_the_api_pix_examples_gets_its_crc() {
        // `bacen/pix-api` openapi.yaml, cobResponse example: the same CRC for the same bytes.
        let body = "00020101021226760014br.gov.bcb.pix2554pix.example.com/qr/v2/8b3da2f39a4140d1a91abd93113bd4415204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***80800014br.gov.bcb.pix2558pix.example.com/qr/v2/rec/94ed2badcbc04c15b0bb7fa3531948906304";
        assert_eq!(format!("{:04X}", CRC16.checksum(body.as_bytes())), "7741");
    }
}
