//! `make push` to a real registry that asks for credentials: CNCF distribution with
//! `auth.htpasswd` (a bcrypt htpasswd written here) on loopback. Credentials come as an operator
//! keeps them: a docker config whose `credsStore` or `credHelpers` names a helper on `PATH` (a
//! script here that answers as docker-credential-pass does: it stands in for an external
//! program), or an `auths` entry in a podman auth file. Each push is read back with the same
//! user; a wrong password, no credentials, an identity token offered to a Basic realm and a
//! missing helper each fail naming where the credentials came from, and a registry that asks for
//! none never runs a helper.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use super::text;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use super::push::{INDEX, get_with, layout, sha256, start_registry_with};

const USER: &str = "robot";
const PASSWORD: &str = "correct horse battery staple";

/// A docker config directory, a helper directory put first on `PATH`, a podman auth file.
struct Client {
    dir: tempfile::TempDir,
}

impl Client {
    fn new() -> Client {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::create_dir(dir.path().join("docker")).unwrap();
        Client { dir }
    }

    fn docker_config(&self, json: &str) {
        std::fs::write(self.dir.path().join("docker/config.json"), json).unwrap();
    }

    fn auth_file(&self) -> PathBuf {
        self.dir.path().join("auth.json")
    }

    /// `docker-credential-<name>`: records the server it was asked for, prints `answer`, exits
    /// with `code`.
    fn helper_exiting(&self, name: &str, answer: &str, code: u8) {
        let path = self
            .dir
            .path()
            .join(format!("bin/docker-credential-{name}"));
        let asked = self.asked_file(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n[ \"$1\" = get ] || exit 9\ncat > '{}'\ncat <<'EOF'\n{answer}\nEOF\nexit {code}\n",
                asked.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A helper that answers `answer`.
    fn helper(&self, name: &str, answer: &str) {
        self.helper_exiting(name, answer, 0);
    }

    fn asked_file(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("asked-{name}"))
    }

    fn asked(&self, name: &str) -> String {
        std::fs::read_to_string(self.asked_file(name)).unwrap_or_default()
    }

    /// The environment of an operator's shell: only these credential files, the helpers first on
    /// `PATH`.
    fn env(&self, command: &mut Command, auth_file: bool) {
        let path = std::env::var("PATH").unwrap_or_default();
        command
            .env("HOME", self.dir.path())
            .env("DOCKER_CONFIG", self.dir.path().join("docker"))
            .env(
                "PATH",
                format!("{}:{path}", self.dir.path().join("bin").display()),
            )
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("REGISTRY_AUTH_FILE");
        if auth_file {
            command.env("REGISTRY_AUTH_FILE", self.auth_file());
        }
    }

    /// The push command `make push` runs with `args`.
    fn push(&self, args: &[String], auth_file: bool) -> Output {
        let mut command = Command::new(super::push_tool());
        command.args(args);
        self.env(&mut command, auth_file);
        command.output().unwrap()
    }

    /// `make push` as an operator runs it.
    fn make_push(&self, vars: &[String]) -> Output {
        let mut command = Command::new("make");
        command
            .arg("-s")
            .arg("-C")
            .arg(super::repo_root())
            .arg("push")
            .args(vars);
        self.env(&mut command, false);
        command.output().unwrap()
    }
}

/// A registry that admits `USER` with `PASSWORD` only.
fn htpasswd_registry() -> super::push::Registry {
    start_registry_with(
        |dir| {
            let htpasswd = dir.join("htpasswd");
            // Cost 4, bcrypt's least: the registry checks it on every request.
            let hash = bcrypt::hash(PASSWORD, 4).unwrap();
            std::fs::write(&htpasswd, format!("{USER}:{hash}\n")).unwrap();
            format!(
                "auth:\n  htpasswd:\n    realm: resize-guard-test\n    path: {}\n",
                htpasswd.display()
            )
        },
        Some(401),
    )
}

fn basic() -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
    )
}

/// The index digest the layout of `binary` holds, and the registry has under `tag` (read with
/// `USER`'s credentials).
fn pushed(port: u16, repo: &str, tag: &str, binary: &str) {
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout(binary).join("index.json")).unwrap()).unwrap();
    let want = index["manifests"][0]["digest"].as_str().unwrap();
    let path = format!("/v2/{repo}/manifests/{tag}");
    let (status, _, body) = get_with(port, &path, INDEX, None).unwrap();
    assert_eq!(status, 401, "the registry admits no anonymous read");
    let (status, _, body2) = get_with(port, &path, INDEX, Some(&basic())).unwrap();
    assert_eq!(
        status,
        200,
        "{}{}",
        String::from_utf8_lossy(&body),
        String::from_utf8_lossy(&body2)
    );
    assert_eq!(sha256(&body2), want, "{repo}:{tag} is the layout's index");
}

