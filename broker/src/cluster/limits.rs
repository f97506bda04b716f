//! The builder's connection limit settings ([`crate::limits`]).

use std::time::Duration;

use super::ClusterBuilder;

impl ClusterBuilder {
    /// Kafka's `connections.max.idle.ms`: a connection with no byte read from it and no answer
    /// written to it for this long is closed (a warning says so), whether or not one of its
    /// requests is in progress, as on Kafka. Default 10 minutes; `None` never closes one.
    pub fn connections_max_idle(mut self, idle: Option<Duration>) -> Self {
        self.config.limits.connections_max_idle = idle;
        self
    }

    /// How long the rest of a frame may take to arrive once its first bytes are read; a
    /// connection that takes longer is closed and journaled as a bad request. A kmock limit
    /// (Kafka has none), default 60 s, above every client's request timeout.
    ///
    /// # Panics
    /// If `timeout` is zero.
    pub fn frame_timeout(mut self, timeout: Duration) -> Self {
        assert!(!timeout.is_zero(), "a frame timeout must be above zero");
        self.config.limits.frame_timeout = timeout;
        self
    }

    /// Kafka's `max.connections`, per broker: a connection beyond `max` open ones is closed at
    /// once (the newest goes, as Kafka's `max.connections.per.ip` does; see
    /// `crate::limits`). Default `None`, unlimited, as Kafka.
    pub fn max_connections(mut self, max: Option<usize>) -> Self {
        self.config.limits.max_connections = max;
        self
    }
}
