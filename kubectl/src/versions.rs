//! Which release of resize-guard is installed, against this plugin's: the plugin judges with the
//! policy crate it was built with, so a plugin of another release than the programs may explain
//! a decision the installed programs do not make. Each program's release is read from its
//! Deployment in the install namespace (the names `deploy/base/webhook.yaml`,
//! `deploy/base/controller.yaml` and the chart give them): the image tag when it names a release
//! (`0.2.0`, or a build of it, `0.2.0-g1a2b3c4[-dirty]`, as `make image` tags them), else the
//! `app.kubernetes.io/version` label both `deploy/base/kustomization.yaml` and the chart put on
//! it (an image pinned by digest alone names no release).

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use serde::Serialize;

use crate::connection::Connection;
use crate::exit::said;

/// This plugin's release.
pub const PLUGIN: &str = env!("CARGO_PKG_VERSION");

/// The Deployments whose release is compared, each with its program's container.
pub const PROGRAMS: [(&str, &str); 2] = [
    ("resize-guard-webhook", "webhook"),
    ("resize-guard-controller", "controller"),
];

/// The label both install methods put on every object, naming the release.
pub const VERSION_LABEL: &str = "app.kubernetes.io/version";

/// The plugin's release and the installed programs'.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Versions {
    /// This plugin's release.
    pub plugin: String,
    /// Each program's Deployment and what it runs.
    pub programs: Vec<Program>,
    /// Whether a program runs another release than the plugin.
    pub skew: bool,
}

/// One program's installed release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Program {
    /// The Deployment, `namespace/name`.
    pub deployment: String,
    /// The program's container image, as the Deployment names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The release it runs, when known.
    pub version: Option<String>,
    /// Where [`Program::version`] was read: `imageTag` or `label`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
    /// Why the release is unknown: no such Deployment, or it could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Reads both programs' Deployments.
pub async fn read(conn: &Connection) -> Versions {
    let ns = &conn.install_namespace;
    let api: Api<Deployment> = Api::namespaced(conn.client.clone(), ns);
    let mut programs = Vec::new();
    for (name, container) in PROGRAMS {
        let deployment = format!("{ns}/{name}");
        programs.push(match api.get_opt(name).await {
            Ok(Some(d)) => program(deployment, &d, container),
            Ok(None) => unknown(deployment, "no such Deployment".into()),
            Err(e) => unknown(deployment, format!("cannot read it: {}", said(&e))),
        });
    }
    compare(PLUGIN, programs)
}

/// `programs` against the plugin's release `plugin`.
pub fn compare(plugin: &str, programs: Vec<Program>) -> Versions {
    let skew = programs.iter().any(|p| {
        p.version
            .as_deref()
            .is_some_and(|v| !same_release(v, plugin))
    });
    Versions {
        plugin: plugin.to_owned(),
        programs,
        skew,
    }
}

fn unknown(deployment: String, error: String) -> Program {
    Program {
        deployment,
        image: None,
        version: None,
        source: None,
        error: Some(error),
    }
}

/// What Deployment `d` runs in its container `container` (else its first).
pub fn program(deployment: String, d: &Deployment, container: &str) -> Program {
    let containers = d
        .spec
        .template
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let image = containers
        .iter()
        .find(|c| c.name == container)
        .or(containers.first())
        .and_then(|c| c.image.clone());
    let label = d
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(VERSION_LABEL))
        .and_then(|v| release(v));
    let (version, source) = match image.as_deref().and_then(image_tag).and_then(release) {
        Some(v) => (Some(v), Some("imageTag")),
        None => match label {
            Some(v) => (Some(v), Some("label")),
            None => (None, None),
        },
    };
    let error = version
        .is_none()
        .then(|| format!("neither its image tag nor its {VERSION_LABEL} label names a release"));
    Program {
        deployment,
        image,
        version,
        source,
        error,
    }
}

/// The tag of an image reference (`registry:5000/a/b:tag@sha256:…` → `tag`), if it has one.
pub fn image_tag(image: &str) -> Option<&str> {
    let named = image.split('@').next().unwrap_or(image);
    let last = named.rsplit('/').next().unwrap_or(named);
    last.split_once(':').map(|(_, tag)| tag)
}

/// The release a tag or label names: `0.2.0` for `0.2.0`, `v0.2.0` or a build of it
/// (`0.2.0-g1a2b3c4`, `0.2.0-g1a2b3c4-dirty`, `0.2.0-gunknown`); `None` for anything that is not
/// `MAJOR.MINOR.PATCH[-PRERELEASE]` (`latest`, a branch name).
pub fn release(tag: &str) -> Option<String> {
    let tag = tag.strip_prefix('v').unwrap_or(tag);
    let tag = tag.strip_suffix("-dirty").unwrap_or(tag);
    let core = match tag.rsplit_once("-g") {
        Some((core, build)) if is_build(build) => core,
        _ => tag,
    };
    let (numbers, pre) = match core.split_once('-') {
        Some((n, p)) => (n, Some(p)),
        None => (core, None),
    };
    let parts: Vec<&str> = numbers.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    let pre_ok = pre.is_none_or(|p| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    });
    (parts.len() == 3 && parts.iter().all(numeric) && pre_ok).then(|| core.to_owned())
}

/// A build suffix `make image` writes: a short commit, or `unknown` outside git.
fn is_build(build: &str) -> bool {
    build == "unknown"
        || (build.len() >= 7
            && build
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_uppercase()))
}

