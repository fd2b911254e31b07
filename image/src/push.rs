//! Pushing an OCI image layout (what `make image` writes next to each archive) to a registry with
//! the OCI distribution API, as `make push` does: each blob the registry lacks is uploaded
//! (`HEAD`, then `POST` + `PUT ?digest=` — the monolithic upload every registry accepts), then
//! each platform's manifest is `PUT` by its digest, then the image index under the tag (a
//! registry refuses an index whose manifests it lacks); every digest the registry answers is
//! checked against the layout's. A layout whose `index.json` names a single manifest is pushed
//! the same way, that manifest under the tag. The image's SBOM then goes beside it as an OCI
//! artifact whose `subject` is what the tag names ([`referrer`]), found by the referrers API or
//! its tag-schema fallback.
//!
//! Credentials come from the files and credential helpers `docker login` and `podman login` use
//! ([`credentials`]); a `401` is answered once (`push/auth.rs`): with Basic credentials, or a
//! Bearer token from the realm the registry names (the token flow of Docker Hub, GHCR, ECR, GAR,
//! ACR, Quay), an identity token exchanged there for an access token.

use std::sync::Mutex;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

mod auth;
pub mod credentials;
mod destination;
mod error;
mod layout;
pub mod pins;
pub mod referrer;

pub use credentials::{Credential, Secret, credentials, credentials_in};
pub use destination::Destination;
pub use error::PushError;
use layout::read_blob;
pub use layout::{Document, Layout};

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

/// A registry's answer: status, headers, body.
type Answer = (StatusCode, HeaderMap, Bytes);

/// Where a client's credentials come from: given, or looked up on the first challenge.
enum Source {
    /// These, or none.
    Given(Option<Credential>),
    /// [`credentials()`] for the host, run once, when the registry first asks: a registry that
    /// asks for none never runs a credential helper.
    Lookup(Mutex<Option<Option<Credential>>>),
}

/// A registry client for one host.
pub struct Registry {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    host: String,
    base: String,
    source: Source,
    authorization: Mutex<Option<HeaderValue>>,
}

impl Registry {
    /// A client for `host` (`host[:port]`; Docker Hub's names go to its API host), over plain
    /// HTTP when `plain_http` (a registry on loopback), else HTTPS verified against the system's
    /// roots; the credentials for a challenge are looked up ([`credentials()`]) when the first
    /// one comes.
    pub fn new(host: &str, plain_http: bool) -> Result<Registry, PushError> {
        Registry::build(host, plain_http, Source::Lookup(Mutex::new(None)))
    }

    /// [`Registry::new`] answering challenges with `credential` (none: anonymously).
    pub fn with_credential(
        host: &str,
        plain_http: bool,
        credential: Option<Credential>,
    ) -> Result<Registry, PushError> {
        Registry::build(host, plain_http, Source::Given(credential))
    }

    /// The credentials sent so far (`None`: none, or the registry asked for none).
    pub fn credential_used(&self) -> Option<Credential> {
        match &self.source {
            Source::Given(c) => c.clone(),
            Source::Lookup(slot) => slot.lock().ok().and_then(|s| s.clone()).flatten(),
        }
    }

    /// The credentials to answer a challenge with, looked up on first use.
    fn credential(&self) -> Result<Option<Credential>, PushError> {
        match &self.source {
            Source::Given(c) => Ok(c.clone()),
            Source::Lookup(slot) => {
                let Ok(mut slot) = slot.lock() else {
                    return credentials(&self.host);
                };
                if let Some(found) = slot.as_ref() {
                    return Ok(found.clone());
                }
                let found = credentials(&self.host)?;
                *slot = Some(found.clone());
                Ok(found)
            }
        }
    }

