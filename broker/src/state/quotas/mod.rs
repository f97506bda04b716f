//! Client quotas: what AlterClientQuotas stores and DescribeClientQuotas lists, as Kafka's
//! controller (`ClientQuotaControlManager`) and metadata image (`ClientQuotasImage`) keep them,
//! and the byte rates Produce and Fetch are held to ([`rate`]), as Kafka's
//! `ClientQuotaManager` with its default quota callback enforces them.
//!
//! An entity maps entity types (`user`, `client-id`, `ip`) to a name, or to `None` for the
//! type's default entity. kmock has no authentication, so every connection's user is Kafka's
//! unauthenticated principal, `ANONYMOUS`: quotas of user `ANONYMOUS` and of the default user
//! apply to every client, as they do on a PLAINTEXT Kafka listener.

pub mod rate;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::ResponseError;

pub use rate::Throttle;

/// The user of every kmock connection: Kafka's principal name of an unauthenticated client.
pub const ANONYMOUS: &str = "ANONYMOUS";

/// Entity type of a user quota.
pub const USER: &str = "user";
/// Entity type of a client id quota.
pub const CLIENT_ID: &str = "client-id";
/// Entity type of an IP (connection rate) quota.
pub const IP: &str = "ip";

/// Quota key: bytes per second a client may produce (Kafka's `producer_byte_rate`).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Quota key: bytes per second a client may fetch (Kafka's `consumer_byte_rate`).
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";

/// A quota entity: entity type to name (`None`: the type's default entity).
pub type Entity = BTreeMap<String, Option<String>>;

/// An entity's quotas: key to value.
pub type Values = BTreeMap<String, f64>;

/// How Kafka's config definition types a quota key, which decides the values it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyType {
    Long,
    Int,
    Double,
}

/// The keys a user and/or client-id entity takes (`QuotaConfig.userAndClientQuotaConfigs`).
const USER_AND_CLIENT_KEYS: &[(&str, KeyType)] = &[
    (PRODUCER_BYTE_RATE, KeyType::Long),
    (CONSUMER_BYTE_RATE, KeyType::Long),
    ("request_percentage", KeyType::Double),
    ("controller_mutation_rate", KeyType::Double),
];

/// The keys an ip entity takes (`QuotaConfig.ipConfigs`).
const IP_KEYS: &[(&str, KeyType)] = &[("connection_creation_rate", KeyType::Int)];

/// A refused alteration or filter: Kafka's error and message.
pub type Refusal = (ResponseError, String);

/// One alteration of AlterClientQuotas: an entity and its operations, `(key, Some(value))` to
/// set, `(key, None)` to remove.
#[derive(Debug, Clone)]
pub struct Alteration {
    /// The entity altered.
    pub entity: Entity,
    /// The operations, in request order.
    pub ops: Vec<(String, Option<f64>)>,
}

/// How a DescribeClientQuotas filter component matches an entity type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// The entity of exactly this name (`Some`) or the default entity (`None`).
    Exact(Option<String>),
    /// Any entity that has this type, default or named.
    Specified,
}

/// The stored quotas and the byte rates measured against them.
#[derive(Debug, Default)]
pub struct ClientQuotas {
    entities: BTreeMap<Entity, Values>,
    /// Byte rates measured, per broker, quota kind and metric key ([`rate`]).
    pub(crate) rates: HashMap<rate::SensorKey, rate::SampledRate>,
    /// When the rates were last swept of expired entries (ms on kmock's clock).
    rates_swept_ms: Option<u64>,
}

impl ClientQuotas {
    /// Applies (or, `validate_only`, only checks) alterations as Kafka's
    /// `ClientQuotaControlManager.alterClientQuotas`: one result per distinct entity, in order
    /// of first appearance. An entity named again, or with a key given twice, is answered
    /// INVALID_REQUEST "Ignoring duplicate entity …" (Kafka overwrites its first result) while
    /// what its first valid alteration set stays applied, as Kafka's controller keeps the
    /// records it already generated. An ip entity's name must be an IP address or one of
    /// `resolved`, the host names the caller resolved beforehand (Kafka's
    /// `InetAddress.getByName`; resolving is slow, so it is not done under the state lock).
    pub fn alter(
        &mut self,
        alterations: &[Alteration],
        validate_only: bool,
        resolved: &BTreeSet<String>,
    ) -> Vec<(Entity, Result<(), Refusal>)> {
        let mut results: Vec<(Entity, Result<(), Refusal>)> = Vec::new();
        let mut changes: Vec<(Entity, String, Option<f64>)> = Vec::new();
        // Where each entity's result is: a lookup per entry, not a scan of the results.
        let mut index: BTreeMap<&Entity, usize> = BTreeMap::new();
        for alteration in alterations {
            let entity = &alteration.entity;
            let mut keys = BTreeSet::new();
            let duplicate_key = alteration.ops.iter().any(|(k, _)| !keys.insert(k.as_str()));
            let at = index.get(entity).copied();
            if duplicate_key || at.is_some() {
                let refused = Err((
                    ResponseError::InvalidRequest,
                    format!("Ignoring duplicate entity {}", describe_entity(entity)),
                ));
                match at {
                    Some(i) => results[i].1 = refused,
                    None => {
                        index.insert(entity, results.len());
                        results.push((entity.clone(), refused));
                    }
                }
                continue;
            }
            let result = self.check(entity, &alteration.ops, resolved).map(|set| {
                changes.extend(set.into_iter().map(|(k, v)| (entity.clone(), k, v)));
            });
            index.insert(entity, results.len());
            results.push((entity.clone(), result));
        }
        if !validate_only {
            for (entity, key, value) in changes {
                self.set(entity, key, value);
            }
        }
        results
    }

