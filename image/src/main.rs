//! `resize-guard-image`: builds one multi-platform OCI image per Containerfile stage from each
//! platform's static binaries, with no container engine (see the library docs); `make image` runs
//! it.
//!
//! ```text
//! resize-guard-image --revision $(git rev-parse HEAD) --out-dir target/image \
//!     --platform linux/amd64=target/image-build/x86_64-unknown-linux-gnu/release \
//!     --platform linux/arm64=target/image-build/aarch64-unknown-linux-gnu/release \
//!     resize-guard-webhook resize-guard-controller
//! ```

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Parser;
use resize_guard_image::{Build, Platform, archive_name, build, layout, sbom, sbom_name};

#[derive(Parser)]
#[command(
    name = "resize-guard-image",
    version,
    about = "Offline OCI image builder for the resize-guard binaries"
)]
struct Cli {
    /// The Containerfile (only FROM scratch, ARG, COPY, USER, ENTRYPOINT, LABEL).
    #[arg(long, default_value = "deploy/image/Containerfile")]
    containerfile: PathBuf,
    /// Where `<binary>-<version>.oci.tar`, the `<binary>-<version>.oci/` layout and the SBOM
    /// `<binary>-<version>.cdx.json` go.
    #[arg(long, default_value = "target/image")]
    out_dir: PathBuf,
    /// `VERSION` (the version label and the archive's name); the workspace version by default.
    #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
    image_version: String,
    /// The tag the images are named under; `--image-version` by default. `make image` passes
    /// the version and commit (`0.2.0-g1a2b3c4`), so no two builds share a tag.
    #[arg(long)]
    tag: Option<String>,
    /// `REVISION`: the git commit the binaries were built from.
    #[arg(long, env = "RESIZE_GUARD_REVISION", default_value = "unknown")]
    revision: String,
    /// Registry and namespace the images are named under. The default cannot resolve (RFC 2606
    /// reserves `.invalid`): it is what `deploy/` and the chart name until an operator points
    /// them at their own registry (`make push` prints how).
    #[arg(long, default_value = "registry.invalid/resize-guard")]
    registry: String,
    /// Every timestamp in the image, in seconds since 1970.
    #[arg(long, env = "SOURCE_DATE_EPOCH", default_value_t = 0)]
    source_date_epoch: u64,
    /// `os/arch=DIR`: a platform (linux/amd64, linux/arm64) and the directory of its static
    /// binaries, the build context its `COPY`s read from; repeated, in index order.
    #[arg(long = "platform", required = true, value_parser = parse_platform)]
    platforms: Vec<(Platform, PathBuf)>,
    /// The images: each names a Containerfile stage (`BINARY`).
    #[arg(required = true)]
    images: Vec<String>,
}

fn parse_platform(s: &str) -> Result<(Platform, PathBuf), String> {
    Platform::parse_with_dir(s, &Platform::IMAGES)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let containerfile = std::fs::read_to_string(&cli.containerfile)
        .with_context(|| format!("reading {}", cli.containerfile.display()))?;
    let contexts: Vec<(Platform, &Path)> = cli
        .platforms
        .iter()
        .map(|(platform, dir)| (*platform, dir.as_path()))
        .collect();
    for name in &cli.images {
        let spec = Build {
            containerfile: &containerfile,
            binary: name,
            contexts: &contexts,
            version: &cli.image_version,
            tag: cli.tag.as_deref().unwrap_or(&cli.image_version),
            revision: &cli.revision,
            registry: &cli.registry,
            epoch: cli.source_date_epoch,
        };
        let image = build(&spec).with_context(|| format!("building the image {name}"))?;
        let bom = sbom(&spec, &image).with_context(|| format!("the SBOM of the image {name}"))?;
        let bom_path = cli.out_dir.join(sbom_name(name, &cli.image_version));
        let archive = cli.out_dir.join(archive_name(name, &cli.image_version));
        let layout_dir = archive.with_extension("");
        layout::write_layout(&image, &layout_dir)
            .with_context(|| format!("writing {}", layout_dir.display()))?;
        layout::write_archive(&image, &archive, cli.source_date_epoch)
            .with_context(|| format!("writing {}", archive.display()))?;
        let mut json = serde_json::to_vec_pretty(&bom).context("serialising the SBOM")?;
        json.push(b'\n');
        std::fs::write(&bom_path, json)
            .with_context(|| format!("writing {}", bom_path.display()))?;
        println!(
            "{}  {}  {}",
            archive.display(),
            image.reference,
            image.index.digest
        );
        for platform in &image.platforms {
            let compressed: u64 = platform.layers.iter().map(|l| l.size()).sum();
            println!(
                "  {}  {}  layers {} bytes",
                platform.platform, platform.manifest.digest, compressed
            );
        }
        println!(
            "  SBOM {}  {} components",
            bom_path.display(),
            bom.components.len()
        );
    }
    Ok(())
}
