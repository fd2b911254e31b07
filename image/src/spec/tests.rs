//! Resolution tests: the project's Containerfile for each binary, ARG scoping, and rejections.

use super::*;
use crate::containerfile::parse;

const PROJECT: &str = include_str!("../../../deploy/image/Containerfile");

fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn resolve_text(text: &str, pairs: &[(&str, &str)]) -> Result<ImageSpec, ImageError> {
    resolve(&parse(text).unwrap(), &args(pairs))
}

#[test]
fn resolves_each_binary_to_its_own_entrypoint_and_shared_labels() {
    for binary in ["resize-guard-webhook", "resize-guard-controller"] {
        let spec = resolve_text(
            PROJECT,
            &[
                ("BINARY", binary),
                ("VERSION", "1.2.3"),
                ("REVISION", "abc"),
            ],
        )
        .unwrap();
        let path = format!("/usr/local/bin/{binary}");
        let mut copies = vec![CopySpec {
            src: binary.into(),
            dest: path.clone(),
        }];
        // The controller image carries resize-guard-certs too (the Containerfile says why).
        if binary == "resize-guard-controller" {
            copies.push(CopySpec {
                src: "resize-guard-certs".into(),
                dest: "/usr/local/bin/resize-guard-certs".into(),
            });
        }
        assert_eq!(spec.copies, copies);
        assert_eq!(spec.entrypoint, Some(vec![path]));
        assert_eq!(spec.user.as_deref(), Some("65532:65532"));
        assert_eq!(spec.env, [DEFAULT_PATH]);
        let label = |key: &str| spec.labels.get(&format!("org.opencontainers.image.{key}"));
        assert_eq!(label("title").map(String::as_str), Some(binary));
        assert_eq!(label("version").map(String::as_str), Some("1.2.3"));
        assert_eq!(label("revision").map(String::as_str), Some("abc"));
        assert_eq!(
            label("source").map(String::as_str),
            Some("https://github.com/resize-guard/resize-guard")
        );
        assert_eq!(label("licenses").map(String::as_str), Some("Apache-2.0"));
        assert!(label("description").is_some_and(|d| !d.is_empty()));
    }
}

#[test]
fn uses_defaults_and_the_global_value_of_a_bare_arg() {
    let text = "ARG NAME=g\nFROM scratch\nARG NAME\nARG TAG=v-${NAME}\nLABEL t=$TAG";
    assert_eq!(resolve_text(text, &[]).unwrap().labels["t"], "v-g");
    assert_eq!(
        resolve_text(text, &[("NAME", "x")]).unwrap().labels["t"],
        "v-x"
    );
    assert_eq!(
        resolve_text(text, &[("TAG", "y")]).unwrap().labels["t"],
        "y"
    );
}

#[test]
fn inherits_config_but_not_args_from_an_earlier_stage() {
    let text = "FROM scratch AS base\nARG V=1\nLABEL v=$V\nUSER 7\n\
                FROM base\nENTRYPOINT [\"/x\"]\nLABEL w=$V";
    let err = resolve_text(text, &[]).unwrap_err();
    assert!(matches!(err, ImageError::Parse { line: 7, .. }), "{err}");
    let spec = resolve_text(&text.replace(" w=$V", " w=2"), &[]).unwrap();
    assert_eq!(spec.user.as_deref(), Some("7"));
    assert_eq!(spec.labels, args(&[("v", "1"), ("w", "2")]));
    assert_eq!(spec.entrypoint, Some(vec!["/x".to_string()]));
}

#[test]
fn global_args_are_not_visible_inside_a_stage() {
    let err = resolve_text("ARG V=1\nFROM scratch\nLABEL v=$V", &[]).unwrap_err();
    assert!(err.to_string().contains("$V has no value"), "{err}");
}

#[test]
fn rejects_a_build_argument_no_arg_declares() {
    let err = resolve_text("FROM scratch", &[("VERSION", "1")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Containerfile: build argument VERSION is not declared by any ARG"
    );
}

#[test]
fn rejects_base_images_and_unknown_stages() {
    let err = resolve_text("FROM debian:13\nUSER 1", &[]).unwrap_err();
    assert!(err.to_string().contains("no base image is pulled"), "{err}");
    let err = resolve_text("ARG B=x\nFROM scratch AS a\nFROM ${B}", &[]).unwrap_err();
    assert!(matches!(err, ImageError::Parse { line: 3, .. }), "{err}");
}

#[test]
fn places_a_copy_into_a_destination_directory() {
    let spec = resolve_text("FROM scratch\nCOPY tool usr/bin/", &[]).unwrap();
    assert_eq!(spec.copies[0].dest, "/usr/bin/tool");
}

#[test]
fn rejects_copy_paths_outside_the_context_or_with_globs() {
    for copy in [
        "COPY ../x /x",
        "COPY /etc/passwd /x",
        "COPY * /x",
        "COPY a /../x",
    ] {
        let err = resolve_text(&format!("FROM scratch\n{copy}"), &[]).unwrap_err();
        assert!(
            matches!(err, ImageError::Parse { line: 2, .. }),
            "{copy}: {err}"
        );
    }
}
