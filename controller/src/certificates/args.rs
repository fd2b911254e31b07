//! The certificate manager's flags (flattened into the controller's `Args`): who provides the
//! webhook's certificates, and the names and lifetimes the manager keeps them under.

use std::time::Duration;

use resize_guard_runtime::parse_duration;

/// Who provides the webhook's certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CertificateMode {
    /// The leader keeps a CA, the serving Secret and both caBundles itself.
    #[value(name = "self")]
    SelfManaged,
    /// cert-manager or a person provides the Secret and caBundle; the controller does nothing.
    External,
}

/// Flags of the certificate manager (see `crate::certificates`).
#[derive(Debug, Clone, clap::Args)]
pub struct CertificateArgs {
    /// `self`: the leader keeps the CA Secret, the serving Secret and caBundle; `external`:
    /// someone else does (cert-manager), and the controller leaves them alone.
    #[arg(
        long = "certificates",
        env = "RESIZE_GUARD_CERTIFICATES",
        default_value = "self",
        value_enum
    )]
    pub mode: CertificateMode,

    /// The webhook's Service in `--namespace` (its DNS names go into the serving certificate).
    #[arg(
        long,
        env = "RESIZE_GUARD_WEBHOOK_SERVICE",
        default_value = "resize-guard-webhook"
    )]
    pub webhook_service: String,

    /// Name of the Mutating- and ValidatingWebhookConfiguration whose caBundle is kept.
    #[arg(
        long,
        env = "RESIZE_GUARD_WEBHOOK_CONFIGURATION",
        default_value = "resize-guard"
    )]
    pub webhook_configuration: String,

    /// The `kubernetes.io/tls` Secret the webhook serves from.
    #[arg(
        long,
        env = "RESIZE_GUARD_TLS_SECRET",
        default_value = "resize-guard-webhook-tls"
    )]
    pub tls_secret: String,

    /// The Secret holding the CA (and rotation state); no pod mounts it.
    #[arg(
        long,
        env = "RESIZE_GUARD_CA_SECRET",
        default_value = "resize-guard-ca"
    )]
    pub ca_secret: String,

    /// Lifetime of a serving certificate; renewed at 2/3 of it.
    #[arg(long, env = "RESIZE_GUARD_LEAF_VALIDITY", default_value = "2160h", value_parser = parse_duration)]
    pub leaf_validity: Duration,

    /// Lifetime of a CA; rotated at 2/3 of it.
    #[arg(long, env = "RESIZE_GUARD_CA_VALIDITY", default_value = "87600h", value_parser = parse_duration)]
    pub ca_validity: Duration,

    /// During CA rotation, how long the new CA is trusted before it signs, and how long the old
    /// one stays trusted after.
    #[arg(long, env = "RESIZE_GUARD_CA_OVERLAP", default_value = "1h", value_parser = parse_duration)]
    pub ca_overlap: Duration,

    /// Extra name the serving certificate carries (DNS name or IP address; repeatable, or
    /// comma-separated in the environment).
    #[arg(
        long = "serving-host",
        env = "RESIZE_GUARD_SERVING_HOST",
        value_delimiter = ','
    )]
    pub serving_hosts: Vec<String>,

    /// How often the certificates are re-checked besides on watch events.
    #[arg(long, env = "RESIZE_GUARD_CERT_CHECK_INTERVAL", default_value = "30s", value_parser = parse_duration)]
    pub cert_check_interval: Duration,
}
