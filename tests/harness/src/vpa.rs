//! The Vertical Pod Autoscaler's recommender, updater and admission-controller, v1.6.0 and
//! unpatched, run as processes against the harness's real kube-apiserver, so tests can watch
//! resize-guard and VPA's in-place updates (`updateMode: InPlaceOrRecreate`) meet on the same pods.
//!
//! The binaries and VPA's own CRD and RBAC files come from `third_party/vpa/build.sh`
//! ([`VpaBinaries`]).
//! [`Vpa::start`] applies the CRDs (server-side apply) and waits until they are Established, makes
//! a throwaway CA and a serving certificate for `127.0.0.1`, starts `vpa-admission-controller`
//! (which registers the MutatingWebhookConfiguration [`WEBHOOK_CONFIG_NAME`] by URL itself, after
//! its fixed 10 s delay, with `failurePolicy: Ignore`), waits for that configuration and for the
//! first renewal of its status Lease (which the updater checks before every loop), then starts
//! `vpa-updater`. Both log at `--v=4` to files in the control plane's directory; tests search them
//! with [`Vpa::updater_log`] / [`Vpa::admission_log`].
//!
//! **The recommender is optional.** [`Vpa::start`] does not run it. Tests either write
//! `status.recommendation` in its place with [`write_recommendation`] (through the CRD's `status`
//! subresource, as the recommender does) — everything downstream of that (the updater's choice of
//! pods, its in-place resizes through `pods/resize`, its fall-back to eviction, the admission
//! controller's patches of new pods) is VPA's own code — or start the real one,
//! [`Recommender::start`] (`vpa_recommender.rs`): ServiceAccount `kube-system/vpa-recommender`
//! with the RBAC of VPA's `deploy/vpa-rbac.yaml` (applied as shipped), one of the flag presets of
//! [`intervals`] (VPA's defaults, or the shortest intervals it supports). It reads usage from
//! `metrics.k8s.io`, so it recommends only where metrics-server serves that API, and otherwise
//! logs [`RECOMMENDER_NO_METRICS_LOG`] every loop. [`VpaOptions::with_intervals`] gives the
//! updater the matching preset; [`usage_loop`] plays the whole loop from a usage change on a
//! hollow node to the resize the kubelet applies.
//!
//! The webhook intercepts pod creation in every namespace once registered (failing open), so a
//! suite that starts VPA should have a control plane of its own. The configuration and the CRDs
//! stay when VPA stops; a later [`Vpa::start`] on the same control plane re-registers.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde::Deserialize as _;
use serde_json::json;

use crate::binaries::cached_path;
use crate::control_plane::ControlPlane;
use crate::env::{LogGuard, Logs};
use crate::objects::force_apply;
use crate::process::{Process, free_port};

#[path = "vpa_intervals.rs"]
pub mod intervals;
pub use intervals::VpaIntervals;
#[path = "vpa_recommender.rs"]
mod recommender;
pub use recommender::Recommender;
#[path = "vpa_loop.rs"]
pub mod usage_loop;

/// Environment variable naming a directory with `vpa-recommender`, `vpa-updater`,
/// `vpa-admission-controller`, [`CRD_FILE`] and [`RBAC_FILE`].
pub const VPA_DIR_ENV: &str = "RESIZE_GUARD_VPA_DIR";
/// VPA's CRD file (`deploy/vpa-v1-crd-gen.yaml` of the module): VerticalPodAutoscaler and
/// VerticalPodAutoscalerCheckpoint.
pub const CRD_FILE: &str = "vpa-v1-crd-gen.yaml";
/// VPA's RBAC file (`deploy/vpa-rbac.yaml` of the module): the three components' ServiceAccounts
/// in `kube-system`, their ClusterRoles and bindings.
pub const RBAC_FILE: &str = "vpa-rbac.yaml";
/// The recommender's ServiceAccount in [`STATUS_NAMESPACE`] (`deploy/vpa-rbac.yaml`).
pub const RECOMMENDER_ACCOUNT: &str = "vpa-recommender";
/// What the recommender logs (error) each loop when `metrics.k8s.io` cannot be read
/// (`pkg/recommender/input/cluster_feeder.go` `LoadRealTimeMetrics`).
pub const RECOMMENDER_NO_METRICS_LOG: &str =
    "Cannot get ContainerMetricsSnapshot from MetricsClient";
