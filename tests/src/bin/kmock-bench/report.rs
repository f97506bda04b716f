//! Figures, their medians and ratios, printed as a table and as JSON.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::peers::Peer;

/// Whether a larger or a smaller number is the better one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
}

/// One measured quantity (a row of the table), with every peer's rounds.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The figure number and name, e.g. `2 rdkafka producer`.
    pub figure: String,
    /// What is measured, e.g. `messages/s`.
    pub metric: String,
    pub unit: &'static str,
    pub better: Better,
    /// Every round's value, by peer (in the order the rounds ran).
    pub rounds: BTreeMap<Peer, Vec<f64>>,
    /// Anything that limits or qualifies the numbers, in a sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Row {
    pub fn new(figure: &str, metric: &str, unit: &'static str, better: Better) -> Self {
        Self {
            figure: figure.to_owned(),
            metric: metric.to_owned(),
            unit,
            better,
            rounds: BTreeMap::new(),
            note: None,
        }
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    pub fn push(&mut self, peer: Peer, value: f64) {
        self.rounds.entry(peer).or_default().push(value);
    }

    /// The median of a peer's rounds, if it was measured.
    pub fn median(&self, peer: Peer) -> Option<f64> {
        self.rounds.get(&peer).map(|v| median(v))
    }

    /// kmock's median divided by `peer`'s, when both were measured and the quotient is a number.
    pub fn ratio(&self, peer: Peer) -> Option<f64> {
        Some(self.median(Peer::Kmock)? / self.median(peer)?).filter(|r| r.is_finite())
    }
}

/// The median of `values` (the mean of the middle two for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    percentile(values, 0.5)
}

/// The `q` quantile (0..=1) of `values`, interpolating between neighbours; NaN when empty.
pub fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = q * (sorted.len() - 1) as f64;
    let (low, high) = (at.floor() as usize, at.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (at - low as f64)
}

/// The machine and the moment a run happened on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub memory_gib: f64,
    pub cpu: String,
    pub kernel: String,
    /// `/proc/loadavg`'s 1-, 5- and 15-minute load averages at the start and end of the run.
    pub load_average_start: [f64; 3],
    pub load_average_end: [f64; 3],
    /// The load averages as each figure started.
    pub load_average_by_figure: Vec<(String, [f64; 3])>,
}

impl Machine {
    pub fn now() -> Self {
        let read = |path| std::fs::read_to_string(path).unwrap_or_default();
        let meminfo = read("/proc/meminfo");
        let mem_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
            .unwrap_or_default();
        Self {
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_gib: mem_kib / (1024.0 * 1024.0),
            cpu,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            load_average_start: load_average(),
            load_average_end: [f64::NAN; 3],
            load_average_by_figure: Vec::new(),
        }
    }
}

/// The 1-, 5- and 15-minute load averages.
pub fn load_average() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut fields = text
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(f64::NAN));
    [(); 3].map(|()| fields.next().unwrap_or(f64::NAN))
}

/// Everything a run printed, as its JSON is shaped.
#[derive(Debug, Serialize)]
pub struct Report {
    pub machine: Machine,
    pub rounds: usize,
    pub quick: bool,
    pub figures: Vec<JsonRow>,
}

/// A row with its medians and ratios computed, for the JSON.
#[derive(Debug, Serialize)]
pub struct JsonRow {
    #[serde(flatten)]
    pub row: Row,
    pub median: BTreeMap<Peer, f64>,
    /// kmock's median divided by each peer's.
    pub kmock_ratio: BTreeMap<Peer, f64>,
}

impl From<Row> for JsonRow {
    fn from(row: Row) -> Self {
        let median = row
            .rounds
            .keys()
            .map(|&p| (p, row.median(p).unwrap_or(f64::NAN)))
            .collect();
        let kmock_ratio = Peer::OTHERS
            .iter()
            .filter_map(|&p| Some((p, row.ratio(p)?)))
            .collect();
        Self {
            row,
            median,
            kmock_ratio,
        }
    }
}

/// A number with about four significant digits, and thousands separated.
pub fn show(value: f64) -> String {
    if !value.is_finite() {
        return "-".to_owned();
    }
    let decimals = match value.abs() {
        v if v >= 1000.0 => 0,
        v if v >= 100.0 => 1,
        v if v >= 10.0 => 2,
        _ => 3,
    };
    let text = format!("{value:.decimals$}");
    let (int, frac) = text
        .split_once('.')
        .map_or((&text[..], None), |(i, f)| (i, Some(f)));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// The rows as a Markdown table: medians, and kmock's ratio to each peer.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| figure | metric | unit | better | kmock | librdkafka mock | kfake | kmock ÷ librdkafka | kmock ÷ kfake |\n\
         |---|---|---|---|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let value = |p| row.median(p).map_or("n/a".to_owned(), show);
        let ratio = |p| row.ratio(p).map_or("n/a".to_owned(), |r| format!("{r:.2}"));
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.figure,
            row.metric,
            row.unit,
            match row.better {
                Better::Higher => "higher",
                Better::Lower => "lower",
            },
            value(Peer::Kmock),
            value(Peer::Librdkafka),
            value(Peer::Kfake),
            ratio(Peer::Librdkafka),
            ratio(Peer::Kfake),
        );
    }
    let notes: Vec<_> = rows
        .iter()
        .filter_map(|r| {
            Some(format!(
                "- {} / {}: {}",
                r.figure,
                r.metric,
                r.note.as_ref()?
            ))
        })
        .collect();
    if !notes.is_empty() {
        out += "\n";
        out += &notes.join("\n");
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_percentiles_interpolate() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.99), 4.96);
    }

    #[test]
    fn numbers_show_with_separators() {
        assert_eq!(show(1_234_567.8), "1,234,568");
        assert_eq!(show(12.345), "12.35");
        assert_eq!(show(-1234.0), "-1,234");
    }
}
