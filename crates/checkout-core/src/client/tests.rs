use super::*;

#[test]
fn a_server_status_this_till_does_not_know_is_never_approved_or_declined() {
    let p: RemotePayment = serde_json::from_str(
        r#"{"id":"pay_1","status":"aguardando","valor":100,"criado_em":"2026-12-01T12:00:00Z"}"#,
    )
    .unwrap();
    assert_eq!(p.status, RemoteStatus::Desconhecido);
    for state in AttemptState::ALL {
        assert!(!p.status.agrees_with(state), "{state:?}");
    }
    assert!(RemoteStatus::Aprovado.agrees_with(AttemptState::Aprovado));
    assert!(!RemoteStatus::Aprovado.agrees_with(AttemptState::Recusado));
}

#[test]
fn retryable_statuses_keep_the_attempt_pending_and_others_need_review() {
    for s in [301, 302, 307, 408, 409, 429, 500, 502, 503] {
        assert!(
            matches!(
                classify(
                    &Target::Payment,
                    StatusCode::from_u16(s).unwrap(),
                    None,
                    vec![]
                ),
                Answer::Retry { .. }
            ),
            "{s}"
        );
    }
    for s in [400, 401, 403, 404, 422] {
        assert!(
            matches!(
                classify(
                    &Target::Payment,
                    StatusCode::from_u16(s).unwrap(),
                    None,
                    vec![]
                ),
                Answer::Review { .. }
            ),
            "{s}"
        );
    }
}

#[test]
fn a_decline_is_final_with_its_reason() {
    let body = br#"{"id":"pay_1","status":"recusado","motivo":"saldo_insuficiente"}"#.to_vec();
    match classify(&Target::Payment, StatusCode::PAYMENT_REQUIRED, None, body) {
        Answer::Final(f) => {
            assert_eq!(f.state, AttemptState::Recusado);
            assert_eq!(f.motivo.as_deref(), Some("saldo_insuficiente"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_status_that_contradicts_its_http_code_or_is_unknown_needs_review() {
    for (code, body) in [
        (StatusCode::CREATED, r#"{"id":"pay_1","status":"recusado"}"#),
        (
            StatusCode::PAYMENT_REQUIRED,
            r#"{"id":"pay_1","status":"aprovado"}"#,
        ),
        (
            StatusCode::CREATED,
            r#"{"id":"pay_1","status":"estornado"}"#,
        ),
    ] {
        assert!(
            matches!(
                classify(&Target::Payment, code, None, body.as_bytes().to_vec()),
                Answer::Review { .. }
            ),
            "{code} {body}"
        );
    }
}

#[test]
fn retry_after_is_read_in_seconds_and_as_a_date() {
    let mut h = HeaderMap::new();
    h.insert(RETRY_AFTER, "7".parse().unwrap());
    assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
    let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
    h.insert(RETRY_AFTER, later.parse().unwrap());
    let d = retry_after(&h).unwrap();
    assert!(
        d > Duration::from_secs(100) && d <= Duration::from_secs(120),
        "{d:?}"
    );
}
