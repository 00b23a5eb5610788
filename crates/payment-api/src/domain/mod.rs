//! Domain types: parse, don't validate. Each type's constructor is the only way in, and its
//! error says what was wrong in a type of its own. One concept per file.

mod capture;
mod card;
mod fingerprint;
mod json;
mod key;
mod machine;
mod means;
mod merchant;
mod money;
mod operation;
mod payment;
mod pix;
mod plan;
mod refund;
mod request;
mod sale;
mod terminal;

pub use capture::{CaptureState, CaptureStep, UnknownCapture};
pub use card::{CardToken, UnknownCard};
pub use fingerprint::{BodyDigest, Fingerprint};
pub use json::{parse_json_strict, MalformedJson};
pub use key::{DownstreamKey, IdempotencyKey, KeyError};
pub use machine::{MachineId, MachineRequest, MachineStatus, OrderKey, UnknownMachineStatus};
pub use means::{Means, UnknownMeans};
pub use merchant::{InvalidMerchant, MerchantId};
pub use money::{AmountError, Centavos, MAX_VALOR_CENTAVOS};
pub use operation::{CancelByKey, CancelRules, KeyOperation, UnknownOperation};
pub use payment::{PaymentId, PaymentStatus, UnknownStatus};
pub use pix::{PixRequest, PixStatus, Txid, UnknownPixStatus, PIX_EXPIRY_RANGE};
pub use plan::{installments, CardMethod, CardPlan, Financing, UnknownPlan, MAX_PARCELAS};
pub use refund::{RefundId, RefundRequest, RefundStatus, UnknownRefundStatus};
pub(crate) use request::{json_object, unknown_fields};
pub use request::{FieldError, PaymentAsk, PaymentRequest, MAX_TEXT_LEN};
pub use sale::SaleRef;
pub use terminal::{InvalidTerminal, TerminalId};
