//! Is this Kubernetes new enough for `pods/resize` (v1.33+), and within the minors resize-guard
//! is tested on? Read from the API server's `/version`, which any authenticated user may read;
//! when even that fails the cluster cannot be reached, and `check` stops with that error.

use anyhow::Context as _;
use resize_guard_policy::version::{KubernetesVersion, NEWEST_TESTED_MINOR, OLDEST_MINOR, Support};

use super::{Line, fail, line};
use crate::connection::Connection;
use crate::table::Mark;

/// Whether this Kubernetes minor has `pods/resize` and is tested; an error when the API server
/// cannot be reached at all (then no other check can run either).
pub async fn version(conn: &Connection) -> anyhow::Result<Line> {
    const S: &str = "kubernetes";
    let info = conn
        .client
        .apiserver_version()
        .await
        .context("reading the API server's version")?;
    let Some(v) = KubernetesVersion::parse(&info.major, &info.minor, &info.git_version) else {
        return Ok(line(
            S,
            Mark::Warn,
            format!("cannot tell the minor of Kubernetes {}", info.git_version),
        ));
    };
    let range = format!("v1.{OLDEST_MINOR}–v1.{NEWEST_TESTED_MINOR}");
    Ok(match v.support() {
        Support::Supported => line(
            S,
            Mark::Ok,
            format!(
                "Kubernetes {} is supported ({range} are tested)",
                v.git_version
            ),
        ),
        Support::Untested => line(
            S,
            Mark::Warn,
            format!(
                "Kubernetes {} is newer than resize-guard is tested on ({range})",
                v.git_version
            ),
        ),
        Support::Unsupported => fail(
            S,
            format!(
                "Kubernetes {} has no pods/resize subresource (v1.{OLDEST_MINOR}+)",
                v.git_version
            ),
            "upgrade the cluster to v1.33 or later",
        ),
    })
}
