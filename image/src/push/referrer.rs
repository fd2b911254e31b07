//! An SBOM pushed beside its image as an OCI 1.1 artifact that refers to it: an image manifest
//! with `artifactType` `application/vnd.cyclonedx+json`, the empty config, the SBOM as its one
//! layer and the pushed image index as its `subject`. A registry that serves the referrers API
//! (`GET /v2/<name>/referrers/<digest>`) says so with an `OCI-Subject` header when it stores such
//! a manifest; for one that does not, the distribution spec's referrers tag schema is kept too:
//! the image index tagged `sha256-<hex of the subject>` lists every referrer, read, extended
//! with this one and put back (other referrers, e.g. cosign's signatures, stay). `cosign tree`,
//! `oras discover` and Kyverno find it either way.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::{Value, json};

use super::{Document, PushError, Registry};
use crate::blob::sha256_digest;
use crate::oci::{INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE};

/// The IANA media type of a CycloneDX JSON document: the artifact's type and its layer's.
pub const CYCLONEDX_MEDIA_TYPE: &str = "application/vnd.cyclonedx+json";
/// The OCI empty descriptor's media type (an artifact with no config).
pub const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The empty JSON object, the content of [`EMPTY_MEDIA_TYPE`].
const EMPTY: &[u8] = b"{}";
/// The annotation naming a layer's file (what `oras pull` writes it as).
const TITLE: &str = "org.opencontainers.image.title";

/// An SBOM read and checked, ready to push.
#[derive(Debug, Clone)]
pub struct Sbom {
    /// The file it was read from.
    pub path: PathBuf,
    /// Its bytes, pushed as they are.
    pub bytes: Bytes,
}

impl Sbom {
    /// Reads `path` and checks it is a CycloneDX JSON document (`bomFormat` `CycloneDX`, a
    /// `specVersion`): a push never attaches something else under that type.
    pub fn read(path: &Path) -> Result<Sbom, PushError> {
        let bad = |problem: String| PushError::Sbom {
            path: path.to_path_buf(),
            problem,
        };
        let bytes = std::fs::read(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => bad(
                "missing: `make image` writes it beside the image (or push with --no-sbom, \
                 make push NO_SBOM=1, to leave it out)"
                    .to_owned(),
            ),
            _ => bad(e.to_string()),
        })?;
        let doc: Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
        if doc["bomFormat"] != "CycloneDX" || !doc["specVersion"].is_string() {
            return Err(bad(
                "not a CycloneDX JSON document (no \"bomFormat\": \"CycloneDX\" and \"specVersion\")"
                    .to_owned(),
            ));
        }
        Ok(Sbom {
            path: path.to_path_buf(),
            bytes: Bytes::from(bytes),
        })
    }

    /// The SBOM `make image` writes beside a layout: `<name>-<version>.oci` →
    /// `<name>-<version>.cdx.json`.
    pub fn beside(layout: &Path) -> PathBuf {
        let stem = layout
            .file_name()
            .map(|n| n.to_string_lossy().trim_end_matches(".oci").to_owned())
            .unwrap_or_default();
        layout.with_file_name(format!("{stem}.cdx.json"))
    }
}

/// The artifact manifest that attaches `sbom` to `subject` (an image index or manifest).
pub fn sbom_manifest(subject: &Document, sbom: &Sbom) -> Document {
    let title = sbom
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": CYCLONEDX_MEDIA_TYPE,
        "config": {
            "mediaType": EMPTY_MEDIA_TYPE,
            "digest": sha256_digest(EMPTY),
            "size": EMPTY.len(),
            "data": "e30=",
        },
        "layers": [{
            "mediaType": CYCLONEDX_MEDIA_TYPE,
            "digest": sha256_digest(&sbom.bytes),
            "size": sbom.bytes.len(),
            "annotations": { TITLE: title },
        }],
        "subject": {
            "mediaType": subject.media_type,
            "digest": subject.digest,
            "size": subject.bytes.len(),
        },
    });
    let bytes = Bytes::from(manifest.to_string());
    Document {
        media_type: MANIFEST_MEDIA_TYPE.to_owned(),
        digest: sha256_digest(&bytes),
        bytes,
    }
}

/// The referrers tag of a subject: `sha256:<hex>` → `sha256-<hex>`.
pub fn fallback_tag(subject_digest: &str) -> String {
    subject_digest.replacen(':', "-", 1)
}

