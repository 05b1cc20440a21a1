//! The consistent-hash ring: which shard a key belongs to.
//!
//! Each shard puts [`TOKENS_PER_SHARD`] virtual nodes on a ring of 64-bit
//! tokens (`xxh64("<shard>-<i>")`); a key belongs to the shard owning the
//! first token at or after `xxh64(key)`, wrapping around. Adding or removing
//! one shard moves only the keys between its tokens and their predecessors
//! (about `1/n` of them), and with 100 virtual nodes per shard the shares stay
//! within a few percent of even for small rings. The token and key hashes are
//! those of timebertt/kubernetes-controller-sharding, so a key lands on the
//! same shard name there and here.

use xxhash_rust::xxh64::xxh64;

/// Virtual nodes per shard (the reference sharder's default).
pub const TOKENS_PER_SHARD: usize = 100;

/// A ring of shards. Built from a membership snapshot; rebuilt when it changes.
#[derive(Clone, Debug, Default)]
pub struct Ring {
    /// Sorted by token, then by shard index, so that a (vanishingly rare)
    /// token collision resolves the same way on every replica.
    tokens: Vec<(u64, usize)>,
    shards: Vec<String>,
}

impl Ring {
    /// A ring over `shards` (duplicates ignored) with [`TOKENS_PER_SHARD`].
    pub fn new<S: AsRef<str>>(shards: impl IntoIterator<Item = S>) -> Ring {
        Ring::with_tokens(shards, TOKENS_PER_SHARD)
    }

    /// A ring with `tokens_per_shard` virtual nodes per shard (at least one).
    pub fn with_tokens<S: AsRef<str>>(shards: impl IntoIterator<Item = S>, tokens_per_shard: usize) -> Ring {
        let mut names: Vec<String> = shards.into_iter().map(|s| s.as_ref().to_owned()).collect();
        names.sort();
        names.dedup();
        let per_shard = tokens_per_shard.max(1);
        let mut tokens = Vec::with_capacity(names.len() * per_shard);
        for (index, name) in names.iter().enumerate() {
            for i in 0..per_shard {
                tokens.push((xxh64(format!("{name}-{i}").as_bytes(), 0), index));
            }
        }
        tokens.sort_unstable();
        Ring { tokens, shards: names }
    }

    /// The shard `key` belongs to; `None` on an empty ring.
    pub fn shard_for(&self, key: &str) -> Option<&str> {
        if self.tokens.is_empty() {
            return None;
        }
        let hash = xxh64(key.as_bytes(), 0);
        let at = self.tokens.partition_point(|&(token, _)| token < hash);
        let (_, index) = self.tokens[if at == self.tokens.len() { 0 } else { at }];
        Some(&self.shards[index])
    }

    /// The shards on the ring, sorted by name.
    pub fn shards(&self) -> &[String] {
        &self.shards
    }

    /// True when no shard is available.
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn keys(n: usize) -> impl Iterator<Item = String> {
        (0..n).map(|i| format!("batch.tutorial.kubebuilder.io/CronJob/default/cronjob-{i}"))
    }

    #[test]
    fn an_empty_ring_names_no_shard() {
        assert_eq!(Ring::new(Vec::<String>::new()).shard_for("a"), None);
    }

    #[test]
    fn one_shard_owns_everything() {
        let ring = Ring::new(["host-0"]);
        assert!(keys(100).all(|k| ring.shard_for(&k) == Some("host-0")));
    }

    #[test]
    fn order_and_duplicates_of_members_do_not_matter() {
        let a = Ring::new(["host-0", "host-1", "host-2"]);
        let b = Ring::new(["host-2", "host-0", "host-1", "host-0"]);
        assert!(keys(500).all(|k| a.shard_for(&k) == b.shard_for(&k)));
    }

    #[test]
    fn three_shards_share_keys_roughly_evenly() {
        let ring = Ring::new(["host-0", "host-1", "host-2"]);
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for key in keys(3000) {
            *counts.entry(ring.shard_for(&key).unwrap()).or_default() += 1;
        }
        assert_eq!(counts.len(), 3);
        for (shard, n) in counts {
            // An even share is 1,000; 100 virtual nodes keep each within 20%.
            assert!((800..=1200).contains(&n), "{shard} owns {n} of 3000");
        }
    }

    #[test]
    fn adding_a_shard_moves_keys_only_to_it() {
        let before = Ring::new(["host-0", "host-1", "host-2"]);
        let after = Ring::new(["host-0", "host-1", "host-2", "host-3"]);
        let mut moved = 0;
        for key in keys(3000) {
            let (old, new) = (before.shard_for(&key).unwrap(), after.shard_for(&key).unwrap());
            if old != new {
                assert_eq!(new, "host-3", "{key} moved between old shards");
                moved += 1;
            }
        }
        // About a quarter of the keys move to the new shard.
        assert!((450..=1050).contains(&moved), "{moved} of 3000 moved");
    }

    #[test]
    fn removing_a_shard_moves_only_its_keys() {
        let before = Ring::new(["host-0", "host-1", "host-2"]);
        let after = Ring::new(["host-0", "host-2"]);
        for key in keys(3000) {
            let old = before.shard_for(&key).unwrap();
            if old != "host-1" {
                assert_eq!(after.shard_for(&key), Some(old), "{key} moved off a live shard");
            }
        }
    }

    #[test]
    fn tokens_are_xxh64_of_shard_and_index() {
        // A key hashing to exactly a shard's token belongs to that shard.
        let ring = Ring::with_tokens(["a", "b"], 1);
        assert_eq!(ring.shard_for("a-0"), Some("a"));
        assert_eq!(ring.shard_for("b-0"), Some("b"));
    }
}
