//! What the outbox refuses to queue: payments over the offline caps, and new attempts once the
//! file nears its size limit (the rest stays free to record the outcomes already owed).

use crate::domain::{Centavos, Total};
use crate::error::{CoreError, Result};

/// The offline caps: applied while the engine is not online.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OfflineCaps {
    /// Largest single payment accepted while offline.
    pub per_payment: Option<Centavos>,
    /// Largest total waiting while offline, this payment included.
    pub total: Option<Total>,
}

impl OfflineCaps {
    /// Refuses `valor` when it, or the queue it would make (`queued` already waiting), is over
    /// a cap.
    pub fn check(&self, valor: Centavos, queued: Total) -> Result<()> {
        if let Some(cap) = self.per_payment.filter(|cap| valor > *cap) {
            return Err(CoreError::OfflinePaymentTooLarge { cap });
        }
        let would_be = queued + valor;
        if let Some(cap) = self.total.filter(|cap| would_be > *cap) {
            return Err(CoreError::OfflineQueueFull { would_be, cap });
        }
        Ok(())
    }
}

/// The outbox's file size limit, in SQLite pages: new attempts are refused past `soft` pages;
/// SQLite itself stops at twice that, so outcomes can still be recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PageLimit {
    pub soft: u64,
}

impl PageLimit {
    /// The limit for a file of at most `max_bytes` (4 KiB pages, at least 8).
    pub fn for_bytes(max_bytes: u64) -> Self {
        Self {
            soft: (max_bytes / 4096).max(8),
        }
    }

    /// The hard limit SQLite enforces.
    pub fn hard(self) -> u64 {
        self.soft * 2
    }

    /// Refuses a new attempt when the file already has `pages` pages.
    pub fn check(self, pages: u64) -> Result<()> {
        if pages >= self.soft {
            Err(CoreError::StorageFull)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(v: i64) -> Centavos {
        Centavos::new(v).unwrap()
    }

    fn t(v: i64) -> Total {
        Total::new(v).unwrap()
    }

    #[test]
    fn a_payment_over_the_per_payment_cap_is_refused_whatever_the_queue() {
        let caps = OfflineCaps {
            per_payment: Some(c(1_000)),
            total: None,
        };
        assert!(caps.check(c(1_000), Total::ZERO).is_ok());
        assert!(matches!(
            caps.check(c(1_001), Total::ZERO),
            Err(CoreError::OfflinePaymentTooLarge { cap }) if cap == c(1_000)
        ));
    }

    #[test]
    fn the_total_counts_what_is_queued_and_this_payment() {
        let caps = OfflineCaps {
            per_payment: None,
            total: Some(t(5_000)),
        };
        assert!(caps.check(c(1_000), t(4_000)).is_ok());
        assert!(matches!(
            caps.check(c(1_000), t(4_001)),
            Err(CoreError::OfflineQueueFull { would_be, cap })
                if would_be == t(5_001) && cap == t(5_000)
        ));
        assert!(OfflineCaps::default()
            .check(c(100_000_000), t(i64::MAX / 2))
            .is_ok());
    }

    #[test]
    fn the_page_limit_leaves_as_much_again_for_outcomes() {
        let limit = PageLimit::for_bytes(1 << 20);
        assert_eq!(limit.soft, 256);
        assert_eq!(limit.hard(), 512);
        assert!(limit.check(255).is_ok());
        assert!(matches!(limit.check(256), Err(CoreError::StorageFull)));
        assert_eq!(PageLimit::for_bytes(0).soft, 8);
    }
}
