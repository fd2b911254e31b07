//! The admission listener's connections: how many may be open, how many one source may hold,
//! and how long one may stay.
//!
//! - **A limit, with a share for light sources.** At most `--max-connections` are open at once,
//!   and the last `--reserved-connections` of them only for a source holding fewer than
//!   [`LIGHT_SOURCE`] connections: kube-apiserver multiplexes every review to a webhook over
//!   one HTTP/2 connection (Go's HTTP/2 transport opens another only when the server's
//!   `SETTINGS_MAX_CONCURRENT_STREAMS` are all in use), so it is such a source, and a crowd of
//!   connections from a few addresses cannot take the slots it needs to reconnect.
//! - **A cap per source.** One address holds at most `--max-connections-per-source`.
//! - A connection over either is closed as soon as it is accepted, before its TLS handshake
//!   costs anything, and counted (`resize_guard_connections_refused_total{reason}`, `limit` or
//!   `source-limit`).
//! - **Idle and age.** A connection with no request in flight for `--connection-idle-timeout`,
//!   or open for `--max-connection-age`, is shut down gracefully: on HTTP/2 a GOAWAY (the
//!   streams in flight finish; kube-apiserver's client opens a new connection for its next
//!   review), on HTTP/1.1 a close after the response in flight (counted as
//!   `resize_guard_connections_closed_total{reason="idle"|"max-age"}`); one whose streams have
//!   not finished `--shutdown-grace` later is closed outright (`reason="forced"` too). HTTP/2
//!   keep-alive
//!   pings ([`crate::server`]) close a connection whose peer stopped answering.
//!
//! Each open connection holds TLS and HTTP buffers (tens of KiB), so the limit is what bounds
//! the memory a crowd of idle or slow connections can take; the handshake and request-head
//! deadlines ([`crate::server`]) bound how long one can stay before its first request, the idle
//! and age timers after it. The NetworkPolicy (deploy/base/network-policy.yaml,
//! `networkPolicy.admissionFrom` in the chart) is what keeps other senders away where the API
//! server's addresses are known.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum_server::accept::Accept;
use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

use crate::metrics::Metrics;

mod lifetime;
pub use lifetime::{Activity, Close, Closed, Ended, InFlight, Timers, timers};

/// A source holding fewer connections than this may take the reserved slots (kube-apiserver
/// holds one per webhook address, a few while it opens a replacement after a GOAWAY).
pub const LIGHT_SOURCE: usize = 4;

/// The peer address of a request on the admission port (a request extension, set for every
/// request the listener serves; [`crate::intake`] gives each address its share of permits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub IpAddr);

/// The caps on open connections.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Open at once (`--max-connections`, at least 1).
    pub max: usize,
    /// Of those, the ones only light sources may take (`--reserved-connections`).
    pub reserved: usize,
    /// Open at once from one address (`--max-connections-per-source`).
    pub per_source: usize,
}

/// Why a connection was refused on accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Every slot this source may take is in use.
    #[error("connection limit reached")]
    Limit,
    /// The source holds `--max-connections-per-source`.
    #[error("this source holds its limit of connections")]
    SourceLimit,
}

impl Refused {
    /// The metric's `reason` label.
    pub fn reason(self) -> &'static str {
        match self {
            Refused::Limit => "limit",
            Refused::SourceLimit => "source-limit",
        }
    }
}

/// The open connections, in all and by source.
#[derive(Debug)]
struct Table {
    caps: Caps,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

impl Table {
    fn take(self: &Arc<Self>, source: Option<IpAddr>) -> Result<Slot, Refused> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, by_source) = &mut *open;
        let held = source.map_or(0, |ip| by_source.get(&ip).copied().unwrap_or(0));
        if source.is_some() && held >= self.caps.per_source.max(1) {
            return Err(Refused::SourceLimit);
        }
        let max = self.caps.max.max(1);
        let shared = max.saturating_sub(self.caps.reserved).max(1);
        let light = source.is_some() && held < LIGHT_SOURCE;
        if *total >= max || (*total >= shared && !light) {
            return Err(Refused::Limit);
        }
        *total += 1;
        if let Some(ip) = source {
            *by_source.entry(ip).or_insert(0) += 1;
        }
        Ok(Slot {
            table: self.clone(),
            source,
        })
    }
}