/// What the recommender logs (`--v=3`) each loop after listing VPAs, with `count=<n>`
/// (`cluster_feeder.go` `LoadVPAs`).
pub const RECOMMENDER_LISTED_VPAS_LOG: &str = "Fetching VPAs";
/// What the recommender logs (`--v=3`) once its informers have synced, before its first loop
/// (`cluster_feeder.go` `InitFromCheckpoints`).
pub const RECOMMENDER_SYNCED_LOG: &str = "Initializing VPA from checkpoints";
/// The VerticalPodAutoscaler CRD's name.
pub const VPA_CRD: &str = "verticalpodautoscalers.autoscaling.k8s.io";
/// The MutatingWebhookConfiguration the admission controller registers
/// (`pkg/admission-controller/config.go`).
pub const WEBHOOK_CONFIG_NAME: &str = "vpa-webhook-config";
/// Namespace of the admission controller's status Lease (`NAMESPACE` given to both processes).
pub const STATUS_NAMESPACE: &str = "kube-system";
/// The admission controller's status Lease, renewed every 10 s (`pkg/utils/status`); the updater
/// skips its loop unless it was renewed (or created) within the last minute.
pub const STATUS_LEASE: &str = "vpa-admission-controller";
/// The field manager the harness applies the CRDs with.
pub const FIELD_MANAGER: &str = "resize-guard-harness-vpa";

/// Where the VPA binaries and CRD file are.
#[derive(Debug, Clone)]
pub struct VpaBinaries {
    /// `vpa-recommender` (`pkg/recommender`).
    pub recommender: PathBuf,
    /// `vpa-updater` (`pkg/updater`).
    pub updater: PathBuf,
    /// `vpa-admission-controller` (`pkg/admission-controller`).
    pub admission_controller: PathBuf,
    /// [`CRD_FILE`].
    pub crd: PathBuf,
    /// [`RBAC_FILE`].
    pub rbac: PathBuf,
}

impl VpaBinaries {
    /// [`VPA_DIR_ENV`], else the build script's stamp cache `vpa-current` ([`cached_path`]). A
    /// missing file is an error that says how to build it — tests never skip silently.
    pub fn locate() -> anyhow::Result<VpaBinaries> {
        VpaBinaries::in_dir(&cached_path(VPA_DIR_ENV, "vpa-current")?)
    }

    /// The files in one directory.
    pub fn in_dir(dir: &Path) -> anyhow::Result<VpaBinaries> {
        let pick = |name: &str| -> anyhow::Result<PathBuf> {
            let p = dir.join(name);
            anyhow::ensure!(
                p.is_file(),
                "VPA file {name} not found in {} — build VPA v1.6.0 with `third_party/vpa/build.sh` \
                 (first run ~4 min) or point {VPA_DIR_ENV} at a directory holding \
                 vpa-recommender, vpa-updater, vpa-admission-controller, {CRD_FILE} and {RBAC_FILE}",
                dir.display()
            );
            Ok(p)
        };
        Ok(VpaBinaries {
            recommender: pick("vpa-recommender")?,
            updater: pick("vpa-updater")?,
            admission_controller: pick("vpa-admission-controller")?,
            crd: pick(CRD_FILE)?,
            rbac: pick(RBAC_FILE)?,
        })
    }
}

/// How to start VPA: the updater's flags of a preset, and more flags for either process.
#[derive(Debug, Clone)]
pub struct VpaOptions {
    /// The updater's flags ([`intervals::UpdaterPreset::args`]). Default: VPA's own except
    /// `--updater-interval` 5 s (VPA: 1 min; the updater's first loop runs one interval after it
    /// starts).
    pub updater: intervals::UpdaterPreset,
    /// More `vpa-updater` flags, after the harness's (a repeated flag's last value wins).
    pub updater_args: Vec<String>,
    /// More `vpa-admission-controller` flags, after the harness's.
    pub admission_args: Vec<String>,
}

