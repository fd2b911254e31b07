//! Where an image goes: `host[:port]/repository[:tag]`, checked as a registry would check it.

use super::PushError;

/// Where an image goes: `host[:port]/repository:tag`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// `host[:port]`.
    pub host: String,
    /// The repository path under the host, e.g. `resize-guard/resize-guard-webhook`.
    pub repository: String,
    /// The tag.
    pub tag: String,
}

impl Destination {
    /// Parses `host[:port]/repository[:tag]`; the tag defaults to `default_tag`.
    pub fn parse(s: &str, default_tag: &str) -> Result<Destination, PushError> {
        let bad = || PushError::Destination(s.to_owned());
        let (host, rest) = s.split_once('/').ok_or_else(bad)?;
        let (repository, tag) = match rest.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, t),
            _ => (rest, default_tag),
        };
        let valid_repo = !repository.is_empty()
            && repository.split('/').all(|c| {
                !c.is_empty()
                    && c.chars().all(|ch| {
                        ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch)
                    })
            });
        let valid_tag = !tag.is_empty()
            && tag.len() <= 128
            && tag
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "._-".contains(ch));
        if host.is_empty() || !valid_repo || !valid_tag {
            return Err(bad());
        }
        Ok(Destination {
            host: host.to_owned(),
            repository: repository.to_owned(),
            tag: tag.to_owned(),
        })
    }
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}:{}", self.host, self.repository, self.tag)
    }
}
