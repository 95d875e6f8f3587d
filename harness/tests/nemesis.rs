//! The nemesis against the no-op cluster and a scripted metadata view. Plans run with their
//! times compressed (seconds become hundredths), so a minute-long plan takes a fraction of a
//! second; outcomes never depend on timing beyond the order of steps.

use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tidewater::cluster::noop::NoopCluster;
use tidewater::cluster::Cluster;
use tidewater::nemesis::{
    random_plan, Action, ClusterTimeouts, Fault, FaultKind, FaultPlan, MemoryRecorder, Nemesis,
    PartitionState, StaticView, Step, Target, Wait,
};
use tokio::time::Instant;

fn names(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

fn state(leader: &str, isr: &[&str]) -> PartitionState {
    PartitionState {
        leader: Some(leader.to_string()),
        isr: names(isr),
        replicas: names(&["n1", "n2", "n3"]),
    }
}

struct Rig {
    cluster: Arc<NoopCluster>,
    view: Arc<StaticView>,
    recorder: Arc<MemoryRecorder>,
    nemesis: Nemesis,
}

fn rig(seed: u64) -> Rig {
    let cluster = Arc::new(NoopCluster::new(3));
    let view = Arc::new(StaticView::default());
    view.set("t0/0", state("n1", &["n1", "n2", "n3"]));
    let recorder = Arc::new(MemoryRecorder::default());
    let nemesis = Nemesis::new(cluster.clone(), view.clone(), recorder.clone(), seed);
    Rig {
        cluster,
        view,
        recorder,
        nemesis,
    }
}

/// The plan with every time multiplied by `factor`.
fn compress(mut plan: FaultPlan, factor: f64) -> FaultPlan {
    for step in &mut plan.step {
        step.when = step.when.scaled(factor);
        if let Action::Wait(
            Wait::IsrShrink { timeout_s, .. }
            | Wait::IsrExpand { timeout_s, .. }
            | Wait::Leader { timeout_s, .. }
            | Wait::IsrFull { timeout_s, .. },
        ) = &mut step.action
        {
            *timeout_s = timeout_s.map(|t| t * factor);
        }
    }
    plan
}

fn fs(recorder: &MemoryRecorder) -> Vec<String> {
    recorder.ops().iter().map(|o| o.f.clone()).collect()
}

#[tokio::test]
async fn the_unclean_election_plan_kills_the_isr_and_starts_only_the_stale_follower() {
    let mut rig = rig(1);
    let plan = compress(FaultPlan::load("unclean-election").unwrap(), 0.01);
    // The leader drops the isolated follower from the ISR a little after the partition.
    let (view, recorder) = (rig.view.clone(), rig.recorder.clone());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let ops = recorder.ops();
            if let Some(op) = ops.iter().find(|o| o.f == "start-partition") {
                let stale = op
                    .value
                    .as_object()
                    .unwrap()
                    .iter()
                    .find(|(_, d)| d.as_array().unwrap().len() == 3);
                let stale = stale.unwrap().0.clone();
                tokio::time::sleep(Duration::from_millis(100)).await;
                let isr: Vec<&str> = ["n1", "n2", "n3"]
                    .into_iter()
                    .filter(|n| *n != stale)
                    .collect();
                view.set("t0/0", state("n1", &isr));
                return;
            }
        }
    });
    let started = Instant::now();
    let steps = rig
        .nemesis
        .run(&plan, started, started + Duration::from_secs(300))
        .await;
    assert_eq!(steps, plan.step.len());

    let stale = rig.nemesis.bindings()["stale"].clone();
    assert_eq!(stale.len(), 1);
    assert!(
        stale[0] == "n2" || stale[0] == "n3",
        "a follower, not the leader n1: {stale:?}"
    );
    let isr = rig.nemesis.bindings()["isr"].clone();
    let mut expected_isr = names(&["n1", "n2", "n3"]);
    expected_isr.retain(|n| *n != stale[0]);
    assert_eq!(isr, expected_isr, "the ISR after the shrink");
    assert_eq!(
        fs(&rig.recorder),
        [
            "start-partition",
            "wait-for-isr-shrink",
            "start-kill",
            "stop-partition",
            "start-kill",
            "stop-kill",
            "stop-kill"
        ]
    );
    let ops = rig.recorder.ops();
    assert!(ops.iter().all(|o| o.error.is_none()), "{ops:?}");
    assert_eq!(ops[2].value, json!(stale));
    assert_eq!(ops[4].value, json!(isr));
    assert_eq!(
        ops[5].value,
        json!(stale),
        "only the stale follower starts first"
    );
    let calls = rig.cluster.calls();
    let kill_isr = calls
        .iter()
        .position(|c| *c == format!("kill {}", isr[1]))
        .unwrap();
    let start_stale = calls
        .iter()
        .position(|c| *c == format!("start {}", stale[0]))
        .unwrap();
    let start_isr = calls
        .iter()
        .position(|c| *c == format!("start {}", isr[0]))
        .unwrap();
    assert!(
        kill_isr < start_stale && start_stale < start_isr,
        "{calls:?}"
    );
}

