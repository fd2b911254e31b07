//! Destinations and challenges, without a registry.

use super::auth::{challenge_params, encode};
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
