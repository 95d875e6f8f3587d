//! Kafka's client-side partition assignors, from the shared model (`tidewater-kafka-model`):
//! the group leader computes an assignment with one of them and hands it to the coordinator on
//! sync. The coordinator never runs them itself; they are here for the broker's tests and so
//! that the group code names partitions and assignments in one vocabulary with the clients.

pub use tidewater_kafka_model::assignor::{
    assign, range, round_robin, Assignment, RANGE, ROUND_ROBIN,
};
pub use tidewater_kafka_model::TopicPartition;
