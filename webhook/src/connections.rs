//! The connection limit of the admission listener: at most `--max-connections` connections are
//! open at once; one more is closed as soon as it is accepted, before its TLS handshake costs
//! anything, and counted (`resize_guard_connections_refused_total`).
//!
//! Each open connection holds TLS and HTTP buffers (tens of KiB), so the limit is what bounds
//! the memory a crowd of idle or slow connections can take; the handshake and request-head
//! deadlines ([`crate::server`]) bound how long each one can stay. kube-apiserver reuses its
//! connections (HTTP/2 by ALPN), so it rarely needs a new one while the port is crowded; when
//! it does and the limit is reached, that one call fails and the `failurePolicy` applies — the
//! limit is set well above what the apiserver and probes use, and the NetworkPolicy
//! (deploy/base/network-policy.yaml) is what keeps other senders away.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum_server::accept::Accept;
use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;

/// An acceptor that admits at most a fixed number of open connections, then runs `inner`.
#[derive(Clone)]
pub struct ConnectionLimit<A> {
    inner: A,
    slots: Arc<Semaphore>,
    metrics: Arc<Metrics>,
}

impl<A> ConnectionLimit<A> {
    /// At most `max` connections (at least 1) through `inner`.
    pub fn new(inner: A, max: usize, metrics: Arc<Metrics>) -> ConnectionLimit<A> {
        ConnectionLimit {
            inner,
            slots: Arc::new(Semaphore::new(max.max(1))),
            metrics,
        }
    }
}

impl<A, I, S> Accept<I, S> for ConnectionLimit<A>
where
    A: Accept<I, S>,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = Counted<A::Stream>;
    type Service = A::Service;
    type Future = BoxFuture<'static, io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let Ok(permit) = self.slots.clone().try_acquire_owned() else {
            self.metrics.connection_refused();
            // Dropping the stream closes the connection.
            drop(stream);
            return Box::pin(std::future::ready(Err(io::Error::other(LimitReached))));
        };
        let accepted = self.inner.accept(stream, service);
        let metrics = self.metrics.clone();
        Box::pin(async move {
            let (stream, service) = accepted.await?;
            metrics.connection_opened();
            Ok((
                Counted {
                    inner: stream,
                    metrics,
                    _permit: permit,
                },
                service,
            ))
        })
    }
}

/// The error a connection refused at the limit ends with.
#[derive(Debug, thiserror::Error)]
#[error("connection limit reached")]
pub struct LimitReached;

/// Whether an accept error is a refusal at the limit (already counted).
pub fn is_limit(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<LimitReached>())
}

/// A stream that holds one connection slot until it is dropped.
pub struct Counted<S> {
    inner: S,
    metrics: Arc<Metrics>,
    _permit: OwnedSemaphorePermit,
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
mod tests {
    use super::*;
    use axum_server::accept::DefaultAcceptor;

    #[tokio::test]
    async fn one_connection_over_the_limit_is_refused_and_a_closed_one_frees_its_slot() {
        let metrics = Arc::new(Metrics::new());
        let limit = ConnectionLimit::new(DefaultAcceptor::new(), 2, metrics.clone());
        let (a, _) = limit.accept(tokio::io::empty(), ()).await.unwrap();
        let (_b, _) = limit.accept(tokio::io::empty(), ()).await.unwrap();
        assert!(limit.accept(tokio::io::empty(), ()).await.is_err());
        let text = metrics.render();
        assert!(
            text.contains("resize_guard_connections_refused_total 1"),
            "{text}"
        );
        assert!(text.contains("resize_guard_connections_open 2"), "{text}");
        drop(a);
        assert!(limit.accept(tokio::io::empty(), ()).await.is_ok());
    }
}