/// Whether two releases are the same (`0.2.0` and `v0.2.0-g1a2b3c4` are).
pub fn same_release(a: &str, b: &str) -> bool {
    match (release(a), release(b)) {
        (Some(a), Some(b)) => a == b,
        _ => a == b,
    }
}

impl Versions {
    /// The programs whose release differs from the plugin's.
    pub fn skewed(&self) -> Vec<&Program> {
        self.programs
            .iter()
            .filter(|p| {
                p.version
                    .as_deref()
                    .is_some_and(|v| !same_release(v, &self.plugin))
            })
            .collect()
    }

    /// The warning `status` prints when a program runs another release than the plugin.
    pub fn warning(&self) -> Option<String> {
        let skewed = self.skewed();
        if skewed.is_empty() {
            return None;
        }
        Some(format!(
            "kubectl resize-guard is {}, but {}: the plugin judges with its own release's rules; \
             install the plugin of the installed release (or upgrade resize-guard)",
            self.plugin,
            runs(&skewed)
        ))
    }
}

/// `ns/a runs 0.1.0 (image tag), ns/b runs …`.
pub fn runs(programs: &[&Program]) -> String {
    programs
        .iter()
        .map(|p| {
            let source = match p.source {
                Some("label") => format!(" ({VERSION_LABEL} label)"),
                Some(_) => " (image tag)".to_owned(),
                None => String::new(),
            };
            format!(
                "{} runs {}{source}",
                p.deployment,
                p.version.as_deref().unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};

    fn deployment(image: &str, label: Option<&str>) -> Deployment {
        let mut d = Deployment {
            spec: DeploymentSpec {
                template: PodTemplateSpec {
                    spec: Some(PodSpec {
                        containers: vec![
                            Container {
                                name: "sidecar".into(),
                                image: Some("proxy:9.9.9".into()),
                                ..Default::default()
                            },
                            Container {
                                name: "webhook".into(),
                                image: Some(image.into()),
                                ..Default::default()
                            },
                        ],
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        };
        if let Some(v) = label {
            d.metadata.labels = Some([(VERSION_LABEL.to_owned(), v.to_owned())].into());
        }
        d
    }

    #[test]
    fn releases_are_read_from_tags_and_builds_of_them() {
        for (tag, want) in [
            ("0.2.0", Some("0.2.0")),
            ("v0.2.0", Some("0.2.0")),
            ("0.2.0-g1a2b3c4", Some("0.2.0")),
            ("0.2.0-g1a2b3c4-dirty", Some("0.2.0")),
            ("0.2.0-gunknown", Some("0.2.0")),
            ("0.3.0-rc.1", Some("0.3.0-rc.1")),
            ("0.3.0-rc.1-g1a2b3c4", Some("0.3.0-rc.1")),
            ("latest", None),
            ("0.2", None),
            ("0.2.x", None),
            ("", None),
            ("1.2.3-", None),
        ] {
            assert_eq!(release(tag).as_deref(), want, "{tag:?}");
        }
        assert!(same_release("0.2.0", "v0.2.0-gabcdef0"));
        assert!(!same_release("0.2.0", "0.1.0"));
    }

    #[test]
    fn the_tag_is_the_last_path_segments_after_its_colon() {
        assert_eq!(image_tag("registry.invalid/a/b:0.2.0"), Some("0.2.0"));
        assert_eq!(image_tag("localhost:5000/b:0.2.0@sha256:00"), Some("0.2.0"));
        assert_eq!(image_tag("localhost:5000/b@sha256:00"), None);
        assert_eq!(image_tag("b"), None);
    }

    #[test]
    fn the_image_tag_wins_then_the_label() {
        let p = program(
            "ns/d".into(),
            &deployment("r/w:0.1.0", Some("0.2.0")),
            "webhook",
        );
        assert_eq!(
            (p.version.as_deref(), p.source, p.image.as_deref()),
            (Some("0.1.0"), Some("imageTag"), Some("r/w:0.1.0"))
        );
        let p = program(
            "ns/d".into(),
            &deployment("r/w@sha256:00", Some("0.2.0")),
            "webhook",
        );
        assert_eq!(
            (p.version.as_deref(), p.source),
            (Some("0.2.0"), Some("label"))
        );
        let p = program("ns/d".into(), &deployment("r/w:main", None), "webhook");
        assert_eq!(p.version, None);
        assert!(p.error.unwrap().contains("names a release"));
    }

    #[test]
    fn a_program_of_another_release_is_skew() {
        let same = program(
            "ns/w".into(),
            &deployment("r/w:0.2.0-g1a2b3c4", None),
            "webhook",
        );
        let old = program("ns/c".into(), &deployment("r/c:0.1.0", None), "webhook");
        let unknown = unknown("ns/x".into(), "no such Deployment".into());
        let v = compare("0.2.0", vec![same.clone(), unknown.clone()]);
        assert!(!v.skew);
        assert_eq!(v.warning(), None);
        let v = compare("0.2.0", vec![same, old, unknown]);
        assert!(v.skew);
        assert_eq!(
            v.warning().unwrap(),
            "kubectl resize-guard is 0.2.0, but ns/c runs 0.1.0 (image tag): the plugin judges \
             with its own release's rules; install the plugin of the installed release (or \
             upgrade resize-guard)"
        );
    }
}
