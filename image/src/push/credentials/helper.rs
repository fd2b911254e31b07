//! A docker credential helper (`docker-credential-<name>` on `PATH`), run as
//! docker-credential-helpers' protocol says: `get` with the server address on standard input
//! answers `{"ServerURL": …, "Username": …, "Secret": …}` on standard output; `<token>` as the user
//! name makes the secret an identity token; a failure with `credentials not found in native
//! keychain` means it holds nothing for that server.

use std::ffi::OsStr;
use std::io::Write as _;
use std::process::{Command, Stdio};

use serde::Deserialize;

use super::Secret;
use crate::push::PushError;

/// What a helper answers when it has nothing for the server.
const NOT_FOUND: &str = "credentials not found in native keychain";

/// The user name that marks the secret as an identity token.
const TOKEN_USER: &str = "<token>";

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Answer {
    #[serde(default)]
    username: String,
    #[serde(default)]
    secret: String,
}

/// Runs `docker-credential-<name> get` for `server`; `None` when it holds nothing for it.
/// `source` names the helper and the file that chose it, for errors; `search_path` replaces
/// `PATH` for finding it.
pub(super) fn get(
    name: &str,
    server: &str,
    source: &str,
    search_path: Option<&OsStr>,
) -> Result<Option<Secret>, PushError> {
    let fail = |problem: String| PushError::CredentialHelper {
        helper: source.to_owned(),
        problem,
    };
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(fail(format!("{name:?} is not a credential helper's name")));
    }
    let program = format!("docker-credential-{name}");
    let mut command = Command::new(&program);
    if let Some(search_path) = search_path {
        command.env("PATH", search_path);
    }
    let mut child = command
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => fail(format!(
                "{program} is not on PATH: install it, or log in again without it"
            )),
            _ => fail(format!("cannot run {program}: {e}")),
        })?;
    // Dropping stdin after the write closes it: the helper reads to its end.
    let written = match child.stdin.take() {
        Some(mut stdin) => stdin.write_all(server.as_bytes()),
        None => Ok(()),
    };
    let output = child
        .wait_with_output()
        .map_err(|e| fail(format!("waiting for {program}: {e}")))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        if stdout.trim() == NOT_FOUND {
            return Ok(None);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = [stdout.trim(), stderr.trim()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        return Err(fail(format!(
            "`{program} get` for {server} failed ({}): {}",
            output.status,
            truncate(&said)
        )));
    }
    written.map_err(|e| fail(format!("writing the server address to {program}: {e}")))?;
    let answer: Answer = serde_json::from_slice(&output.stdout).map_err(|e| {
        fail(format!(
            "`{program} get` for {server} answered no credentials JSON ({e})"
        ))
    })?;
    if answer.secret.is_empty() {
        return Err(fail(format!(
            "`{program} get` for {server} answered an empty Secret"
        )));
    }
    Ok(Some(if answer.username == TOKEN_USER {
        Secret::IdentityToken(answer.secret)
    } else {
        Secret::Basic {
            username: answer.username,
            password: answer.secret,
        }
    }))
}

/// The first 512 bytes of a helper's message (at a character boundary): enough to say why,
/// never a flood.
fn truncate(s: &str) -> &str {
    let mut end = s.len().min(512);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
