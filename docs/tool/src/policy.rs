//! The policy reference: every key of `policy.yaml` from
//! `resize_guard_policy::policy::keys::KEYS` (whose tests hold it to the policy types), with its
//! type, its default from `Policy::default()` serialized, and its meaning.

use resize_guard_policy::policy::keys::{KEYS, Key, KeyType};
use resize_guard_policy::policy::{POLICY_KEY, Policy};
use serde_json::Value;

use crate::table;

/// A key's type in words.
fn type_words(ty: KeyType) -> String {
    match ty {
        KeyType::Section => "section".to_owned(),
        KeyType::Boolean => "boolean".to_owned(),
        KeyType::Integer => "integer".to_owned(),
        KeyType::Selector => "label selector (`kubectl -l` syntax)".to_owned(),
        KeyType::Strings => "list of strings".to_owned(),
        KeyType::OneOf(values) => format!(
            "one of {}",
            values()
                .iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The default at `path` of the serialized default policy, as YAML would show it.
fn default_words(defaults: &Value, path: &str) -> String {
    let value = path.split('.').try_fold(defaults, |v, part| v.get(part));
    match value {
        None | Some(Value::Null) => "unset".to_owned(),
        Some(Value::String(s)) => format!("`{s}`"),
        Some(Value::Array(items)) => format!(
            "`[{}]`",
            items
                .iter()
                .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some(other) => format!("`{other}`"),
    }
}

/// The keys of the serialized `value` (at `prefix`) that have no row in `KEYS`.
fn unlisted(value: &Value, prefix: &str) -> Vec<String> {
    let Value::Object(map) = value else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, inner) in map {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        if !KEYS.iter().any(|k| k.path == path) {
            out.push(path.clone());
        }
        out.extend(unlisted(inner, &path));
    }
    out
}

/// The keys directly under `section` (`""`: the top level), sections left out.
fn leaves_under(section: &str) -> impl Iterator<Item = &'static Key> {
    let section = section.to_owned();
    KEYS.iter().filter(move |k| {
        let parent = k.path.rsplit_once('.').map_or("", |(p, _)| p);
        parent == section && !matches!(k.ty, KeyType::Section)
    })
}

fn key_table(defaults: &Value, keys: impl Iterator<Item = &'static Key>) -> String {
    let rows: Vec<Vec<String>> = keys
        .map(|k| {
            vec![
                format!("`{}`", k.path),
                type_words(k.ty),
                default_words(defaults, k.path),
                k.meaning.to_owned(),
            ]
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    table::render(&["Key", "Type", "Default", "Meaning"], &rows)
}

/// The policy reference page.
pub fn page() -> Result<String, String> {
    let defaults = serde_json::to_value(Policy::default())
        .map_err(|e| format!("serializing the default policy: {e}"))?;
    let missing = unlisted(&defaults, "");
    if !missing.is_empty() {
        return Err(format!(
            "policy keys {} have no row in shared/src/policy/keys.rs: add one each",
            missing.join(", ")
        ));
    }
    let mut out = crate::pages::header(
        "the policy types (shared/src/policy.rs) and their key table (shared/src/policy/keys.rs)",
    );
    out.push_str(&format!(
        "# Policy keys\n\n\
         The policy is the YAML document under key `{POLICY_KEY}` of the policy ConfigMap. Every \
         key below may be left out and takes its default, except `mode`, which must be stated, \
         and `preemption.enabled`, which must be stated whenever the `preemption:` section sets \
         any other key. Unknown keys and bad values are refused with the key and the line; the \
         programs keep the last good policy meanwhile.\n\n\
         ## Top-level keys\n\n"
    ));
    out.push_str(&key_table(&defaults, leaves_under("")));
    for section in KEYS.iter().filter(|k| matches!(k.ty, KeyType::Section)) {
        let depth = section.path.matches('.').count();
        out.push_str(&format!(
            "\n{} `{}`\n\n{}\n",
            "#".repeat(depth + 2),
            section.path,
            section.meaning
        ));
        let keys = key_table(&defaults, leaves_under(section.path));
        if !keys.is_empty() {
            out.push('\n');
            out.push_str(&keys);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_without_a_row_fails_the_page() {
        let mut defaults = serde_json::to_value(Policy::default()).unwrap();
        defaults["preemption"]["maxVictimsPerHour"] = Value::from(3);
        defaults["tenancy"] = serde_json::json!({"quota": 1});
        assert_eq!(
            unlisted(&defaults, ""),
            ["preemption.maxVictimsPerHour", "tenancy", "tenancy.quota"]
        );
    }

    #[test]
    fn every_key_is_on_the_page_with_its_default() {
        let page = page().unwrap();
        for k in KEYS {
            assert!(
                page.contains(&format!("`{}`", k.path)),
                "{} missing",
                k.path
            );
        }
        for line in [
            "| `preemption.maxVictimsPerResize` | integer | `5` |",
            "| `mode` | one of `enforce`, `audit` | `enforce` |",
            "| `namespaces.exclude` | list of strings | `[kube-system]` |",
            "| `preemption.maxGracePeriodSeconds` | integer | unset |",
            "| `preemption.protectedNamespaces` | list of strings | `[]` |",
            "### `preemption.circuitBreaker`",
        ] {
            assert!(page.contains(line), "{line} missing from\n{page}");
        }
    }
}
