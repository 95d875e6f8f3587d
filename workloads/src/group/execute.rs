//! Running one [`super::GroupIntent`]: the calls to the queue client and the coordinator, the
//! member's state after them, and the completion line; heartbeats are folded in between ops.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::intent::commit_value;
use super::{assignors, GroupClient, GroupIntent, GroupSettings, Member};
use crate::client::{ClientError, Outcome};
use crate::history::OpType;
use crate::queue::{self, Completion, Consumer, QueueClient};

fn completion(
    kind: OpType,
    value: Value,
    node: Option<String>,
    error: Option<String>,
) -> Completion {
    Completion {
        kind,
        value,
        node,
        high_watermarks: None,
        log_start_offsets: None,
        isr_sizes: None,
        error,
    }
}

fn failed(kind: OpType, value: Value, e: &ClientError) -> Completion {
    completion(kind, value, e.node.clone(), Some(e.cause.name()))
}

/// Sends a heartbeat when `heartbeat_interval_ms` has passed since the last one (Kafka's
/// heartbeat thread, folded into the worker's loop).
pub async fn heartbeat_if_due<G: GroupClient>(
    client: &G,
    settings: &GroupSettings,
    member: &mut Member,
) {
    let (Some(member_id), Some(generation)) = (member.member_id.clone(), member.generation) else {
        return;
    };
    let due = member
        .last_heartbeat
        .is_none_or(|t| t.elapsed() >= Duration::from_millis(settings.heartbeat_interval_ms));
    if !due || member.rejoin {
        return;
    }
    member.last_heartbeat = Some(Instant::now());
    let polled = std::mem::take(&mut member.polled);
    if let Outcome::Fail(e) | Outcome::Info(e) = client
        .heartbeat(&member.group, &member_id, generation, polled)
        .await
    {
        member.on_error(&e);
    }
}

/// Runs one intent of a consumer or producer and returns its completion line.
pub async fn execute<C: QueueClient, G: GroupClient>(
    queue: &C,
    group: &G,
    settings: &GroupSettings,
    member: &mut Member,
    intent: &GroupIntent,
) -> Completion {
    match intent {
        GroupIntent::Send { key, value } => {
            let send = queue::Intent::Send {
                key: key.clone(),
                value: *value,
            };
            let mut scratch = Consumer::default();
            queue::execute(queue, &settings.queue_settings(), &mut scratch, &send).await
        }
        GroupIntent::Rebalance => rebalance(queue, group, settings, member).await,
        GroupIntent::Poll => {
            heartbeat_if_due(group, settings, member).await;
            let invoke = json!([["poll"]]);
            let Some(key) = member.consumer.next_key() else {
                return completion(OpType::Fail, invoke, None, Some("not-assigned".into()));
            };
            let position = member.consumer.positions.get(&key).copied().unwrap_or(0);
            member.polled = true;
            queue::poll_key(
                queue,
                &mut member.consumer,
                &key,
                position,
                settings.poll_max_wait_ms,
            )
            .await
        }
        GroupIntent::Commit => {
            heartbeat_if_due(group, settings, member).await;
            let offsets = member.progress();
            let value = commit_value(&offsets);
            let (Some(member_id), Some(generation)) = (member.member_id.clone(), member.generation)
            else {
                // Removed meanwhile (a stall, an expired session): nothing to commit in.
                member.generation = None;
                return completion(OpType::Fail, value, None, Some("not-a-member".into()));
            };
            match group
                .commit(&member.group, &member_id, generation, &offsets)
                .await
            {
                Outcome::Ok(node) => {
                    member.committed.extend(offsets);
                    member.polled = true;
                    if member.rejoin {
                        // The revocation commit is done: rejoin next.
                        member.generation = None;
                    }
                    completion(OpType::Ok, value, Some(node), None)
                }
                Outcome::Fail(e) => {
                    member.on_error(&e);
                    if member.rejoin {
                        member.generation = None;
                    }
                    failed(OpType::Fail, value, &e)
                }
                Outcome::Info(e) => failed(OpType::Info, value, &e),
            }
        }
        GroupIntent::Crash => completion(
            OpType::Info,
            Value::Null,
            None,
            Some("consumer-crash".into()),
        ),
        GroupIntent::Stall => {
            let stall = Duration::from_millis(
                settings.max_poll_interval_ms + settings.heartbeat_interval_ms,
            );
            let started = Instant::now();
            while started.elapsed() < stall && !member.rejoin {
                tokio::time::sleep(Duration::from_millis(settings.heartbeat_interval_ms)).await;
                member.polled = false;
                heartbeat_if_due(group, settings, member).await;
            }
            member.rejoin = true;
            completion(OpType::Ok, json!([]), None, None)
        }
        GroupIntent::Leave => {
            let Some(member_id) = member.member_id.take() else {
                return completion(OpType::Fail, json!([]), None, Some("not-a-member".into()));
            };
            let done = match group.leave(&member.group, &member_id).await {
                Outcome::Ok(()) => completion(OpType::Ok, json!([]), None, None),
                Outcome::Fail(e) | Outcome::Info(e) => failed(OpType::Fail, json!([]), &e),
            };
            member.revoke();
            done
        }
    }
}

/// Join, sync (computing the assignment when leading), then positions from the committed
/// offsets (the log start for keys without one: `auto.offset.reset=earliest`).
async fn rebalance<C: QueueClient, G: GroupClient>(
    queue: &C,
    group: &G,
    settings: &GroupSettings,
    member: &mut Member,
) -> Completion {
    member.revoke();
    let topics = settings.topics();
    let joined = match group
        .join(
            &member.group,
            member.member_id.as_deref(),
            &topics,
            settings,
        )
        .await
    {
        Outcome::Ok(j) => j,
        Outcome::Fail(e) | Outcome::Info(e) => {
            member.on_error(&e);
            return failed(OpType::Fail, Value::Null, &e);
        }
    };
    member.member_id = Some(joined.member_id.clone());
    let assignment = joined.leader.then(|| {
        assignors::assign(
            &settings.assignor,
            &joined.members,
            &joined.partition_counts,
        )
    });
    let keys = match group
        .sync(
            &member.group,
            &joined.member_id,
            joined.generation,
            assignment.as_ref(),
        )
        .await
    {
        Outcome::Ok(keys) => keys,
        Outcome::Fail(e) | Outcome::Info(e) => {
            member.on_error(&e);
            return failed(OpType::Fail, Value::Null, &e);
        }
    };
    let committed = match group.fetch_offsets(&member.group).await {
        Outcome::Ok(c) => c,
        Outcome::Fail(e) | Outcome::Info(e) => return failed(OpType::Fail, Value::Null, &e),
    };
    for key in &keys {
        let position = match committed.get(key) {
            Some(&offset) => offset,
            None => queue.log_start(key).await.unwrap_or(0),
        };
        member.consumer.positions.insert(key.clone(), position);
        member.committed.insert(key.clone(), position);
    }
    member.consumer.assign(keys.clone());
    member.generation = Some(joined.generation);
    member.last_heartbeat = Some(Instant::now());
    let value = json!({"group": member.group, "generation": joined.generation, "assignment": keys});
    completion(OpType::Ok, value, Some(joined.node), None)
}
