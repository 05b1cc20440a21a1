//! What a head-to-head run reads from outside the contestant: the API
//! server's own request counter (`apiserver_request_total` on its
//! `/metrics`), a process's CPU time and peak RSS from `/proc`, and the
//! Jobs as they appear in etcd, so that watching progress costs the API
//! server nothing.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use real_cluster::ControlPlane;

/// `apiserver_request_total` summed by verb, resource and subresource.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Requests(pub BTreeMap<(String, String, String), f64>);

/// Resources that are no contestant's work: kube-apiserver renews its own
/// identity Lease and reconciles the `kubernetes` Service's endpoints every
/// ten seconds whoever runs.
const NOT_COUNTED: &[&str] = &["leases", "endpoints", "endpointslices"];

impl Requests {
    /// Scrapes kube-apiserver's `/metrics` as the administrator.
    pub fn scrape(plane: &ControlPlane) -> anyhow::Result<(Requests, Requests)> {
        let out = plane.kubectl(&["get", "--raw", "/metrics"]);
        anyhow::ensure!(out.status.success(), "kubectl get --raw /metrics: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        Ok((Self::parse(&text), Self::parse_metric(&text, "apiserver_request_duration_seconds_sum")))
    }

    /// Mean milliseconds the server spent per request of each kind, given
    /// the seconds it spent on them (`self` holds the counts).
    pub fn mean_ms(&self, seconds: &Requests) -> String {
        self.0
            .iter()
            .filter_map(|(k, n)| {
                let (verb, resource, sub) = k;
                let sub = if sub.is_empty() { String::new() } else { format!("/{sub}") };
                seconds.0.get(k).map(|s| format!("{verb} {resource}{sub} {:.1} ms", s * 1e3 / n))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Sums the samples of `apiserver_request_total` over codes, groups,
    /// versions and scopes; requests without a resource (`/metrics`,
    /// `/readyz`, discovery) are left out: the bench makes those.
    pub fn parse(text: &str) -> Requests {
        Self::parse_metric(text, "apiserver_request_total")
    }

    /// The same sums of another per-request metric, e.g.
    /// `apiserver_request_duration_seconds_sum` (seconds the server spent).
    pub fn parse_metric(text: &str, metric: &str) -> Requests {
        let mut sums = BTreeMap::new();
        let prefix = format!("{metric}{{");
        for line in text.lines().filter(|l| l.starts_with(&prefix)) {
            let Some((labels, value)) = line.rsplit_once(' ') else { continue };
            let Ok(value) = value.parse::<f64>() else { continue };
            let label = |name: &str| {
                let key = format!("{name}=\"");
                labels.split(&key).nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("").to_string()
            };
            let resource = label("resource");
            if resource.is_empty() || NOT_COUNTED.contains(&resource.as_str()) {
                continue;
            }
            *sums.entry((label("verb"), resource, label("subresource"))).or_insert(0.0) += value;
        }
        Requests(sums)
    }

    /// What `self` counted that `before` had not.
    pub fn since(&self, before: &Requests) -> Requests {
        let diff = self.0.iter().map(|(k, v)| (k.clone(), v - before.0.get(k).copied().unwrap_or(0.0))).filter(|(_, v)| *v > 0.0).collect();
        Requests(diff)
    }

    /// Takes `n` requests of (verb, resource, subresource) off the counts
    /// (the bench's own), never below zero.
    pub fn subtract(&mut self, (verb, resource, sub): (&str, &str, &str), n: f64) {
        if let Some(v) = self.0.get_mut(&(verb.to_string(), resource.to_string(), sub.to_string())) {
            *v = (*v - n).max(0.0);
        }
        self.0.retain(|_, v| *v > 0.0);
    }

    pub fn total(&self) -> f64 {
        self.0.values().sum()
    }

    /// Totals by verb (`POST`, `PUT`, `LIST`, ...).
    pub fn by_verb(&self) -> BTreeMap<String, f64> {
        let mut verbs = BTreeMap::new();
        for ((verb, _, _), v) in &self.0 {
            *verbs.entry(verb.clone()).or_insert(0.0) += v;
        }
        verbs
    }

    /// `VERB resource[/sub]=n` for each, as one line.
    pub fn detail(&self) -> String {
        self.0
            .iter()
            .map(|((verb, resource, sub), v)| {
                let sub = if sub.is_empty() { String::new() } else { format!("/{sub}") };
                format!("{verb} {resource}{sub}={v:.0}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// CPU time (user + system) of process `pid` so far.
pub fn cpu(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rfind(')').map(|i| &stat[i + 2..]).ok_or_else(|| anyhow::anyhow!("/proc/{pid}/stat has no command"))?;
    let fields: Vec<&str> = rest.split(' ').collect();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).ok_or_else(|| anyhow::anyhow!("/proc/{pid}/stat field {i}"));
    // utime and stime, in USER_HZ (100 on every Linux this runs on).
    Ok(Duration::from_millis((tick(11)? + tick(12)?) * 10))
}

/// A field of `/proc/PID/status` in KiB (`VmHWM`: peak RSS, `VmRSS`: now).
pub fn status_kib(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no {field} in /proc/{pid}/status"))
}

/// Resets `pid`'s peak RSS (`VmHWM`) to its current RSS (`5` written to
/// `/proc/PID/clear_refs`, Linux 4.0+), so a later `VmHWM` is the peak of
/// what ran since.
pub fn reset_peak(pid: u32) -> anyhow::Result<()> {
    let file = format!("/proc/{pid}/clear_refs");
    std::fs::write(&file, "5").map_err(|e| anyhow::anyhow!("reset the peak RSS in {file}: {e}"))
}

/// Proportional set size of `pid` in KiB (`Pss` in `/proc/PID/smaps_rollup`:
/// each shared page split among the processes that map it).
pub fn pss_kib(pid: u32) -> anyhow::Result<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))?;
    rollup
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no Pss in /proc/{pid}/smaps_rollup"))
}

/// The machine's 1-minute load average.
pub fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg").ok().and_then(|s| s.split_whitespace().next()?.parse().ok()).unwrap_or(f64::NAN)
}

/// New keys under an etcd prefix, polled through etcd's JSON gateway with
/// `min_create_revision`, so each poll returns only what was created since
/// the last one; each key is stamped with the time of the poll that saw it.
pub struct NewKeys {
    url: String,
    prefix: String,
    after_revision: i64,
    pub seen: Vec<(String, SystemTime)>,
}

impl NewKeys {
    /// Keys under `prefix` created after etcd's current revision.
    pub fn start(plane: &ControlPlane, prefix: &str) -> NewKeys {
        NewKeys {
            url: format!("{}/v3/kv/range", plane.etcd_url()),
            prefix: prefix.to_string(),
            after_revision: plane.etcd_revision(),
            seen: Vec::new(),
        }
    }

    /// One poll; returns how many keys were new.
    pub fn poll(&mut self) -> anyhow::Result<usize> {
        let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
        let mut end = self.prefix.clone().into_bytes();
        // The range end of a prefix: its last byte plus one.
        *end.last_mut().expect("a non-empty prefix") += 1;
        let request = serde_json::json!({
            "key": b64(self.prefix.as_bytes()),
            "range_end": b64(&end),
            "keys_only": true,
            "min_create_revision": (self.after_revision + 1).to_string(),
        });
        let body = real_cluster::http::post_json(&self.url, &request.to_string())?;
        let now = SystemTime::now();
        let answer: serde_json::Value = serde_json::from_str(&body)?;
        let mut new = 0;
        for kv in answer["kvs"].as_array().into_iter().flatten() {
            let revision: i64 = kv["create_revision"].as_str().and_then(|r| r.parse().ok()).unwrap_or(0);
            let key = kv["key"].as_str().and_then(|k| base64::engine::general_purpose::STANDARD.decode(k).ok()).unwrap_or_default();
            self.after_revision = self.after_revision.max(revision);
            self.seen.push((String::from_utf8_lossy(&key).into_owned(), now));
            new += 1;
        }
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_counts_by_verb_leave_out_leases_and_non_resource_paths() {
        let text = r#"# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch.tutorial.kubebuilder.io",resource="cronjobs",scope="resource",subresource="status",verb="PUT",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="",verb="GET",version=""} 3
"#;
        let after = Requests::parse(text);
        assert_eq!(after.total(), 14.0);
        assert_eq!(after.by_verb().get("POST"), Some(&9.0));
        let before = Requests::parse(&text.replace("} 7", "} 1"));
        let diff = after.since(&before);
        assert_eq!(diff.total(), 6.0);
        assert_eq!(diff.detail(), "POST jobs=6");
    }
}
