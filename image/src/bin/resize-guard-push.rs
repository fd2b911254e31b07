//! `resize-guard-push`: pushes the OCI layouts `make image` wrote to a registry, each under the
//! repository and tag it was built as, re-rooted at `--registry`: the blobs, every platform's
//! manifest by digest, then the image index under the tag, then the image's CycloneDX SBOM
//! (`<layout>.cdx.json` beside it) as an artifact referring to that index; `make push` runs it.
//! Then it prints what runs them: a kustomize `images:` block and Helm `--set` flags pinning
//! each digest.
//!
//! ```text
//! resize-guard-push --registry registry.example/platform [--tag 0.2.0] [--plain-http] \
//!     [--no-sbom] target/image/resize-guard-webhook-0.2.0.oci \
//!     target/image/resize-guard-controller-0.2.0.oci
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use resize_guard_image::push::pins::{self, Pin};
use resize_guard_image::push::referrer::Sbom;
use resize_guard_image::push::{Destination, Layout, Registry};

#[derive(Parser)]
#[command(
    name = "resize-guard-push",
    version,
    about = "Push resize-guard's OCI image layouts to a registry (OCI distribution API)",
    after_help = "Credentials, looked up when the registry first asks for some: the first of \
                  $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json (podman login), $DOCKER_CONFIG/config.json or ~/.docker/config.json (docker login) \
                  that has some for the registry's host: its credHelpers entry for the host, else its \
                  credsStore (docker-credential-<name> get, as docker runs them), else its auths entry \
                  (auth, username and password, or identitytoken). An identity token is exchanged at \
                  the registry's token realm (OAuth2 refresh-token grant).\n\n\
                  SBOM: each layout's <name>-<version>.cdx.json beside it (make image writes it) is \
                  pushed as an OCI artifact (artifactType application/vnd.cyclonedx+json) whose subject \
                  is the pushed image index; a registry without the referrers API also gets the \
                  referrers tag sha256-<hex>. A missing SBOM fails the push unless --no-sbom.\n\n\
                  Examples:\n  \
                  make push REGISTRY=registry.example/platform\n  \
                  make push REGISTRY=localhost:5000/resize-guard PLAIN_HTTP=1 TAG=dev"
)]
struct Cli {
    /// `host[:port]/namespace` the images go under: `<registry>/resize-guard-webhook:<tag>`.
    #[arg(long)]
    registry: String,
    /// The tag; by default the one each image was built with (`make image`: version and commit).
    #[arg(long)]
    tag: Option<String>,
    /// Talk plain HTTP (a registry on loopback); HTTPS with the system's roots otherwise.
    #[arg(long)]
    plain_http: bool,
    /// Push the images without their SBOMs (`make push NO_SBOM=1`).
    #[arg(long)]
    no_sbom: bool,
    /// Image layout directories (`target/image/<binary>-<version>.oci`).
    #[arg(required = true)]
    layouts: Vec<PathBuf>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: &Cli) -> anyhow::Result<()> {
    let registry = cli.registry.trim_end_matches('/');
    let host = registry.split('/').next().unwrap_or_default();
    let client = Registry::new(host, cli.plain_http)?;
    // Every layout and SBOM is read before anything is pushed: a missing file pushes nothing.
    let mut work = Vec::new();
    for dir in &cli.layouts {
        let layout = Layout::read(dir)?;
        let sbom = match cli.no_sbom {
            true => None,
            false => Some(Sbom::read(&Sbom::beside(dir))?),
        };
        work.push((layout, sbom));
    }
    let mut pinned = Vec::new();
    for (layout, sbom) in &work {
        let (name, built_tag) = layout.short_name();
        let tag = cli.tag.clone().unwrap_or(built_tag);
        let to = Destination::parse(&format!("{registry}/{name}:{tag}"), &tag)?;
        let pushed = client.push(layout, &to).await?;
        println!(
            "{to}@{}  ({} blobs uploaded, {} already there; {} platform manifest{})",
            pushed.digest,
            pushed.uploaded,
            pushed.present,
            pushed.manifests,
            if pushed.manifests == 1 { "" } else { "s" }
        );
        if let Some(sbom) = sbom {
            let attached = client
                .attach_sbom(&to.repository, &layout.top, sbom)
                .await?;
            let how = match &attached.fallback_tag {
                Some(tag) => format!("referrers tag {tag}"),
                None => "referrers API".to_owned(),
            };
            println!(
                "  SBOM {}/{}@{}  ({}, refers to {}; {how})",
                to.host,
                to.repository,
                attached.digest,
                sbom.path.display(),
                pushed.digest
            );
        }
        pinned.push(Pin {
            built: layout.built().0.to_owned(),
            pushed: format!("{}/{}", to.host, to.repository),
            digest: pushed.digest,
        });
    }
    if let Some(c) = client.credential_used() {
        eprintln!("resize-guard-push: {host}: pushed with {}", c.describe());
    }
    println!("\n{}\n{}", pins::kustomize(&pinned), pins::helm(&pinned));
    Ok(())
}