/// `existing` (the index under the referrers tag, if any) with `referrer` (the artifact manifest)
/// listed; `None` when it lists it already. An `existing` that is not an image index is an
/// error: the tag is someone else's.
pub fn with_referrer(
    existing: Option<&[u8]>,
    referrer: &Document,
) -> Result<Option<Bytes>, String> {
    let parsed: Value = serde_json::from_slice(referrer.bytes.as_ref())
        .map_err(|e| format!("the referrer {} is not JSON: {e}", referrer.digest))?;
    let mut entry = json!({
        "mediaType": referrer.media_type,
        "digest": referrer.digest,
        "size": referrer.bytes.len(),
    });
    if let Some(t) = parsed.get("artifactType") {
        entry["artifactType"] = t.clone();
    }
    if let Some(a) = parsed.get("annotations") {
        entry["annotations"] = a.clone();
    }
    let mut index = match existing {
        None => json!({ "schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": [] }),
        Some(bytes) => {
            let index: Value =
                serde_json::from_slice(bytes).map_err(|e| format!("holds no JSON ({e})"))?;
            let is_index = index["mediaType"] == INDEX_MEDIA_TYPE
                || (index["mediaType"].is_null() && index["manifests"].is_array());
            if !is_index || !index["manifests"].is_array() {
                return Err("names something other than an image index".to_owned());
            }
            index
        }
    };
    let Some(list) = index["manifests"].as_array_mut() else {
        return Err("lists no manifests".to_owned());
    };
    if list.iter().any(|m| m["digest"] == referrer.digest.as_str()) {
        return Ok(None);
    }
    list.push(entry);
    Ok(Some(Bytes::from(index.to_string())))
}

/// Where an attached artifact went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// The artifact manifest's digest.
    pub digest: String,
    /// The registry indexes referrers itself (it answered `OCI-Subject`).
    pub referrers_api: bool,
    /// The tag of the referrers index kept for a registry without the referrers API.
    pub fallback_tag: Option<String>,
}

