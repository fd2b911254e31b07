//! Pins: what an operator adds to their install to run the images just pushed, each pinned by
//! its digest. `deploy/` and the chart name the images under a registry that cannot resolve
//! (`registry.invalid/resize-guard/…`), so an install runs only the images its operator pushed:
//! `make push` prints a kustomize `images:` block (the built name, matched against
//! `deploy/`'s, then the pushed repository and digest) and the Helm `--set` flags for
//! `image.<program>.repository` and `image.<program>.digest`.

use std::fmt::Write as _;

/// One pushed image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// The repository the image was built under
    /// (`registry.invalid/resize-guard/resize-guard-webhook`): the name kustomize's `images:`
    /// matches in `deploy/`.
    pub built: String,
    /// Where it was pushed, without a tag (`registry.example/platform/resize-guard-webhook`).
    pub pushed: String,
    /// The digest the registry stored under the tag (`sha256:…`).
    pub digest: String,
}

impl Pin {
    /// The chart's key under `image.`: the repository's last segment without `resize-guard-`
    /// (`webhook`, `controller`).
    fn chart_key(&self) -> &str {
        let base = self.pushed.rsplit('/').next().unwrap_or(&self.pushed);
        base.strip_prefix("resize-guard-").unwrap_or(base)
    }
}

/// The kustomize `images:` block for a kustomization that lists `deploy/` (or an overlay) under
/// `resources:`, with a comment line before it.
pub fn kustomize(pins: &[Pin]) -> String {
    let mut out = String::from(
        "# kustomize: add to your kustomization.yaml (resources: [<resize-guard>/deploy] or an overlay)\nimages:\n",
    );
    for pin in pins {
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "  - name: {}\n    newName: {}\n    digest: {}\n",
            pin.built, pin.pushed, pin.digest
        );
    }
    out
}

/// The Helm flags for `helm install` / `helm upgrade`, with a comment line before them.
pub fn helm(pins: &[Pin]) -> String {
    let flags: Vec<String> = pins
        .iter()
        .map(|pin| {
            let key = pin.chart_key();
            format!(
                "--set image.{key}.repository={},image.{key}.digest={}",
                pin.pushed, pin.digest
            )
        })
        .collect();
    format!(
        "# Helm: add to helm install or helm upgrade\n{}\n",
        flags.join(" \\\n  ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pins() -> Vec<Pin> {
        ["webhook", "controller"]
            .iter()
            .map(|p| Pin {
                built: format!("registry.invalid/resize-guard/resize-guard-{p}"),
                pushed: format!("registry.example/platform/resize-guard-{p}"),
                digest: format!(
                    "sha256:{}",
                    if *p == "webhook" { "a" } else { "b" }.repeat(64)
                ),
            })
            .collect()
    }

    #[test]
    fn the_kustomize_block_matches_the_built_name_and_pins_the_pushed_digest() {
        let text = kustomize(&pins());
        let block = text.split_once('\n').unwrap().1;
        assert_eq!(
            block,
            format!(
                "images:\n\
                 \x20 - name: registry.invalid/resize-guard/resize-guard-webhook\n\
                 \x20   newName: registry.example/platform/resize-guard-webhook\n\
                 \x20   digest: sha256:{}\n\
                 \x20 - name: registry.invalid/resize-guard/resize-guard-controller\n\
                 \x20   newName: registry.example/platform/resize-guard-controller\n\
                 \x20   digest: sha256:{}\n",
                "a".repeat(64),
                "b".repeat(64)
            )
        );
    }

    #[test]
    fn the_helm_flags_name_each_program_s_values() {
        let text = helm(&pins());
        assert!(
            text.contains(&format!(
                "--set image.webhook.repository=registry.example/platform/resize-guard-webhook,image.webhook.digest=sha256:{} \\\n  --set image.controller.repository=",
                "a".repeat(64)
            )),
            "{text}"
        );
    }
}
