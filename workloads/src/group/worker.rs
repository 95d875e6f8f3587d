//! [`group_worker`]: the loop a runner spawns per worker, and what it shares with the others
//! ([`GroupContext`]) and writes to ([`OpSink`]).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{execute, GroupClient, GroupGenerator, GroupSettings, Member};
use crate::history::{Op, OpType};
use crate::queue::{QueueClient, ValueSource};

/// Where a worker's history lines go (the runner's recorder and rate limit).
pub trait OpSink: Send + Sync + 'static {
    /// A fresh process number.
    fn new_process(&self) -> u64;
    /// Records one line (index and time are the sink's business).
    fn record(&self, op: Op);
    /// Waits for the rate limit before an op.
    fn pace(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Everything the workers share.
pub struct GroupContext<C, G> {
    /// Produce and fetch.
    pub queue: Arc<C>,
    /// Coordinator calls.
    pub group: Arc<G>,
    /// The workload's settings.
    pub settings: Arc<GroupSettings>,
    /// The run's seed.
    pub seed: u64,
    /// Unique values.
    pub values: ValueSource,
    /// Set to stop after the current op.
    pub stop: Arc<AtomicBool>,
}

impl<C, G> Clone for GroupContext<C, G> {
    fn clone(&self) -> Self {
        GroupContext {
            queue: self.queue.clone(),
            group: self.group.clone(),
            settings: self.settings.clone(),
            seed: self.seed,
            values: self.values.clone(),
            stop: self.stop.clone(),
        }
    }
}

/// One worker until `stop`: a producer sends; a consumer rebalances, polls, commits and
/// suffers its faults. After an `info` (a crash included) the process retires and the worker
/// continues as a new process and a new member. A member still in the group at the end
/// leaves, so the group settles. Returns the number of ops.
pub async fn group_worker<C: QueueClient, G: GroupClient, S: OpSink>(
    ctx: GroupContext<C, G>,
    sink: Arc<S>,
    worker: u64,
) -> u64 {
    let mut generator =
        GroupGenerator::new(ctx.seed, worker, ctx.settings.clone(), ctx.values.clone());
    let group = GroupGenerator::group_of(&ctx.settings, worker);
    let mut process = sink.new_process();
    let mut member = Member::new(&group);
    let mut ops = 0;
    while !ctx.stop.load(Ordering::Relaxed) {
        tokio::task::yield_now().await;
        sink.pace().await;
        if ctx.stop.load(Ordering::Relaxed) {
            break;
        }
        let intent = generator.next(&member);
        let f = intent.f();
        if let Some(invoke) = intent.invoke_value(&member) {
            sink.record(Op::client(process, OpType::Invoke, f, invoke));
        }
        let c = execute(
            &*ctx.queue,
            &*ctx.group,
            &ctx.settings,
            &mut member,
            &intent,
        )
        .await;
        let retire = c.kind == OpType::Info;
        sink.record(c.into_op(process, f));
        ops += 1;
        if retire {
            process = sink.new_process();
            member = Member::new(&group);
        }
    }
    if let Some(member_id) = &member.member_id {
        let _ = ctx.group.leave(&group, member_id).await;
    }
    ops
}
