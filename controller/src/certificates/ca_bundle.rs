//! `caBundle`: what the two webhook configurations trust. [`Configuration`] is what the decision
//! sees of one (its webhooks' names and current `caBundle` bytes), [`trusted`] the bundle that
//! should be there (every CA a served leaf may chain to, oldest first, so the bundle does not
//! change when the next CA is promoted), and [`apply_patch`] the server-side apply body that
//! sets it on every webhook of a configuration (field manager `resize-guard-controller`,
//! forced, so a GitOps re-apply that wiped or garbled it is taken back).

use std::time::SystemTime;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use serde_json::{Value, json};

/// Which of the two configuration kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigurationKind {
    /// `MutatingWebhookConfiguration`.
    Mutating,
    /// `ValidatingWebhookConfiguration`.
    Validating,
}

impl ConfigurationKind {
    /// The API kind.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Mutating => "MutatingWebhookConfiguration",
            Self::Validating => "ValidatingWebhookConfiguration",
        }
    }
}

/// One webhook configuration as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configuration {
    /// Its kind.
    pub kind: ConfigurationKind,
    /// Each webhook's name and `clientConfig.caBundle` (decoded bytes; `None` when unset).
    pub webhooks: Vec<(String, Option<Vec<u8>>)>,
}

impl Configuration {
    /// What a MutatingWebhookConfiguration trusts.
    pub fn mutating(c: &MutatingWebhookConfiguration) -> Configuration {
        let webhooks = c.webhooks.iter().flatten();
        Configuration::of(
            ConfigurationKind::Mutating,
            webhooks.map(|w| (&w.name, &w.client_config)),
        )
    }

    /// What a ValidatingWebhookConfiguration trusts.
    pub fn validating(c: &ValidatingWebhookConfiguration) -> Configuration {
        let webhooks = c.webhooks.iter().flatten();
        Configuration::of(
            ConfigurationKind::Validating,
            webhooks.map(|w| (&w.name, &w.client_config)),
        )
    }

    /// Either kind, from its webhooks' names and client configs.
    fn of<'a>(
        kind: ConfigurationKind,
        webhooks: impl Iterator<Item = (&'a String, &'a WebhookClientConfig)>,
    ) -> Configuration {
        Configuration {
            kind,
            webhooks: webhooks
                .map(|(name, client)| (name.clone(), bytes(client.ca_bundle.as_ref())))
                .collect(),
        }
    }

    /// Why some webhook does not trust exactly `bundle`, or `None` when all do.
    pub fn mismatch(&self, bundle: &str) -> Option<String> {
        self.webhooks
            .iter()
            .find_map(|(name, current)| match current {
                None => Some(format!("webhook {name} has no caBundle")),
                Some(b) if b.is_empty() => Some(format!("webhook {name} has an empty caBundle")),
                Some(b) if b.as_slice() != bundle.as_bytes() => Some(format!(
                    "webhook {name} has a caBundle that is not the CA bundle ({} bytes, {})",
                    b.len(),
                    if b.starts_with(b"-----BEGIN CERTIFICATE-----") {
                        "other certificates"
                    } else {
                        "not PEM"
                    }
                )),
                Some(_) => None,
            })
    }

    /// The names of its webhooks.
    pub fn names(&self) -> Vec<String> {
        self.webhooks.iter().map(|(n, _)| n.clone()).collect()
    }
}

fn bytes(b: Option<&ByteString>) -> Option<Vec<u8>> {
    b.map(|b| b.0.clone())
}

/// The PEM bundle of `cas` (each a `(notBefore, PEM)`), oldest first (ties by PEM): a single CA
/// is its PEM verbatim, several are joined with newlines between them.
pub fn trusted(mut cas: Vec<(SystemTime, &str)>) -> String {
    cas.sort();
    cas.dedup_by(|a, b| a.1 == b.1);
    let mut out = String::new();
    for (_, pem) in cas {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(pem);
    }
    out
}

/// The server-side apply body setting `bundle` as the caBundle of each of `webhooks` in the
/// configuration `name` of `kind` (only the fields resize-guard owns).
pub fn apply_patch(
    kind: ConfigurationKind,
    name: &str,
    webhooks: &[String],
    bundle: &str,
) -> Value {
    let encoded =
        serde_json::to_value(ByteString(bundle.as_bytes().to_vec())).unwrap_or(Value::Null);
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind.kind(),
        "metadata": {"name": name},
        "webhooks": webhooks
            .iter()
            .map(|w| json!({"name": w, "clientConfig": {"caBundle": encoded}}))
            .collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn one_ca_is_its_pem_verbatim() {
        assert_eq!(trusted(vec![(at(1), "A\n")]), "A\n");
        assert_eq!(trusted(vec![(at(1), "A")]), "A");
    }

    #[test]
    fn several_cas_are_oldest_first_whatever_their_slot() {
        assert_eq!(
            trusted(vec![(at(2), "NEW\n"), (at(1), "OLD\n")]),
            "OLD\nNEW\n"
        );
        assert_eq!(trusted(vec![(at(1), "OLD"), (at(2), "NEW")]), "OLD\nNEW");
        assert_eq!(trusted(vec![(at(1), "A\n"), (at(1), "A\n")]), "A\n");
    }

    #[test]
    fn mismatch_names_the_webhook_and_the_problem() {
        let c = Configuration {
            kind: ConfigurationKind::Validating,
            webhooks: vec![("a".into(), Some(b"PEM".to_vec())), ("b".into(), None)],
        };
        assert_eq!(c.mismatch("PEM").unwrap(), "webhook b has no caBundle");
        let garbled = Configuration {
            kind: ConfigurationKind::Mutating,
            webhooks: vec![("a".into(), Some(b"garbage".to_vec()))],
        };
        assert!(garbled.mismatch("PEM").unwrap().contains("not PEM"));
        let good = Configuration {
            kind: ConfigurationKind::Mutating,
            webhooks: vec![("a".into(), Some(b"PEM".to_vec()))],
        };
        assert_eq!(good.mismatch("PEM"), None);
    }

    #[test]
    fn the_patch_sets_only_the_ca_bundle_of_every_webhook() {
        let p = apply_patch(
            ConfigurationKind::Validating,
            "resize-guard",
            &["validate.resize-guard.io".into()],
            "PEM",
        );
        assert_eq!(p["kind"], "ValidatingWebhookConfiguration");
        assert_eq!(p["metadata"]["name"], "resize-guard");
        assert_eq!(
            p["webhooks"],
            json!([{"name": "validate.resize-guard.io", "clientConfig": {"caBundle": "UEVN"}}])
        );
    }

    #[test]
    fn observing_reads_each_webhooks_bundle() {
        let c: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "resize-guard"},
            "webhooks": [
                {"name": "v1", "clientConfig": {"url": "https://x", "caBundle": "UEVN"},
                 "sideEffects": "None", "admissionReviewVersions": ["v1"]},
                {"name": "v2", "clientConfig": {"url": "https://x"},
                 "sideEffects": "None", "admissionReviewVersions": ["v1"]},
            ],
        }))
        .unwrap();
        let seen = Configuration::validating(&c);
        assert_eq!(
            seen.webhooks,
            vec![("v1".into(), Some(b"PEM".to_vec())), ("v2".into(), None)]
        );
    }
}
