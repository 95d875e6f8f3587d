//! The driver process: started once per run, one JSON line per request on its standard
//! input, one per answer on its standard output, matched by `id` (answers come in any order:
//! each logical client is a thread of its own in the driver).
//!
//! The process is tied to the harness: it is its own process group (a Ctrl-C at the terminal
//! reaches the harness, which then ends the run in order), it receives SIGKILL if the harness
//! dies (`PR_SET_PDEATHSIG`), and it is killed when the [`JavaDriver`] is dropped.

use super::JavaClientSettings;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

/// Bound on the driver's JVM starting and saying it is ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Bound on one request: longer than anything the client's own bounds allow (a transaction:
/// `max.block.ms` to initialise, `delivery.timeout.ms` for its sends, `max.block.ms` to
/// commit), so it fires only when the driver is stuck.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(25);

/// What the driver said of one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// It took effect; the answer's other fields.
    Ok(Map<String, Value>),
    /// It certainly had no effect.
    Fail {
        /// The client's exception (`TimeoutException`, ...) or the driver's cause.
        error: String,
        /// Its message.
        message: String,
        /// The answer's other fields (a transaction's `txn_end`).
        details: Map<String, Value>,
    },
    /// It may have had an effect.
    Info {
        /// As for `Fail`.
        error: String,
        /// Its message.
        message: String,
        /// As for `Fail`.
        details: Map<String, Value>,
    },
}

impl Answer {
    /// Parses one answer line's object (without its `id`).
    pub fn from_value(mut v: Map<String, Value>) -> Answer {
        let text = |v: &mut Map<String, Value>, k: &str| match v.remove(k) {
            Some(Value::String(s)) => s,
            _ => String::new(),
        };
        let kind = v.remove("type");
        match kind.as_ref().and_then(Value::as_str) {
            Some("ok") => Answer::Ok(v),
            Some("fail") => Answer::Fail {
                error: text(&mut v, "error"),
                message: text(&mut v, "message"),
                details: v,
            },
            Some("info") => Answer::Info {
                error: text(&mut v, "error"),
                message: text(&mut v, "message"),
                details: v,
            },
            other => Answer::info("driver-protocol", format!("answer of type {other:?}")),
        }
    }

    fn info(error: &str, message: String) -> Answer {
        Answer::Info {
            error: error.into(),
            message,
            details: Map::new(),
        }
    }
}

/// Requests waiting for their answer, by id.
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>>;

/// The running driver.
pub struct JavaDriver {
    /// Requests go here, one line each; the lock keeps lines whole.
    stdin: tokio::sync::Mutex<ChildStdin>,
    /// Who waits for which answer; the reader task fulfils them, or drops them all when the
    /// driver's output ends (then every waiter learns `driver-exited`).
    pending: Pending,
    /// The next request id (0 is the driver's ready line).
    next_id: AtomicU64,
    /// The process, killed on drop.
    child: Mutex<Option<Child>>,
}

