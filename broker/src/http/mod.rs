//! The HTTP/1.1 front door of the broker and the controller: the accept loop with its
//! connection limit, the per-connection timeouts, JSON answers to malformed requests, and a
//! graceful stop. Requests then go to an axum [`Router`].
//!
//! # Layout
//!
//! - [`head`]: follows a connection's requests through their framing and checks each request
//!   head before the HTTP library sees it.
//! - [`connection`]: the socket as the library sees it: held-back heads, the header, body and
//!   idle timeouts, the JSON refusal of a malformed head, the lingering close.
//! - [`per_ip`]: connections per client address (`max.connections.per.ip`), shared with the
//!   Kafka listener.
//! - [`errors`]: the broker's errors as HTTP statuses and the JSON error body.
//! - [`routes`]: the broker's routes (`docs/api.md`): the client API under `/v1`, `/metrics`,
//!   and the broker-to-broker routes under `/internal/v1`, each a thin codec over
//!   [`crate::ops`], [`crate::group`] or [`crate::replication`].
//! - this file: [`ConnectionLimits`], [`serve`] (accept loop) and the per-connection task.
//!
//! Why not `axum::serve`: it has no idle or header timeout, so `max.connections` silent
//! connections locked every other client out, and its HTTP library answers a malformed
//! request with an empty `400` where the API promises its JSON error body.

pub mod connection;
pub mod errors;
pub mod head;
pub mod per_ip;
pub mod routes;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::http::header::CONNECTION;
use axum::http::HeaderValue;
use axum::response::Response;
use axum::Router;
use hyper::body::{Body as _, Incoming};
use hyper::service::Service;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::config::Config;
use connection::{Activity, Connection};
use per_ip::{ConnectionsPerIp, IpConnection};

/// Pause after an accept error that is not about one connection (e.g. out of file
/// descriptors), so the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// Bounds on client connections (settings in `docs/configuration.md`), for both front doors.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// `max.connections`: connections open at most; more clients wait in the listen backlog.
    pub max_connections: usize,
    /// `connections.max.idle.ms`: a connection with no request in progress and no byte moving
    /// for this long is closed.
    pub idle_timeout: Duration,
    /// `tidewater.request.header.timeout.ms`: a request head must arrive whole within this
    /// of its first byte (of the accept, for a new connection).
    pub header_timeout: Duration,
    /// `tidewater.request.body.timeout.ms`: a request body (HTTP) or frame (Kafka) must
    /// arrive whole within this once it has begun.
    pub body_timeout: Duration,
    /// `max.connections.per.ip`: open connections per client address, counted over every
    /// listener that shares this (clones share it).
    pub per_ip: Arc<ConnectionsPerIp>,
}

impl ConnectionLimits {
    /// The limits a broker or controller with `config` applies.
    pub fn from_config(config: &Config) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: config.max_connections,
            idle_timeout: Duration::from_millis(config.connections_max_idle_ms),
            header_timeout: Duration::from_millis(config.request_header_timeout_ms),
            body_timeout: Duration::from_millis(config.request_body_timeout_ms),
            per_ip: ConnectionsPerIp::new(
                config.max_connections_per_ip,
                config.max_connections_per_ip_overrides.clone(),
            ),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets every connection finish the
/// request it is serving, closes it, and returns once the last one is closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let permits_total = u32::try_from(limits.max_connections)
        .unwrap_or(u32::MAX)
        .clamp(1, Semaphore::MAX_PERMITS as u32);
    let permits = Arc::new(Semaphore::new(permits_total as usize));
    let (stop, stopping) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        // Beyond `max.connections` the loop stops accepting: further clients wait in the
        // kernel's backlog instead of the process running out of file descriptors.
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("never closed"),
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    pause_after_accept_error(error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(ip_connection) = admit(&limits.per_ip, &stream, peer) else {
            continue; // closed; its permit goes back
        };
        tokio::spawn(serve_connection(
            stream,
            app.clone(),
            limits.clone(),
            (permit, ip_connection),
            stopping.clone(),
        ));
    }
    let _ = stop.send(true);
    // Every connection holds a permit until it is closed: taking them all waits for the last.
    let _ = permits.acquire_many(permits_total).await;
}

