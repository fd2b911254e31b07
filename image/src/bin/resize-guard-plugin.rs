//! `resize-guard-plugin`: packs the kubectl plugin for krew (see `resize_guard_image::plugin`):
//! per platform an archive with the program and LICENSE and its `.sha256`, and the krew
//! manifest listing exactly those archives; `make image` and `make plugins` run it.
//!
//! ```text
//! resize-guard-plugin --out-dir target/image \
//!     --platform linux/amd64=target/image-build/x86_64-unknown-linux-musl/release \
//!     --platform windows/amd64=target/image-build/x86_64-pc-windows-gnu/release
//! ```

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use resize_guard_image::Platform;
use resize_guard_image::plugin::{self, Package};

#[derive(Parser)]
#[command(
    name = "resize-guard-plugin",
    version,
    about = "Packs the kubectl plugin for krew: archives, their sha256 and the manifest"
)]
struct Cli {
    /// The krew manifest template (`@VERSION@` and one `spec.platforms` entry per platform).
    #[arg(long, default_value = "plugins/resize-guard.yaml")]
    template: PathBuf,
    /// The license file every archive carries.
    #[arg(long, default_value = "LICENSE")]
    license: PathBuf,
    /// Where the archives, their `.sha256` files and `resize-guard.yaml` go.
    #[arg(long, default_value = "target/image")]
    out_dir: PathBuf,
    /// The plugin's version; the workspace version by default.
    #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
    plugin_version: String,
    /// Every timestamp in the archives, in seconds since 1970.
    #[arg(long, env = "SOURCE_DATE_EPOCH", default_value_t = 0)]
    source_date_epoch: u64,
    /// `os/arch=DIR`: a platform (linux/amd64, linux/arm64, darwin/amd64, darwin/arm64,
    /// windows/amd64) and the directory holding its `kubectl-resize_guard[.exe]`; repeated, in
    /// manifest order.
    #[arg(long = "platform", required = true, value_parser = parse_platform)]
    platforms: Vec<(Platform, PathBuf)>,
}

fn parse_platform(s: &str) -> Result<(Platform, PathBuf), String> {
    Platform::parse_with_dir(s, &Platform::PLUGINS)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let template = std::fs::read_to_string(&cli.template)
        .with_context(|| format!("reading {}", cli.template.display()))?;
    let license = std::fs::read(&cli.license)
        .with_context(|| format!("reading {}", cli.license.display()))?;
    let written = plugin::write(
        &Package {
            version: &cli.plugin_version,
            platforms: &cli.platforms,
            license: &license,
            template: &template,
            epoch: cli.source_date_epoch,
        },
        &cli.out_dir,
    )
    .context("packing the kubectl plugin")?;
    for archive in &written {
        println!(
            "{}  {}  sha256 {}",
            archive.path.display(),
            archive.platform,
            archive.sha256
        );
    }
    println!("{}", cli.out_dir.join(plugin::MANIFEST).display());
    Ok(())
}
