//! The fidelity report: how many exchanges were compared, how many were
//! identical after normalization, and every difference with its cause (from
//! the allowed list) or as unexplained; differences the list expects but
//! that no longer occur are reported too, so the list cannot rot.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::allowed::{Allowed, Entry};
use crate::compare::{Difference, compare, exchange_ids};
use crate::exchange::Exchange;

/// Where the unexplained differences are grouped when no cause names them.
pub const UNEXPLAINED: &str = "(not on the allowed list)";

#[derive(Debug, Serialize)]
pub struct Report {
    /// The compared exchanges' names.
    pub compared: Vec<String>,
    pub exchanges: usize,
    /// kubectl's own discovery refreshes, replayed but not compared.
    pub incidental: usize,
    pub identical: usize,
    /// Cause -> its differences.
    pub by_cause: BTreeMap<String, Vec<Difference>>,
    /// Allowed entries that matched nothing.
    pub stale: Vec<Entry>,
}

impl Report {
    pub fn build(recorded: &[Exchange], replayed: &[Exchange], allowed: &Allowed) -> Report {
        let compared: Vec<(&Exchange, &Exchange)> = recorded.iter().zip(replayed).filter(|(r, _)| !r.incidental).collect();
        let owned: Vec<Exchange> = compared.iter().map(|(r, _)| (*r).clone()).collect();
        let ids = exchange_ids(&owned);
        let mut identical = 0;
        let mut by_cause: BTreeMap<String, Vec<Difference>> = BTreeMap::new();
        let mut used = vec![false; allowed.differences.len()];
        for (id, (real, embedded)) in ids.iter().zip(&compared) {
            let diffs = compare(id, real, embedded);
            if diffs.is_empty() {
                identical += 1;
            }
            for d in diffs {
                let cause = match allowed.differences.iter().position(|e| Some(e) == allowed.matching(&d)) {
                    Some(i) => {
                        used[i] = true;
                        allowed.differences[i].cause.clone()
                    }
                    None => UNEXPLAINED.to_string(),
                };
                by_cause.entry(cause).or_default().push(d);
            }
        }
        // A whole-exchange entry names a feature whose effect may vary from run to run (what a
        // controller has done by the time of a read): it is in use while its exchange occurs.
        for (entry, used) in allowed.differences.iter().zip(used.iter_mut()) {
            if entry.path == "*" && ids.contains(&entry.exchange) {
                *used = true;
            }
        }
        let stale = allowed.differences.iter().zip(&used).filter(|(_, u)| !**u).map(|(e, _)| e.clone()).collect();
        Report { compared: ids.clone(), exchanges: compared.len(), incidental: recorded.len() - compared.len(), identical, by_cause, stale }
    }

    pub fn unexplained(&self) -> &[Difference] {
        self.by_cause.get(UNEXPLAINED).map_or(&[], Vec::as_slice)
    }

    /// The human summary `cargo xtask fidelity` prints.
    pub fn summary(&self, detail: usize) -> String {
        let mut out = format!(
            "fidelity: {} exchanges compared, {} identical after normalization ({} more were kubectl's own discovery refreshes, replayed, not compared)\n",
            self.exchanges, self.identical, self.incidental
        );
        for (cause, diffs) in &self.by_cause {
            let exchanges: std::collections::BTreeSet<&str> = diffs.iter().map(|d| d.exchange.as_str()).collect();
            out += &format!("  {cause}: {} differences in {} exchanges\n", diffs.len(), exchanges.len());
        }
        for d in self.unexplained().iter().take(detail) {
            out += &format!("    {}  {}\n      real:     {}\n      embedded: {}\n", d.exchange, d.path, short(&d.real), short(&d.embedded));
        }
        if self.unexplained().len() > detail {
            out += &format!("    ... {} more in the report file\n", self.unexplained().len() - detail);
        }
        for e in &self.stale {
            out += &format!("  listed but no longer occurring ({}): {}  {}\n", e.cause, e.exchange, e.path);
        }
        out
    }
}

fn short(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.len() > 300 { format!("{}...", &s[..s.floor_char_boundary(300)]) } else { s }
}
