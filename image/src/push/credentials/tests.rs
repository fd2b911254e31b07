//! Credentials files and helpers, without a registry: each helper here is a shell script that
//! answers as a docker credential helper does (it stands in for an external program).

use std::os::unix::fs::PermissionsExt as _;

use super::*;

fn basic(username: &str, password: &str) -> Secret {
    Secret::Basic {
        username: username.into(),
        password: password.into(),
    }
}

#[test]
fn auths_come_from_the_first_file_that_names_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let (podman, docker) = (dir.path().join("auth.json"), dir.path().join("config.json"));
    // eDp5 = x:y, dTpw = u:p, bm86 = no:
    std::fs::write(&podman, r#"{"auths":{"other:5000":{"auth":"eDp5"}}}"#).unwrap();
    std::fs::write(
        &docker,
        r#"{"auths":{"https://registry.example/v1/":{"auth":"dTpw"},"other:5000":{"auth":"bm86"},
            "plain.example":{"username":"me","password":"pw"},
            "token.example":{"identitytoken":"refresh-me"},
            "helped.example":{}}}"#,
    )
    .unwrap();
    let files = [
        dir.path().join("missing.json"),
        podman.clone(),
        docker.clone(),
    ];
    let found = |host| credentials_in(&files, host).unwrap().map(|c| c.secret);
    assert_eq!(found("registry.example"), Some(basic("u", "p")));
    assert_eq!(found("other:5000"), Some(basic("x", "y")));
    assert_eq!(found("plain.example"), Some(basic("me", "pw")));
    assert_eq!(
        found("token.example"),
        Some(Secret::IdentityToken("refresh-me".into()))
    );
    assert_eq!(
        found("helped.example"),
        None,
        "an empty entry is no credential"
    );
    assert_eq!(found("nowhere"), None);
    let c = credentials_in(&files, "other:5000").unwrap().unwrap();
    assert_eq!(
        c.source,
        format!("auths[\"other:5000\"] in {}", podman.display())
    );
    assert_eq!(
        c.describe(),
        format!(
            "user \"x\" from auths[\"other:5000\"] in {}",
            podman.display()
        )
    );
    assert!(
        !format!("{c:?}").contains("\"y\""),
        "Debug shows no password"
    );

    std::fs::write(&podman, "{not json").unwrap();
    let e = credentials_in(&files, "x").unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("credentials file {}", podman.display())),
        "{e}"
    );
    std::fs::write(&podman, r#"{"auths":{"bad:1":{"auth":"!!"}}}"#).unwrap();
    let e = credentials_in(&files, "bad:1").unwrap_err().to_string();
    assert!(e.contains("auths[\"bad:1\"]: auth is not base64"), "{e}");
}

#[test]
fn docker_hub_answers_to_each_of_its_names() {
    assert!(same_registry("https://index.docker.io/v1/", "docker.io"));
    assert!(same_registry("docker.io", "registry-1.docker.io"));
    assert!(same_registry("http://localhost:5000", "localhost:5000"));
    assert!(!same_registry("localhost:5000", "localhost:5001"));
    assert_eq!(server_address("docker.io"), DOCKER_HUB_KEY);
    assert_eq!(server_address("ghcr.io"), "ghcr.io");
    assert_eq!(api_host("index.docker.io"), DOCKER_HUB_API);
    assert_eq!(api_host("ghcr.io"), "ghcr.io");
}

/// A directory holding `docker-credential-<name>` scripts, put first on `PATH` by the caller.
fn helper(dir: &Path, name: &str, script: &str) {
    let path = dir.join(format!("docker-credential-{name}"));
    std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn credential_helpers_are_asked_as_docker_asks_them() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let seen = dir.path().join("seen");
    // Records what it was asked, answers as docker-credential-pass does.
    helper(
        &bin,
        "store",
        &format!(
            "[ \"$1\" = get ] || exit 9\ncat > {seen}\ncase \"$(cat {seen})\" in\n\
             registry.example) echo '{{\"ServerURL\":\"registry.example\",\"Username\":\"robot\",\"Secret\":\"s3cret\"}}' ;;\n\
             {hub}) echo '{{\"ServerURL\":\"{hub}\",\"Username\":\"<token>\",\"Secret\":\"refresh\"}}' ;;\n\
             *) echo 'credentials not found in native keychain'; exit 1 ;;\nesac",
            seen = seen.display(),
            hub = DOCKER_HUB_KEY,
        ),
    );
    helper(
        &bin,
        "special",
        r#"cat >/dev/null; echo '{"Username":"special","Secret":"pw"}'"#,
    );
    helper(
        &bin,
        "broken",
        "cat >/dev/null; echo 'no keyring' >&2; exit 3",
    );
    helper(&bin, "garbled", "cat >/dev/null; echo 'Username: x'");
    // The helpers' directory first, then the system's (for `cat`).
    let search = format!("{}:/usr/bin:/bin", bin.display());
    let search = Some(std::ffi::OsStr::new(&search));
    let config = dir.path().join("config.json");
    let files = [config.clone()];
    let write = |text: &str| std::fs::write(&config, text).unwrap();
    let found = |host| lookup(&files, host, search);

    write(
        r#"{"credsStore":"store","credHelpers":{"special.example":"special","gone.example":"absent"},
           "auths":{"registry.example":{},"fallback.example":{"auth":"dTpw"}}}"#,
    );
    let c = found("registry.example").unwrap().unwrap();
    assert_eq!(c.secret, basic("robot", "s3cret"));
    assert_eq!(
        c.source,
        format!(
            "docker-credential-store (credsStore in {})",
            config.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), "registry.example");

    // Docker Hub is asked for under its v1 key; `<token>` makes an identity token.
    let c = found("docker.io").unwrap().unwrap();
    assert_eq!(c.secret, Secret::IdentityToken("refresh".into()));
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), DOCKER_HUB_KEY);

    // credHelpers wins over credsStore for its registry.
    let c = found("special.example").unwrap().unwrap();
    assert_eq!(c.secret, basic("special", "pw"));
    assert!(
        c.source.contains("credHelpers[\"special.example\"]"),
        "{}",
        c.source
    );

    // Nothing in the store: the file's auths, else nothing.
    assert_eq!(
        found("fallback.example").unwrap().unwrap().secret,
        basic("u", "p")
    );
    assert_eq!(found("unknown.example").unwrap(), None);

    // A helper that is not there, fails, or answers no JSON: an error naming it.
    let e = found("gone.example").unwrap_err().to_string();
    assert!(
        e.contains("docker-credential-absent is not on PATH")
            && e.contains(&config.display().to_string()),
        "{e}"
    );
    write(r#"{"credsStore":"broken"}"#);
    let e = found("registry.example").unwrap_err().to_string();
    assert!(
        e.starts_with("credential helper docker-credential-broken (credsStore in ")
            && e.contains("`docker-credential-broken get` for registry.example failed")
            && e.contains("no keyring"),
        "{e}"
    );
    write(r#"{"credsStore":"garbled"}"#);
    let e = found("registry.example").unwrap_err().to_string();
    assert!(e.contains("answered no credentials JSON"), "{e}");
    write(r#"{"credsStore":"../evil"}"#);
    let e = found("registry.example").unwrap_err().to_string();
    assert!(e.contains("is not a credential helper's name"), "{e}");
}
