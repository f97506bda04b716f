use super::*;

fn entity(pairs: &[(&str, Option<&str>)]) -> Entity {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
        .collect()
}

fn set(e: &Entity, key: &str, value: f64) -> Alteration {
    Alteration {
        entity: e.clone(),
        ops: vec![(key.to_owned(), Some(value))],
    }
}

/// No host name resolved.
fn none() -> BTreeSet<String> {
    BTreeSet::new()
}

fn refusal(result: &Result<(), Refusal>) -> Option<&str> {
    result.as_ref().err().map(|(_, m)| m.as_str())
}

#[test]
fn alter_refuses_what_kafkas_controller_refuses() {
    let mut quotas = ClientQuotas::default();
    let client = entity(&[(CLIENT_ID, Some("c"))]);
    let ip = entity(&[(IP, Some("127.0.0.1"))]);
    let cases: Vec<(Alteration, &str)> = vec![
        (
            set(&entity(&[]), PRODUCER_BYTE_RATE, 1.0),
            "Invalid empty client quota entity",
        ),
        (
            set(&entity(&[("group", Some("g"))]), PRODUCER_BYTE_RATE, 1.0),
            "Unhandled client quota entity type: group",
        ),
        (
            set(&entity(&[(USER, Some(""))]), PRODUCER_BYTE_RATE, 1.0),
            "Empty user not supported",
        ),
        (
            set(&client, "connection_creation_rate", 1.0),
            "Invalid configuration key connection_creation_rate",
        ),
        (
            set(&ip, PRODUCER_BYTE_RATE, 1.0),
            "Invalid configuration key producer_byte_rate",
        ),
        (
            set(&client, PRODUCER_BYTE_RATE, 0.0),
            "Quota producer_byte_rate must be greater than 0",
        ),
        (
            set(&client, PRODUCER_BYTE_RATE, 1.5),
            "producer_byte_rate cannot be a fractional value.",
        ),
        (
            set(&ip, "connection_creation_rate", 3e9),
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
    ];
    for (alteration, message) in cases {
        let results = quotas.alter(std::slice::from_ref(&alteration), false, &none());
        assert_eq!(results.len(), 1, "{alteration:?}");
        assert_eq!(refusal(&results[0].1), Some(message), "{alteration:?}");
    }
    let both = entity(&[(IP, None), (USER, Some("u"))]);
    let results = quotas.alter(
        &[set(&both, "connection_creation_rate", 1.0)],
        false,
        &none(),
    );
    assert!(refusal(&results[0].1)
        .unwrap()
        .starts_with("Invalid quota entity combination"));
    assert!(
        quotas.describe(&[], false).unwrap().is_empty(),
        "nothing refused was stored"
    );
}

#[test]
fn validate_only_stores_nothing_and_a_duplicate_entity_is_refused() {
    let mut quotas = ClientQuotas::default();
    let client = entity(&[(CLIENT_ID, Some("c"))]);
    let results = quotas.alter(&[set(&client, PRODUCER_BYTE_RATE, 100.0)], true, &none());
    assert_eq!(results[0].1, Ok(()));
    assert!(quotas.describe(&[], false).unwrap().is_empty());
    let results = quotas.alter(
        &[
            set(&client, PRODUCER_BYTE_RATE, 100.0),
            set(&client, CONSUMER_BYTE_RATE, 5.0),
        ],
        false,
        &none(),
    );
    assert_eq!(results.len(), 1);
    assert_eq!(
        refusal(&results[0].1),
        Some("Ignoring duplicate entity ClientQuotaEntity(entries={client-id=c})")
    );
    // As Kafka's controller, the first alteration's change stays applied.
    let found = quotas.describe(&[], false).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].1.get(PRODUCER_BYTE_RATE), Some(&100.0));
    assert_eq!(found[0].1.get(CONSUMER_BYTE_RATE), None);
    // Removing the last key removes the entity; removing a key not set succeeds.
    let remove = Alteration {
        entity: client.clone(),
        ops: vec![
            (PRODUCER_BYTE_RATE.into(), None),
            (CONSUMER_BYTE_RATE.into(), None),
        ],
    };
    assert_eq!(quotas.alter(&[remove], false, &none())[0].1, Ok(()));
    assert!(quotas.describe(&[], false).unwrap().is_empty());
}

