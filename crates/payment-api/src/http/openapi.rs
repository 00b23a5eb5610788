//! The OpenAPI document, generated from the handlers' annotations (utoipa).

use super::*;
use crate::schema::{
    AwaitedHeadBody, CancelamentoBody, EmAndamento, Health, Ledger, LedgerEntry, MachineDetail,
    NovoCancelamento, NovoEstorno, NovoPagamento, PaymentBody, PaymentCreated, PaymentDetail,
    PaymentList, PaymentRead, PixDetail, PixPaymentBody, Problem, RefundBody, RefundLedgerEntry,
    VendaBody, VendaTender,
};

struct SecuritySchemes;

impl utoipa::Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        for name in ["bearer", "admin"] {
            components.add_security_scheme(
                name,
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
        }
    }
}

/// The OpenAPI document, generated from the handlers' annotations.
#[derive(OpenApi)]
#[openapi(
    info(title = "Pagar payment API", description = "Honours Idempotency-Key: each key charges at most once and replays its stored answer."),
    paths(create_payment, create_refund, capture_payment, undo_payment, cancel_payment_key, get_payment, get_sale, cancel_waiting, pix_webhook, machine_notification, list_payments, health, ready, admin_ledger, admin_get_faults, admin_put_faults),
    components(schemas(NovoPagamento, PaymentBody, PaymentList, Problem, Ledger, LedgerEntry, Faults, Health, NovoEstorno, RefundBody, PaymentDetail, RefundLedgerEntry, EmAndamento, NovoCancelamento, CancelamentoBody, PixPaymentBody, PixDetail, MachinePaymentBody, MachineDetail, AwaitedHeadBody, PaymentCreated, PaymentRead, VendaBody, VendaTender)),
    modifiers(&SecuritySchemes)
)]
pub struct ApiDoc;
