//! [`ImageError`]: every way reading a Containerfile or writing an image can fail, one variant per
//! failed operation, each with a stable [`ImageError::reason`].

use std::path::PathBuf;

/// Why building an image failed.
///
/// `Display` describes the failed operation; an underlying OS or JSON error is the
/// [`source`](std::error::Error::source), so print the chain (`{:#}` with anyhow).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// A Containerfile line is malformed or uses something outside the supported subset.
    #[error("Containerfile line {line}: {problem}")]
    Parse {
        /// 1-based line where the instruction starts.
        line: usize,
        /// What is wrong, and what is supported instead.
        problem: String,
    },
    /// The Containerfile parses but cannot produce an image with the given build arguments.
    #[error("Containerfile: {problem}")]
    Resolve {
        /// What is missing or inconsistent.
        problem: String,
    },
    /// A COPY source is not a regular file in the build context.
    #[error("COPY source {} is not a regular file", path.display())]
    Source {
        /// The resolved source path.
        path: PathBuf,
    },
    /// A program is not for the platform it is packed as, or needs a dynamic loader.
    #[error("{} is {problem}", path.display())]
    Program {
        /// The program's path.
        path: PathBuf,
        /// What its header says instead ([`crate::executable::check`]).
        problem: String,
    },
    /// A program carries no dependency tree (`cargo auditable` embeds one), or it is unreadable.
    #[error("{}: no SBOM: {problem}", path.display())]
    AuditData {
        /// The program's path.
        path: PathBuf,
        /// Why its audit data could not be read.
        problem: String,
    },
    /// Serialising an OCI JSON document failed.
    #[error("serialising the {what} failed")]
    Json {
        /// Which document, e.g. `"image config"`.
        what: &'static str,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
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

impl ImageError {
    /// A short, stable, machine-friendly tag for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Parse { .. } => "ParseFailed",
            Self::Resolve { .. } => "ResolveFailed",
            Self::Source { .. } => "MissingSource",
            Self::Program { .. } => "WrongProgram",
            Self::AuditData { .. } => "NoAuditData",
            Self::Json { .. } => "JsonFailed",
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

    pub(crate) fn parse(line: usize, problem: impl ToString) -> Self {
        Self::Parse {
            line,
            problem: problem.to_string(),
        }
    }

    pub(crate) fn resolve(problem: impl ToString) -> Self {
        Self::Resolve {
            problem: problem.to_string(),
        }
    }

    pub(crate) fn json(what: &'static str) -> impl FnOnce(serde_json::Error) -> Self {
        move |source| Self::Json { what, source }
    }
}