/// Counts a just-accepted connection against its address's `max.connections.per.ip`; over it,
/// `None`, and the caller drops (closes) the connection unanswered, as Kafka does.
pub fn admit(
    per_ip: &Arc<ConnectionsPerIp>,
    stream: &TcpStream,
    peer: SocketAddr,
) -> Option<IpConnection> {
    let admitted = per_ip.admit(peer.ip());
    if admitted.is_none() {
        tracing::debug!(
            %peer,
            local = ?stream.local_addr().ok(),
            limit = per_ip.limit(peer.ip()),
            "closing a new connection: its address has max.connections.per.ip open"
        );
    }
    admitted
}

async fn pause_after_accept_error(error: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return; // that connection is gone; the next one may be fine
    }
    tracing::error!(%error, "accept failed; pausing before accepting again");
    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
}

/// Serves one connection with HTTP/1.1 until it closes, the client goes silent, or the server
/// stops; then closes it (see [`Connection::close`]) and returns its permit.
async fn serve_connection(
    stream: TcpStream,
    app: Router,
    limits: ConnectionLimits,
    counted: (OwnedSemaphorePermit, IpConnection),
    mut stopping: watch::Receiver<bool>,
) {
    // Small JSON answers must not wait for Nagle's algorithm.
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "TCP_NODELAY not set");
    }
    let activity = Arc::new(Activity::default());
    let mut connection = Connection::new(stream, limits, activity.clone());
    let service = TrackedService {
        inner: TowerToHyperService::new(app),
        activity,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The connection applies the header and idle timeouts itself; hyper's own header timer
    // would also run between keep-alive requests.
    builder.header_read_timeout(None);
    let served = {
        let mut http = pin!(builder.serve_connection(TokioIo::new(&mut connection), service));
        tokio::select! {
            served = http.as_mut() => served,
            () = stopped(&mut stopping) => {
                http.as_mut().graceful_shutdown();
                http.await
            }
        }
    };
    if let Err(error) = served {
        tracing::debug!(%error, "connection ended with an error");
    }
    connection.close().await;
    drop(counted);
}

/// Resolves once the server stops (or its stop signal is gone).
async fn stopped(stopping: &mut watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}

/// The router as hyper's service, counting each request as in progress on its connection
/// until its response is produced (a connection serving a request is never idle).
#[derive(Clone)]
struct TrackedService {
    inner: TowerToHyperService<Router>,
    activity: Arc<Activity>,
}

impl Service<hyper::Request<Incoming>> for TrackedService {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.request_started();
        let body_ended = Arc::new(AtomicBool::new(request.body().is_end_stream()));
        let request: Request = request.map(|body| {
            axum::body::Body::new(EndTracked {
                inner: body,
                ended: body_ended.clone(),
            })
        });
        let response = self.inner.call(request);
        Box::pin(async move {
            let Ok(mut response) = response.await;
            if !body_ended.load(Ordering::SeqCst) {
                // Answered before its body was read (a 413 for an announced length, an unknown
                // topic): the connection closes after the answer, since the rest of the body
                // cannot be told from the next request without reading it. Saying so keeps
                // the client from sending its next request on a connection about to close.
                response
                    .headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            drop(in_flight);
            Ok(response)
        })
    }
}

/// A request body that records when it has been read to its end.
struct EndTracked {
    inner: Incoming,
    /// Set once the last frame was read.
    ended: Arc<AtomicBool>,
}

impl hyper::body::Body for EndTracked {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if frame.is_none() || self.inner.is_end_stream() {
            self.ended.store(true, Ordering::SeqCst);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}
