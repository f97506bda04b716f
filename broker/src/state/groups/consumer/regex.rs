//! Subscriptions by regular expression (KIP-848's server-side regex, `SubscribedTopicRegex`),
//! as Kafka 4.4's `GroupMetadataManager.maybeUpdateRegularExpressions` and
//! `TopicRegexResolver` keep them.
//!
//! A group counts its members' regexes ([`Regexes`]), each kept compiled. A regex no member
//! had before must compile when a member subscribes to it: one that does not is refused with
//! INVALID_REGULAR_EXPRESSION (`Utils.throwIfRegularExpressionIsInvalid`). The
//! ConsumerGroupHeartbeat handler compiles the request's regex ([`compile`]) before it takes
//! the cluster's state lock, so no compilation is done under it; kmock refuses patterns over
//! 32 KiB or compiling past 256 KiB (stricter than Kafka, whose RE2/J has no such limit).
//! Every regex of the
//! group is resolved, matched as a whole (RE2/J's `Matcher.matches`) against every topic name
//! of the cluster, on a heartbeat at least [`REGEX_BATCH_REFRESH_MIN_INTERVAL`] (10 s, Kafka's
//! `REGEX_BATCH_REFRESH_MIN_INTERVAL_MS`) after the last resolution (the first at once), and
//! applied by the group's next heartbeat, as Kafka applies the result of its background
//! resolution after the heartbeat that started it: so a new regex, and a topic created later,
//! join the subscription within that time and one heartbeat. A member's
//! topics for the assignor are its names and what its regex resolved to.
//!
//! The syntax is the `regex` crate's, which follows RE2's as RE2/J's does; where they differ:
//! RE2/J's `\d`, `\w`, `\s` and `\b` are ASCII only, the crate's Unicode (topic names are
//! ASCII, so no match differs); the crate also accepts character class set operations
//! (`[a-z&&[^x]]`, `--`, `~~`) and the word boundaries `\<`, `\>`, which RE2/J refuses; RE2/J
//! accepts `\Q…\E` quoting, which the crate refuses; and the description after "is not a
//! valid regular expression:" is the crate's, not RE2/J's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::heartbeat::Refusal;
use super::TopicIndex;

/// Kafka's `REGEX_BATCH_REFRESH_MIN_INTERVAL_MS`: regexes are resolved again at most this
/// often.
pub const REGEX_BATCH_REFRESH_MIN_INTERVAL: Duration = Duration::from_secs(10);

/// Most bytes of a pattern compiled; a longer one is refused as invalid (the parser's memory
/// grows with the pattern before its own size limit applies).
const MAX_PATTERN_BYTES: usize = 32 * 1024;

/// Most bytes one compiled pattern may take (the `regex` crate's `size_limit`): an alternation
/// of about 300 topic names (5 KiB) fits; 64 KiB would refuse one of 80.
const MAX_COMPILED_BYTES: usize = 256 << 10;

/// Most bytes of lazy DFA cache one compiled pattern may use while matching (the `regex`
/// crate's `dfa_size_limit`; past it the crate falls back to slower engines, not an error).
const MAX_DFA_BYTES: usize = 256 << 10;

/// `regex` as a matcher of whole topic names. Costs up to a few milliseconds for a pattern
/// near the limits: called outside the cluster's state lock.
///
/// # Errors
/// INVALID_REGULAR_EXPRESSION with Kafka's message, when it does not compile (alone: a
/// pattern such as `a)|(b` that parses only inside the anchoring group is refused too).
pub fn compile(regex: &str) -> Result<regex::Regex, Refusal> {
    let build = |p: &str| {
        regex::RegexBuilder::new(p)
            .size_limit(MAX_COMPILED_BYTES)
            .dfa_size_limit(MAX_DFA_BYTES)
            .build()
    };
    let described = |why: String| {
        (
            ResponseError::InvalidRegularExpression,
            format!("SubscribedTopicRegex `{regex}` is not a valid regular expression: {why}."),
        )
    };
    if regex.len() > MAX_PATTERN_BYTES {
        return Err(described(format!(
            "pattern longer than {MAX_PATTERN_BYTES} bytes"
        )));
    }
    let why = |e: regex::Error| {
        let text = e.to_string();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("error: "))
            .unwrap_or(&text)
            .to_owned();
        described(line)
    };
    build(regex).map_err(why)?;
    build(&format!("^(?:{regex})$")).map_err(why)
}