impl VpaOptions {
    /// The updater's flags of `intervals`; the rest as [`VpaOptions::default`].
    pub fn with_intervals(intervals: VpaIntervals) -> VpaOptions {
        VpaOptions {
            updater: intervals.updater(),
            ..VpaOptions::default()
        }
    }
}

impl Default for VpaOptions {
    fn default() -> Self {
        VpaOptions {
            updater: intervals::UpdaterPreset {
                interval: Duration::from_secs(5),
                ..VpaIntervals::Defaults.updater()
            },
            updater_args: Vec::new(),
            admission_args: Vec::new(),
        }
    }
}

/// The running updater and admission controller. Dropping it stops both.
#[derive(Debug)]
pub struct Vpa {
    updater: Process,
    admission: Process,
    updater_args: Vec<String>,
    admission_args: Vec<String>,
    webhook_url: String,
    ca_pem: String,
}

/// How long the admission controller may take to register and renew its Lease (VPA waits 10 s
/// before registering, then renews every 10 s; the first write creates the Lease unrenewed).
const ADMISSION_READY: Duration = Duration::from_secs(90);

impl Vpa {
    /// Applies the CRDs, starts the admission controller and waits until its webhook is
    /// registered and its status Lease renewed (~30 s), then starts the updater and waits until
    /// it listens. The API calls run on the caller's runtime; the processes do not depend on it,
    /// so a `Vpa` may outlive the test that started it (e.g. in a static).
    pub async fn start(cp: &ControlPlane, options: VpaOptions) -> anyhow::Result<Vpa> {
        let binaries = VpaBinaries::locate()?;
        let client = cp.client().await?;
        apply_crds(&client, &binaries.crd).await?;

        let certs = cp.dir().join("vpa-certs");
        fs::create_dir_all(&certs)?;
        let (ca_pem, cert_pem, key_pem) =
            crate::issuer::serving_certificate("vpa-webhook", vec!["127.0.0.1".to_owned()])?;
        fs::write(certs.join("ca.pem"), &ca_pem)?;
        fs::write(certs.join("tls.crt"), cert_pem)?;
        fs::write(certs.join("tls.key"), key_pem)?;

        let kubeconfig = format!("--kubeconfig={}", cp.kubeconfig_path().display());
        let webhook_port = free_port()?;
        let webhook_url = format!("https://127.0.0.1:{webhook_port}");
        let mut admission_args = vec![
            kubeconfig.clone(),
            format!("--client-ca-file={}", certs.join("ca.pem").display()),
            format!("--tls-cert-file={}", certs.join("tls.crt").display()),
            format!("--tls-private-key={}", certs.join("tls.key").display()),
            format!("--port={webhook_port}"),
            format!("--address=127.0.0.1:{}", free_port()?),
            "--register-by-url=true".to_owned(),
            "--webhook-address=https://127.0.0.1".to_owned(),
            format!("--webhook-port={webhook_port}"),
            "--v=4".to_owned(),
        ];
        admission_args.extend(options.admission_args.iter().cloned());
        let started = Timestamp::now();
        let mut admission = spawn(
            cp,
            "vpa-admission-controller",
            &binaries.admission_controller,
            &admission_args,
        )?;
        wait_admission_ready(&client, &mut admission, &webhook_url, started).await?;

        let updater_port = free_port()?;
        let mut updater_args = vec![
            kubeconfig,
            format!("--address=127.0.0.1:{updater_port}"),
            "--v=4".to_owned(),
        ];
        updater_args.extend(options.updater.args());
        updater_args.extend(options.updater_args.iter().cloned());
        let mut updater = spawn(cp, "vpa-updater", &binaries.updater, &updater_args)?;
        // The metrics listener opens before the informers sync; the first loop follows one
        // interval after they have.
        poll("vpa-updater listening", Duration::from_secs(60), || {
            anyhow::ensure!(updater.is_running(), "vpa-updater exited");
            anyhow::ensure!(
                std::net::TcpStream::connect(("127.0.0.1", updater_port)).is_ok(),
                "nothing listens on 127.0.0.1:{updater_port}"
            );
            Ok(())
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e:#}\n{}", updater.log_tail(4000)))?;

        Ok(Vpa {
            updater,
            admission,
            updater_args,
            admission_args,
            webhook_url,
            ca_pem,
        })
    }

    /// The webhook's URL as registered: `https://127.0.0.1:<port>`.
    pub fn webhook_url(&self) -> &str {
        &self.webhook_url
    }

    /// The CA (PEM) that signed the webhook's serving certificate: the registered `caBundle`.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The flags `vpa-updater` runs with.
    pub fn updater_args(&self) -> &[String] {
        &self.updater_args
    }

    /// The flags `vpa-admission-controller` runs with (plus `NAMESPACE=kube-system`).
    pub fn admission_args(&self) -> &[String] {
        &self.admission_args
    }

    /// The updater's whole log so far.
    pub fn updater_log(&self) -> String {
        read_log(&self.updater)
    }

    /// The admission controller's whole log so far.
    pub fn admission_log(&self) -> String {
        read_log(&self.admission)
    }

    /// Waits until the updater's log contains `needle`.
    pub async fn wait_updater_log(&self, needle: &str, timeout: Duration) -> anyhow::Result<()> {
        wait_log(&self.updater, needle, timeout).await
    }

    /// Waits until the admission controller's log contains `needle`.
    pub async fn wait_admission_log(&self, needle: &str, timeout: Duration) -> anyhow::Result<()> {
        wait_log(&self.admission, needle, timeout).await
    }

    /// The tails of both logs, for a failing test's output.
    pub fn dump_logs(&self) -> String {
        [&self.admission, &self.updater]
            .iter()
            .map(|p| {
                format!(
                    "--- {} ({}) ---\n{}\n",
                    p.name(),
                    p.log_path().display(),
                    p.log_tail(6000)
                )
            })
            .collect()
    }

    /// A guard that prints both log tails ([`Vpa::dump_logs`]) if the test panics while it lives.
    pub fn guard(&self) -> LogGuard<'_> {
        LogGuard::new(self)
    }

    /// Stops the updater, then the admission controller (SIGTERM, SIGKILL after 5 s).
    pub fn stop(&mut self) {
        self.updater.stop(Duration::from_secs(5));
        self.admission.stop(Duration::from_secs(5));
    }
}

impl Drop for Vpa {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Logs for Vpa {
    fn heading(&self) -> String {
        "VPA logs".to_owned()
    }

