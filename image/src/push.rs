//! Pushing an OCI image layout (what `make image` writes next to each archive) to a registry with
//! the OCI distribution API, as `make push` does: each blob the registry lacks is uploaded
//! (`HEAD`, then `POST` + `PUT ?digest=` — the monolithic upload every registry accepts), then
//! each platform's manifest is `PUT` by its digest, then the image index under the tag (a
//! registry refuses an index whose manifests it lacks); every digest the registry answers is
//! checked against the layout's. A layout whose `index.json` names a single manifest is pushed
//! the same way, that manifest under the tag. Credentials come from the files `docker login` and `podman login` write
//! ([`credentials`]); a `401` is answered once, with Basic credentials or a Bearer token fetched
//! from the realm the registry names (the token flow of Docker Hub, GHCR, ECR, GAR, Quay).

use std::path::PathBuf;
use std::sync::Mutex;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

mod credentials;
mod destination;
mod layout;
pub mod pins;

pub use credentials::{credentials, credentials_in};
pub use destination::Destination;
use layout::read_blob;
pub use layout::{Document, Layout};

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
    /// A credentials file exists but cannot be read.
    #[error("credentials file {}: {problem}", path.display())]
    Credentials {
        /// The file.
        path: PathBuf,
        /// What is wrong.
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

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The digest the registry stored under the tag (the image index's).
    pub digest: String,
    /// Manifests pushed by digest before it (one per platform).
    pub manifests: usize,
    /// Blobs uploaded.
    pub uploaded: usize,
    /// Blobs the registry already had.
    pub present: usize,
}

/// A registry client for one host.
pub struct Registry {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    base: String,
    basic: Option<String>,
    authorization: Mutex<Option<HeaderValue>>,
}

impl Registry {
    /// A client for `host`, over plain HTTP when `plain_http` (a registry on loopback), else
    /// HTTPS verified against the system's roots; `basic` is `base64(user:password)`.
    pub fn new(host: &str, plain_http: bool, basic: Option<String>) -> Result<Registry, PushError> {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider)
            .map_err(|e| PushError::Connect {
                method: Method::GET,
                url: format!("https://{host}/"),
                source: Box::new(e),
            })?
            .https_or_http()
            .enable_http1()
            .build();
        let scheme = if plain_http { "http" } else { "https" };
        Ok(Registry {
            client: Client::builder(TokioExecutor::new()).build(connector),
            base: format!("{scheme}://{host}"),
            basic,
            authorization: Mutex::new(None),
        })
    }

    /// Pushes `layout` to `to` (which must be on this client's host).
    pub async fn push(&self, layout: &Layout, to: &Destination) -> Result<Pushed, PushError> {
        let (mut uploaded, mut present) = (0, 0);
        for digest in &layout.blobs {
            let url = format!("{}/v2/{}/blobs/{digest}", self.base, to.repository);
            let head = self.send(Method::HEAD, &url, None, Bytes::new()).await?;
            if head.0 == StatusCode::OK {
                present += 1;
                continue;
            }
            let bytes = read_blob(&layout.dir, digest).map_err(|problem| PushError::Layout {
                dir: layout.dir.clone(),
                problem,
            })?;
            self.upload(&to.repository, digest, Bytes::from(bytes))
                .await?;
            uploaded += 1;
        }
        for manifest in &layout.manifests {
            self.put_manifest(&to.repository, &manifest.digest, manifest)
                .await?;
        }
        let digest = self
            .put_manifest(&to.repository, &to.tag, &layout.top)
            .await?;
        Ok(Pushed {
            digest,
            manifests: layout.manifests.len(),
            uploaded,
            present,
        })
    }

    /// `PUT`s a manifest or index under `reference` (a tag or its digest) and checks the digest
    /// the registry stored is the document's.
    async fn put_manifest(
        &self,
        repository: &str,
        reference: &str,
        document: &Document,
    ) -> Result<String, PushError> {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        let (status, headers, body) = self
            .send(
                Method::PUT,
                &url,
                Some(&document.media_type),
                document.bytes.clone(),
            )
            .await?;
        expect(status, StatusCode::CREATED, Method::PUT, &url, &body)?;
        let stored = headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .unwrap_or(&document.digest)
            .to_owned();
        if stored != document.digest {
            return Err(PushError::Digest {
                url,
                expected: document.digest.clone(),
                stored,
            });
        }
        Ok(stored)
    }

    /// One monolithic upload: `POST` opens a session, `PUT ?digest=` closes it with the bytes.
    async fn upload(&self, repository: &str, digest: &str, bytes: Bytes) -> Result<(), PushError> {
        let url = format!("{}/v2/{repository}/blobs/uploads/", self.base);
        let (status, headers, body) = self.send(Method::POST, &url, None, Bytes::new()).await?;
        expect(status, StatusCode::ACCEPTED, Method::POST, &url, &body)?;
        let location = headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| PushError::Refused {
                method: Method::POST,
                url: url.clone(),
                status,
                body: "no Location header".into(),
            })?;
        let location = if location.starts_with('/') {
            format!("{}{location}", self.base)
        } else {
            location.to_owned()
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let put = format!("{location}{sep}digest={}", encode(digest));
        let (status, _, body) = self
            .send(Method::PUT, &put, Some("application/octet-stream"), bytes)
            .await?;
        expect(status, StatusCode::CREATED, Method::PUT, &url, &body)
    }

    /// Sends a request, answering one `401` with credentials (Basic, or a Bearer token from the
    /// realm the challenge names) and keeping them for the next requests.
    async fn send(
        &self,
        method: Method,
        url: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<(StatusCode, HeaderMap, Bytes), PushError> {
        let first = self
            .request(method.clone(), url, content_type, body.clone(), None)
            .await?;
        if first.0 != StatusCode::UNAUTHORIZED {
            return Ok(first);
        }
        let challenge = first
            .1
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let authorization = self.authorize(&challenge).await?;
        if let Ok(mut slot) = self.authorization.lock() {
            *slot = authorization;
        }
        self.request(method, url, content_type, body, None).await
    }

    /// The `Authorization` value for a `WWW-Authenticate` challenge, if there is one to give.
    async fn authorize(&self, challenge: &str) -> Result<Option<HeaderValue>, PushError> {
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        let basic = self
            .basic
            .as_ref()
            .and_then(|b| HeaderValue::from_str(&format!("Basic {b}")).ok());
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Ok(basic);
        }
        let params = challenge_params(params);
        let Some(realm) = params.iter().find(|(k, _)| k == "realm").map(|(_, v)| v) else {
            return Ok(basic);
        };
        let query: Vec<String> = params
            .iter()
            .filter(|(k, _)| k == "service" || k == "scope")
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        let sep = if realm.contains('?') { '&' } else { '?' };
        let url = format!("{realm}{sep}{}", query.join("&"));
        let (status, _, body) = self
            .request(Method::GET, &url, None, Bytes::new(), basic)
            .await?;
        expect(status, StatusCode::OK, Method::GET, &url, &body)?;
        #[derive(Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&body).map_err(|e| PushError::Refused {
            method: Method::GET,
            url: url.clone(),
            status,
            body: format!("not a token answer: {e}"),
        })?;
        Ok(token
            .token
            .or(token.access_token)
            .and_then(|t| HeaderValue::from_str(&format!("Bearer {t}")).ok()))
    }

    async fn request(
        &self,
        method: Method,
        url: &str,
        content_type: Option<&str>,
        body: Bytes,
        authorization: Option<HeaderValue>,
    ) -> Result<(StatusCode, HeaderMap, Bytes), PushError> {
        let connect = |source: Box<dyn std::error::Error + Send + Sync>| PushError::Connect {
            method: method.clone(),
            url: url.to_owned(),
            source,
        };
        let mut req = Request::builder()
            .method(method.clone())
            .uri(url)
            .header(header::CONTENT_LENGTH, body.len());
        if let Some(ct) = content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        let stored = self.authorization.lock().ok().and_then(|a| a.clone());
        if let Some(auth) = authorization.or(stored) {
            req = req.header(header::AUTHORIZATION, auth);
        }
        let req = req.body(Full::new(body)).map_err(|e| connect(e.into()))?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| connect(e.into()))?;
        let (parts, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| connect(e.into()))?
            .to_bytes();
        Ok((parts.status, parts.headers, body))
    }
}

fn expect(
    status: StatusCode,
    want: StatusCode,
    method: Method,
    url: &str,
    body: &[u8],
) -> Result<(), PushError> {
    if status == want {
        return Ok(());
    }
    Err(PushError::Refused {
        method,
        url: url.to_owned(),
        status,
        body: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
    })
}

/// `key="value"` pairs of a challenge, in order.
fn challenge_params(s: &str) -> Vec<(String, String)> {
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
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests;
