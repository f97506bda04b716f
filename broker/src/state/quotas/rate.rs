//! The byte rates of Produce and Fetch measured against client quotas, and the throttle time
//! a request over its quota gets, as Kafka's `ClientQuotaManager` computes them with its
//! default settings (`quota.window.num` 11 samples of `quota.window.size.seconds` 1 s).
//!
//! A rate is the bytes of the samples still in the window divided by the window's length,
//! counted as at least 10 full samples plus the current one's elapsed part (Kafka's
//! `Rate.windowSize`); a request that takes the rate past the quota is throttled by
//! `(rate - quota) / quota × window` ms (`QuotaUtils.throttleTime`), the time it takes the rate
//! to fall back to the quota with nothing more recorded. Each broker measures its own clients,
//! as each Kafka broker does.

use super::{ClientQuotas, Metric, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE};

/// Length of one sample, in ms (Kafka's `quota.window.size.seconds` default, 1 s).
pub const QUOTA_WINDOW_MS: u64 = 1_000;
/// Samples kept (Kafka's `quota.window.num` default, 11).
pub const QUOTA_WINDOW_SAMPLES: usize = 11;

/// Which quota a request is measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Throttle {
    /// Produce request bytes against `producer_byte_rate`.
    Produce,
    /// Fetch response bytes against `consumer_byte_rate`.
    Fetch,
}

impl Throttle {
    fn key(self) -> &'static str {
        match self {
            Self::Produce => PRODUCER_BYTE_RATE,
            Self::Fetch => CONSUMER_BYTE_RATE,
        }
    }
}

/// Where a rate is kept: the broker, the quota kind and the metric tags.
pub(crate) type SensorKey = (i32, Throttle, Metric);

/// One sample: when it started (ms on kmock's clock) and what it holds.
#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: u64,
    value: f64,
}

/// A rate sampled as Kafka's `SampledStat` samples it: up to [`QUOTA_WINDOW_SAMPLES`] samples
/// of [`QUOTA_WINDOW_MS`], the oldest dropped when the window has passed it.
#[derive(Debug, Default)]
pub(crate) struct SampledRate {
    samples: Vec<Sample>,
}

impl SampledRate {
    fn purge(&mut self, now_ms: u64) {
        let expire = QUOTA_WINDOW_SAMPLES as u64 * QUOTA_WINDOW_MS;
        self.samples
            .retain(|s| now_ms.saturating_sub(s.start_ms) < expire);
    }

    fn record(&mut self, value: f64, now_ms: u64) {
        self.purge(now_ms);
        match self.samples.last_mut() {
            Some(s) if now_ms.saturating_sub(s.start_ms) < QUOTA_WINDOW_MS => s.value += value,
            _ => {
                self.samples.push(Sample {
                    start_ms: now_ms,
                    value,
                });
                if self.samples.len() > QUOTA_WINDOW_SAMPLES {
                    self.samples.remove(0);
                }
            }
        }
    }

    /// The window's length in ms (Kafka's `Rate.windowSize`).
    fn window_ms(&self, now_ms: u64) -> u64 {
        let oldest = self.samples.first().map_or(now_ms, |s| s.start_ms);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / QUOTA_WINDOW_MS;
        let min_full = QUOTA_WINDOW_SAMPLES as u64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * QUOTA_WINDOW_MS;
        }
        elapsed.max(1)
    }

    /// Whether every sample has left the window at `now_ms`: the rate is then the same as a
    /// new one's, so the entry can go.
    fn expired(&self, now_ms: u64) -> bool {
        let expire = QUOTA_WINDOW_SAMPLES as u64 * QUOTA_WINDOW_MS;
        self.samples
            .iter()
            .all(|s| now_ms.saturating_sub(s.start_ms) >= expire)
    }

    /// Bytes per second over the window.
    fn rate(&self, now_ms: u64) -> f64 {
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (self.window_ms(now_ms) as f64 / 1_000.0)
    }
}

impl ClientQuotas {
    /// Records `bytes` of a request of client `client_id` (user `user`) on broker `node_id`
    /// against its `kind` quota at `now_ms`, and gives the throttle time in ms (0 when no
    /// quota applies or the rate stays within it), as Kafka's
    /// `ClientQuotaManager.recordAndGetThrottleTimeMs`.
    pub fn record(
        &mut self,
        node_id: i32,
        kind: Throttle,
        user: &str,
        client_id: &str,
        bytes: usize,
        now_ms: u64,
    ) -> u32 {
        let Some((quota, metric)) = self.quota_for(kind.key(), user, client_id) else {
            return 0;
        };
        let key = (node_id, kind, metric);
        if !self.rates.contains_key(&key) {
            self.sweep_rates(now_ms);
        }
        let rate = self.rates.entry(key).or_default();
        rate.record(bytes as f64, now_ms);
        let measured = rate.rate(now_ms);
        if measured <= quota {
            return 0;
        }
        let throttle = (measured - quota) / quota * rate.window_ms(now_ms) as f64;
        throttle.round().min(f64::from(u32::MAX)) as u32
    }

    /// Drops the rates whose samples have all left the window, at most once a window (11 s),
    /// so a client that changes its client id on every request does not grow the map forever.
    /// Kafka expires a quota sensor after an hour without activity; a rate with no sample in
    /// its window measures 0 exactly as a new one does, so dropping it sooner changes no
    /// throttle time.
    pub(crate) fn sweep_rates(&mut self, now_ms: u64) {
        let window = QUOTA_WINDOW_SAMPLES as u64 * QUOTA_WINDOW_MS;
        if self
            .rates_swept_ms
            .is_some_and(|at| now_ms.saturating_sub(at) < window)
        {
            return;
        }
        self.rates_swept_ms = Some(now_ms);
        self.rates.retain(|_, rate| !rate.expired(now_ms));
    }

    /// Takes back `bytes` recorded by [`Self::record`] (a throttled Fetch answers no records,
    /// so its bytes do not count: Kafka's `unrecordQuotaSensor`).
    pub fn unrecord(
        &mut self,
        node_id: i32,
        kind: Throttle,
        user: &str,
        client_id: &str,
        bytes: usize,
        now_ms: u64,
    ) {
        if let Some((_, metric)) = self.quota_for(kind.key(), user, client_id) {
            if let Some(rate) = self.rates.get_mut(&(node_id, kind, metric)) {
                rate.record(-(bytes as f64), now_ms);
            }
        }
    }

    /// The most bytes one Fetch may answer without being sure to be throttled: the quota
    /// times the window's full samples (Kafka's `getMaxValueInQuotaWindow`); `None` without a
    /// quota.
    pub fn max_fetch_bytes(&self, user: &str, client_id: &str) -> Option<f64> {
        self.quota_for(CONSUMER_BYTE_RATE, user, client_id)
            .map(|(quota, _)| {
                quota * (QUOTA_WINDOW_SAMPLES as f64 - 1.0) * (QUOTA_WINDOW_MS as f64 / 1_000.0)
            })
    }
}
