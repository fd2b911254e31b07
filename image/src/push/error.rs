//! Why a push failed: every error names the registry's URL or the file at fault, and one about
//! credentials names where they came from, never the secret.

use std::path::PathBuf;

use http::{Method, StatusCode};

/// Why a push failed; every variant names the registry or the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PushError {
    /// The destination is not `host[:port]/repository[:tag]`.
    #[error("destination {0:?}: expected host[:port]/repository[:tag]")]
    Destination(String),
    /// The layout directory is missing or malformed.
    #[error("image layout {}: {problem}", dir.display())]
    Layout {
        /// The layout directory.
        dir: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The SBOM to push beside an image is missing or is not a CycloneDX JSON document.
    #[error("SBOM {}: {problem}", path.display())]
    Sbom {
        /// The SBOM file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A credentials file exists but cannot be read.
    #[error("credentials file {}: {problem}", path.display())]
    Credentials {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A credential helper a credentials file names failed.
    #[error("credential helper {helper}: {problem}")]
    CredentialHelper {
        /// The helper and the file that names it.
        helper: String,
        /// What went wrong.
        problem: String,
    },
    /// The registry refused the credentials, or its token realm gave no token.
    #[error("{url}: not authorized with {credentials}: {problem}")]
    Unauthorized {
        /// The request's URL.
        url: String,
        /// Which credentials were sent (never the secret).
        credentials: String,
        /// What the registry or its token realm answered.
        problem: String,
    },
    /// The referrers tag (`sha256-<hex>`) names something other than a referrers index.
    #[error("{url}: the referrers tag {problem}")]
    ReferrersTag {
        /// The tag's manifest URL.
        url: String,
        /// What it holds instead.
        problem: String,
    },
    /// The registry could not be reached.
    #[error("{method} {url}: {source}")]
    Connect {
        /// The request's method.
        method: Method,
        /// The request's URL.
        url: String,
        /// The client's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The registry answered, but not as the protocol says it should.
    #[error("{method} {url}: the registry answered {status}: {body}")]
    Refused {
        /// The request's method.
        method: Method,
        /// The request's URL.
        url: String,
        /// The status.
        status: StatusCode,
        /// The start of the answer's body (the registry's error JSON).
        body: String,
    },
    /// The registry stored a manifest or index with another digest than the layout's.
    #[error("{url}: the registry stored digest {stored}, the layout's is {expected}")]
    Digest {
        /// The manifest URL.
        url: String,
        /// What the layout holds.
        expected: String,
        /// What the registry answered in `Docker-Content-Digest`.
        stored: String,
    },
}