#[test]
fn credentials_from_helpers_and_auth_files_push_to_an_htpasswd_registry() {
    let registry = htpasswd_registry();
    let port = registry.port;
    let host = format!("127.0.0.1:{port}");
    let client = Client::new();
    let answer = |user: &str, secret: &str| {
        format!(r#"{{"ServerURL":"{host}","Username":"{user}","Secret":"{secret}"}}"#)
    };

    // credsStore: every registry's credentials from one helper, through `make push`.
    client.helper("store", &answer(USER, PASSWORD));
    client.docker_config(r#"{"auths":{},"credsStore":"store"}"#);
    let out = client.make_push(&[format!("REGISTRY={host}/store"), "PLAIN_HTTP=1".into()]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        client.asked("store"),
        host,
        "the helper is asked for the host"
    );
    assert!(
        text(&out).contains(&format!(
            "resize-guard-push: {host}: pushed with user \"{USER}\" from docker-credential-store (credsStore in {})",
            client.dir.path().join("docker/config.json").display()
        )),
        "{}",
        text(&out)
    );
    let tag = super::archive::built_tag();
    for binary in ["resize-guard-webhook", "resize-guard-controller"] {
        pushed(port, &format!("store/{binary}"), &tag, binary);
    }

    let webhook = layout("resize-guard-webhook").display().to_string();
    let args = |namespace: &str| {
        vec![
            "--registry".into(),
            format!("{host}/{namespace}"),
            "--plain-http".into(),
            "--no-sbom".into(),
            "--tag".into(),
            "t".into(),
            webhook.clone(),
        ]
    };

    // credHelpers: the helper named for this host wins over credsStore, which would fail.
    client.helper("broken", "not json");
    client.helper("special", &answer(USER, PASSWORD));
    client.docker_config(&format!(
        r#"{{"credsStore":"broken","credHelpers":{{"{host}":"special"}}}}"#
    ));
    let out = client.push(&args("special"), false);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(client.asked("special"), host);
    pushed(
        port,
        "special/resize-guard-webhook",
        "t",
        "resize-guard-webhook",
    );

    // A podman auth file (REGISTRY_AUTH_FILE) comes before docker's config.
    std::fs::write(
        client.auth_file(),
        format!(
            r#"{{"auths":{{"{host}":{{"auth":"{}"}}}}}}"#,
            basic().trim_start_matches("Basic ")
        ),
    )
    .unwrap();
    let out = client.push(&args("podman"), true);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "user \"{USER}\" from auths[\"{host}\"] in {}",
            client.auth_file().display()
        )),
        "{}",
        text(&out)
    );
    pushed(
        port,
        "podman/resize-guard-webhook",
        "t",
        "resize-guard-webhook",
    );

    // A wrong password: refused, naming the helper, never the secret.
    client.helper("store", &answer(USER, "wrong"));
    client.docker_config(r#"{"credsStore":"store"}"#);
    let out = client.push(&args("wrong"), false);
    let err = text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            ": not authorized with user \"{USER}\" from docker-credential-store (credsStore in "
        )) && err.contains("the registry answered 401")
            && !err.contains("wrong\""),
        "{err}"
    );

    // No credentials at all: the message says where they were looked for.
    client.helper_exiting("store", "credentials not found in native keychain", 1);
    let out = client.push(&args("anonymous"), false);
    let err = text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "not authorized with no credentials (none for {host} in the credential files"
        )),
        "{err}"
    );

    // An identity token (`<token>`) needs a token realm; this registry asks for Basic.
    client.helper("store", &answer("<token>", "refresh-token"));
    let out = client.push(&args("token"), false);
    let err = text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not authorized with the identity token from docker-credential-store")
            && err.contains("an identity token is only accepted by a Bearer token realm"),
        "{err}"
    );

    // A helper that is not installed: nothing is pushed, the error names it and its file.
    client.docker_config(r#"{"credsStore":"desktop"}"#);
    let out = client.push(&args("missing"), false);
    let err = text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error: credential helper docker-credential-desktop (credsStore in ")
            && err.contains("docker-credential-desktop is not on PATH"),
        "{err}"
    );
    let (status, _, _) = get_with(
        port,
        "/v2/missing/resize-guard-webhook/manifests/t",
        INDEX,
        Some(&basic()),
    )
    .unwrap();
    assert_eq!(status, 404, "nothing was pushed");

    // A registry that asks for no credentials never runs the helper: the same missing helper is
    // no obstacle there.
    let open = super::push::start_registry();
    let mut open_args = args("open");
    open_args[1] = format!("127.0.0.1:{}/open", open.port);
    let out = client.push(&open_args, false);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("pushed with"), "{}", text(&out));
    drop(registry);
}
