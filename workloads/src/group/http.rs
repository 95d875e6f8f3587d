//! [`HttpGroupClient`]: the group calls over the broker's HTTP API (`/v1/groups/...`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use super::client::{certain, commit_outcome, GroupClient, Joined};
use super::coordinator::{retry_when_moved, Coordinators};
use super::GroupSettings;
use crate::client::{first_answer, ClientError, ErrorCause, Outcome};
use crate::history::Key;

/// The group calls over the broker's HTTP API (`/v1/groups/...`), with coordinator discovery
/// and a bounded number of retries when the coordinator moved.
pub struct HttpGroupClient {
    http: reqwest::Client,
    /// Node name -> base URL.
    nodes: BTreeMap<String, String>,
    /// Group -> the coordinator's node name, as last found.
    coordinators: Coordinators<String>,
    /// Retries after the coordinator moved or was unreachable.
    retries: u32,
    /// Pause between them.
    retry_backoff_ms: u64,
    /// Bound on heartbeats, leaves, commits and offset fetches.
    request_timeout: Duration,
    /// Bound on joins and syncs, which wait for the rebalance round.
    long_poll_timeout: Duration,
}

impl HttpGroupClient {
    /// A client for `config`'s nodes. Joins and syncs are long polls that the coordinator
    /// bounds by `max_poll_interval_ms` + 5 s, so they get one second more than that; the other
    /// calls get the config's request timeout.
    pub fn new(config: &crate::client::ClientConfig, settings: &GroupSettings) -> HttpGroupClient {
        let long_poll_ms = config
            .request_timeout_ms
            .max(settings.max_poll_interval_ms + 6_000);
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
            .build()
            .expect("reqwest client without TLS builds");
        HttpGroupClient {
            http,
            nodes: config.nodes.clone(),
            coordinators: Coordinators::new(),
            retries: config.retries.min(crate::client::RETRIES_MAX) + 2,
            retry_backoff_ms: config.retry_backoff_ms.max(200),
            request_timeout: Duration::from_millis(config.request_timeout_ms),
            long_poll_timeout: Duration::from_millis(long_poll_ms),
        }
    }

    async fn call(
        &self,
        node: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, ClientError> {
        let err = |cause, message: String| ClientError {
            cause,
            node: Some(node.to_string()),
            message,
        };
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Err(err(ErrorCause::Connect, e.to_string())),
            Err(e) if e.is_timeout() => return Err(err(ErrorCause::Timeout, e.to_string())),
            Err(e) => return Err(err(ErrorCause::Transport, e.to_string())),
        };
        let status = response.status().as_u16();
        let body: Value = match response.json().await {
            Ok(v) => v,
            Err(e) if e.is_timeout() => return Err(err(ErrorCause::Timeout, e.to_string())),
            Err(e) => return Err(err(ErrorCause::Transport, e.to_string())),
        };
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let name = body["error"]
            .as_str()
            .map_or_else(|| format!("HTTP_{status}"), str::to_string);
        let message = body["message"].as_str().unwrap_or_default().to_string();
        Err(err(ErrorCause::Broker { name, status }, message))
    }

    /// The coordinator's node name, asking the nodes in turn when unknown.
    async fn coordinator(&self, group: &str) -> Result<String, ClientError> {
        if let Some(node) = self.coordinators.get(group) {
            return Ok(node);
        }
        let found = first_answer(
            &self.nodes,
            "no nodes configured",
            |(node, url)| async move {
                let request = self
                    .http
                    .get(format!("{url}/v1/groups/{group}/coordinator"));
                let answer = self.call(node, request).await?;
                let found = answer["url"].as_str().and_then(|u| self.node_of_url(u));
                found
                    .or_else(|| crate::client::node_name(&answer["broker_id"]))
                    .filter(|n| self.nodes.contains_key(n))
                    .ok_or_else(|| ClientError {
                        cause: ErrorCause::NoLeader,
                        node: Some(node.clone()),
                        message: format!("no coordinator for {group} yet: {answer}"),
                    })
            },
        )
        .await?;
        self.coordinators.remember(group, found.clone());
        Ok(found)
    }

