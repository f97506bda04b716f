//! What a workload does, learned from the journal of a run without faults: the fault space
//! [`super::space`] draws from.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::journal::Entry;

/// A workload's traffic, as one fault-free run showed it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Traffic {
    /// Requests of each API (Kafka's names), by count.
    pub apis: BTreeMap<String, u64>,
    /// Node ids of the brokers the workload sent requests to.
    pub brokers: BTreeSet<i32>,
    /// Consumer groups named in its requests.
    pub groups: BTreeSet<String>,
    /// Partitions named in its requests, internal topics (`__…`) left out.
    pub partitions: BTreeSet<(String, i32)>,
    /// Producer ids its requests carried.
    pub producer_ids: BTreeSet<i64>,
    /// When its first request arrived, after the cluster started.
    pub start: Duration,
    /// From its first request to its last.
    pub span: Duration,
}

impl Traffic {
    /// The traffic of `entries` (a journal), cluster operations left out.
    pub fn learn(entries: &[Entry]) -> Self {
        let mut traffic = Self::default();
        let (mut first, mut last) = (u64::MAX, 0);
        for entry in entries.iter().filter(|e| e.operation.is_none()) {
            let Some(api) = &entry.api else { continue };
            *traffic.apis.entry(api.to_string()).or_default() += 1;
            traffic.brokers.insert(entry.broker);
            traffic
                .groups
                .extend(entry.groups().into_iter().map(str::to_owned));
            traffic.partitions.extend(
                entry
                    .partitions()
                    .into_iter()
                    .filter(|(t, _)| !t.starts_with("__"))
                    .map(|(t, p)| (t.to_owned(), p)),
            );
            traffic
                .producer_ids
                .extend(entry.producer_ids().into_iter().filter(|pid| *pid >= 0));
            first = first.min(entry.at_us);
            last = last.max(entry.at_us);
        }
        if first <= last {
            traffic.start = Duration::from_micros(first);
            traffic.span = Duration::from_micros(last - first);
        }
        traffic
    }

    /// Topics named in its requests (internal ones left out).
    pub fn topics(&self) -> BTreeSet<&str> {
        self.partitions.iter().map(|(t, _)| t.as_str()).collect()
    }
}

impl std::fmt::Display for Traffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let apis: Vec<String> = self.apis.iter().map(|(a, n)| format!("{a} {n}")).collect();
        write!(
            f,
            "{} over {:.1?} from +{:.1?}; brokers {:?}; {} partitions; groups {:?}; producer ids {:?}",
            apis.join(", "),
            self.span,
            self.start,
            self.brokers,
            self.partitions.len(),
            self.groups,
            self.producer_ids
        )
    }
}