impl Registry {
    /// Pushes `sbom` into `repository` as an artifact whose subject is `subject` (pushed
    /// there before), and lists it under the referrers tag when the registry does not index
    /// referrers itself.
    pub async fn attach_sbom(
        &self,
        repository: &str,
        subject: &Document,
        sbom: &Sbom,
    ) -> Result<Attached, PushError> {
        let manifest = sbom_manifest(subject, sbom);
        for bytes in [Bytes::from_static(EMPTY), sbom.bytes.clone()] {
            let digest = sha256_digest(&bytes);
            if !self.has_blob(repository, &digest).await? {
                self.upload(repository, &digest, bytes).await?;
            }
        }
        let (digest, headers) = self
            .put_manifest(repository, &manifest.digest, &manifest)
            .await?;
        let referrers_api = headers
            .get("oci-subject")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == subject.digest);
        if referrers_api {
            return Ok(Attached {
                digest,
                referrers_api,
                fallback_tag: None,
            });
        }
        let tag = fallback_tag(&subject.digest);
        let existing = self
            .get_manifest(repository, &tag, INDEX_MEDIA_TYPE)
            .await?;
        let updated = with_referrer(existing.as_ref().map(|a| a.2.as_ref()), &manifest).map_err(
            |problem| PushError::ReferrersTag {
                url: format!("{}/v2/{repository}/manifests/{tag}", self.base),
                problem,
            },
        )?;
        if let Some(bytes) = updated {
            let index = Document {
                media_type: INDEX_MEDIA_TYPE.to_owned(),
                digest: sha256_digest(&bytes),
                bytes,
            };
            self.put_manifest(repository, &tag, &index).await?;
        }
        Ok(Attached {
            digest,
            referrers_api,
            fallback_tag: Some(tag),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject() -> Document {
        let bytes = Bytes::from_static(br#"{"schemaVersion":2,"manifests":[]}"#);
        Document {
            media_type: INDEX_MEDIA_TYPE.to_owned(),
            digest: sha256_digest(&bytes),
            bytes,
        }
    }

    fn sbom(dir: &Path, text: &str) -> Result<Sbom, PushError> {
        let path = dir.join("resize-guard-webhook-0.2.0.cdx.json");
        std::fs::write(&path, text).unwrap();
        Sbom::read(&path)
    }

    /// The smallest CycloneDX document.
    const CYCLONEDX: &str = r#"{"bomFormat":"CycloneDX","specVersion":"1.6"}"#;

    /// An SBOM read from a file holding [`CYCLONEDX`].
    fn cyclonedx() -> Sbom {
        let dir = tempfile::tempdir().unwrap();
        sbom(dir.path(), CYCLONEDX).unwrap()
    }

    #[test]
    fn the_sbom_beside_a_layout_is_named_after_it() {
        assert_eq!(
            Sbom::beside(Path::new("target/image/resize-guard-webhook-0.2.0.oci")),
            Path::new("target/image/resize-guard-webhook-0.2.0.cdx.json")
        );
    }

    #[test]
    fn only_a_cyclonedx_document_is_attached() {
        assert_eq!(cyclonedx().bytes.as_ref(), CYCLONEDX.as_bytes());
        let dir = tempfile::tempdir().unwrap();
        for bad in [
            "{",
            r#"{"spdxVersion":"SPDX-2.3"}"#,
            r#"{"bomFormat":"CycloneDX"}"#,
        ] {
            let e = sbom(dir.path(), bad).unwrap_err().to_string();
            assert!(e.starts_with("SBOM "), "{e}");
        }
        let e = Sbom::read(&dir.path().join("gone.cdx.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("missing: `make image` writes it") && e.contains("--no-sbom"),
            "{e}"
        );
    }

    #[test]
    fn the_artifact_refers_to_the_subject_and_carries_the_sbom_as_its_one_layer() {
        let sbom = cyclonedx();
        let subject = subject();
        let m = sbom_manifest(&subject, &sbom);
        assert_eq!(m.digest, sha256_digest(&m.bytes));
        let v: Value = serde_json::from_slice(&m.bytes).unwrap();
        assert_eq!(v["artifactType"], CYCLONEDX_MEDIA_TYPE);
        assert_eq!(v["config"]["mediaType"], EMPTY_MEDIA_TYPE);
        assert_eq!(
            v["config"]["digest"],
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(v["layers"][0]["digest"], sha256_digest(&sbom.bytes));
        assert_eq!(v["layers"][0]["size"], sbom.bytes.len());
        assert_eq!(
            v["layers"][0]["annotations"][TITLE],
            "resize-guard-webhook-0.2.0.cdx.json"
        );
        assert_eq!(v["subject"]["digest"], subject.digest);
        assert_eq!(v["subject"]["mediaType"], INDEX_MEDIA_TYPE);
        assert_eq!(v["subject"]["size"], subject.bytes.len());
        assert_eq!(fallback_tag("sha256:abc"), "sha256-abc");
    }

    #[test]
    fn the_referrers_index_keeps_other_referrers_and_lists_each_once() {
        let sbom = cyclonedx();
        let m = sbom_manifest(&subject(), &sbom);
        let fresh = with_referrer(None, &m).unwrap().unwrap();
        let v: Value = serde_json::from_slice(&fresh).unwrap();
        assert_eq!(v["mediaType"], INDEX_MEDIA_TYPE);
        assert_eq!(v["manifests"][0]["digest"], m.digest);
        assert_eq!(v["manifests"][0]["artifactType"], CYCLONEDX_MEDIA_TYPE);
        assert_eq!(with_referrer(Some(&fresh), &m).unwrap(), None);

        let signature = format!(
            r#"{{"schemaVersion":2,"mediaType":"{INDEX_MEDIA_TYPE}","manifests":[{{"mediaType":"{MANIFEST_MEDIA_TYPE}","digest":"sha256:{}","size":9,"artifactType":"application/vnd.dev.sigstore.bundle.v0.3+json"}}]}}"#,
            "5".repeat(64)
        );
        let both = with_referrer(Some(signature.as_bytes()), &m)
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_slice(&both).unwrap();
        let digests = crate::sbom::tests::each(&v["manifests"], "digest");
        assert_eq!(
            digests,
            [format!("sha256:{}", "5".repeat(64)), m.digest.clone()]
        );

        let manifest = format!(r#"{{"schemaVersion":2,"mediaType":"{MANIFEST_MEDIA_TYPE}"}}"#);
        let e = with_referrer(Some(manifest.as_bytes()), &m).unwrap_err();
        assert!(e.contains("other than an image index"), "{e}");
    }
}
