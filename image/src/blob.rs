//! Content-addressed bytes: a [`Blob`] is its bytes and their `sha256:<hex>` digest, the unit
//! an OCI layout stores under `blobs/sha256/<hex>` and a descriptor points to.

use sha2::{Digest as _, Sha256};

/// Bytes and their digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// `sha256:<64 hex digits>`.
    pub digest: String,
    /// The content.
    pub bytes: Vec<u8>,
}

impl Blob {
    /// Digests `bytes`.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self {
            digest: sha256_digest(&bytes),
            bytes,
        }
    }

    /// The hex part of the digest: the file name under `blobs/sha256/`.
    pub fn hex(&self) -> &str {
        self.digest.trim_start_matches("sha256:")
    }

    /// Size in bytes, as a descriptor states it.
    pub fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut digest = String::with_capacity(7 + 64);
    digest.push_str("sha256:");
    for byte in hash {
        digest.push_str(&format!("{byte:02x}"));
    }
    digest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_like_sha256sum() {
        let blob = Blob::new(b"abc".to_vec());
        assert_eq!(
            blob.digest,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(blob.hex().len(), 64);
        assert_eq!(blob.size(), 3);
    }
}
