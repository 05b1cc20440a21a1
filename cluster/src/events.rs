//! Event expiry: kube-apiserver stores Events with a TTL (`--event-ttl`, default 1 h), renewed
//! on every write, so a cluster holds about an hour of Events. Here a controller deletes Events
//! whose last write (the newest `managedFields` time, else `creationTimestamp`) is older than
//! [`ClusterConfig::event_ttl`](super::ClusterConfig::event_ttl). Without it a long run (a week
//! of virtual time, say) piles up Events that every garbage-collector pass has to read.

use super::{Next, builtin, meta_str};
use apiserver::rest::{Core, DeleteOptions};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::Duration;
use tokio::time::Instant;

/// The Event expiry controller.
#[derive(Debug)]
pub struct EventExpiry {
    ttl: Duration,
}

/// Whether a commit calls for a pass at once: never. A pass asks to wake when the soonest
/// Event expires, and an Event written since is picked up by the next resync (it expires an
/// hour later at the earliest), so Events are deleted at most one resync interval late and the
/// busiest kind in a cluster does not cost a pass per write.
pub(crate) fn relevant(_: &apiserver::store::Event) -> bool {
    false
}

fn time(text: Option<&str>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text?).ok().map(|t| t.with_timezone(&Utc))
}

/// When an Event was last written.
fn last_write(event: &Value) -> Option<DateTime<Utc>> {
    let fields = event.pointer("/metadata/managedFields").and_then(Value::as_array);
    let newest = fields.into_iter().flatten().filter_map(|f| time(f.get("time").and_then(Value::as_str))).max();
    newest.or_else(|| time(event.pointer("/metadata/creationTimestamp").and_then(Value::as_str)))
}

impl EventExpiry {
    /// Expiry after `ttl` without a write.
    pub fn new(ttl: Duration) -> Self {
        EventExpiry { ttl }
    }

    /// Deletes expired Events; asks to wake when the next one expires.
    pub(crate) fn pass(&mut self, core: &Core) -> Next {
        let mut next = Next::default();
        let res = builtin(core, "", "v1", "events");
        let now = core.config.clock.now();
        let ttl = chrono::Duration::from_std(self.ttl).unwrap_or(chrono::Duration::MAX);
        for event in core.store.list_shared(&res.group_resource(), None).0 {
            let Some(written) = last_write(&event) else { continue };
            let expires = written + ttl;
            if expires > now {
                let left = (expires - now).to_std().unwrap_or_default();
                next.at(Instant::now() + left);
                continue;
            }
            let o = DeleteOptions { resource_version: Some(meta_str(&event, "resourceVersion").into()), ..Default::default() };
            match core.delete(&res, meta_str(&event, "namespace"), meta_str(&event, "name"), &o) {
                Ok(_) | Err(apiserver::ApiError { code: 404, .. }) => {}
                // Written again since it was listed: look again (its TTL restarted).
                Err(e) if e.code == 409 => next.retry = true,
                Err(e) => {
                    tracing::warn!(error = %e.message, "could not expire an Event");
                    next.retry = true;
                }
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_last_write_is_the_newest_managed_fields_time() {
        let e = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z", "managedFields": [
            {"manager": "a", "time": "2026-01-01T00:10:00Z"}, {"manager": "b", "time": "2026-01-01T00:20:00Z"}]}});
        assert_eq!(last_write(&e), time(Some("2026-01-01T00:20:00Z")));
        let bare = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}});
        assert_eq!(last_write(&bare), time(Some("2026-01-01T00:00:00Z")));
    }
}