#[test]
fn describe_filters_match_as_kafkas_image_does() {
    let mut quotas = ClientQuotas::default();
    let entities = [
        entity(&[(USER, Some("u"))]),
        entity(&[(USER, None)]),
        entity(&[(USER, Some("u")), (CLIENT_ID, Some("c"))]),
        entity(&[(CLIENT_ID, None)]),
    ];
    let alterations: Vec<Alteration> = entities
        .iter()
        .map(|e| set(e, "request_percentage", 50.0))
        .collect();
    assert!(quotas
        .alter(&alterations, false, &none())
        .iter()
        .all(|(_, r)| r.is_ok()));
    let count = |filter: &[(&str, i8, Option<&str>)], strict: bool| {
        let filter: Vec<(String, i8, Option<String>)> = filter
            .iter()
            .map(|(k, m, n)| ((*k).to_owned(), *m, n.map(str::to_owned)))
            .collect();
        quotas.describe(&filter, strict).map(|found| found.len())
    };
    assert_eq!(count(&[], false), Ok(4));
    assert_eq!(count(&[], true), Ok(0));
    assert_eq!(count(&[(USER, 0, Some("u"))], false), Ok(2));
    assert_eq!(count(&[(USER, 0, Some("u"))], true), Ok(1));
    assert_eq!(count(&[(USER, 1, None)], false), Ok(1));
    assert_eq!(count(&[(USER, 2, None)], false), Ok(3));
    assert_eq!(count(&[(USER, 2, None), (CLIENT_ID, 2, None)], true), Ok(1));
    assert_eq!(count(&[(CLIENT_ID, 2, None)], false), Ok(2));
    let error = |filter: &[(&str, i8, Option<&str>)]| count(filter, false).unwrap_err().0;
    assert_eq!(error(&[(USER, 0, None)]), ResponseError::InvalidRequest);
    assert_eq!(
        error(&[(USER, 1, Some("u"))]),
        ResponseError::InvalidRequest
    );
    assert_eq!(
        error(&[(USER, 2, None), (USER, 2, None)]),
        ResponseError::InvalidRequest
    );
    assert_eq!(error(&[("", 2, None)]), ResponseError::InvalidRequest);
    assert_eq!(
        error(&[("group", 2, None)]),
        ResponseError::UnsupportedVersion
    );
    assert_eq!(error(&[(USER, 3, None)]), ResponseError::InvalidRequest);
    assert_eq!(
        error(&[(IP, 2, None), (USER, 2, None)]),
        ResponseError::InvalidRequest
    );
}

#[test]
fn the_most_specific_quota_applies_and_is_measured_under_its_tags() {
    let mut quotas = ClientQuotas::default();
    let alter = |q: &mut ClientQuotas, pairs: &[(&str, Option<&str>)], v: f64| {
        let r = q.alter(
            &[set(&entity(pairs), PRODUCER_BYTE_RATE, v)],
            false,
            &none(),
        );
        assert_eq!(r[0].1, Ok(()));
    };
    alter(&mut quotas, &[(CLIENT_ID, None)], 8.0);
    let both = |c: &str| (String::new(), c.to_owned());
    assert_eq!(
        quotas.quota_for(PRODUCER_BYTE_RATE, ANONYMOUS, "c"),
        Some((8.0, both("c")))
    );
    alter(&mut quotas, &[(CLIENT_ID, Some("c"))], 7.0);
    assert_eq!(
        quotas.quota_for(PRODUCER_BYTE_RATE, ANONYMOUS, "c"),
        Some((7.0, both("c")))
    );
    alter(&mut quotas, &[(USER, None)], 6.0);
    assert_eq!(
        quotas.quota_for(PRODUCER_BYTE_RATE, ANONYMOUS, "c"),
        Some((6.0, (ANONYMOUS.to_owned(), String::new())))
    );
    alter(
        &mut quotas,
        &[(USER, Some(ANONYMOUS)), (CLIENT_ID, Some("c"))],
        5.0,
    );
    assert_eq!(
        quotas.quota_for(PRODUCER_BYTE_RATE, ANONYMOUS, "c"),
        Some((5.0, (ANONYMOUS.to_owned(), "c".to_owned())))
    );
    assert_eq!(quotas.quota_for(CONSUMER_BYTE_RATE, ANONYMOUS, "c"), None);
}

