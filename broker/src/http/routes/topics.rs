//! `POST/GET /v1/topics`, `GET/DELETE /v1/topics/{topic}`: the JSON shapes of
//! [`crate::ops::topics`].

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::extract::{ApiJson, ApiPath};
use crate::broker::Broker;
use crate::error::ApiError;
use crate::ops::topics::{ConfigValue, CreateTopic, TopicDescription, TopicList};

/// Body of `POST /v1/topics`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTopicRequest {
    /// Topic name (Kafka's rule).
    pub name: String,
    /// Partition count; absent or -1 = `num.partitions`.
    pub partitions: Option<i64>,
    /// Replicas per partition; absent or -1 = `default.replication.factor`.
    pub replication_factor: Option<i64>,
    /// Topic-level overrides (`retention.ms`, ...); strings, numbers or booleans.
    #[serde(default)]
    pub configs: BTreeMap<String, Value>,
}

/// A config value's text: Kafka's configs are strings, JSON numbers and booleans are accepted
/// for convenience; anything else is refused by the creation when its checks reach it.
fn config_value(value: Value) -> ConfigValue {
    match value {
        Value::String(s) => ConfigValue::Text(s),
        Value::Number(n) => ConfigValue::Text(n.to_string()),
        Value::Bool(b) => ConfigValue::Text(b.to_string()),
        _ => ConfigValue::NotText,
    }
}

/// `POST /v1/topics` -> 201 with the description.
pub async fn create(
    State(broker): State<Arc<Broker>>,
    ApiJson(request): ApiJson<CreateTopicRequest>,
) -> Result<(StatusCode, Json<TopicDescription>), ApiError> {
    let create = CreateTopic {
        name: request.name,
        partitions: request.partitions,
        replication_factor: request.replication_factor,
        configs: request
            .configs
            .into_iter()
            .map(|(name, value)| (name, config_value(value)))
            .collect(),
    };
    let description = crate::ops::topics::create_topic(&broker, &create).await?;
    Ok((StatusCode::CREATED, Json(description)))
}

/// `GET /v1/topics`.
pub async fn list(State(broker): State<Arc<Broker>>) -> Json<TopicList> {
    Json(crate::ops::topics::list_topics(&broker))
}

/// `GET /v1/topics/{topic}`.
pub async fn describe(
    State(broker): State<Arc<Broker>>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<TopicDescription>, ApiError> {
    crate::ops::topics::describe(&broker, &name).map(Json)
}

/// Answer of `DELETE /v1/topics/{topic}`.
#[derive(Debug, Serialize)]
pub struct Deleted {
    /// Name of the deleted topic.
    pub deleted: String,
}

/// `DELETE /v1/topics/{topic}`.
pub async fn delete(
    State(broker): State<Arc<Broker>>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<Deleted>, ApiError> {
    crate::ops::topics::delete_topic(&broker, &name).await?;
    Ok(Json(Deleted { deleted: name }))
}
