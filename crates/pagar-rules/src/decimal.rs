//! Amounts as providers write them on the wire (the API Pix's `valor.original`, Mercado Pago's
//! `amount`): a string of reais with two decimals (`"12.34"`, pattern `\d{1,10}\.\d{2}`), read into
//! and written from whole centavos (never floats).

/// Centavos as `"12.34"`.
pub fn format(centavos: i64) -> String {
    format!("{}.{:02}", centavos / 100, centavos % 100)
}

/// `"12.34"` as centavos; `None` for anything the API Pix pattern does not accept.
pub fn parse(s: &str) -> Option<i64> {
    let (reais, cents) = s.split_once('.')?;
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if !digits(reais) || reais.len() > 10 || cents.len() != 2 || !digits(cents) {
        return None;
    }
    Some(reais.parse::<i64>().ok()? * 100 + cents.parse::<i64>().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_amount_round_trips_and_bad_forms_are_refused() {
        for c in [0, 1, 9, 10, 99, 100, 101, 12_345, 9_999_999_999] {
            assert_eq!(parse(&format(c)), Some(c), "{c}");
        }
        assert_eq!(format(1234), "12.34");
        for bad in [
            "12",
            "12.3",
            "12.345",
            ".12",
            "1e3.00",
            "-1.00",
            "12,34",
            "",
            "12345678901.00",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