/// One open connection's place in the [`Table`], given back when dropped.
#[derive(Debug)]
struct Slot {
    table: Arc<Table>,
    source: Option<IpAddr>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self
            .table
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (total, by_source) = &mut *open;
        *total = total.saturating_sub(1);
        if let Some(ip) = self.source
            && let Some(n) = by_source.get_mut(&ip)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                by_source.remove(&ip);
            }
        }
    }
}

/// An acceptor that enforces the [`Caps`] and the [`Timers`], then runs `inner`.
#[derive(Clone)]
pub struct ConnectionLimit<A> {
    inner: A,
    table: Arc<Table>,
    timers: Timers,
    metrics: Arc<Metrics>,
}

impl<A> ConnectionLimit<A> {
    /// At most `caps` connections, each for at most `timers`, through `inner`.
    pub fn new(inner: A, caps: Caps, timers: Timers, metrics: Arc<Metrics>) -> ConnectionLimit<A> {
        ConnectionLimit {
            inner,
            table: Arc::new(Table {
                caps,
                open: Mutex::new((0, HashMap::new())),
            }),
            timers,
            metrics,
        }
    }
}

/// A stream whose peer address may be known.
pub trait PeerAddr {
    /// The peer's IP address (IPv4-mapped IPv6 as IPv4), if known.
    fn peer_ip(&self) -> Option<IpAddr>;
}

impl PeerAddr for tokio::net::TcpStream {
    fn peer_ip(&self) -> Option<IpAddr> {
        self.peer_addr().ok().map(|a| a.ip().to_canonical())
    }
}

impl<A, I, S> Accept<I, S> for ConnectionLimit<A>
where
    I: PeerAddr,
    A: Accept<I, Tracked<S>>,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = Counted<A::Stream>;
    type Service = A::Service;
    type Future = BoxFuture<'static, io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let source = stream.peer_ip();
        let slot = match self.table.take(source) {
            Ok(slot) => slot,
            Err(refused) => {
                self.metrics.connection_refused(refused.reason());
                // Dropping the stream closes the connection.
                drop(stream);
                return Box::pin(std::future::ready(Err(io::Error::other(refused))));
            }
        };
        let activity = Arc::new(Activity::new());
        let service = Tracked {
            inner: service,
            activity: activity.clone(),
            peer: source,
        };
        let accepted = self.inner.accept(stream, service);
        let (metrics, limits) = (self.metrics.clone(), self.timers);
        Box::pin(async move {
            let (stream, service) = accepted.await?;
            metrics.connection_opened();
            let (gone, watching) = watch::channel(());
            {
                let metrics = metrics.clone();
                tokio::spawn(async move {
                    if let Some(ended) = timers(activity, limits, watching).await {
                        metrics.connection_closed_by(ended.why.reason());
                        if ended.forced {
                            metrics.connection_closed_by("forced");
                        }
                    }
                });
            }
            Ok((
                Counted {
                    inner: stream,
                    metrics,
                    _slot: slot,
                    _gone: gone,
                },
                service,
            ))
        })
    }
}

/// Whether an accept error is a refusal at a limit (already counted).
pub fn is_limit(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Refused>())
}

/// The connection's service: counts its requests in flight for the timers, learns from the
/// first request how to shut the connection down gracefully, and tells every request its
/// [`Peer`].
#[derive(Clone)]
pub struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
    peer: Option<IpAddr>,
}

impl<S, B> tower_service::Service<http::Request<B>> for Tracked<S>
where
    S: tower_service::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if let Some(shutdown) = request
            .extensions()
            .get::<axum_server::ConnectionShutdown>()
        {
            let shutdown = shutdown.clone();
            self.activity.set_closer(move |how| match how {
                Close::Graceful => shutdown.graceful_shutdown(),
                Close::Abort => shutdown.shutdown(),
            });
        }
        if let Some(ip) = self.peer {
            request.extensions_mut().insert(Peer(ip));
        }
        let in_flight = self.activity.begin();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            drop(in_flight);
            answer
        })
    }
}

/// A stream that holds one connection slot until it is dropped, and ends the connection's
/// timers then.
pub struct Counted<S> {
    inner: S,
    metrics: Arc<Metrics>,
    _slot: Slot,
    _gone: watch::Sender<()>,
}

impl<S> Drop for Counted<S> {
    fn drop(&mut self) {
        self.metrics.connection_closed();
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests;