    fn node_of_url(&self, url: &str) -> Option<String> {
        let url = url.trim_end_matches('/');
        let bare = url.split("://").last().unwrap_or(url);
        self.nodes
            .iter()
            .find(|(_, u)| {
                let u = u.trim_end_matches('/');
                u == url || u.split("://").last() == Some(bare)
            })
            .map(|(n, _)| n.clone())
    }

    /// Sends `method path body` to the group's coordinator, rediscovering it when it moved.
    async fn to_coordinator(
        &self,
        group: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(Value, String), ClientError> {
        let long_poll = path == "/join" || path == "/sync";
        let timeout = if long_poll {
            self.long_poll_timeout
        } else {
            self.request_timeout
        };
        let backoff = Duration::from_millis(self.retry_backoff_ms);
        retry_when_moved(&self.coordinators, group, self.retries, backoff, || async {
            let node = self.coordinator(group).await?;
            let url = &self.nodes[&node];
            let mut request = self
                .http
                .request(method.clone(), format!("{url}/v1/groups/{group}{path}"))
                .timeout(timeout);
            if let Some(body) = body {
                request = request.json(body);
            }
            self.call(&node, request).await.map(|v| (v, node))
        })
        .await
    }
}

fn keys_of(value: &Value) -> Vec<Key> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|tp| {
                    Some(format!(
                        "{}/{}",
                        tp["topic"].as_str()?,
                        tp["partition"].as_u64()?
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl GroupClient for HttpGroupClient {
    async fn join(
        &self,
        group: &str,
        member_id: Option<&str>,
        topics: &[String],
        settings: &GroupSettings,
    ) -> Outcome<Joined> {
        let body = json!({
            "member_id": member_id,
            "client_id": "tidewater",
            "topics": topics,
            "assignors": [settings.assignor],
            "session_timeout_ms": settings.session_timeout_ms,
            "max_poll_interval_ms": settings.max_poll_interval_ms,
            "heartbeat_interval_ms": settings.heartbeat_interval_ms,
        });
        let result = self
            .to_coordinator(group, reqwest::Method::POST, "/join", Some(&body))
            .await
            .map(|(v, node)| Joined {
                generation: v["generation"].as_u64().unwrap_or(0),
                member_id: v["member_id"].as_str().unwrap_or_default().to_string(),
                leader: v["leader_id"] == v["member_id"],
                members: v["members"]
                    .as_array()
                    .map(|ms| {
                        ms.iter()
                            .filter_map(|m| {
                                let topics = serde_json::from_value(m["topics"].clone()).ok()?;
                                Some((m["member_id"].as_str()?.to_string(), topics))
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                partition_counts: serde_json::from_value(v["partition_counts"].clone())
                    .unwrap_or_default(),
                node,
            });
        certain(result)
    }

    async fn sync(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        assignment: Option<&BTreeMap<String, Vec<Key>>>,
    ) -> Outcome<Vec<Key>> {
        let assignment = assignment.map(|a| {
            a.iter()
                .map(|(member, keys)| {
                    let tps: Vec<Value> = keys
                        .iter()
                        .filter_map(|k| crate::client::split_key(k))
                        .map(|(t, p)| json!({"topic": t, "partition": p}))
                        .collect();
                    (member.clone(), Value::Array(tps))
                })
                .collect::<serde_json::Map<String, Value>>()
        });
        let body =
            json!({"member_id": member_id, "generation": generation, "assignment": assignment});
        let result = self
            .to_coordinator(group, reqwest::Method::POST, "/sync", Some(&body))
            .await
            .map(|(v, _)| keys_of(&v["assignment"]));
        certain(result)
    }

    async fn heartbeat(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        polled: bool,
    ) -> Outcome<()> {
        let body = json!({"member_id": member_id, "generation": generation, "polled": polled});
        let result = self
            .to_coordinator(group, reqwest::Method::POST, "/heartbeat", Some(&body))
            .await;
        certain(result.map(|_| ()))
    }

    async fn leave(&self, group: &str, member_id: &str) -> Outcome<()> {
        let body = json!({"member_id": member_id});
        let result = self
            .to_coordinator(group, reqwest::Method::POST, "/leave", Some(&body))
            .await;
        certain(result.map(|_| ()))
    }

    async fn commit(
        &self,
        group: &str,
        member_id: &str,
        generation: u64,
        offsets: &BTreeMap<Key, u64>,
    ) -> Outcome<String> {
        let entries: Vec<Value> = offsets
            .iter()
            .filter_map(|(k, o)| {
                let (t, p) = crate::client::split_key(k)?;
                Some(json!({"topic": t, "partition": p, "offset": o}))
            })
            .collect();
        let body = json!({"member_id": member_id, "generation": generation, "offsets": entries});
        let result = self
            .to_coordinator(group, reqwest::Method::POST, "/offsets", Some(&body))
            .await;
        commit_outcome(result.map(|(_, node)| node))
    }

    async fn fetch_offsets(&self, group: &str) -> Outcome<BTreeMap<Key, u64>> {
        let result = self
            .to_coordinator(group, reqwest::Method::GET, "/offsets", None)
            .await
            .map(|(v, _)| {
                v["offsets"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|o| {
                                let key = format!(
                                    "{}/{}",
                                    o["topic"].as_str()?,
                                    o["partition"].as_u64()?
                                );
                                Some((key, o["offset"].as_u64()?))
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            });
        certain(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::tests::canned_server_with as canned_server;
    use crate::group::tests::settings;

    #[tokio::test]
    async fn http_client_finds_the_coordinator_again_and_classifies_commit_errors() {
        let url = canned_server(|url| {
            let coordinator = json!({"group_id": "g0", "partition": 1, "broker_id": 1, "url": url});
            vec![
                (200, coordinator.clone()),
                (
                    200,
                    json!({"generation": 4, "member_id": "m", "leader_id": "m", "protocol": "range",
                           "members": [{"member_id": "m", "topics": ["t0"]}],
                           "partition_counts": {"t0": 2}, "heartbeat_interval_ms": 500}),
                ),
                (421, json!({"error": "NOT_COORDINATOR", "message": "moved"})),
                (200, coordinator),
                (200, json!({})),
                (504, json!({"error": "REQUEST_TIMED_OUT", "message": "isr"})),
                (
                    409,
                    json!({"error": "ILLEGAL_GENERATION", "message": "old"}),
                ),
            ]
        })
        .await;
        let config = crate::client::ClientConfig::new(BTreeMap::from([("n1".to_string(), url)]));
        let client = HttpGroupClient::new(&config, &settings());
        let Outcome::Ok(joined) = client.join("g0", None, &["t0".into()], &settings()).await else {
            panic!("join failed");
        };
        assert_eq!((joined.generation, joined.leader), (4, true));
        assert_eq!(joined.members["m"], ["t0"]);
        assert_eq!(joined.partition_counts["t0"], 2);
        let offsets = BTreeMap::from([("t0/0".to_string(), 5)]);
        let committed = client.commit("g0", "m", 4, &offsets).await;
        assert_eq!(
            committed,
            Outcome::Ok("n1".to_string()),
            "retried after NOT_COORDINATOR"
        );
        match client.commit("g0", "m", 4, &offsets).await {
            Outcome::Info(e) => assert_eq!(e.cause.name(), "REQUEST_TIMED_OUT"),
            other => panic!("a timed-out commit may be stored: {other:?}"),
        }
        match client.commit("g0", "m", 4, &offsets).await {
            Outcome::Fail(e) => assert_eq!(e.cause.name(), "ILLEGAL_GENERATION"),
            other => panic!("a refused commit stored nothing: {other:?}"),
        }
    }
}