    /// The changes an alteration of `entity` makes (removals of keys it has, values that
    /// differ), or the first problem, as `ClientQuotaControlManager.alterClientQuotaEntity`.
    fn check(
        &self,
        entity: &Entity,
        ops: &[(String, Option<f64>)],
        resolved: &BTreeSet<String>,
    ) -> Result<Vec<(String, Option<f64>)>, Refusal> {
        let invalid = |m: String| Err((ResponseError::InvalidRequest, m));
        if entity.is_empty() {
            return invalid("Invalid empty client quota entity".into());
        }
        for (kind, name) in entity {
            if ![USER, CLIENT_ID, IP].contains(&kind.as_str()) {
                return invalid(format!("Unhandled client quota entity type: {kind}"));
            }
            if name.as_deref() == Some("") {
                return invalid(format!("Empty {kind} not supported"));
            }
        }
        let keys = if let Some(ip) = entity.get(IP) {
            if entity.len() > 1 {
                return invalid(
                    "Invalid quota entity combination, IP entity shouldnot be combined with \
                     User or ClientId"
                        .into(),
                );
            }
            if ip
                .as_deref()
                .is_some_and(|ip| !is_ip_literal(ip) && !resolved.contains(ip))
            {
                return invalid(format!(
                    "{} is not a valid IP or resolvable host.",
                    ip.as_deref().unwrap_or_default()
                ));
            }
            IP_KEYS
        } else {
            USER_AND_CLIENT_KEYS
        };
        let current = self.entities.get(entity);
        let mut changes = Vec::new();
        for (key, value) in ops {
            match value {
                None => {
                    if current.is_some_and(|c| c.contains_key(key)) {
                        changes.push((key.clone(), None));
                    }
                }
                Some(value) => {
                    validate_value(keys, key, *value)?;
                    if current.and_then(|c| c.get(key)) != Some(value) {
                        changes.push((key.clone(), Some(*value)));
                    }
                }
            }
        }
        Ok(changes)
    }

    fn set(&mut self, entity: Entity, key: String, value: Option<f64>) {
        match value {
            Some(v) => {
                self.entities.entry(entity).or_default().insert(key, v);
            }
            None => {
                if let Some(values) = self.entities.get_mut(&entity) {
                    values.remove(&key);
                    if values.is_empty() {
                        self.entities.remove(&entity);
                    }
                }
            }
        }
    }