#[test]
fn throttle_time_brings_the_rate_back_to_the_quota() {
    let mut quotas = ClientQuotas::default();
    let client = entity(&[(CLIENT_ID, Some("c"))]);
    quotas.alter(&[set(&client, PRODUCER_BYTE_RATE, 1_000.0)], false, &none());
    let record =
        |q: &mut ClientQuotas, bytes, at| q.record(1, Throttle::Produce, ANONYMOUS, "c", bytes, at);
    // 10 s of window from the start (10 full samples assumed, Kafka's `Rate.windowSize`):
    // 10,000 bytes are within 1,000 B/s.
    assert_eq!(record(&mut quotas, 10_000, 0), 0);
    // 20,000 bytes over 10 s is 2,000 B/s: (2,000 - 1,000) / 1,000 × 10,000 ms.
    assert_eq!(record(&mut quotas, 10_000, 0), 10_000);
    // Another client id has a rate of its own, and no quota.
    assert_eq!(
        quotas.record(1, Throttle::Produce, ANONYMOUS, "d", 1 << 30, 0),
        0
    );
    // Another broker measures on its own.
    assert_eq!(
        quotas.record(2, Throttle::Produce, ANONYMOUS, "c", 10_000, 0),
        0
    );
    // Once the window has passed the samples, the rate is back to nothing.
    assert_eq!(record(&mut quotas, 1_000, 11_000), 0);
    assert_eq!(quotas.max_fetch_bytes(ANONYMOUS, "c"), None);
}

#[test]
fn rates_whose_samples_all_left_the_window_are_dropped() {
    let mut quotas = ClientQuotas::default();
    // The default client id's quota is measured per client id: each one has a rate.
    let default_client = entity(&[(CLIENT_ID, None)]);
    quotas.alter(
        &[set(&default_client, PRODUCER_BYTE_RATE, 1_000.0)],
        false,
        &none(),
    );
    let mut record =
        |id: &str, bytes, at| quotas.record(1, Throttle::Produce, ANONYMOUS, id, bytes, at);
    for i in 0..100 {
        assert_eq!(record(&format!("c{i}"), 10, 0), 0);
    }
    // Still in the window at 5 s.
    assert_eq!(record("live", 10_000, 5_000), 0);
    assert_eq!(quotas.rates.len(), 101);
    // At 11 s the first 100 have no sample left in the window (11 × 1 s): a new client id
    // sweeps them; the one recorded at 5 s stays, with its bytes.
    assert_eq!(
        quotas.record(1, Throttle::Produce, ANONYMOUS, "new", 10, 11_000),
        0
    );
    assert_eq!(quotas.rates.len(), 2);
    // 20,000 bytes over 11 s (window from 5 s to 16 s) is above 1,000 B/s: the kept rate
    // still throttles.
    assert!(quotas.record(1, Throttle::Produce, ANONYMOUS, "live", 10_000, 11_000) > 0);
    // A dropped client id starts again from nothing, as a new one does.
    assert_eq!(
        quotas.record(1, Throttle::Produce, ANONYMOUS, "c0", 10_000, 11_000),
        0
    );
    // The rates kept: live, new and c0.
    assert_eq!(quotas.rates.len(), 3);
}

#[test]
fn an_ip_entity_names_an_address_or_a_name_resolved_beforehand() {
    let mut quotas = ClientQuotas::default();
    let rate = "connection_creation_rate";
    let literal = entity(&[(IP, Some("::1"))]);
    let named = entity(&[(IP, Some("broker.example"))]);
    let unknown = entity(&[(IP, Some("nowhere.example"))]);
    let alterations = [
        set(&literal, rate, 5.0),
        set(&named, rate, 5.0),
        set(&unknown, rate, 5.0),
        set(&entity(&[(IP, None)]), rate, 5.0),
        set(&entity(&[(IP, Some(""))]), rate, 5.0),
    ];
    // Only host names are looked up, each once.
    let names: Vec<String> = names_to_resolve(&alterations).into_iter().collect();
    assert_eq!(names, ["broker.example", "nowhere.example"]);
    let resolved = BTreeSet::from(["broker.example".to_owned()]);
    let results = quotas.alter(&alterations, false, &resolved);
    let refusals: Vec<Option<&str>> = results.iter().map(|(_, r)| refusal(r)).collect();
    assert_eq!(
        refusals,
        [
            None,
            None,
            Some("nowhere.example is not a valid IP or resolvable host."),
            None,
            Some("Empty ip not supported"),
        ]
    );
}
