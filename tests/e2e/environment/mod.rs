//! The test environment itself: upstream's kubelet in a hollow node and metrics-server behave as
//! the suites assume.

mod hollow_node;
mod metrics_server;
