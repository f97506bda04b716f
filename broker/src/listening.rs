//! [`Listening`]: one broker's accept loop and connections, as a stop token and a task
//! tracker. A leaf: the tasks it runs are given by [`crate::server::listen`], so the cluster
//! and the proxy hold listeners without importing the server.

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// One broker's accept loop and connections: stopped together when the broker goes down.
#[derive(Debug)]
pub(crate) struct Listening {
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl Listening {
    /// Runs `serve(stop, tasks)` as a task until `stop` (a child of `shutdown`) is cancelled;
    /// `serve` spawns its connections on `tasks`.
    pub(crate) fn start<F>(
        shutdown: &CancellationToken,
        serve: impl FnOnce(CancellationToken, TaskTracker) -> F,
    ) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = shutdown.child_token();
        let tasks = TaskTracker::new();
        tasks.spawn(serve(stop.clone(), tasks.clone()));
        Self { stop, tasks }
    }

    /// Closes the listener and every connection, and waits until they have ended.
    pub(crate) async fn stop(&self) {
        self.stop.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}
