//! `resize-guard-image`: builds one OCI image per static binary from the Containerfile, with no
//! container engine (see the library docs); `make image` runs it.
//!
//! ```text
//! resize-guard-image --revision $(git rev-parse HEAD) --out-dir target/image \
//!     target/image-build/x86_64-unknown-linux-gnu/release/resize-guard-{webhook,controller}
//! ```

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use resize_guard_image::{Build, archive_name, build, layout};

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
    /// Where `<binary>-<version>.oci.tar` and the `<binary>-<version>.oci/` layout go.
    #[arg(long, default_value = "target/image")]
    out_dir: PathBuf,
    /// `VERSION` and tag; the workspace version by default.
    #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
    image_version: String,
    /// `REVISION`: the git commit the binaries were built from.
    #[arg(long, env = "RESIZE_GUARD_REVISION", default_value = "unknown")]
    revision: String,
    /// Registry and namespace the images are named under.
    #[arg(long, default_value = "ghcr.io/resize-guard")]
    registry: String,
    /// Every timestamp in the image, in seconds since 1970.
    #[arg(long, env = "SOURCE_DATE_EPOCH", default_value_t = 0)]
    source_date_epoch: u64,
    /// The static binaries, one image each; the file name selects the Containerfile stage.
    #[arg(required = true)]
    binaries: Vec<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let containerfile = std::fs::read_to_string(&cli.containerfile)
        .with_context(|| format!("reading {}", cli.containerfile.display()))?;
    for binary in &cli.binaries {
        let image = build(&Build {
            containerfile: &containerfile,
            binary,
            version: &cli.image_version,
            revision: &cli.revision,
            registry: &cli.registry,
            epoch: cli.source_date_epoch,
        })
        .with_context(|| format!("building the image of {}", binary.display()))?;
        let name = binary
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let archive = cli.out_dir.join(archive_name(&name, &cli.image_version));
        let layout_dir = archive.with_extension("");
        layout::write_layout(&image, &layout_dir)
            .with_context(|| format!("writing {}", layout_dir.display()))?;
        layout::write_archive(&image, &archive, cli.source_date_epoch)
            .with_context(|| format!("writing {}", archive.display()))?;
        let compressed: u64 = image.layers.iter().map(|l| l.size()).sum();
        println!(
            "{}  {}  {}  layers {} bytes",
            archive.display(),
            image.reference,
            image.manifest.digest,
            compressed
        );
    }
    Ok(())
}