#[tokio::test]
async fn isolating_the_leader_records_the_grudge_applied() {
    let mut rig = rig(2);
    rig.view.set("t0/0", state("n2", &["n1", "n2", "n3"]));
    let step = Step::new(Action::Isolate {
        target: "leader:t0/0".parse().unwrap(),
    });
    let far = Instant::now() + Duration::from_secs(60);
    rig.nemesis.execute(&step, far).await.unwrap();
    let grudge = tidewater::net::isolate(&rig.cluster.node_names(), &names(&["n2"]));
    assert_eq!(rig.cluster.net().current(), grudge);
    let op = &rig.recorder.ops()[0];
    assert_eq!(op.f, "start-partition");
    assert_eq!(op.value, json!(grudge));
    assert_eq!(op.value["n2"], json!(["c1", "n1", "n3"]));
}

#[tokio::test]
async fn a_failed_step_is_recorded_and_the_plan_goes_on() {
    let mut rig = rig(3);
    let plan = FaultPlan::from_toml(
        r#"
        [[step]]
        action = "kill"
        target = "leader:t9/9"
        [[step]]
        action = "pause"
        target = "n3"
        "#,
    )
    .unwrap();
    let started = Instant::now();
    assert_eq!(
        rig.nemesis
            .run(&plan, started, started + Duration::from_secs(10))
            .await,
        2
    );
    let ops = rig.recorder.ops();
    assert_eq!(ops[0].f, "start-kill");
    assert!(ops[0].error.as_deref().unwrap().contains("t9/9"), "{ops:?}");
    assert_eq!(
        (ops[1].f.as_str(), &ops[1].value),
        ("start-pause", &json!(["n3"]))
    );
    assert!(rig.cluster.is_paused("n3"));
}

#[tokio::test]
async fn the_final_step_heals_resumes_and_starts_everything() {
    let mut rig = rig(4);
    let plan = FaultPlan::from_toml(
        r#"
        [[step]]
        action = "pause"
        target = "n1"
        [[step]]
        action = "kill"
        target = "n2,c1"
        [[step]]
        action = "partition"
        kind = "halves"
        "#,
    )
    .unwrap();
    let started = Instant::now();
    rig.nemesis
        .run(&plan, started, started + Duration::from_secs(10))
        .await;
    assert!(!rig.cluster.net().current().is_empty());
    rig.nemesis.final_step().await.unwrap();
    let ops = rig.recorder.ops();
    let tail: Vec<(&str, serde_json::Value)> = ops[3..]
        .iter()
        .map(|o| (o.f.as_str(), o.value.clone()))
        .collect();
    assert_eq!(
        tail,
        [
            ("stop-partition", serde_json::Value::Null),
            ("stop-pause", json!(["n1"])),
            ("stop-kill", json!(["c1", "n2"])),
        ]
    );
    assert!(rig.cluster.net().current().is_empty());
    for node in rig.cluster.node_names() {
        assert!(
            rig.cluster.is_running(&node) && !rig.cluster.is_paused(&node),
            "{node}"
        );
    }
}

#[tokio::test]
async fn steps_past_the_deadline_do_not_run_and_waits_end_at_it() {
    let mut rig = rig(5);
    let plan = FaultPlan::from_toml(
        r#"
        [[step]]
        at_s = 0.01
        action = "wait-for-isr-shrink"
        key = "t0/0"
        target = "n2"
        timeout_s = 100
        [[step]]
        at_s = 50
        action = "kill"
        target = "n1"
        "#,
    )
    .unwrap();
    let started = Instant::now();
    let ran = rig
        .nemesis
        .run(&plan, started, started + Duration::from_millis(300))
        .await;
    assert_eq!(ran, 1);
    assert!(
        Instant::now() - started < Duration::from_secs(50),
        "returned at the deadline, not after the wait's timeout or the next step"
    );
    let ops = rig.recorder.ops();
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].f, "wait-for-isr-shrink");
    assert!(ops[0].error.is_some(), "n2 never left the ISR");
    assert!(!rig.cluster.calls().iter().any(|c| c.starts_with("kill")));
}