/// One regex of a group.
#[derive(Debug, Clone)]
struct Entry {
    /// How many members subscribe to it.
    members: usize,
    /// It compiled once ([`compile`]), kept for every resolution (`None`: it did not, and
    /// matches no topic; not reached, as such a regex is refused before it is added).
    matcher: Option<regex::Regex>,
    /// The topic names it resolved to, `None` until first resolved.
    resolved: Option<BTreeSet<String>>,
}

/// The regexes a group's members subscribe to: each with how many members do, its compiled
/// matcher and the topic names it resolved to (`None` until first resolved).
#[derive(Debug, Clone, Default)]
pub struct Regexes {
    by_regex: BTreeMap<String, Entry>,
    resolved_at: Option<Instant>,
    /// A resolution computed on a heartbeat, applied on the group's next one (Kafka resolves
    /// in the background: the heartbeat that starts it does not see it).
    pending: Option<Vec<(String, BTreeSet<String>)>>,
}

impl Regexes {
    /// Whether no member subscribes by regex.
    pub fn is_empty(&self) -> bool {
        self.by_regex.is_empty()
    }

    /// Whether some member subscribes to `regex`.
    pub fn contains(&self, regex: &str) -> bool {
        self.by_regex.contains_key(regex)
    }

    /// Whether `regex` has been resolved (some member subscribes to it).
    pub fn is_resolved(&self, regex: &str) -> bool {
        self.by_regex
            .get(regex)
            .is_some_and(|e| e.resolved.is_some())
    }

    /// Counts one more member subscribing to `regex`, keeping `compiled` (its [`compile`]d
    /// matcher) when the group did not have it yet; compiled here if not given.
    pub fn add(&mut self, regex: &str, compiled: Option<regex::Regex>) {
        self.by_regex
            .entry(regex.to_owned())
            .or_insert_with(|| Entry {
                members: 0,
                matcher: compiled.or_else(|| compile(regex).ok()),
                resolved: None,
            })
            .members += 1;
    }

    /// Counts one member fewer subscribing to `regex`; dropped with its resolution when none
    /// does any more.
    pub fn remove(&mut self, regex: &str) {
        if let Some(entry) = self.by_regex.get_mut(regex) {
            entry.members -= 1;
            if entry.members == 0 {
                self.by_regex.remove(regex);
            }
        }
    }

    /// The topic names `regex` resolved to (none before its first resolution).
    pub fn topics(&self, regex: &str) -> impl Iterator<Item = &String> {
        self.by_regex
            .get(regex)
            .and_then(|e| e.resolved.as_ref())
            .into_iter()
            .flatten()
    }

    /// Every topic name some regex resolved to.
    pub fn all_topics(&self) -> BTreeSet<&String> {
        self.by_regex
            .values()
            .filter_map(|e| e.resolved.as_ref())
            .flatten()
            .collect()
    }

    /// Applies the resolution an earlier heartbeat computed, if any (regexes no member
    /// subscribes to any more are skipped); whether any regex's topics changed.
    pub fn apply_pending(&mut self) -> bool {
        let mut changed = false;
        for (regex, found) in self.pending.take().into_iter().flatten() {
            if let Some(e) = self.by_regex.get_mut(&regex) {
                if e.resolved.as_ref() != Some(&found) {
                    changed = true;
                    e.resolved = Some(found);
                }
            }
        }
        changed
    }

