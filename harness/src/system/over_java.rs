//! A system with the workload over Kafka's own Java client (`--client java`): Apache Kafka, or
//! the companion broker's Kafka listeners. The harness's calls (topic setup, samples, the
//! nemesis's view, recovery, replica logs) stay those of the system underneath; the
//! workload's sends, polls and transactions, and the final reads, go through the Java
//! driver, whose consumers read as the run's `isolation.level` says.

use super::{System, Topic};
use crate::nemesis::ClusterView;
use crate::recorder::Recorder;
use serde_json::Value;
use std::sync::Arc;
use tidewater_workloads::group::GroupSettings;
use tidewater_workloads::java::JavaQueueClient;
use tidewater_workloads::kafka_group::KafkaGroupClient;
use tidewater_workloads::replicas::PartitionReplicas;
use tidewater_workloads::txn::TxnClient;

/// A system, the workload over the Java client.
pub struct OverJava<S> {
    /// Setup, samples, view and recovery.
    kafka: S,
    /// The workload's and the final reads' client.
    java: Arc<JavaQueueClient>,
}

impl<S> OverJava<S> {
    /// `system` with the workload over `java`.
    pub fn new(system: S, java: Arc<JavaQueueClient>) -> OverJava<S> {
        OverJava {
            kafka: system,
            java,
        }
    }
}

impl<S: System<Group = KafkaGroupClient>> System for OverJava<S> {
    type Queue = JavaQueueClient;
    // The group workload is refused with --client java before a run starts.
    type Group = KafkaGroupClient;

    fn describe_nodes(&self) -> String {
        format!(
            "{} (workload over the Java client)",
            self.kafka.describe_nodes()
        )
    }

    async fn setup_topic(&self, topic: &Topic) -> Result<(), String> {
        self.kafka.setup_topic(topic).await?;
        if !self.java.transactional() {
            return Ok(());
        }
        // The first InitProducerId creates __transaction_state (Kafka: 50 partitions); done here,
        // the main phase's first transactions do not spend their time limit waiting for it.
        let deadline = tokio::time::Instant::now() + super::SETUP_TIME_LIMIT;
        let client = tidewater_workloads::txn::client_name(0);
        self.java
            .init_transactions(&client, deadline)
            .await
            .map_err(|e| {
                format!(
                    "the transaction coordinator did not initialise a producer within {}s: {e}",
                    super::SETUP_TIME_LIMIT.as_secs()
                )
            })
    }

    async fn sample(&self, clock: &Recorder) -> Vec<Value> {
        self.kafka.sample(clock).await
    }

    fn view(&self) -> Arc<dyn ClusterView> {
        self.kafka.view()
    }

    async fn leaders_answer(&self, keys: &[String]) -> bool {
        self.kafka.leaders_answer(keys).await
    }

    async fn settled_at(&self, key: &str, offset: u64) -> bool {
        self.kafka.settled_at(key, offset).await
    }

    async fn replica_logs(&self, key: &str) -> Result<PartitionReplicas, String> {
        self.kafka.replica_logs(key).await
    }

    fn queue(&self) -> Arc<JavaQueueClient> {
        self.java.clone()
    }

    fn group(&self, settings: &GroupSettings) -> KafkaGroupClient {
        self.kafka.group(settings)
    }

    fn transactions(&self) -> Option<Arc<dyn TxnClient>> {
        Some(self.java.clone())
    }
}
