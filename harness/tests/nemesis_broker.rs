//! The shipped `unclean-election` plan against real brokers (needs root; prints a message and
//! passes otherwise): its steps resolve against the real metadata, the ISR really shrinks,
//! and after the ISR is killed the stale follower becomes leader only when
//! `unclean.leader.election.enable=true`.
//!
//! Broker timeouts are lowered (`replica.lag.time.max.ms=2000`,
//! `broker.session.timeout.ms=3000`) and the plan's delays scaled to match, so each case takes
//! about half a minute.

use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tidewater::cluster::local::{find_broker_binary, sys, LocalCluster, LocalSpec, NodeProgram};
use tidewater::cluster::Cluster;
use tidewater::nemesis::{
    Action, ClusterView, FaultPlan, MemoryRecorder, Nemesis, Step, Target, Wait,
};
use tidewater::system::HttpView;
use tokio::time::Instant;

/// The plan up to "start only the stale follower", then a wait for it to lead.
fn plan_until_stale_leads() -> FaultPlan {
    let mut plan = FaultPlan::load("unclean-election").unwrap();
    let start_stale = plan
        .step
        .iter()
        .position(|s| {
            s.action
                == Action::Start {
                    target: Target::Bound("stale".into()),
                }
        })
        .unwrap();
    plan.step.truncate(start_stale + 1);
    for step in &mut plan.step {
        step.when = step.when.scaled(0.3);
    }
    plan.step.push(Step::new(Action::Wait(Wait::Leader {
        key: "t0/0".into(),
        target: Some(Target::Bound("stale".into())),
        timeout_s: Some(15.0),
    })));
    plan.validate().unwrap();
    plan
}

/// Runs the plan on a fresh cluster; returns the recorded ops and the final leader.
async fn run_case(
    run_id: &str,
    subnet: &str,
    unclean: bool,
) -> (Vec<tidewater::nemesis::RecordedOp>, Option<String>, String) {
    let binary = tokio::task::spawn_blocking(find_broker_binary)
        .await
        .unwrap()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let state_dir = std::path::Path::new(tidewater::cluster::local::state::DEFAULT_STATE_DIR);
    if state_dir.join(format!("{run_id}.json")).exists() {
        tidewater::clean::clean_run(state_dir, run_id).unwrap();
    }
    let settings = [
        ("replica.lag.time.max.ms", "2000".to_string()),
        ("broker.session.timeout.ms", "3000".to_string()),
        ("broker.heartbeat.interval.ms", "500".to_string()),
        ("unclean.leader.election.enable", unclean.to_string()),
    ];
    let mut spec = LocalSpec::new(
        run_id,
        dir.path(),
        NodeProgram::Broker {
            binary,
            settings: settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        },
    );
    spec.subnet = LocalSpec::parse_subnet(subnet).unwrap();
    spec.stop_timeout_ms = 3_000;
    let cluster = Arc::new(LocalCluster::create(spec).unwrap());
    cluster.start_all().unwrap();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let view = Arc::new(HttpView::new(cluster.nodes()));

    let n1 = cluster.node("n1").unwrap().url();
    let create = json!({"name": "t0", "partitions": 1, "replication_factor": 3});
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ok = match http
            .post(format!("{n1}/v1/topics"))
            .json(&create)
            .send()
            .await
        {
            Ok(r) => r.status().is_success(),
            Err(_) => false,
        };
        let in_sync = view
            .partition_state("t0/0")
            .await
            .is_some_and(|s| s.isr.len() == 3 && s.leader.is_some());
        if in_sync {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "t0/0 never got three in-sync replicas (created: {ok})"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    let recorder = Arc::new(MemoryRecorder::default());
    let mut nemesis = Nemesis::new(cluster.clone(), view.clone(), recorder.clone(), 7);
    let started = Instant::now();
    nemesis
        .run(
            &plan_until_stale_leads(),
            started,
            started + Duration::from_secs(120),
        )
        .await;
    let leader = view.partition_state("t0/0").await.and_then(|s| s.leader);
    let stale = nemesis.bindings()["stale"][0].clone();
    nemesis.final_step().await.unwrap();
    cluster.teardown().unwrap();
    (recorder.ops(), leader, stale)
}

fn root() -> bool {
    if sys::is_root() {
        return true;
    }
    eprintln!("skipped: the local cluster tests need root (network namespaces)");
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_unclean_election_the_stale_follower_becomes_leader() {
    if !root() {
        return;
    }
    let (ops, leader, stale) = run_case("tn1", "10.213.12.0/24", true).await;
    let fs: Vec<&str> = ops.iter().map(|o| o.f.as_str()).collect();
    assert_eq!(
        fs[..7],
        [
            "start-partition",
            "wait-for-isr-shrink",
            "start-kill",
            "stop-partition",
            "start-kill",
            "stop-kill",
            "wait-for-leader"
        ]
    );
    assert!(ops[..7].iter().all(|o| o.error.is_none()), "{ops:#?}");
    assert_eq!(leader.as_ref(), Some(&stale), "{ops:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_unclean_election_the_partition_waits_for_its_isr() {
    if !root() {
        return;
    }
    let (ops, leader, stale) = run_case("tn2", "10.213.13.0/24", false).await;
    let wait = ops.iter().find(|o| o.f == "wait-for-leader").unwrap();
    assert!(
        wait.error.is_some(),
        "the stale follower must not be elected: {ops:#?}"
    );
    assert_ne!(leader.as_ref(), Some(&stale));
    assert!(ops[..6].iter().all(|o| o.error.is_none()), "{ops:#?}");
}
