//! Offset commits against a classic group's membership: OffsetCommit (`validateOffsetCommit`)
//! and TxnOffsetCommit (KIP-447's generation and member checks).

use kafka_protocol::ResponseError;

use super::*;

impl Groups {
    /// Checks an OffsetCommit (at `version`) against the group, as Kafka's
    /// `validateOffsetCommit` (and REBALANCE_IN_PROGRESS while CompletingRebalance); creates
    /// the group for a commit from outside any group (generation -1), as Kafka does.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, and
    /// from v9 GROUP_ID_NOT_FOUND for a generation of a group that does not exist.
    pub fn check_commit(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        version: i16,
    ) -> Result<&mut Group, ResponseError> {
        if !self.groups.contains_key(group_id) {
            // A group Kafka does not know: a commit from outside group management (generation
            // -1) creates it; any other is from a generation that no longer exists.
            if generation_id >= 0 {
                return Err(if version >= 9 {
                    ResponseError::GroupIdNotFound
                } else {
                    ResponseError::IllegalGeneration
                });
            }
            return Ok(self
                .groups
                .entry(group_id.to_owned())
                .or_insert_with(Group::new));
        }
        let group = self.groups.get_mut(group_id).expect("checked above");
        // An Empty group takes commits from outside group management (Kafka 4's
        // `ClassicGroup.validateOffsetCommit`), whatever member id they carry.
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(group);
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            group.check_member(member_id, instance_id)?;
            if generation_id != group.generation_id {
                return Err(ResponseError::IllegalGeneration);
            }
        } else {
            // When the group has members, only members may commit.
            return Err(ResponseError::UnknownMemberId);
        }
        if group.state == GroupState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(group)
    }

    /// Checks a TxnOffsetCommit against the group, as Kafka's `OffsetMetadataManager.
    /// validateTransactionalOffsetCommit` (`ClassicGroup.validateOffsetCommit` with
    /// `isTransactional`): like an OffsetCommit, except that a request without member and
    /// generation is taken whatever the group's state, and a rebalance does not refuse it.
    ///
    /// # Errors
    /// ILLEGAL_GENERATION (also for a generation of a group that does not exist),
    /// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID; for a KIP-848 consumer group UNKNOWN_MEMBER_ID
    /// and STALE_MEMBER_EPOCH (any epoch but the member's, stricter than Kafka 4.4 for an older
    /// epoch and partitions the member has owned since).
    pub fn check_txn_commit(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ResponseError> {
        let Some(group) = self.groups.get(group_id) else {
            if generation_id >= 0 {
                return Err(ResponseError::IllegalGeneration);
            }
            self.groups.insert(group_id.to_owned(), Group::new());
            return Ok(());
        };
        // A KIP-848 consumer group: the member epoch as Kafka 4.4's
        // `ConsumerGroup.validateOffsetCommit` with `isTransactional`. An epoch older than the
        // member's is refused whatever the partitions (Kafka takes it for partitions the member
        // has owned since, KIP-1251: this check does not see the partitions).
        if let Some(cg) = group.consumer.as_deref() {
            return match cg.check_commit(member_id, instance_id, generation_id, true, 0)? {
                None => Ok(()),
                Some(_) => Err(ResponseError::StaleMemberEpoch),
            };
        }
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            group.check_member(member_id, instance_id)?;
            if generation_id != group.generation_id {
                return Err(ResponseError::IllegalGeneration);
            }
        }
        Ok(())
    }
}
