//! [`CertError`]: every way issuing, inspecting or writing certificates can fail, one variant
//! per failed operation, each with a stable [`CertError::reason`] for logs and Events.

use std::path::PathBuf;

/// Why a certificate operation failed.
///
/// `Display` describes the failed operation; the underlying rcgen or OS error is the
/// [`source`](std::error::Error::source), so print the chain (`{:#}` with anyhow).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    /// Creating a key or signing a certificate failed (bad SAN, validity out of range, ...).
    #[error("generating the {what} failed")]
    Generate {
        /// Which artefact was being generated, e.g. `"CA certificate"`.
        what: &'static str,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// The spec cannot be turned into a certificate (e.g. a lifetime that overflows the clock).
    #[error("invalid certificate spec: {problem}")]
    Spec {
        /// What is wrong with the spec.
        problem: String,
    },
    /// A PEM input could not be decoded into the expected object.
    #[error("parsing the {what} failed: {problem}")]
    Parse {
        /// Which input was being parsed, e.g. `"CA private key"`.
        what: &'static str,
        /// Why it was rejected.
        problem: String,
    },
    /// The CA given for renewal cannot sign a usable leaf.
    #[error("the CA cannot issue a serving certificate: {problem}")]
    Ca {
        /// What is wrong with the CA (not a CA, key mismatch, expired).
        problem: String,
    },
    /// A filesystem operation failed.
    #[error("{op} {}", path.display())]
    Io {
        /// The operation, e.g. `"writing"`.
        op: &'static str,
        /// The path it was applied to.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl CertError {
    /// A short, stable, machine-friendly tag for this error (for metrics labels and Event
    /// reasons).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Generate { .. } => "GenerateFailed",
            Self::Spec { .. } => "InvalidSpec",
            Self::Parse { .. } => "ParseFailed",
            Self::Ca { .. } => "UnusableCa",
            Self::Io { .. } => "IoFailed",
        }
    }

    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { op, path, source }
    }

    pub(crate) fn generate(what: &'static str) -> impl FnOnce(rcgen::Error) -> Self {
        move |source| Self::Generate { what, source }
    }

    pub(crate) fn parse(what: &'static str, problem: impl ToString) -> Self {
        Self::Parse {
            what,
            problem: problem.to_string(),
        }
    }
}
