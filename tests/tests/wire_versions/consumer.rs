//! The KIP-848 consumer group APIs of `wire_versions`: each version joins a group of its own
//! at its coordinator (ConsumerGroupHeartbeat; v0 with an empty member id, which the broker
//! fills, v1 with one the client made) and describes it (ConsumerGroupDescribe).

use anyhow::{anyhow, ensure, Result};
use kafka_protocol::messages::{ApiKey, ConsumerGroupDescribeRequest, GroupId};

use super::Fixture;
use crate::common::consumer_group::{assigned, said};
use crate::common::{same, text};
use kmock_tests::consumer_group::join;

/// Checks the answer of `api` at `v`.
pub async fn check(f: &Fixture, api: ApiKey, v: i16) -> Result<()> {
    let group = format!("kip848-{}-v{v}", api as i16);
    let client = f.coordinator(&group).await?;
    let member_id = if v == 0 { "" } else { "member-made-by-client" };
    let joined = client.send(join(&group, member_id, &["t"]), v).await?;
    ensure!(
        joined.error_code == 0 && joined.member_epoch == 2,
        "join at v{v}: {}",
        said(&joined)
    );
    let answered_id = joined.member_id.as_ref().map(|m| m.to_string());
    if v == 0 {
        ensure!(
            answered_id.as_deref().is_some_and(|m| !m.is_empty()),
            "v0 join: no member id given: {}",
            said(&joined)
        );
    } else {
        same(
            "member id answered",
            answered_id.as_deref(),
            Some(member_id),
        )?;
    }
    same(
        "the lone member's assignment",
        assigned(&joined, f.topic_id),
        Some([0, 1].into()),
    )?;
    match api {
        ApiKey::ConsumerGroupHeartbeat => Ok(()),
        ApiKey::ConsumerGroupDescribe => {
            let request =
                ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(&group))]);
            let answer = client.send(request, v).await?;
            let g = &answer.groups[0];
            same(
                "described group",
                (
                    g.error_code,
                    g.group_state.as_str(),
                    g.group_epoch,
                    g.members.len(),
                ),
                (0, "Stable", 2, 1),
            )?;
            same(
                "member type (v1+: 1, the consumer protocol)",
                g.members[0].member_type,
                if v >= 1 { 1 } else { -1 },
            )
        }
        _ => Err(anyhow!("not a KIP-848 consumer group API")),
    }
}