    /// Resolves every regex against `topics` if one is due (Kafka's batch interval since the
    /// last resolution, the first at once), to be applied by the group's next heartbeat
    /// ([`Self::apply_pending`]).
    pub fn maybe_resolve(&mut self, topics: &impl TopicIndex, now: Instant) {
        if self.by_regex.is_empty()
            || self
                .resolved_at
                .is_some_and(|at| now <= at + REGEX_BATCH_REFRESH_MIN_INTERVAL)
        {
            return;
        }
        self.resolved_at = Some(now);
        let mut matchers: Vec<(&String, Option<&regex::Regex>, BTreeSet<String>)> = self
            .by_regex
            .iter()
            .map(|(r, e)| (r, e.matcher.as_ref(), BTreeSet::new()))
            .collect();
        topics.each_topic(&mut |name, _| {
            for (_, matcher, found) in &mut matchers {
                if matcher.as_ref().is_some_and(|m| m.is_match(name)) {
                    found.insert(name.to_owned());
                }
            }
        });
        self.pending = Some(
            matchers
                .into_iter()
                .map(|(r, _, found)| (r.clone(), found))
                .collect(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn a_regex_matches_whole_topic_names_and_resolves_again_after_the_batch_interval() {
        let mut topics = BTreeMap::from([
            ("orders-1".to_owned(), (Uuid::from_u128(1), 1)),
            ("xorders-2".to_owned(), (Uuid::from_u128(2), 1)),
        ]);
        let mut r = Regexes::default();
        r.add("orders-.*", compile("orders-.*").ok());
        let now = Instant::now();
        r.maybe_resolve(&topics, now);
        assert_eq!(
            r.topics("orders-.*").count(),
            0,
            "applied by the next heartbeat"
        );
        assert!(r.apply_pending());
        assert_eq!(r.topics("orders-.*").collect::<Vec<_>>(), ["orders-1"]);
        topics.insert("orders-3".to_owned(), (Uuid::from_u128(3), 1));
        r.maybe_resolve(&topics, now + Duration::from_secs(10));
        assert!(!r.apply_pending(), "nothing resolved within 10 s");
        r.maybe_resolve(&topics, now + Duration::from_millis(10_001));
        assert!(r.apply_pending());
        assert_eq!(
            r.topics("orders-.*").collect::<Vec<_>>(),
            ["orders-1", "orders-3"]
        );
        r.remove("orders-.*");
        assert!(!r.contains("orders-.*"));
    }

    #[test]
    fn a_regex_that_does_not_compile_is_refused_as_kafka_refuses_it() {
        let (error, message) = compile("orders-(").unwrap_err();
        assert_eq!(error, ResponseError::InvalidRegularExpression);
        assert!(
            message
                .starts_with("SubscribedTopicRegex `orders-(` is not a valid regular expression: "),
            "{message}"
        );
        assert!(
            compile("a)|(b").is_err(),
            "parses only inside the anchoring group"
        );
        assert!(compile("^orders-.*$").is_ok());
    }

    #[test]
    fn a_pattern_past_the_size_limits_is_refused_and_a_long_name_list_is_not() {
        // Compiles to about 360 KiB: accepted under the 1 MiB limit kmock had before.
        let (error, message) = compile(r"[a-z]{5000}").unwrap_err();
        assert_eq!(error, ResponseError::InvalidRegularExpression);
        assert!(message.contains("size limit"), "{message}");
        let long = "x".repeat(MAX_PATTERN_BYTES + 1);
        assert!(compile(&long)
            .unwrap_err()
            .1
            .contains("longer than 32768 bytes"));
        // An alternation of 200 topic names, as a client may send for a fixed list.
        let names: Vec<String> = (0..200).map(|i| format!("orders-eu-{i:04}")).collect();
        let listed = compile(&names.join("|")).expect("a list of 200 names compiles");
        assert!(listed.is_match("orders-eu-0199") && !listed.is_match("orders-eu-0200"));
    }
}
