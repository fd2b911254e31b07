//! `resize_guard_build_info{version,revision,program} 1`: which build of which program answers
//! a scrape (the convention of Prometheus's own `prometheus_build_info`, github.com/prometheus/
//! common `version/info.go`, `NewCollector`). A gauge, not an OpenMetrics `info`, so the classic
//! text parsers read it too.
//!
//! The version is the workspace's (`Cargo.toml`); the revision is the git commit the build was
//! made from when `RESIZE_GUARD_REVISION` was set at compile time (the image build's `REVISION`,
//! `image/src/main.rs`), else `unknown`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The workspace version the binary was built at.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit the binary was built from (`RESIZE_GUARD_REVISION` at compile time), or
/// `unknown`.
pub const REVISION: &str = match option_env!("RESIZE_GUARD_REVISION") {
    Some(revision) => revision,
    None => "unknown",
};

/// The labels of `resize_guard_build_info`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// [`VERSION`].
    pub version: String,
    /// [`REVISION`].
    pub revision: String,
    /// `resize-guard-webhook` or `resize-guard-controller`.
    pub program: String,
}

/// Registers `build_info` (1 for this build of `program`) in `registry` (the program's
/// `resize_guard`-prefixed registry).
pub fn register(registry: &mut Registry, program: &str) {
    let info = Family::<BuildLabels, Gauge>::default();
    info.get_or_create(&BuildLabels {
        version: VERSION.to_owned(),
        revision: REVISION.to_owned(),
        program: program.to_owned(),
    })
    .set(1);
    registry.register(
        "build_info",
        "The program's version and git revision (always 1)",
        info,
    );
}
