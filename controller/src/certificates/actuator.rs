//! The side effects of the certificate manager, and nothing else: read the two Secrets and the
//! two webhook configurations ([`Actuator::read`]), and carry out one decided [`CertWrite`]
//! ([`Actuator::carry_out`]): generate what the plan asks for, create or replace a Secret with
//! the resourceVersion it was read at (a concurrent change makes the write fail with a conflict
//! and the next pass decides again), or server-side apply a caBundle. Every carried-out action is
//! logged with what and why.

use std::time::SystemTime;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use resize_guard_certs::{Authority, CertError, CertSpec};
use resize_guard_runtime::error_chain;

use crate::lease::fence::{Fenced, Leadership};

use super::ca_bundle::{Configuration, ConfigurationKind, apply_patch};
use super::rotation::{CaPlan, CertWrite, Observed};
use super::secrets::{CaContents, MANAGER, Stored, ca_secret, rfc3339, serving_secret};

/// Why a certificate operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertificateError {
    /// Reading a Secret or configuration failed.
    #[error("reading {what}")]
    Read {
        /// What was read.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Generating a CA or signing a leaf failed.
    #[error("generating the {what}")]
    Generate {
        /// What was generated.
        what: &'static str,
        /// The certs crate's error.
        #[source]
        source: CertError,
    },
    /// Creating, replacing or deleting a Secret failed (a conflict means it changed meanwhile).
    #[error("writing {what}")]
    Write {
        /// Which Secret.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// This replica stopped leading before the write: it was not made.
    #[error("not writing {what}")]
    Fenced {
        /// Which object.
        what: String,
        /// Why.
        #[source]
        source: Fenced,
    },
    /// Server-side applying a caBundle failed.
    #[error("applying caBundle to {what}")]
    Apply {
        /// Which configuration.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

impl CertificateError {
    /// A short, stable tag (logs, metrics).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Read { .. } => "ReadFailed",
            Self::Generate { .. } => "GenerateFailed",
            Self::Write { source, .. } if is_conflict(source) => "Conflict",
            Self::Write { .. } => "WriteFailed",
            Self::Apply { .. } => "ApplyFailed",
            Self::Fenced { .. } => "NotLeader",
        }
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The objects as read, with their resourceVersions.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The CA Secret.
    pub ca: Option<Secret>,
    /// The serving Secret.
    pub serving: Option<Secret>,
    /// The MutatingWebhookConfiguration.
    pub mutating: Option<MutatingWebhookConfiguration>,
    /// The ValidatingWebhookConfiguration.
    pub validating: Option<ValidatingWebhookConfiguration>,
}

impl Snapshot {
    /// What the decision looks at.
    pub fn observed(&self) -> Observed {
        Observed {
            ca: self.ca.as_ref().map(Stored::from_secret),
            serving: self.serving.as_ref().map(Stored::from_secret),
            configurations: self
                .mutating
                .iter()
                .map(Configuration::mutating)
                .chain(self.validating.iter().map(Configuration::validating))
                .collect(),
        }
    }
}

/// Where the certificates live and what they are for.
#[derive(Clone)]
pub struct Actuator {
    /// The client.
    pub client: kube::Client,
    /// The install namespace (both Secrets).
    pub namespace: String,
    /// The CA Secret's name.
    pub ca_secret: String,
    /// The serving Secret's name.
    pub tls_secret: String,
    /// Both configurations' name.
    pub configuration: String,
    /// What a leaf names, and the lifetimes.
    pub spec: CertSpec,
    /// Every write is fenced by it.
    pub leadership: Leadership,
}

impl std::fmt::Debug for Actuator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Actuator")
            .field("namespace", &self.namespace)
            .field("ca_secret", &self.ca_secret)
            .field("tls_secret", &self.tls_secret)
            .field("configuration", &self.configuration)
            .finish_non_exhaustive()
    }
}

impl Actuator {
    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Reads the four objects.
    pub async fn read(&self) -> Result<Snapshot, CertificateError> {
        let secrets = self.secrets();
        let read = |what: String| move |source| CertificateError::Read { what, source };
        Ok(Snapshot {
            ca: secrets
                .get_opt(&self.ca_secret)
                .await
                .map_err(read(self.secret_name(&self.ca_secret)))?,
            serving: secrets
                .get_opt(&self.tls_secret)
                .await
                .map_err(read(self.secret_name(&self.tls_secret)))?,
            mutating: Api::<MutatingWebhookConfiguration>::all(self.client.clone())
                .get_opt(&self.configuration)
                .await
                .map_err(read(self.configuration_name(ConfigurationKind::Mutating)))?,
            validating: Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
                .get_opt(&self.configuration)
                .await
                .map_err(read(self.configuration_name(ConfigurationKind::Validating)))?,
        })
    }