    fn tails(&self) -> String {
        self.dump_logs()
    }
}

/// The `ApiResource` of `autoscaling.k8s.io/v1` VerticalPodAutoscalers.
pub fn vpa_resource() -> ApiResource {
    ApiResource {
        group: "autoscaling.k8s.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "autoscaling.k8s.io/v1".to_owned(),
        kind: "VerticalPodAutoscaler".to_owned(),
        plural: "verticalpodautoscalers".to_owned(),
    }
}

/// VerticalPodAutoscalers in `ns`.
pub fn api(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &vpa_resource())
}

/// A VerticalPodAutoscaler for Deployment `deployment` (`apps/v1`) with `updatePolicy.updateMode`
/// `update_mode` (e.g. `InPlaceOrRecreate`) and one container policy for `*`, carrying
/// `controlledValues` (`RequestsAndLimits` | `RequestsOnly`) when given.
pub fn vpa_object(
    name: &str,
    deployment: &str,
    update_mode: &str,
    controlled_values: Option<&str>,
) -> serde_json::Value {
    let mut policy = json!({"containerName": "*"});
    if let Some(cv) = controlled_values {
        policy["controlledValues"] = json!(cv);
    }
    json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "updatePolicy": {"updateMode": update_mode},
            "resourcePolicy": {"containerPolicies": [policy]},
        },
    })
}

/// Creates a VerticalPodAutoscaler (e.g. from [`vpa_object`]) in `ns`; VPA's webhook validates
/// it.
pub async fn create_vpa(
    client: &kube::Client,
    ns: &str,
    object: &serde_json::Value,
) -> anyhow::Result<DynamicObject> {
    let obj: DynamicObject = serde_json::from_value(object.clone())?;
    Ok(api(client, ns).create(&PostParams::default(), &obj).await?)
}