    /// The entities a DescribeClientQuotas filter selects, with their quotas, as Kafka's
    /// `ClientQuotasImage.describe`; `strict` keeps only entities of exactly the filter's types.
    ///
    /// # Errors
    /// The filter's problem, as Kafka checks it: an empty or repeated entity type or a
    /// malformed match INVALID_REQUEST, an unknown entity type UNSUPPORTED_VERSION, an ip
    /// component beside a user or client-id one INVALID_REQUEST.
    pub fn describe(
        &self,
        filter: &[(String, i8, Option<String>)],
        strict: bool,
    ) -> Result<Vec<(&Entity, &Values)>, Refusal> {
        let invalid = |m: String| Err((ResponseError::InvalidRequest, m));
        let mut wanted: BTreeMap<&str, Match> = BTreeMap::new();
        for (kind, match_type, name) in filter {
            if kind.is_empty() {
                return invalid("Invalid empty entity type.".into());
            }
            if wanted.contains_key(kind.as_str()) {
                return invalid(format!(
                    "Entity type {kind} cannot appear more than once in the filter."
                ));
            }
            if ![IP, USER, CLIENT_ID].contains(&kind.as_str()) {
                return Err((
                    ResponseError::UnsupportedVersion,
                    format!("Unsupported entity type {kind}"),
                ));
            }
            let matching = match (match_type, name) {
                (0, None) => {
                    return invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                    )
                }
                (0, Some(name)) => Match::Exact(Some(name.clone())),
                (1, None) => Match::Exact(None),
                (1, Some(_)) => {
                    return invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                            .into(),
                    )
                }
                (2, None) => Match::Specified,
                (2, Some(_)) => {
                    return invalid(
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match \
                         string."
                            .into(),
                    )
                }
                (other, _) => return invalid(format!("Unknown match type {other}")),
            };
            wanted.insert(kind, matching);
        }
        if wanted.contains_key(IP) && (wanted.contains_key(USER) || wanted.contains_key(CLIENT_ID))
        {
            return invalid(
                "Invalid entity filter component combination. IP filter component should not be \
                 used with user or clientId filter component."
                    .into(),
            );
        }
        Ok(self
            .entities
            .iter()
            .filter(|(entity, _)| {
                (!strict || entity.len() == wanted.len())
                    && wanted.iter().all(|(kind, m)| match (m, entity.get(*kind)) {
                        (_, None) => false,
                        (Match::Specified, Some(_)) => true,
                        (Match::Exact(want), Some(have)) => want == have,
                    })
            })
            .collect())
    }

    /// The quota of `key` that applies to a client of user `user` and client id `client_id`,
    /// with the metric key its rate is measured under (Kafka's `DefaultQuotaCallback`: the
    /// first of user/client-id, user/default client-id, user, default user/client-id, default
    /// user/default client-id, default user, client-id, default client-id that is set).
    pub fn quota_for(&self, key: &str, user: &str, client_id: &str) -> Option<(f64, Metric)> {
        if self.entities.is_empty() {
            return None;
        }
        let entity = |u: Option<Option<&str>>, c: Option<Option<&str>>| {
            let mut e = Entity::new();
            if let Some(u) = u {
                e.insert(USER.into(), u.map(str::to_owned));
            }
            if let Some(c) = c {
                e.insert(CLIENT_ID.into(), c.map(str::to_owned));
            }
            e
        };
        let both = (user.to_owned(), client_id.to_owned());
        let user_only = (user.to_owned(), String::new());
        let client_only = (String::new(), client_id.to_owned());
        let order = [
            (entity(Some(Some(user)), Some(Some(client_id))), &both),
            (entity(Some(Some(user)), Some(None)), &both),
            (entity(Some(Some(user)), None), &user_only),
            (entity(Some(None), Some(Some(client_id))), &both),
            (entity(Some(None), Some(None)), &both),
            (entity(Some(None), None), &user_only),
            (entity(None, Some(Some(client_id))), &client_only),
            (entity(None, Some(None)), &client_only),
        ];
        let found = order.into_iter().find_map(|(e, metric)| {
            self.entities
                .get(&e)
                .and_then(|values| values.get(key))
                .map(|v| (*v, metric.clone()))
        });
        found
    }
}

/// The tags a quota's rate is measured under: (user, client id), `""` where the quota that
/// applies does not name that type (Kafka's `quotaMetricTags`): a client-id quota is measured
/// per client id, a user quota across the user's clients.
pub type Metric = (String, String);

/// An entity as Kafka's `ClientQuotaEntity.toString` prints it (for one entity type exactly;
/// Kafka prints several in hash-map order, kmock in name order).
pub fn describe_entity(entity: &Entity) -> String {
    let entries: Vec<String> = entity
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", entries.join(", "))
}

/// Kafka's `validateQuotaKeyValue`: a key the entity takes, a value above 0, within its
/// type, integral for integer types.
fn validate_value(keys: &[(&str, KeyType)], key: &str, value: f64) -> Result<(), Refusal> {
    let invalid = |m: String| Err((ResponseError::InvalidRequest, m));
    let Some(&(_, kind)) = keys.iter().find(|(k, _)| *k == key) else {
        return invalid(format!("Invalid configuration key {key}"));
    };
    if value <= 0.0 || value.is_nan() {
        return invalid(format!("Quota {key} must be greater than 0"));
    }
    let integral = || {
        if (value % 1.0).abs() > 1e-6 {
            invalid(format!("{key} cannot be a fractional value."))
        } else {
            Ok(())
        }
    };
    match kind {
        KeyType::Double => Ok(()),
        KeyType::Int if value > f64::from(i32::MAX) => {
            invalid(format!("Proposed value for {key} is too large for an INT."))
        }
        KeyType::Long if value > i64::MAX as f64 => {
            invalid(format!("Proposed value for {key} is too large for a LONG."))
        }
        KeyType::Int | KeyType::Long => integral(),
    }
}

/// Whether `ip` is an IP address, which needs no lookup.
pub fn is_ip_literal(ip: &str) -> bool {
    ip.parse::<std::net::IpAddr>().is_ok()
}

/// The host names among the ip entities of `alterations` that need a lookup: distinct, in
/// name order, neither IP addresses nor empty (an empty name is refused before any lookup).
pub fn names_to_resolve(alterations: &[Alteration]) -> BTreeSet<String> {
    alterations
        .iter()
        .filter_map(|a| a.entity.get(IP).cloned().flatten())
        .filter(|name| !name.is_empty() && !is_ip_literal(name))
        .collect()
}

#[cfg(test)]
mod tests;