#[tokio::test]
async fn the_same_seed_injects_the_same_faults() {
    let nodes = names(&["c1", "n1", "n2", "n3"]);
    let all = FaultKind::all();
    let timeouts = ClusterTimeouts {
        session_timeout_ms: 2_000,
        replica_lag_time_max_ms: 1_000,
    };
    let mut runs = vec![];
    for _ in 0..2 {
        let mut rig = rig(99);
        let plan = compress(
            random_plan(99, &all, 2.0, 60.0, &nodes, "t0/0", timeouts).unwrap(),
            0.005,
        );
        let started = Instant::now();
        rig.nemesis
            .run(&plan, started, started + Duration::from_secs(60))
            .await;
        rig.nemesis.final_step().await.unwrap();
        // A wait records how long it waited: the only part that is not the seed's.
        let ops: Vec<(String, serde_json::Value, bool)> = rig
            .recorder
            .ops()
            .into_iter()
            .map(|mut o| {
                if let Some(v) = o.value.as_object_mut() {
                    v.remove("waited_ms");
                }
                (o.f, o.value, o.error.is_some())
            })
            .collect();
        runs.push((rig.cluster.calls(), ops));
    }
    assert_eq!(runs[0], runs[1]);
    let kinds: BTreeSet<&str> = runs[0].1.iter().map(|o| o.0.as_str()).collect();
    assert!(kinds.len() >= 4, "a 60 s schedule mixes faults: {kinds:?}");
    // The scripted view's ISR never changes, so only waits for it to shrink can fail.
    assert!(
        runs[0]
            .1
            .iter()
            .all(|(f, _, failed)| !failed || f == "wait-for-isr-shrink"),
        "{:?}",
        runs[0].1
    );
}

#[test]
fn targets_resolve_against_brokers_only_unless_they_name_the_controller() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut rig = rig(6);
        for _ in 0..20 {
            for t in [Target::One, Target::Minority, Target::Majority, Target::All] {
                let nodes = rig.nemesis.resolve(&t).await.unwrap();
                assert!(!nodes.contains(&"c1".to_string()), "{t}: {nodes:?}");
            }
        }
        assert_eq!(
            rig.nemesis.resolve(&Target::Majority).await.unwrap().len(),
            2
        );
        assert_eq!(
            rig.nemesis.resolve(&Target::Minority).await.unwrap().len(),
            1
        );
        assert_eq!(
            rig.nemesis.resolve(&Target::Controller).await.unwrap(),
            ["c1"]
        );
        assert_eq!(
            rig.nemesis
                .resolve(&"isr:t0/0".parse().unwrap())
                .await
                .unwrap(),
            ["n1", "n2", "n3"]
        );
        assert!(rig.nemesis.resolve(&"n9".parse().unwrap()).await.is_err());
        rig.view.set("t0/0", state("n1", &["n1"]));
        let follower = rig
            .nemesis
            .resolve(&"follower:t0/0".parse().unwrap())
            .await
            .unwrap();
        assert!(
            follower == ["n2"] || follower == ["n3"],
            "out-of-sync replicas when the ISR is alone"
        );
    });
}