    fn build(host: &str, plain_http: bool, source: Source) -> Result<Registry, PushError> {
        let host = credentials::api_host(host);
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
            host: host.to_owned(),
            base: format!("{scheme}://{host}"),
            source,
            authorization: Mutex::new(None),
        })
    }

    /// Pushes `layout` to `to` (which must be on this client's host).
    pub async fn push(&self, layout: &Layout, to: &Destination) -> Result<Pushed, PushError> {
        let (mut uploaded, mut present) = (0, 0);
        for digest in &layout.blobs {
            if self.has_blob(&to.repository, digest).await? {
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
            .await?
            .0;
        Ok(Pushed {
            digest,
            manifests: layout.manifests.len(),
            uploaded,
            present,
        })
    }

    /// Whether the repository holds the blob (`HEAD`).
    async fn has_blob(&self, repository: &str, digest: &str) -> Result<bool, PushError> {
        let url = format!("{}/v2/{repository}/blobs/{digest}", self.base);
        let (status, _, body) = self.send(Method::HEAD, &url, None, Bytes::new()).await?;
        match status {
            StatusCode::OK => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(refused(status, Method::HEAD, &url, &body)),
        }
    }

    /// `PUT`s a manifest or index under `reference` (a tag or its digest) and checks the digest
    /// the registry stored is the document's; the digest and the answer's headers.
    async fn put_manifest(
        &self,
        repository: &str,
        reference: &str,
        document: &Document,
    ) -> Result<(String, HeaderMap), PushError> {
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
        Ok((stored, headers))
    }

    /// `GET`s a manifest or index as `accept`; `None` when the registry has none under
    /// `reference`.
    async fn get_manifest(
        &self,
        repository: &str,
        reference: &str,
        accept: &str,
    ) -> Result<Option<Answer>, PushError> {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        let answer = self
            .send_accepting(Method::GET, &url, None, Bytes::new(), Some(accept))
            .await?;
        match answer.0 {
            StatusCode::OK => Ok(Some(answer)),
            StatusCode::NOT_FOUND => Ok(None),
            status => Err(refused(status, Method::GET, &url, &answer.2)),
        }
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
        let put = format!("{location}{sep}digest={}", auth::encode(digest));
        let (status, _, body) = self
            .send(Method::PUT, &put, Some("application/octet-stream"), bytes)
            .await?;
        expect(status, StatusCode::CREATED, Method::PUT, &url, &body)
    }

    /// Sends a request with the authorization kept from the last challenge, answering one `401`
    /// ([`auth`]) and keeping what answered it for the next requests. A second `401` is an
    /// [`PushError::Unauthorized`] naming the credentials sent.
    async fn send(
        &self,
        method: Method,
        url: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<Answer, PushError> {
        self.send_accepting(method, url, content_type, body, None)
            .await
    }

    /// [`Registry::send`] with an `Accept` header.
    async fn send_accepting(
        &self,
        method: Method,
        url: &str,
        content_type: Option<&str>,
        body: Bytes,
        accept: Option<&str>,
    ) -> Result<Answer, PushError> {
        let stored = self.authorization.lock().ok().and_then(|a| a.clone());
        let first = self
            .request_with(
                method.clone(),
                url,
                content_type,
                accept,
                body.clone(),
                stored,
            )
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
        let authorization = self.authorize(url, &challenge).await?;
        if let Ok(mut slot) = self.authorization.lock() {
            slot.clone_from(&authorization);
        }
        let again = self
            .request_with(method, url, content_type, accept, body, authorization)
            .await?;
        if again.0 == StatusCode::UNAUTHORIZED {
            return Err(self.auth_error(
                url,
                &format!(
                    "the registry answered 401: {}",
                    String::from_utf8_lossy(&again.2[..again.2.len().min(512)])
                ),
            ));
        }
        Ok(again)
    }

    /// Sends one request with exactly `authorization` (none when `None`).
    async fn request_with(
        &self,
        method: Method,
        url: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Bytes,
        authorization: Option<HeaderValue>,
    ) -> Result<Answer, PushError> {
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
        if let Some(accept) = accept {
            req = req.header(header::ACCEPT, accept);
        }
        if let Some(auth) = authorization {
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

fn refused(status: StatusCode, method: Method, url: &str, body: &[u8]) -> PushError {
    PushError::Refused {
        method,
        url: url.to_owned(),
        status,
        body: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
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
    Err(refused(status, method, url, body))
}

#[cfg(test)]
mod tests;
