//! Listing a merchant's payments: a lookup by one field, or a time range read page by page
//! (for a till's closing: thousands of sales a day in one pass, not one request per sale).
//!
//! Pages are keyset pages over `(created_at, id)`: each payment that existed when the listing
//! began is on exactly one page however many are added meanwhile, and a page costs one index
//! range scan whatever page it is.

use crate::clock::Millis;
use crate::domain::{FieldError, PaymentId, TerminalId};
use crate::store::PageQuery;

/// Largest page.
pub const MAX_PAGE: usize = 1000;
/// Page size when the client does not say.
pub const DEFAULT_PAGE: usize = 100;
/// Longest range one listing may cover.
pub const MAX_RANGE_DAYS: i64 = 92;

/// The range parameters as they came in the query string.
#[derive(Debug, Default, Clone)]
pub struct RangeParams {
    /// `desde`: from (inclusive), RFC 3339.
    pub desde: Option<String>,
    /// `ate`: to (exclusive), RFC 3339.
    pub ate: Option<String>,
    /// `cursor`: the `proximo` of the previous page.
    pub cursor: Option<String>,
    /// `limite`: page size, 1–1000.
    pub limite: Option<String>,
    /// `terminal`: only this till's payments.
    pub terminal: Option<String>,
}

impl RangeParams {
    /// Whether any range parameter was given.
    pub fn any(&self) -> bool {
        self.desde.is_some()
            || self.ate.is_some()
            || self.cursor.is_some()
            || self.limite.is_some()
            || self.terminal.is_some()
    }

    /// The page asked for; every invalid parameter is reported.
    pub fn parse(&self) -> Result<PageQuery, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut instant = |name: &'static str, value: &Option<String>| {
            match value {
            None => {
                errors.push(FieldError::new(name, format!("{name} é obrigatório num intervalo")));
                None
            }
            Some(v) => parse_instant(v)
                .map_err(|()| {
                    errors.push(FieldError::new(
                        name,
                        format!("{name} deve ser uma data e hora RFC 3339, como 2026-12-01T00:00:00-03:00"),
                    ))
                })
                .ok(),
        }
        };
        let from = instant("desde", &self.desde);
        let to = instant("ate", &self.ate);
        if let (Some(from), Some(to)) = (from, to) {
            if to <= from {
                errors.push(FieldError::new("ate", "ate deve ser depois de desde"));
            } else if to - from > MAX_RANGE_DAYS * 86_400_000 {
                errors.push(FieldError::new(
                    "ate",
                    format!("o intervalo deve ter no máximo {MAX_RANGE_DAYS} dias"),
                ));
            }
        }
        let limit = match &self.limite {
            None => Some(DEFAULT_PAGE),
            Some(v) => match v.parse::<usize>() {
                Ok(n) if (1..=MAX_PAGE).contains(&n) => Some(n),
                _ => {
                    errors.push(FieldError::new(
                        "limite",
                        format!("limite deve ser um inteiro de 1 a {MAX_PAGE}"),
                    ));
                    None
                }
            },
        };
        let after = match &self.cursor {
            None => None,
            Some(c) => match Cursor::decode(c) {
                Some(c) => Some((c.created_at, c.id)),
                None => {
                    errors.push(FieldError::new(
                        "cursor",
                        "cursor inválido: use o proximo da página anterior",
                    ));
                    None
                }
            },
        };
        let terminal = self.terminal.as_deref().and_then(|t| {
            TerminalId::parse(t)
                .map_err(|e| errors.push(FieldError::new("terminal", e.to_string())))
                .ok()
        });
        match (from, to, limit) {
            (Some(from), Some(to), Some(limit)) if errors.is_empty() => Ok(PageQuery {
                from,
                to,
                after,
                terminal,
                limit,
            }),
            _ => Err(errors),
        }
    }
}

fn parse_instant(s: &str) -> Result<Millis, ()> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|_| ())?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).map_err(|_| ())
}

/// Where the next page starts: after this payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// Its creation time.
    pub created_at: Millis,
    /// Its id.
    pub id: PaymentId,
}

impl Cursor {
    /// The opaque form clients send back: `c1.<created_at>.<id>`.
    pub fn encode(&self) -> String {
        format!("c1.{}.{}", self.created_at, self.id)
    }

    /// Reads the opaque form; `None` for anything else.
    pub fn decode(s: &str) -> Option<Self> {
        let rest = s.strip_prefix("c1.")?;
        let (at, id) = rest.split_once('.')?;
        let ok_id = id.starts_with("pay_")
            && id.len() <= 64
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        ok_id.then_some(())?;
        Some(Self {
            created_at: at.parse().ok()?,
            id: PaymentId::from_stored(id.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(desde: &str, ate: &str) -> RangeParams {
        RangeParams {
            desde: Some(desde.into()),
            ate: Some(ate.into()),
            ..RangeParams::default()
        }
    }

    #[test]
    fn a_day_in_the_stores_time_zone_is_a_range_of_instants() {
        let q = range("2026-12-01T00:00:00-03:00", "2026-12-02T00:00:00-03:00")
            .parse()
            .unwrap();
        assert_eq!(q.to - q.from, 86_400_000);
        assert_eq!(
            q.from, 1_796_094_000_000,
            "midnight in São Paulo is 03:00 UTC"
        );
        assert_eq!(q.limit, DEFAULT_PAGE);
    }

    #[test]
    fn bad_ranges_say_which_parameter_is_wrong() {
        let fields = |p: RangeParams| -> Vec<String> {
            p.parse()
                .unwrap_err()
                .into_iter()
                .map(|e| e.campo)
                .collect()
        };
        assert_eq!(fields(range("ontem", "2026-12-02T00:00:00Z")), ["desde"]);
        assert_eq!(
            fields(range("2026-12-02T00:00:00Z", "2026-12-01T00:00:00Z")),
            ["ate"]
        );
        assert_eq!(
            fields(range("2026-01-01T00:00:00Z", "2026-12-01T00:00:00Z")),
            ["ate"],
            "too long"
        );
        let mut p = range("2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z");
        p.limite = Some("0".into());
        p.cursor = Some("abc".into());
        p.terminal = Some("caixa 1".into());
        assert_eq!(fields(p), ["limite", "cursor", "terminal"]);
        let only_from = RangeParams {
            desde: Some("2026-12-01T00:00:00Z".into()),
            ..RangeParams::default()
        };
        assert_eq!(fields(only_from), ["ate"]);
    }

    #[test]
    fn a_cursor_round_trips_and_nothing_else_decodes() {
        let c = Cursor {
            created_at: 1_764_558_000_123,
            id: PaymentId::from_stored("pay_01a2".into()),
        };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        for bad in [
            "",
            "c1.",
            "c1.12",
            "c1.x.pay_1",
            "c2.1.pay_1",
            "c1.1.pay_1;drop",
            "c1.1.abc",
        ] {
            assert_eq!(Cursor::decode(bad), None, "{bad}");
        }
    }
}
