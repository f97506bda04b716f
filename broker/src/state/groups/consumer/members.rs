//! Which member a ConsumerGroupHeartbeat is for, and whether its epoch is one the coordinator
//! takes, as Kafka 4.4's `GroupMetadataManager.getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember`
//! and `throwIfConsumerGroupMemberEpochIsInvalid`.

use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::heartbeat::{refuse, HeartbeatRequest, Refusal};
use super::{ConsumerGroup, ConsumerMember, LEAVE_GROUP_STATIC_MEMBER_EPOCH};

pub(super) fn unknown_member<T>(member_id: &str, group_id: &str) -> Result<T, Refusal> {
    refuse(
        ResponseError::UnknownMemberId,
        format!("Member {member_id} is not a member of group {group_id}."),
    )
}

/// The member a heartbeat is for, new or existing, as Kafka's
/// `getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember`. A static member replacing one that
/// left with -2 takes its place here (removed from the group, its target moved over).
/// `Some` is a new member, not yet in the group; `None`: the member is in `cg.members` under
/// `member_id` (nothing cloned, so a long subscription costs nothing here).
pub(super) fn member_for(
    cg: &mut ConsumerGroup,
    req: &HeartbeatRequest,
    member_id: &str,
    create: bool,
    now: Instant,
    session: std::time::Duration,
) -> Result<Option<ConsumerMember>, Refusal> {
    let fresh = || ConsumerMember::new(now, session);
    let Some(instance) = &req.instance_id else {
        return match cg.members.get(member_id) {
            Some(m) => check_epoch(m, req).map(|()| None),
            None if create => {
                let member = fresh();
                check_epoch(&member, req)?;
                Ok(Some(member))
            }
            None => unknown_member(member_id, &req.group_id),
        };
    };
    let existing = cg.static_member(instance).cloned();
    match existing {
        None if create => Ok((!cg.members.contains_key(member_id)).then(fresh)),
        None => refuse(
            ResponseError::UnknownMemberId,
            format!("Instance id {instance} is unknown."),
        ),
        Some(old) if create => {
            // Kafka 4.4's `getOrMaybeSubscribeStaticConsumerGroupMember` checks the release
            // only when the owner uses the consumer protocol too; a classic owner is replaced.
            let owner = &cg.members[&old];
            if owner.classic.is_none() && owner.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                return refuse(
                    ResponseError::UnreleasedInstanceId,
                    format!(
                        "Static member {member_id} with instance id {instance} cannot join the group because the instance id is owned by {old} member."
                    ),
                );
            }
            let mut member = cg.members.remove(&old).expect("found above");
            member.member_epoch = 0;
            member.previous_member_epoch = 0;
            member.classic = None;
            if let Some(target) = cg.target.remove(&old) {
                cg.target.insert(member_id.to_owned(), target);
            }
            // The replacement is not new to the group: it takes the old id's place.
            cg.members.insert(member_id.to_owned(), member);
            Ok(None)
        }
        Some(old) => {
            if old != member_id {
                return refuse(
                    ResponseError::FencedInstanceId,
                    format!(
                        "Static member {member_id} with instance id {instance} was fenced by member {old}."
                    ),
                );
            }
            check_epoch(&cg.members[&old], req)?;
            Ok(None)
        }
    }
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`.
fn check_epoch(member: &ConsumerMember, req: &HeartbeatRequest) -> Result<(), Refusal> {
    let received = req.member_epoch;
    if received > member.member_epoch {
        return refuse(
            ResponseError::FencedMemberEpoch,
            format!(
                "The consumer group member has a greater member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                member.member_epoch
            ),
        );
    }
    if received < member.member_epoch {
        // Kafka's `isSubset`: an absent list is not a subset.
        let subset = req.owned.as_ref().is_some_and(|owned| {
            let assigned = member.assigned_partitions();
            owned
                .iter()
                .all(|(t, ps)| assigned.get(t).is_some_and(|a| ps.is_subset(a)))
        });
        if received != member.previous_member_epoch || !subset {
            return refuse(
                ResponseError::FencedMemberEpoch,
                format!(
                    "The consumer group member has a smaller member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                    member.member_epoch
                ),
            );
        }
    }
    Ok(())
}
