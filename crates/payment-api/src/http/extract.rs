//! What a handler knows about its caller before it runs: axum extractors, one per header rule.

use crate::domain::{IdempotencyKey, KeyError, MerchantId};
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};

/// The merchant a request is authenticated as: `Authorization: Bearer <api key>` (the scheme
/// case-insensitive, RFC 9110 §11.1), sent once.
#[derive(Debug, Clone)]
pub struct Merchant(pub MerchantId);

impl FromRequestParts<AppState> for Merchant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if parts
            .headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .nth(1)
            .is_some()
        {
            return Err(ApiError::DuplicateHeader("Authorization"));
        }
        let merchant = bearer(&parts.headers)
            .and_then(|token| state.merchant_for(token))
            .ok_or(ApiError::Unauthorized)?;
        Ok(Merchant(merchant))
    }
}

/// A request carrying the admin token (QA routes). Compared in constant time.
#[derive(Debug, Clone, Copy)]
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match (bearer(&parts.headers), state.admin_token()) {
            (Some(given), Some(token)) if constant_time_eq(given.as_bytes(), token.as_bytes()) => {
                Ok(Admin)
            }
            _ => Err(ApiError::AdminUnauthorized),
        }
    }
}

/// The request's `Idempotency-Key`: exactly one field, parsed by [`IdempotencyKey::parse`].
#[derive(Debug, Clone)]
pub struct Key(pub IdempotencyKey);

impl<S: Send + Sync> FromRequestParts<S> for Key {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let mut values = parts.headers.get_all("idempotency-key").iter();
        let first = values.next().ok_or(KeyError::Missing)?;
        if values.next().is_some() {
            return Err(KeyError::Duplicate.into());
        }
        let key = IdempotencyKey::parse(first.as_bytes())?;
        Ok(Key(key))
    }
}

/// The token of an `Authorization: Bearer …` header, trimmed.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
