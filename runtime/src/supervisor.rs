//! Supervised tasks: the cluster view's watch loops and the controller's reconcile loop run on
//! tokio tasks whose end nobody would otherwise notice. A panicking watch task leaves its cache
//! frozen while it still reads as fresh; a panicking reconcile loop leaves a replica renewing the
//! Lease with nothing acting behind it (ARCHITECTURE.md, "runtime/"). Every such task is spawned
//! through a [`Supervisor`], which catches its panic or its unexpected end, logs it at ERROR and
//! records the first [`TaskExit`]. The view then reports itself unready and stale for acting
//! (`ClusterView::readiness`, `cluster/src/view.rs`), and the controller steps down
//! (`controller/src/run.rs`): it stops acting, releases the Lease, fails `/livez` and exits so that
//! another replica takes over.
//!
//! A task that is aborted (leadership lost, shutdown) records nothing: an abort drops it before
//! the supervisor's wrapper can see an end.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How a supervised task stopped when it should not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskExit {
    /// The task, in words (`the pods watch`, `the reconcile loop`).
    pub task: String,
    /// `panicked: <message>` or `ended: <why>`.
    pub how: String,
}

impl std::fmt::Display for TaskExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.task, self.how)
    }
}

/// Spawns tasks and remembers the first that stopped unexpectedly (cheap to clone; clones share
/// it).
#[derive(Debug, Clone)]
pub struct Supervisor {
    exit: Arc<watch::Sender<Option<TaskExit>>>,
}

impl Default for Supervisor {
    fn default() -> Self {
        Supervisor::new()
    }
}

impl Supervisor {
    /// Nothing has stopped.
    pub fn new() -> Supervisor {
        Supervisor {
            exit: Arc::new(watch::Sender::new(None)),
        }
    }

    /// Runs `work` on a new task named `task`. `Ok(())` is an end asked for (a graceful stop);
    /// `Err(why)` and a panic are recorded as a [`TaskExit`].
    pub fn spawn<F>(&self, task: &str, work: F) -> JoinHandle<()>
    where
        F: Future<Output = Result<(), String>> + Send + 'static,
    {
        let supervisor = self.clone();
        let task = task.to_owned();
        tokio::spawn(async move {
            let how = match AssertUnwindSafe(work).catch_unwind().await {
                Ok(Ok(())) => return,
                Ok(Err(why)) => format!("ended: {why}"),
                Err(payload) => format!("panicked: {}", panic_message(payload.as_ref())),
            };
            supervisor.record(TaskExit { task, how });
        })
    }

    /// Records `exit` (the first one is kept) and logs it.
    pub fn record(&self, exit: TaskExit) {
        tracing::error!(task = %exit.task, how = %exit.how,
            "a supervised task stopped; this replica no longer acts and steps down");
        self.exit.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(exit);
                true
            } else {
                false
            }
        });
    }

    /// The first task that stopped, if one did.
    pub fn exit(&self) -> Option<TaskExit> {
        self.exit.borrow().clone()
    }

    /// Completes with the first task that stopped (at once if one already did).
    pub async fn exited(&self) -> TaskExit {
        let mut rx = self.exit.subscribe();
        let exit = rx
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|e| e.clone());
        match exit {
            Some(e) => e,
            // `self` holds a sender, so the channel cannot close while this waits.
            None => std::future::pending().await,
        }
    }
}

/// The text of a panic's payload (`panic!` gives a `&str` or a `String`).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_panic_and_an_unexpected_end_are_recorded_a_graceful_end_is_not() {
        let s = Supervisor::new();
        s.spawn("graceful", async { Ok(()) }).await.unwrap();
        assert_eq!(s.exit(), None);

        s.spawn("the pods watch", async { panic!("boom at {}", 7) })
            .await
            .unwrap();
        let exit = tokio::time::timeout(Duration::from_secs(5), s.exited())
            .await
            .unwrap();
        assert_eq!(exit.to_string(), "the pods watch panicked: boom at 7");

        // The first exit is kept.
        s.spawn("the nodes watch", async { Err("its stream ended".into()) })
            .await
            .unwrap();
        assert_eq!(s.exit(), Some(exit));
    }

    #[tokio::test]
    async fn an_end_is_seen_by_a_waiter_started_before_it() {
        let s = Supervisor::new();
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.exited().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        s.spawn("the reconcile loop", async {
            Err("the stream ended".into())
        });
        let exit = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            exit.to_string(),
            "the reconcile loop ended: the stream ended"
        );
    }

    #[tokio::test]
    async fn an_aborted_task_records_nothing() {
        let s = Supervisor::new();
        let h = s.spawn("aborted", std::future::pending());
        h.abort();
        assert!(h.await.unwrap_err().is_cancelled());
        assert_eq!(s.exit(), None);
    }
}
