//! Registry credentials from the files `docker login` and `podman login` write.

use std::path::PathBuf;

use serde::Deserialize;

use super::PushError;

/// `base64(user:password)` for `host` from the first credentials file that has it:
/// `$REGISTRY_AUTH_FILE`, `$XDG_RUNTIME_DIR/containers/auth.json` (podman login),
/// `$DOCKER_CONFIG/config.json` or `~/.docker/config.json` (docker login). Credential helpers
/// (`credsStore`) are not run: log in with `--password-stdin` into a file, or set
/// `REGISTRY_AUTH_FILE`.
pub fn credentials(host: &str) -> Result<Option<String>, PushError> {
    let env = |k: &str| std::env::var_os(k).map(PathBuf::from);
    let mut files = Vec::new();
    files.extend(env("REGISTRY_AUTH_FILE"));
    files.extend(env("XDG_RUNTIME_DIR").map(|d| d.join("containers/auth.json")));
    match env("DOCKER_CONFIG") {
        Some(d) => files.push(d.join("config.json")),
        None => files.extend(env("HOME").map(|h| h.join(".docker/config.json"))),
    }
    credentials_in(&files, host)
}

/// [`credentials`] from `files`, in order; a missing file is skipped.
pub fn credentials_in(files: &[PathBuf], host: &str) -> Result<Option<String>, PushError> {
    for path in files {
        let path = path.clone();
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(PushError::Credentials {
                    path,
                    problem: e.to_string(),
                });
            }
        };
        #[derive(Deserialize)]
        struct Config {
            #[serde(default)]
            auths: std::collections::BTreeMap<String, Auth>,
        }
        #[derive(Deserialize)]
        struct Auth {
            auth: Option<String>,
        }
        let config: Config = serde_json::from_slice(&text).map_err(|e| PushError::Credentials {
            path: path.clone(),
            problem: e.to_string(),
        })?;
        let found = config.auths.iter().find(|(k, _)| {
            let k = k
                .trim_start_matches("https://")
                .trim_start_matches("http://");
            k.split('/').next() == Some(host)
        });
        if let Some(auth) = found.and_then(|(_, a)| a.auth.clone()) {
            return Ok(Some(auth));
        }
    }
    Ok(None)
}
