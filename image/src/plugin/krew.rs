//! The krew manifest of the archives just built, from the template `plugins/resize-guard.yaml`:
//! `@VERSION@` replaced everywhere, then only the `spec.platforms` entries of the platforms
//! built are kept, each with its archive's sha256. The template must have an entry for every
//! platform built, whose `uri` ends with that archive's name and whose `bin` is the program's
//! name there; anything else is an error, so a manifest never names an archive that was not
//! built or a sha256 that is not its own. krew's `validate-krew-manifest` checks the rest
//! (`make krew`, `tests/e2e/images/krew.rs`).

use serde_yaml_ng::Value;

use crate::oci::Platform;

/// One archive the manifest lists.
#[derive(Debug, Clone)]
pub struct Listed<'a> {
    /// Its platform.
    pub platform: Platform,
    /// Its file name, the last segment of its `uri`.
    pub archive: &'a str,
    /// The program's name in it (`bin`).
    pub program: &'a str,
    /// Lower-case hex SHA-256 of its bytes.
    pub sha256: &'a str,
}

fn text<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(value, |v, key| v.get(*key))?.as_str()
}

/// The manifest for `version` listing `archives` (in template order), with a comment naming
/// what wrote it.
pub fn manifest(template: &str, version: &str, archives: &[Listed<'_>]) -> Result<String, String> {
    let mut doc: Value = serde_yaml_ng::from_str(&template.replace("@VERSION@", version))
        .map_err(|e| format!("the template is not YAML: {e}"))?;
    if text(&doc, &["kind"]) != Some("Plugin") {
        return Err("the template is not a krew Plugin (kind: Plugin)".into());
    }
    let platforms = doc
        .get_mut("spec")
        .and_then(|spec| spec.get_mut("platforms"))
        .and_then(Value::as_sequence_mut)
        .ok_or("the template has no spec.platforms list")?;
    let mut kept = Vec::new();
    for entry in platforms.drain(..) {
        let labels = ["selector", "matchLabels"];
        let (Some(os), Some(arch)) = (
            text(&entry, &[labels[0], labels[1], "os"]).map(str::to_owned),
            text(&entry, &[labels[0], labels[1], "arch"]).map(str::to_owned),
        ) else {
            return Err("a spec.platforms entry has no selector.matchLabels os and arch".into());
        };
        let Some(built) = archives
            .iter()
            .find(|a| a.platform.os == os && a.platform.architecture == arch)
        else {
            continue;
        };
        let uri = text(&entry, &["uri"]).unwrap_or_default();
        if !uri.ends_with(&format!("/{}", built.archive)) {
            return Err(format!(
                "the {os}/{arch} entry's uri {uri:?} does not end with /{}",
                built.archive
            ));
        }
        let bin = text(&entry, &["bin"]).unwrap_or_default();
        if bin != built.program {
            return Err(format!(
                "the {os}/{arch} entry's bin {bin:?} is not {:?}",
                built.program
            ));
        }
        let mut entry = entry;
        let Some(mapping) = entry.as_mapping_mut() else {
            return Err(format!("the {os}/{arch} entry is not a mapping"));
        };
        mapping.insert("sha256".into(), built.sha256.into());
        kept.push((built.platform, entry));
    }
    for archive in archives {
        if !kept.iter().any(|(p, _)| *p == archive.platform) {
            return Err(format!(
                "the template has no spec.platforms entry for {}",
                archive.platform
            ));
        }
    }
    platforms.extend(kept.into_iter().map(|(_, entry)| entry));
    let yaml = serde_yaml_ng::to_string(&doc).map_err(|e| format!("writing the manifest: {e}"))?;
    if yaml.contains('@') {
        return Err("a placeholder (@…@) is left in the manifest".into());
    }
    let names: Vec<String> = archives.iter().map(|a| a.platform.to_string()).collect();
    Ok(format!(
        "# krew manifest of kubectl resize-guard {version} ({}), written by resize-guard-plugin\n\
         # from plugins/resize-guard.yaml with the sha256 of the archives beside it.\n{yaml}",
        names.join(", ")
    ))
}
