//! Answering a registry's `401`: its `WWW-Authenticate` challenge asks for HTTP Basic (sent
//! from the user name and password) or for a Bearer token from the realm it names, fetched as the
//! distribution token spec says: `GET realm?service=…&scope=…` (with Basic credentials when there
//! are some, anonymously otherwise), or, for an identity token, the OAuth2 refresh-token grant
//! `POST realm` (`grant_type=refresh_token`). Docker Hub, GHCR, ECR, GAR, ACR and Quay all answer
//! one of these.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use serde::Deserialize;

use super::credentials::Secret;
use super::{PushError, Registry};

/// The `client_id` sent with the refresh-token grant (the token spec asks for one).
const CLIENT_ID: &str = "resize-guard-push";

/// A token endpoint's answer: `access_token` (OAuth2) or `token` (the GET flow).
#[derive(Deserialize)]
struct Token {
    token: Option<String>,
    access_token: Option<String>,
}

impl Registry {
    /// The `Authorization` value that answers `challenge` (a `WWW-Authenticate` value) for the
    /// request to `url`, if there is one to give.
    pub(super) async fn authorize(
        &self,
        url: &str,
        challenge: &str,
    ) -> Result<Option<HeaderValue>, PushError> {
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        let credential = self.credential()?;
        let secret = credential.as_ref().map(|c| &c.secret);
        let basic = match secret {
            Some(Secret::Basic { username, password }) => header(&format!(
                "Basic {}",
                STANDARD.encode(format!("{username}:{password}"))
            )),
            _ => None,
        };
        if !scheme.eq_ignore_ascii_case("bearer") {
            if let Some(Secret::IdentityToken(_)) = secret {
                return Err(self.auth_error(
                    url,
                    &format!(
                        "the registry asks for {scheme:?} authentication, and an identity token \
                         is only accepted by a Bearer token realm"
                    ),
                ));
            }
            return Ok(basic);
        }
        let params = challenge_params(params);
        let Some(realm) = params.iter().find(|(k, _)| k == "realm").map(|(_, v)| v) else {
            return Err(self.auth_error(
                url,
                &format!("a Bearer challenge without a realm: {challenge:?}"),
            ));
        };
        let service = params.iter().find(|(k, _)| k == "service").map(|(_, v)| v);
        let scopes: Vec<&str> = params
            .iter()
            .filter(|(k, _)| k == "scope")
            .map(|(_, v)| v.as_str())
            .collect();
        let (method, token_url, form, auth) = match secret {
            Some(Secret::IdentityToken(refresh)) => {
                let mut form = vec![
                    ("grant_type", "refresh_token"),
                    ("client_id", CLIENT_ID),
                    ("refresh_token", refresh.as_str()),
                ];
                form.extend(service.map(|s| ("service", s.as_str())));
                let scope = scopes.join(" ");
                if !scope.is_empty() {
                    form.push(("scope", scope.as_str()));
                }
                let body = form
                    .iter()
                    .map(|(k, v)| format!("{k}={}", encode(v)))
                    .collect::<Vec<_>>()
                    .join("&");
                (Method::POST, realm.clone(), Bytes::from(body), None)
            }
            _ => {
                let query: Vec<String> = service
                    .map(|s| format!("service={}", encode(s)))
                    .into_iter()
                    .chain(scopes.iter().map(|s| format!("scope={}", encode(s))))
                    .collect();
                let sep = if realm.contains('?') { '&' } else { '?' };
                let token_url = if query.is_empty() {
                    realm.clone()
                } else {
                    format!("{realm}{sep}{}", query.join("&"))
                };
                (Method::GET, token_url, Bytes::new(), basic)
            }
        };
        let content_type = (method == Method::POST).then_some("application/x-www-form-urlencoded");
        let (status, _, body) = self
            .request_with(method.clone(), &token_url, content_type, None, form, auth)
            .await?;
        if status != StatusCode::OK {
            return Err(self.auth_error(
                url,
                &format!(
                    "{method} {token_url} (the token realm) answered {status}: {}",
                    String::from_utf8_lossy(&body[..body.len().min(512)])
                ),
            ));
        }
        let token: Token = serde_json::from_slice(&body).map_err(|e| {
            self.auth_error(
                url,
                &format!("{method} {token_url} answered no token JSON: {e}"),
            )
        })?;
        match token.access_token.or(token.token).filter(|t| !t.is_empty()) {
            Some(t) => Ok(header(&format!("Bearer {t}"))),
            None => Err(self.auth_error(
                url,
                &format!("{method} {token_url} answered neither access_token nor token"),
            )),
        }
    }

    /// An authentication failure at `url`, naming the credentials used (never the secret).
    pub(super) fn auth_error(&self, url: &str, problem: &str) -> PushError {
        PushError::Unauthorized {
            url: url.to_owned(),
            credentials: self.credentials_used(),
            problem: problem.to_owned(),
        }
    }

    /// Which credentials went with the requests, for messages.
    pub(super) fn credentials_used(&self) -> String {
        match self.credential_used() {
            Some(c) => c.describe(),
            None => format!(
                "no credentials (none for {} in the credential files: docker login, podman \
                 login, or REGISTRY_AUTH_FILE)",
                self.host
            ),
        }
    }
}

fn header(value: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(value).ok()
}

/// `key="value"` pairs of a challenge, in order.
pub(super) fn challenge_params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let (value, tail) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.split_once('"') {
                Some((v, t)) => (v, t),
                None => (quoted, ""),
            },
            None => after.split_once(',').unwrap_or((after, "")),
        };
        out.push((key, value.to_owned()));
        rest = tail.trim_start_matches(',').trim();
    }
    out
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub(super) fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
