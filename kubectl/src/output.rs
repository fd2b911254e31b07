//! The one print path of every command, as kubectl's `-o`: `text` (default) and `wide` are the
//! command's own rendering; `json` and `yaml` print the same document in an envelope shaped like
//! a Kubernetes object, so scripts can tell what they hold and its schema version:
//!
//! ```yaml
//! apiVersion: resize-guard.io/v1alpha1
//! kind: Status                       # Explanation | WhatIf | Status | Check
//! observedAt: "2026-01-02T15:04:05Z" # when the plugin read the cluster (RFC 3339, UTC)
//! ...                                # the document's own fields (camelCase)
//! ```
//!
//! The kinds and their fields: [`crate::explain::Explanation`] (`Explanation`),
//! [`crate::what_if::Report`] (`WhatIf`), [`crate::status::Report`] (`Status`) and
//! [`crate::check::Report`] (`Check`). Every value the text form shows is in the document; a
//! relative age in the text (`3m2s`) is there as both the age and the RFC 3339 time it is
//! counted from. Writing to a closed pipe (`| head`) ends the output quietly, as kubectl does.

use std::io::Write as _;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::args::Output;

/// The `apiVersion` of every JSON and YAML document the plugin prints.
pub const API_VERSION: &str = "resize-guard.io/v1alpha1";

/// Something a command prints.
pub trait Document: Serialize {
    /// Its `kind` in the envelope.
    const KIND: &'static str;

    /// The text form; `wide` for `-o wide`.
    fn text(&self, wide: bool) -> String;
}

/// The envelope around a document.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Envelope<'a, D: Serialize> {
    api_version: &'static str,
    kind: &'static str,
    observed_at: String,
    #[serde(flatten)]
    body: &'a D,
}

/// `doc` as `out` asks, observed at `observed`.
pub fn render<D: Document>(out: Output, doc: &D, observed: Timestamp) -> anyhow::Result<String> {
    let envelope = || Envelope {
        api_version: API_VERSION,
        kind: D::KIND,
        observed_at: rfc3339(observed),
        body: doc,
    };
    Ok(match out {
        Output::Json => format!("{}\n", serde_json::to_string_pretty(&envelope())?),
        Output::Yaml => serde_yaml_ng::to_string(&envelope())?,
        Output::Text => doc.text(false),
        Output::Wide => doc.text(true),
    })
}

/// Prints `doc` on stdout as `out` asks.
pub fn print<D: Document>(out: Output, doc: &D, observed: Timestamp) -> anyhow::Result<()> {
    write_stdout(&render(out, doc, observed)?)
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("writing to stdout"))
        }
        _ => Ok(()),
    }
}

/// `t` as Kubernetes writes times (`metav1.Time`): RFC 3339 in UTC, whole seconds.
pub fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Sample {
        pod_name: String,
        since: Option<String>,
    }

    impl Document for Sample {
        const KIND: &'static str = "Sample";
        fn text(&self, wide: bool) -> String {
            format!("{} {wide}\n", self.pod_name)
        }
    }

    fn at() -> Timestamp {
        "2026-01-02T15:04:05.678Z".parse().unwrap()
    }

    #[test]
    fn json_and_yaml_carry_the_envelope_then_the_document() {
        let doc = Sample {
            pod_name: "web-0".into(),
            since: Some(rfc3339(at())),
        };
        let json: serde_json::Value =
            serde_json::from_str(&render(Output::Json, &doc, at()).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "resize-guard.io/v1alpha1",
                "kind": "Sample",
                "observedAt": "2026-01-02T15:04:05Z",
                "podName": "web-0",
                "since": "2026-01-02T15:04:05Z",
            })
        );
        let yaml: serde_json::Value =
            serde_yaml_ng::from_str(&render(Output::Yaml, &doc, at()).unwrap()).unwrap();
        assert_eq!(yaml, json);
        assert_eq!(
            render(Output::Yaml, &doc, at())
                .unwrap()
                .lines()
                .take(2)
                .collect::<Vec<_>>(),
            ["apiVersion: resize-guard.io/v1alpha1", "kind: Sample"]
        );
        assert_eq!(render(Output::Text, &doc, at()).unwrap(), "web-0 false\n");
        assert_eq!(render(Output::Wide, &doc, at()).unwrap(), "web-0 true\n");
    }

    #[test]
    fn times_are_rfc3339_in_whole_seconds() {
        assert_eq!(rfc3339(at()), "2026-01-02T15:04:05Z");
        let parsed: Timestamp = rfc3339(at()).parse().unwrap();
        assert_eq!(parsed.as_second(), at().as_second());
    }
}
