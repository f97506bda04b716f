//! The admin APIs of `wire_versions` that change or describe logs, configs and partitions:
//! DeleteRecords moves `t`-0's log start offset one further at each version (the partition led
//! elsewhere is refused).

use anyhow::{anyhow, Result};
use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest};

use super::{partition_codes, Fixture, LED_ELSEWHERE, LED_HERE};
use crate::common::{name, same};

/// Checks the answer of `api` at `v`.
pub async fn check(f: &Fixture, api: ApiKey, v: i16) -> Result<()> {
    match api {
        ApiKey::DeleteRecords => {
            // Version v deletes before offset v + 1 of the records every Produce version wrote.
            let offset = i64::from(v) + 1;
            let request = DeleteRecordsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(vec![DeleteRecordsTopic::default()
                    .with_name(name("t"))
                    .with_partitions(
                        [LED_HERE, LED_ELSEWHERE]
                            .map(|p| {
                                DeleteRecordsPartition::default()
                                    .with_partition_index(p)
                                    .with_offset(offset)
                            })
                            .to_vec(),
                    )]);
            let answer = f.broker().await?.send(request, v).await?;
            let partitions = &answer.topics[0].partitions;
            partition_codes(
                "DeleteRecords",
                partitions
                    .iter()
                    .map(|p| (p.partition_index, p.error_code))
                    .collect(),
            )?;
            let low: Vec<i64> = partitions.iter().map(|p| p.low_watermark).collect();
            same("low watermarks", low, vec![offset, -1])?;
        }
        _ => return Err(anyhow!("advertised but unknown to this test")),
    }
    Ok(())
}
