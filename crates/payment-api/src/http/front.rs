//! The request's front door, one tower layer around every route: it refuses headers over the
//! limit (431) and writes the request's log line when it is answered.
//!
//! One hand-written service instead of two `axum::middleware::from_fn` layers: each of those
//! clones the service behind it and boxes a future on every request, and on a replay (a few
//! microseconds of Pagar's own work) that was a measurable share in `perf`.

use crate::domain::{IdempotencyKey, MerchantId};
use crate::error::ApiError;
use axum::extract::Request;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// What a keyed request's log line says besides its method, path and status: put in the
/// response's extensions by the handler, read by the front door.
#[derive(Debug, Clone)]
pub(crate) struct Logged {
    pub(crate) merchant: Option<MerchantId>,
    pub(crate) key: Option<IdempotencyKey>,
    pub(crate) outcome: &'static str,
}

/// Wraps a route in a [`Front`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrontLayer {
    pub(crate) max_header_bytes: usize,
}

impl<S> tower_layer::Layer<S> for FrontLayer {
    type Service = Front<S>;

    fn layer(&self, inner: S) -> Front<S> {
        Front {
            inner,
            max_header_bytes: self.max_header_bytes,
        }
    }
}

/// The service [`FrontLayer`] makes.
#[derive(Debug, Clone)]
pub(crate) struct Front<S> {
    inner: S,
    max_header_bytes: usize,
}

/// A request's start, kept for its log line (only when INFO lines are written).
struct Started {
    at: Instant,
    method: Method,
    uri: Uri,
}

impl<S> tower_service::Service<Request> for Front<S>
where
    S: tower_service::Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = FrontFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let started = tracing::enabled!(tracing::Level::INFO).then(|| Started {
            at: Instant::now(),
            method: req.method().clone(),
            uri: req.uri().clone(),
        });
        let size: usize = req
            .headers()
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 4)
            .sum();
        let answer = if size > self.max_header_bytes {
            Answer::Refused {
                response: Some(ApiError::HeadersTooLarge(self.max_header_bytes).into_response()),
            }
        } else {
            Answer::Routed {
                future: self.inner.call(req),
            }
        };
        FrontFuture { answer, started }
    }
}

pin_project_lite::pin_project! {
    /// The routed request's future, or the refusal, and what the log line needs.
    pub(crate) struct FrontFuture<F> {
        #[pin]
        answer: Answer<F>,
        started: Option<Started>,
    }
}

pin_project_lite::pin_project! {
    #[project = AnswerProj]
    enum Answer<F> {
        Routed { #[pin] future: F },
        Refused { response: Option<Response> },
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for FrontFuture<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let res = match this.answer.project() {
            AnswerProj::Routed { future } => match future.poll(cx) {
                Poll::Ready(Ok(res)) => res,
                Poll::Pending => return Poll::Pending,
            },
            AnswerProj::Refused { response } => {
                response.take().expect("a refusal is answered once")
            }
        };
        if let Some(started) = this.started.take() {
            log(&started, &res);
        }
        Poll::Ready(Ok(res))
    }
}

/// One line per request, written when it is answered, with every field it has: method, path,
/// status, time taken and, for a keyed `POST`, merchant, key and outcome. One event and no span:
/// in `perf` of a replay run, a span per request (its creation, the fields recorded into it as
/// they became known, its close) cost more than the line itself. A first execution has a span of
/// its own (`idempotency::Runner::run`) for the lines its work writes.
fn log(started: &Started, res: &Response) {
    let logged = res.extensions().get::<Logged>();
    // Text fields as `Display` (`display` is the macro's own): recorded as `&str` they would be
    // escaped as `Debug` strings.
    tracing::info!(
        method = %started.method,
        path = %started.uri.path(),
        status = res.status().as_u16(),
        micros = started.at.elapsed().as_micros() as u64,
        merchant = logged.and_then(|l| l.merchant.as_ref()).map(display),
        key = logged.and_then(|l| l.key.as_ref()).map(|k| display(k.as_ref())),
        outcome = logged.map(|l| display(l.outcome)),
        "request"
    );
}