    /// Carries out `action`, decided at `now` from `snapshot`.
    pub async fn carry_out(
        &self,
        action: &CertWrite,
        snapshot: &Snapshot,
        now: SystemTime,
    ) -> Result<(), CertificateError> {
        match action {
            CertWrite::WriteCa { plan, reason } => {
                let contents = self.resolve(plan, now)?;
                let secret = ca_secret(
                    &self.namespace,
                    &self.ca_secret,
                    &contents,
                    snapshot.ca.as_ref(),
                );
                self.put(snapshot.ca.as_ref(), secret).await?;
                tracing::info!(what = "ca", secret = %self.secret_name(&self.ca_secret),
                    ca = contents.current.subject(), ca_expires = %rfc3339(contents.current.not_after()),
                    next = ?contents.next.as_ref().map(Authority::subject),
                    previous = contents.previous.is_some(),
                    %reason, "certificate repair: wrote the CA Secret");
            }
            CertWrite::IssueLeaf { signer, reason } => {
                let leaf =
                    signer
                        .sign(&self.spec, now)
                        .map_err(|source| CertificateError::Generate {
                            what: "serving certificate",
                            source,
                        })?;
                let secret = serving_secret(
                    &self.namespace,
                    &self.tls_secret,
                    &leaf,
                    signer.cert_pem(),
                    snapshot.serving.as_ref(),
                );
                self.put(snapshot.serving.as_ref(), secret).await?;
                let expires = resize_guard_certs::not_after(&leaf.cert_pem)
                    .map(rfc3339)
                    .unwrap_or_default();
                tracing::info!(what = "serving", secret = %self.secret_name(&self.tls_secret),
                    issuer = signer.subject(), %expires, %reason,
                    "certificate repair: issued a serving certificate");
            }
            CertWrite::SetCaBundle {
                configuration,
                webhooks,
                bundle,
                reason,
            } => {
                let patch = apply_patch(*configuration, &self.configuration, webhooks, bundle);
                let params = PatchParams::apply(MANAGER).force();
                let name = &self.configuration;
                let what = self.configuration_name(*configuration);
                let client = &self.client;
                let result = match configuration {
                    ConfigurationKind::Mutating => {
                        let apply = apply::<MutatingWebhookConfiguration>;
                        self.fenced(&what, apply(client, name, &params, &patch))
                            .await?
                    }
                    ConfigurationKind::Validating => {
                        let apply = apply::<ValidatingWebhookConfiguration>;
                        self.fenced(&what, apply(client, name, &params, &patch))
                            .await?
                    }
                };
                result.map_err(|source| CertificateError::Apply { what, source })?;
                tracing::info!(what = "ca_bundle", configuration = %self.configuration_name(*configuration),
                    webhooks = ?webhooks, %reason, "certificate repair: set caBundle");
            }
        }
        Ok(())
    }

    /// Generates what the plan leaves to generate.
    fn resolve(&self, plan: &CaPlan, now: SystemTime) -> Result<CaContents, CertificateError> {
        CaContents::of(plan, self.spec.ca_validity, now)
            .map_err(|source| CertificateError::Generate { what: "CA", source })
    }

    /// Creates `desired`, or replaces `existing` with it at the resourceVersion read. A Secret
    /// of another type is deleted (at that resourceVersion) and created again, since `type`
    /// cannot change.
    async fn put(
        &self,
        existing: Option<&Secret>,
        desired: Secret,
    ) -> Result<(), CertificateError> {
        let api = self.secrets();
        let name = desired.metadata.name.clone().unwrap_or_default();
        let write = |source| CertificateError::Write {
            what: self.secret_name(&name),
            source,
        };
        let post = PostParams {
            field_manager: Some(MANAGER.to_owned()),
            ..PostParams::default()
        };
        match existing {
            Some(old) if old.type_ == desired.type_ => {
                let what = self.secret_name(&name);
                self.fenced(&what, api.replace(&name, &post, &desired))
                    .await?
                    .map_err(write)?;
            }
            Some(old) => {
                let preconditions = Preconditions {
                    resource_version: old.metadata.resource_version.clone(),
                    uid: old.metadata.uid.clone(),
                };
                let delete = DeleteParams {
                    preconditions: Some(preconditions),
                    ..DeleteParams::default()
                };
                let what = self.secret_name(&name);
                self.fenced(&what, api.delete(&name, &delete))
                    .await?
                    .map_err(write)?;
                let mut fresh = desired;
                fresh.metadata.resource_version = None;
                fresh.metadata.uid = None;
                self.fenced(&what, api.create(&post, &fresh))
                    .await?
                    .map_err(write)?;
            }
            None => {
                let what = self.secret_name(&name);
                self.fenced(&what, api.create(&post, &desired))
                    .await?
                    .map_err(write)?;
            }
        }
        Ok(())
    }

    /// Runs `write` only while this replica leads (see [`Leadership::fenced`]).
    async fn fenced<T>(
        &self,
        what: &str,
        write: impl std::future::Future<Output = kube::Result<T>>,
    ) -> Result<kube::Result<T>, CertificateError> {
        self.leadership
            .fenced(write)
            .await
            .map_err(|source| CertificateError::Fenced {
                what: what.to_owned(),
                source,
            })
    }

    fn secret_name(&self, name: &str) -> String {
        format!("Secret {}/{name}", self.namespace)
    }

    fn configuration_name(&self, kind: ConfigurationKind) -> String {
        format!("{} {}", kind.kind(), self.configuration)
    }
}

/// An error with its causes, for logs.
pub fn describe(e: &CertificateError) -> String {
    error_chain(e)
}

/// Server-side applies `patch` to the webhook configuration `name` of kind `K`.
async fn apply<K>(
    client: &kube::Client,
    name: &str,
    params: &PatchParams,
    patch: &serde_json::Value,
) -> kube::Result<()>
where
    K: kube::Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api = Api::<K>::all(client.clone());
    api.patch(name, params, &Patch::Apply(patch))
        .await
        .map(|_| ())
}
