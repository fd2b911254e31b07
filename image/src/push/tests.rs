//! Destinations, challenges and credentials files, without a registry.

use super::*;

#[test]
fn destinations_parse_with_and_without_a_tag_and_refuse_what_a_registry_would() {
    let d = Destination::parse("localhost:5000/rg/resize-guard-webhook:1.2", "x").unwrap();
    assert_eq!(
        (d.host.as_str(), d.repository.as_str(), d.tag.as_str()),
        ("localhost:5000", "rg/resize-guard-webhook", "1.2")
    );
    let d = Destination::parse("registry.example/a/b", "0.1.0").unwrap();
    assert_eq!((d.repository.as_str(), d.tag.as_str()), ("a/b", "0.1.0"));
    for bad in [
        "",
        "noslash",
        "host/",
        "host/UPPER",
        "host/a//b",
        "host/a:bad/tag",
        "host/a:",
    ] {
        assert!(Destination::parse(bad, "t").is_err(), "{bad}");
    }
}

#[test]
fn a_bearer_challenge_is_read_with_quoted_commas() {
    let p = challenge_params(
        r#"realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#,
    );
    assert_eq!(
        p,
        [
            ("realm".into(), "https://auth.example/token".into()),
            ("service".into(), "registry.example".into()),
            ("scope".into(), "repository:a/b:pull,push".into()),
        ]
    );
    assert_eq!(
        encode("repository:a/b:pull,push"),
        "repository%3Aa%2Fb%3Apull%2Cpush"
    );
}

#[test]
fn credentials_come_from_the_first_file_that_names_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let (podman, docker) = (dir.path().join("auth.json"), dir.path().join("config.json"));
    std::fs::write(&podman, r#"{"auths":{"other:5000":{"auth":"eDp5"}}}"#).unwrap();
    std::fs::write(
        &docker,
        r#"{"auths":{"https://registry.example/v1/":{"auth":"dTpw"},"other:5000":{"auth":"bm86"}}}"#,
    )
    .unwrap();
    let files = [dir.path().join("missing.json"), podman.clone(), docker];
    let found = |host| credentials_in(&files, host).unwrap();
    assert_eq!(found("registry.example").as_deref(), Some("dTpw"));
    assert_eq!(found("other:5000").as_deref(), Some("eDp5"));
    assert_eq!(found("nowhere"), None);
    std::fs::write(&podman, "{not json").unwrap();
    let e = credentials_in(&files, "x").unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("credentials file {}", podman.display())),
        "{e}"
    );
}