impl JavaDriver {
    /// Starts `argv` (the `java` command line without its last argument, the settings JSON,
    /// which is added), its standard error appended to `log`, and waits for its ready line.
    pub async fn start(
        argv: &[String],
        settings: &JavaClientSettings,
        log: &Path,
    ) -> Result<JavaDriver, String> {
        let (program, args) = argv.split_first().ok_or("empty driver command")?;
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .arg(settings.to_json().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .process_group(0);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start the Java driver ({program}): {e}"))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let ready = tokio::time::timeout(READY_TIMEOUT, lines.next_line()).await;
        match ready {
            Ok(Ok(Some(line))) if line.contains("\"ready\":true") => {}
            Ok(Ok(other)) => {
                return Err(format!(
                    "the Java driver did not start (first line {other:?}); see {}",
                    log.display()
                ))
            }
            Ok(Err(e)) => return Err(format!("the Java driver's output: {e}")),
            Err(_) => {
                return Err(format!(
                    "the Java driver was not ready within {}s; see {}",
                    READY_TIMEOUT.as_secs(),
                    log.display()
                ))
            }
        }
        let pending: Pending = Arc::default();
        tokio::spawn(read_answers(lines, pending.clone()));
        Ok(JavaDriver {
            stdin: tokio::sync::Mutex::new(stdin),
            pending,
            next_id: AtomicU64::new(1),
            child: Mutex::new(Some(child)),
        })
    }

    /// Sends `op` with `fields` for logical client `client` and waits for its answer, at most
    /// [`ANSWER_TIMEOUT`]. A driver that is gone or silent answers `Info` (`driver-exited`,
    /// `driver-timeout`): the request may have reached the client.
    pub async fn call(&self, client: &str, op: &str, fields: Value) -> Answer {
        self.call_within(client, op, fields, ANSWER_TIMEOUT).await
    }

    /// As [`JavaDriver::call`], waiting at most `bound` (a request whose client may block
    /// longer than usual: a transaction whose end is called again after a timeout).
    pub async fn call_within(
        &self,
        client: &str,
        op: &str,
        fields: Value,
        bound: Duration,
    ) -> Answer {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut request = json!({"id": id, "client": client, "op": op});
        if let (Some(r), Value::Object(more)) = (request.as_object_mut(), fields) {
            r.extend(more);
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("pending lock").insert(id, tx);
        let line = request.to_string() + "\n";
        let written = {
            let mut stdin = self.stdin.lock().await;
            match stdin.write_all(line.as_bytes()).await {
                Ok(()) => stdin.flush().await,
                Err(e) => Err(e),
            }
        };
        if let Err(e) = written {
            self.pending.lock().expect("pending lock").remove(&id);
            return Answer::info("driver-exited", format!("writing to the driver: {e}"));
        }
        match tokio::time::timeout(bound, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Answer::info("driver-exited", "the driver's output ended".into()),
            Err(_) => {
                self.pending.lock().expect("pending lock").remove(&id);
                Answer::info(
                    "driver-timeout",
                    format!("no answer within {}s", bound.as_secs()),
                )
            }
        }
    }

    /// Closes the driver's input (it closes its clients and exits) and waits for it, at most
    /// `bound`; kills it after that.
    pub async fn shutdown(&self, bound: Duration) {
        let child = self.child.lock().expect("child lock").take();
        let Some(mut child) = child else { return };
        let _ = self.stdin.lock().await.shutdown().await;
        if tokio::time::timeout(bound, child.wait()).await.is_err() {
            let _ = child.kill().await;
        }
    }
}

/// Hands each answer line to the request that waits for it; at the end of the output, drops
/// every waiter.
async fn read_answers(
    mut lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    pending: Pending,
) {
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(Value::Object(mut answer)) = serde_json::from_str::<Value>(&line) else {
            tracing::warn!("java driver: not an answer: {line}");
            continue;
        };
        let Some(id) = answer.remove("id").and_then(|v| v.as_u64()) else {
            tracing::warn!("java driver: answer without id: {line}");
            continue;
        };
        let waiter = pending.lock().expect("pending lock").remove(&id);
        if let Some(tx) = waiter {
            let _ = tx.send(Answer::from_value(answer));
        }
    }
    pending.lock().expect("pending lock").clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_by_type_and_anything_else_is_unknown() {
        let ok = serde_json::from_str(r#"{"type":"ok","offset":17}"#).unwrap();
        assert_eq!(
            Answer::from_value(ok),
            Answer::Ok(serde_json::from_str(r#"{"offset":17}"#).unwrap())
        );
        let fail =
            serde_json::from_str(r#"{"type":"fail","error":"RecordTooLargeException"}"#).unwrap();
        assert!(
            matches!(Answer::from_value(fail), Answer::Fail { error, .. } if error == "RecordTooLargeException")
        );
        // Other fields of a fail or info answer are kept: a retried commit's calls.
        let info = serde_json::from_str(
            r#"{"type":"info","error":"TimeoutException","message":"m","txn_end":{"attempts":3}}"#,
        )
        .unwrap();
        assert!(
            matches!(Answer::from_value(info), Answer::Info { error, details, .. }
                if error == "TimeoutException" && details["txn_end"]["attempts"] == 3)
        );
        let odd = serde_json::from_str(r#"{"type":"maybe"}"#).unwrap();
        assert!(
            matches!(Answer::from_value(odd), Answer::Info { error, .. } if error == "driver-protocol")
        );
    }
}
