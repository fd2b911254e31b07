//! Registry credentials as `docker login` and `podman login` leave them: in a config file's
//! `auths` (`auth`, `username` + `password`, or an `identitytoken`), or with a credential helper
//! the file names (`credHelpers` for one registry, `credsStore` for all), run as the
//! docker-credential-helpers protocol says ([`helper`]).
//!
//! The files, first match wins: `$REGISTRY_AUTH_FILE`, `$XDG_RUNTIME_DIR/containers/auth.json`
//! (podman), `$DOCKER_CONFIG/config.json` or `~/.docker/config.json` (docker). In one file, as
//! docker reads it: `credHelpers[host]`, else `credsStore`, else `auths[host]`; a helper that has
//! nothing for the host (`credentials not found in native keychain`) leaves the file's `auths`
//! and then the next file to answer.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;

use super::PushError;

mod helper;

/// Docker Hub's registry API host; its credentials are stored under [`DOCKER_HUB_KEY`].
pub const DOCKER_HUB_API: &str = "registry-1.docker.io";
/// The key docker stores Docker Hub's credentials under (and gives its helpers).
pub const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";

/// A secret a registry accepts.
#[derive(Clone, PartialEq, Eq)]
pub enum Secret {
    /// A user name and a password (or a personal access token), sent as HTTP Basic or to a
    /// token realm as Basic.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// An identity token (`identitytoken`, or a helper's `<token>` user name): an OAuth2
    /// refresh token, exchanged at the registry's token realm for an access token.
    IdentityToken(String),
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Secret::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
            Secret::IdentityToken(_) => f.write_str("IdentityToken(<redacted>)"),
        }
    }
}

/// Credentials for one registry and where they were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The secret.
    pub secret: Secret,
    /// Where it came from, for messages: `auths["host"] in /path/config.json`,
    /// `docker-credential-pass (credsStore in /path/config.json)`.
    pub source: String,
}

impl Credential {
    /// What kind of secret, and from where (never the secret).
    pub fn describe(&self) -> String {
        match &self.secret {
            Secret::Basic { username, .. } => format!("user {username:?} from {}", self.source),
            Secret::IdentityToken(_) => format!("the identity token from {}", self.source),
        }
    }
}

/// The credentials files to read, in order, from the environment.
pub fn credential_files() -> Vec<PathBuf> {
    let env = |k: &str| std::env::var_os(k).map(PathBuf::from);
    let mut files = Vec::new();
    files.extend(env("REGISTRY_AUTH_FILE"));
    files.extend(env("XDG_RUNTIME_DIR").map(|d| d.join("containers/auth.json")));
    match env("DOCKER_CONFIG") {
        Some(d) => files.push(d.join("config.json")),
        None => files.extend(env("HOME").map(|h| h.join(".docker/config.json"))),
    }
    files
}

/// The credentials for `host` (`host[:port]` of the registry's API) from [`credential_files`].
pub fn credentials(host: &str) -> Result<Option<Credential>, PushError> {
    credentials_in(&credential_files(), host)
}

/// [`credentials`] from `files`, in order; a missing file is skipped.
pub fn credentials_in(files: &[PathBuf], host: &str) -> Result<Option<Credential>, PushError> {
    lookup(files, host, None)
}

/// [`credentials_in`], helpers looked up in `search_path` (a `PATH` value) when given, else in
/// this process's `PATH`.
fn lookup(
    files: &[PathBuf],
    host: &str,
    search_path: Option<&OsStr>,
) -> Result<Option<Credential>, PushError> {
    for path in files {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(bad_file(path, e.to_string())),
        };
        let config: Config =
            serde_json::from_slice(&text).map_err(|e| bad_file(path, e.to_string()))?;
        if let Some(found) = config.lookup(path, host, search_path)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

fn bad_file(path: &Path, problem: String) -> PushError {
    PushError::Credentials {
        path: path.to_path_buf(),
        problem,
    }
}

/// The parts of a docker `config.json` or a containers `auth.json` that name credentials.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    #[serde(default)]
    auths: BTreeMap<String, Auth>,
    #[serde(default)]
    creds_store: Option<String>,
    #[serde(default)]
    cred_helpers: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Auth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    identitytoken: Option<String>,
}

impl Config {
    fn lookup(
        &self,
        path: &Path,
        host: &str,
        search_path: Option<&OsStr>,
    ) -> Result<Option<Credential>, PushError> {
        let helper = self
            .cred_helpers
            .iter()
            .find(|(key, name)| same_registry(key, host) && !name.is_empty())
            .map(|(key, name)| (name, format!("credHelpers[{key:?}]")))
            .or_else(|| {
                self.creds_store
                    .as_ref()
                    .filter(|name| !name.is_empty())
                    .map(|name| (name, "credsStore".to_owned()))
            });
        if let Some((name, why)) = helper {
            let source = format!("docker-credential-{name} ({why} in {})", path.display());
            if let Some(secret) = helper::get(name, &server_address(host), &source, search_path)? {
                return Ok(Some(Credential { secret, source }));
            }
        }
        let Some((key, auth)) = self.auths.iter().find(|(key, _)| same_registry(key, host)) else {
            return Ok(None);
        };
        let source = format!("auths[{key:?}] in {}", path.display());
        let bad = |problem: &str| bad_file(path, format!("auths[{key:?}]: {problem}"));
        if let Some(token) = auth.identitytoken.as_ref().filter(|t| !t.is_empty()) {
            return Ok(Some(Credential {
                secret: Secret::IdentityToken(token.clone()),
                source,
            }));
        }
        if let Some(encoded) = auth.auth.as_ref().filter(|a| !a.is_empty()) {
            let decoded = STANDARD
                .decode(encoded.trim())
                .map_err(|e| bad(&format!("auth is not base64: {e}")))?;
            let decoded =
                String::from_utf8(decoded).map_err(|_| bad("auth is not UTF-8 once decoded"))?;
            let (username, password) = decoded
                .split_once(':')
                .ok_or_else(|| bad("auth is not base64 of user:password"))?;
            return Ok(Some(Credential {
                secret: Secret::Basic {
                    username: username.to_owned(),
                    password: password.to_owned(),
                },
                source,
            }));
        }
        match (&auth.username, &auth.password) {
            (Some(username), Some(password)) if !username.is_empty() => Ok(Some(Credential {
                secret: Secret::Basic {
                    username: username.clone(),
                    password: password.clone(),
                },
                source,
            })),
            // An empty entry: what `docker login` leaves when a helper holds the secret.
            _ => Ok(None),
        }
    }
}

/// Whether a config key (`host`, `https://host/v1/`, `http://host`) names the registry whose
/// API is at `host`; Docker Hub answers to each of its names.
fn same_registry(key: &str, host: &str) -> bool {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let key = key.split('/').next().unwrap_or(key);
    hub_alias(key) == hub_alias(host)
}

fn hub_alias(host: &str) -> &str {
    match host {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" => DOCKER_HUB_API,
        other => other,
    }
}

/// What a helper is asked for: Docker Hub's credentials live under [`DOCKER_HUB_KEY`], every
/// other registry's under its `host[:port]`, as `docker login` stores them.
fn server_address(host: &str) -> String {
    if hub_alias(host) == DOCKER_HUB_API {
        DOCKER_HUB_KEY.to_owned()
    } else {
        host.to_owned()
    }
}

/// The API host of a registry name: Docker Hub's names (`docker.io`, `index.docker.io`) answer
/// at [`DOCKER_HUB_API`]; every other `host[:port]` is its own.
pub fn api_host(host: &str) -> &str {
    hub_alias(host)
}

#[cfg(test)]
mod tests;
