//! Classic groups' administration, one edge per case: LeaveGroup in batches and of a group
//! that does not exist, DescribeGroups' member fields and authorized operations, ListGroups
//! and DeleteGroups at each version.

use anyhow::Result;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, LeaveGroupRequest, ListGroupsRequest,
};

use super::{coordinator, stable_member};
use crate::conformance::{case, err, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(leave_group_batch_of_members),
    case!(leave_group_of_a_group_that_does_not_exist),
    case!(describe_groups_member_fields),
    case!(describe_groups_authorized_operations),
    case!(list_groups_at_each_version),
    case!(delete_groups_at_each_version),
];

/// LeaveGroup v5 of several members at once: the member, an unknown one, an unknown instance
/// id, the member again.
async fn leave_group_batch_of_members(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (member, _) = stable_member(&client, &group).await?;
    let identity = |m: &str, i: Option<&str>| {
        MemberIdentity::default()
            .with_member_id(text(m))
            .with_group_instance_id(i.map(text))
    };
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(text(&group)))
        .with_members(vec![
            identity(&member, None),
            identity("ghost", None),
            identity("", Some("nobody")),
            identity(&member, None),
        ]);
    let answer = client.send(request, 5).await?;
    let members: Vec<String> = answer
        .members
        .iter()
        .map(|m| {
            let who = if m.member_id.as_str() == member {
                "the member"
            } else {
                m.member_id.as_str()
            };
            format!(
                "{who:?}/{:?}: {}",
                m.group_instance_id.as_ref().map(|i| i.as_str()),
                err(m.error_code)
            )
        })
        .collect();
    let mut lines = vec![format!("leave: {}", err(answer.error_code))];
    lines.extend(members);
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(text(&group)))
        .with_members(Vec::new());
    let answer = client.send(request, 5).await?;
    lines.push(format!(
        "leave nobody: {} members {}",
        err(answer.error_code),
        answer.members.len()
    ));
    Ok(lines)
}

async fn leave_group_of_a_group_that_does_not_exist(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    coordinator(&client, &group).await?;
    let mut lines = Vec::new();
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(text(&group)))
        .with_member_id(text("ghost"));
    lines.push(format!(
        "v1: {}",
        err(client.send(request, 1).await?.error_code)
    ));
    lines.push(format!(
        "v5: {}",
        super::leave(&client, &group, "ghost").await?
    ));
    Ok(lines)
}

/// DescribeGroups v5 of a stable group of one: the member's fields.
async fn describe_groups_member_fields(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    let (member, _) = stable_member(&client, &group).await?;
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(&group))]);
    let answer = client.send(request, 5).await?;
    let g = &answer.groups[0];
    let mut lines = vec![format!(
        "{} {} type {:?} protocol {:?}",
        err(g.error_code),
        g.group_state.as_str(),
        g.protocol_type.as_str(),
        g.protocol_data.as_str()
    )];
    for m in &g.members {
        lines.push(format!(
            "member: id {} instance {:?} client host {:?} metadata {} bytes assignment {} bytes",
            m.member_id.as_str() == member,
            m.group_instance_id.as_ref().map(|i| i.as_str()),
            m.client_host.as_str(),
            m.member_metadata.len(),
            m.member_assignment.len()
        ));
    }
    Ok(lines)
}

/// DescribeGroups v3+ with and without `include_authorized_operations`, of a known and an
/// unknown group.
async fn describe_groups_authorized_operations(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (group, unknown) = (cx.topic("g"), cx.topic("unknown"));
    stable_member(&client, &group).await?;
    let mut lines = Vec::new();
    for (version, include) in [(3, true), (3, false), (5, true)] {
        let request = DescribeGroupsRequest::default()
            .with_include_authorized_operations(include)
            .with_groups(vec![GroupId(text(&group)), GroupId(text(&unknown))]);
        let answer = client.send(request, version).await?;
        let groups: Vec<String> = answer
            .groups
            .iter()
            .map(|g| {
                format!(
                    "{} {} ops {}",
                    cx.short(&g.group_id.0),
                    err(g.error_code),
                    g.authorized_operations
                )
            })
            .collect();
        lines.push(format!(
            "v{version} include {include}: {}",
            groups.join(", ")
        ));
    }
    Ok(lines)
}

/// ListGroups v0 to v5 (no filters): this case's group with the fields each version has.
async fn list_groups_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let group = cx.topic("g");
    stable_member(&client, &group).await?;
    let mut lines = Vec::new();
    for version in 0..=5 {
        let answer = client.send(ListGroupsRequest::default(), version).await?;
        let mine: Vec<String> = answer
            .groups
            .iter()
            .filter(|g| g.group_id.as_str() == group)
            .map(|g| {
                format!(
                    "{:?} {:?} {:?}",
                    g.protocol_type.as_str(),
                    g.group_state.as_str(),
                    g.group_type.as_str()
                )
            })
            .collect();
        lines.push(format!(
            "v{version}: {} [{}]",
            err(answer.error_code),
            mine.join(", ")
        ));
    }
    Ok(lines)
}

/// DeleteGroups v0 to v2 of an empty group with offsets, then of it again (gone).
async fn delete_groups_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for version in 0..=2 {
        let group = cx.topic(&format!("g{version}"));
        coordinator(&client, &group).await?;
        let code = super::commit_as(&client, &group, -1, "", &full).await?;
        lines.push(format!("commit to g{version}: {code}"));
        for what in ["delete", "delete again"] {
            let request =
                DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(&group))]);
            let answer = client.send(request, version).await?;
            let results: Vec<String> = answer.results.iter().map(|r| err(r.error_code)).collect();
            lines.push(format!("v{version} {what}: {}", results.join(" ")));
        }
    }
    Ok(lines)
}