#[tokio::test]
async fn a_cut_drops_only_the_links_between_target_and_from() {
    let mut rig = rig(4);
    let step = Step {
        bind: Some("cut".into()),
        ..Step::new(Action::Cut {
            target: "leader:t0/0".parse().unwrap(),
            from: "controller+follower:t0/0".parse().unwrap(),
        })
    };
    rig.nemesis
        .execute(&step, Instant::now() + Duration::from_secs(5))
        .await
        .unwrap();
    let ops = rig.recorder.ops();
    assert_eq!(ops[0].f, "start-partition");
    let grudge = ops[0].value.as_object().unwrap();
    let drops = |n: &str| -> BTreeSet<String> {
        grudge
            .get(n)
            .map(|d| {
                d.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    // n1 leads; it loses the controller and one follower, and keeps the other.
    let cut_follower = ["n2", "n3"]
        .into_iter()
        .find(|f| drops("n1").contains(*f))
        .expect("one follower is cut from the leader");
    let kept = if cut_follower == "n2" { "n3" } else { "n2" };
    assert_eq!(
        drops("n1"),
        BTreeSet::from(["c1".into(), cut_follower.into()])
    );
    assert_eq!(drops("c1"), BTreeSet::from(["n1".to_string()]));
    assert_eq!(drops(cut_follower), BTreeSet::from(["n1".to_string()]));
    assert!(drops(kept).is_empty(), "{kept} still reaches everyone");
    assert_eq!(rig.nemesis.bindings()["cut"], names(&["n1"]));
}

#[tokio::test]
async fn unions_and_differences_of_targets_resolve_to_nodes() {
    let mut rig = rig(8);
    let kill_old = Step {
        bind: Some("old".into()),
        ..Step::new(Action::Pause {
            target: "leader:t0/0".parse().unwrap(),
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    rig.nemesis.execute(&kill_old, deadline).await.unwrap();
    let others: Target = "isr:t0/0 except @old".parse().unwrap();
    assert_eq!(
        rig.nemesis.resolve(&others).await.unwrap(),
        names(&["n2", "n3"])
    );
    let union: Target = "@old+controller+n1".parse().unwrap();
    assert_eq!(
        rig.nemesis.resolve(&union).await.unwrap(),
        names(&["c1", "n1"])
    );
    let nothing: Target = "n1 except @old".parse().unwrap();
    assert!(
        rig.nemesis.resolve(&nothing).await.is_err(),
        "names no node"
    );
}

#[tokio::test]
async fn power_loss_windows_end_when_the_node_boots_even_in_the_final_step() {
    let mut rig = rig(3);
    let plan = FaultPlan::from_toml(
        "name = \"p\"\n\
         [[step]]\naction = \"power-loss\"\ntarget = \"leader:t0/0\"\nbind = \"old\"\n\
         [[step]]\naction = \"kill\"\ntarget = \"n2\"\n\
         [[step]]\naction = \"start\"\ntarget = \"@old\"\n\
         [[step]]\naction = \"power-loss\"\ntarget = \"n3\"\n\
         [[step]]\naction = \"restart\"\ntarget = \"n3,n1\"\n\
         [[step]]\naction = \"power-loss\"\ntarget = \"n3\"\n",
    )
    .unwrap();
    let started = Instant::now();
    rig.nemesis
        .run(&plan, started, started + Duration::from_secs(60))
        .await;
    rig.nemesis.final_step().await.unwrap();
    let ops: Vec<(String, serde_json::Value)> = rig
        .recorder
        .ops()
        .into_iter()
        .map(|o| (o.f, o.value))
        .collect();
    let op = |f: &str, nodes: &[&str]| (f.to_string(), serde_json::json!(nodes));
    assert_eq!(
        ops,
        [
            op("start-power-loss", &["n1"]),
            op("start-kill", &["n2"]),
            op("stop-power-loss", &["n1"]),
            op("start-power-loss", &["n3"]),
            // A restart stops only the node with power; the other one just boots.
            op("start-kill", &["n1"]),
            op("stop-power-loss", &["n3"]),
            op("stop-kill", &["n1"]),
            op("start-power-loss", &["n3"]),
            ("stop-partition".to_string(), serde_json::Value::Null),
            // The final step boots n3 as the end of its power loss, n2 as the end of a kill.
            op("stop-power-loss", &["n3"]),
            op("stop-kill", &["n2"]),
        ]
    );
    assert!(rig.cluster.calls().contains(&"power-loss n1".to_string()));
    let power_loss = Action::PowerLoss {
        target: Target::All,
        torn: false,
    };
    assert_eq!(power_loss.fault(), Some(Fault::PowerLoss));
    assert_eq!(Fault::PowerLoss.name(), "power-loss");
}

#[tokio::test]
async fn a_torn_power_loss_records_its_seed_and_replays_the_same_tear() {
    let plan = FaultPlan::from_toml(
        "name = \"t\"\n[[step]]\naction = \"power-loss\"\ntarget = \"n2\"\ntorn = true\n",
    )
    .unwrap();
    let mut seeds = vec![];
    for _ in 0..2 {
        let mut rig = rig(11);
        let started = Instant::now();
        rig.nemesis
            .run(&plan, started, started + Duration::from_secs(60))
            .await;
        let op = rig.recorder.ops()[0].clone();
        assert_eq!(op.f, "start-power-loss");
        assert_eq!(op.value["nodes"], json!(["n2"]));
        let seed = op.value["torn_seed"].as_u64().unwrap();
        assert_eq!(rig.cluster.calls(), [format!("power-loss torn {seed} n2")]);
        seeds.push(seed);
    }
    assert_eq!(seeds[0], seeds[1], "the run's seed decides the tear");
    let e = FaultPlan::from_toml(
        "name = \"t\"\n[[step]]\naction = \"kill\"\ntarget = \"n2\"\ntorn = true\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("torn is for power-loss"), "{e}");
}