/// One container's recommendation, as the recommender would write it; quantities are strings
/// (`"250m"`, `"256Mi"`), each pair is `(cpu, memory)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recommendation {
    /// `containerName`.
    pub container: String,
    /// `target` (also written as `uncappedTarget`).
    pub target: (String, String),
    /// `lowerBound`: requests below it are outside the recommended range.
    pub lower_bound: (String, String),
    /// `upperBound`: requests above it are outside the recommended range.
    pub upper_bound: (String, String),
}

impl Recommendation {
    /// `target` = `lowerBound` = `upperBound` = (`cpu`, `memory`): any other request is outside
    /// the recommended range, so the updater acts on it at once.
    pub fn exact(container: &str, cpu: &str, memory: &str) -> Self {
        let pair = (cpu.to_owned(), memory.to_owned());
        Recommendation {
            container: container.to_owned(),
            target: pair.clone(),
            lower_bound: pair.clone(),
            upper_bound: pair,
        }
    }
}

/// Writes `status.recommendation` of VPA `ns/vpa_name` in the recommender's place, with the
/// condition `RecommendationProvided=True`: a merge patch through the CRD's `status` subresource
/// (VPA's CRD has one, so the object's spec and metadata are untouched and the webhook, which
/// matches only `verticalpodautoscalers`, is not called).
pub async fn write_recommendation(
    client: &kube::Client,
    ns: &str,
    vpa_name: &str,
    containers: &[Recommendation],
) -> anyhow::Result<()> {
    let resources = |(cpu, memory): &(String, String)| json!({"cpu": cpu, "memory": memory});
    let recs: Vec<serde_json::Value> = containers
        .iter()
        .map(|r| {
            json!({
                "containerName": r.container,
                "target": resources(&r.target),
                "uncappedTarget": resources(&r.target),
                "lowerBound": resources(&r.lower_bound),
                "upperBound": resources(&r.upper_bound),
            })
        })
        .collect();
    let patch = json!({"status": {
        "recommendation": {"containerRecommendations": recs},
        "conditions": [{
            "type": "RecommendationProvided",
            "status": "True",
            "lastTransitionTime": Time(Timestamp::now()),
        }],
    }});
    api(client, ns)
        .patch_status(vpa_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Server-side applies every CRD in `file` and waits until each is Established.
async fn apply_crds(client: &kube::Client, file: &Path) -> anyhow::Result<()> {
    let text = fs::read_to_string(file)?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(doc)?;
        if value.is_null() {
            continue;
        }
        let name = value["metadata"]["name"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("a document in {} has no name", file.display()))?
            .to_owned();
        force_apply(&crds, &name, FIELD_MANAGER, &value)
            .await
            .map_err(|e| anyhow::anyhow!("applying CRD {name}: {e}"))?;
        names.push(name);
    }
    anyhow::ensure!(
        names.iter().any(|n| n == VPA_CRD),
        "{} holds no {VPA_CRD}",
        file.display()
    );
    for name in names {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let crd = crds.get(&name).await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "CRD {name} not Established after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// Server-side applies every object of VPA's RBAC file (ServiceAccounts, ClusterRoles, Roles and
/// their bindings), each through its typed API.
async fn apply_rbac(client: &kube::Client, file: &Path) -> anyhow::Result<()> {
    let text = fs::read_to_string(file)?;
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(doc)?;
        if value.is_null() {
            continue;
        }
        let kind = value["kind"].as_str().unwrap_or_default();
        let ns = value["metadata"]["namespace"].as_str().unwrap_or("default");
        let c = client.clone();
        match kind {
            "ServiceAccount" => apply_typed(Api::<ServiceAccount>::namespaced(c, ns), &value).await,
            "ClusterRole" => apply_typed(Api::<ClusterRole>::all(c), &value).await,
            "ClusterRoleBinding" => apply_typed(Api::<ClusterRoleBinding>::all(c), &value).await,
            "Role" => apply_typed(Api::<Role>::namespaced(c, ns), &value).await,
            "RoleBinding" => apply_typed(Api::<RoleBinding>::namespaced(c, ns), &value).await,
            other => Err(anyhow::anyhow!("unexpected kind {other:?}")),
        }
        .map_err(|e| {
            anyhow::anyhow!(
                "{}: {kind} {}: {e:#}",
                file.display(),
                value["metadata"]["name"]
            )
        })?;
    }
    Ok(())
}

/// Server-side applies one object, after reading it as `K` (so a malformed manifest fails here).
async fn apply_typed<K>(api: Api<K>, value: &serde_json::Value) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let object: K = serde_json::from_value(value.clone())?;
    let name = object
        .meta()
        .name
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no metadata.name"))?;
    force_apply(&api, &name, FIELD_MANAGER, &object).await?;
    Ok(())
}

/// A kubeconfig (`<account>.kubeconfig` in the control plane's directory) that authenticates as
/// ServiceAccount `kube-system/<account>` with a 2-hour token from the TokenRequest API, as a
/// pod's projected token would.
async fn account_kubeconfig(
    cp: &ControlPlane,
    client: &kube::Client,
    account: &str,
) -> anyhow::Result<PathBuf> {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(7200),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let token = Api::<ServiceAccount>::namespaced(client.clone(), STATUS_NAMESPACE)
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .map_err(|e| anyhow::anyhow!("TokenRequest for {STATUS_NAMESPACE}/{account}: {e}"))?
        .status
        .and_then(|s| s.token)
        .ok_or_else(|| {
            anyhow::anyhow!("TokenRequest for {STATUS_NAMESPACE}/{account}: no status")
        })?;
    crate::account::token_kubeconfig_of(cp, account, &token)
}

/// Starts VPA program `name` with `args` (and [`STATUS_NAMESPACE`] as its `NAMESPACE`), logging
/// to `<control-plane dir>/<name>.log`.
fn spawn(
    cp: &ControlPlane,
    name: &str,
    program: &Path,
    args: &[String],
) -> anyhow::Result<Process> {
    let mut c = Command::new(program);
    c.args(args).env("NAMESPACE", STATUS_NAMESPACE);
    Process::spawn(name, c, &cp.dir().join(format!("{name}.log")))
}

/// Waits until the admission controller has registered [`WEBHOOK_CONFIG_NAME`] at `url` and
/// renewed [`STATUS_LEASE`] after `started`.
async fn wait_admission_ready(
    client: &kube::Client,
    admission: &mut Process,
    url: &str,
    started: Timestamp,
) -> anyhow::Result<()> {
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), STATUS_NAMESPACE);
    let deadline = Instant::now() + ADMISSION_READY;
    let mut last = String::from("not checked yet");
    while Instant::now() < deadline {
        anyhow::ensure!(
            admission.is_running(),
            "vpa-admission-controller exited:\n{}",
            admission.log_tail(6000)
        );
        let registered = configs
            .get_opt(WEBHOOK_CONFIG_NAME)
            .await?
            .and_then(|c| c.webhooks)
            .unwrap_or_default()
            .iter()
            .any(|w| w.client_config.url.as_deref() == Some(url));
        let renewed = leases
            .get_opt(STATUS_LEASE)
            .await?
            .and_then(|l| l.spec)
            .and_then(|s| s.renew_time)
            .is_some_and(|t| t.0 > started);
        if registered && renewed {
            return Ok(());
        }
        last = format!("webhook registered at {url}: {registered}; Lease renewed: {renewed}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    anyhow::bail!(
        "vpa-admission-controller not ready after {ADMISSION_READY:?} ({last}):\n{}",
        admission.log_tail(6000)
    )
}

/// Retries `check` every 200 ms until it succeeds or `timeout` passes (then its last error).
async fn poll(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                anyhow::bail!("{what}: not after {timeout:?}: {e:#}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

fn read_log(p: &Process) -> String {
    fs::read(p.log_path())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

async fn wait_log(p: &Process, needle: &str, timeout: Duration) -> anyhow::Result<()> {
    poll(&format!("{} logs {needle:?}", p.name()), timeout, || {
        anyhow::ensure!(read_log(p).contains(needle), "not yet");
        Ok(())
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e:#}\n{}", p.log_tail(4000)))
}
