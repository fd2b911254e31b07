//! An identity token (`identitytoken` in a docker config, or a helper's `<token>` user) against a
//! real registry with token auth: CNCF distribution configured with `auth.token`, trusting an
//! ES256 key (JWKS) whose tokens a small token server here issues. The server stands in for a
//! registry's authorization service (Docker Hub's, ACR's): it answers the OAuth2 refresh-token
//! grant of the distribution token spec for one refresh token only, with a JWT granting the scope
//! asked for; the registry verifies that JWT itself. `make push`'s client must exchange the
//! identity token there and push with the access token; a wrong one fails naming the realm.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use super::text;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};

use super::push::{INDEX, get_with, layout, sha256, start_registry_with};

const SERVICE: &str = "resize-guard-test";
const ISSUER: &str = "resize-guard-test-issuer";
const REFRESH: &str = "refresh-0123456789";

/// The token server: its key, its port, and every form it was sent.
struct TokenServer {
    key: Arc<EcdsaKeyPair>,
    port: u16,
    forms: Arc<Mutex<Vec<String>>>,
}

impl TokenServer {
    fn start() -> TokenServer {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let key = Arc::new(
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                .unwrap(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let forms = Arc::new(Mutex::new(Vec::new()));
        let (k, f) = (key.clone(), forms.clone());
        // Serves until the test binary exits; each connection is one request.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                serve(&k, &f, stream);
            }
        });
        TokenServer { key, port, forms }
    }

    /// The JWKS the registry trusts.
    fn jwks(&self) -> String {
        let point = self.key.public_key().as_ref();
        json!({ "keys": [{
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": "test",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        }]})
        .to_string()
    }
}

/// A JWT the registry accepts, granting `scopes` (`repository:<name>:<actions>`).
fn token(key: &EcdsaKeyPair, scopes: &[&str]) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let access: Vec<Value> = scopes
        .iter()
        .filter_map(|s| {
            let mut parts = s.splitn(3, ':');
            let (kind, name, actions) = (parts.next()?, parts.next()?, parts.next()?);
            Some(json!({ "type": kind, "name": name, "actions": actions.split(',').collect::<Vec<_>>() }))
        })
        .collect();
    let header = json!({ "alg": "ES256", "typ": "JWT", "kid": "test" });
    let claims = json!({
        "iss": ISSUER, "sub": "robot", "aud": SERVICE, "iat": now, "nbf": now - 10,
        "exp": now + 300, "jti": format!("{now}-{}", scopes.len()), "access": access,
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = key
        .sign(&SystemRandom::new(), signing_input.as_bytes())
        .unwrap();
    format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature.as_ref())
    )
}

/// `application/x-www-form-urlencoded` value decoding.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

/// One request: `POST /token` with the refresh-token grant answers a token for the scopes asked;
/// anything else is refused.
fn serve(key: &EcdsaKeyPair, forms: &Mutex<Vec<String>>, stream: std::net::TcpStream) {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let form = String::from_utf8_lossy(&body).into_owned();
    forms
        .lock()
        .unwrap()
        .push(format!("{}{form}", request_line.trim_end()));
    let fields: Vec<(String, String)> = form
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), decode(v)))
        .collect();
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let granted = request_line.starts_with("POST /token ")
        && field("grant_type") == Some("refresh_token")
        && field("refresh_token") == Some(REFRESH)
        && field("service") == Some(SERVICE);
    let (status, answer) = if granted {
        let scopes: Vec<&str> = field("scope").unwrap_or_default().split(' ').collect();
        let jwt = token(key, &scopes);
        (
            "200 OK",
            json!({ "access_token": jwt, "expires_in": 300 }).to_string(),
        )
    } else {
        (
            "401 Unauthorized",
            r#"{"error":"invalid_grant"}"#.to_owned(),
        )
    };
    let mut stream = reader.into_inner();
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    );
}

fn push(home: &std::path::Path, args: &[String]) -> Output {
    let path = std::env::var("PATH").unwrap_or_default();
    Command::new(super::push_tool())
        .args(args)
        .env("HOME", home)
        .env("DOCKER_CONFIG", home.join("docker"))
        .env("PATH", format!("{}:{path}", home.join("bin").display()))
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("REGISTRY_AUTH_FILE")
        .output()
        .unwrap()
}

#[test]
fn an_identity_token_is_exchanged_at_the_token_realm_and_pushes() {
    let server = TokenServer::start();
    let jwks = server.jwks();
    let realm = format!("http://127.0.0.1:{}/token", server.port);
    let registry = start_registry_with(
        |dir| {
            let path = dir.join("jwks.json");
            std::fs::write(&path, &jwks).unwrap();
            format!(
                "auth:\n  token:\n    realm: {realm}\n    service: {SERVICE}\n    issuer: {ISSUER}\n    \
                 jwks: {}\n    signingalgorithms: [ES256]\n",
                path.display()
            )
        },
        Some(401),
    );
    let port = registry.port;
    let host = format!("127.0.0.1:{port}");
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("docker")).unwrap();
    std::fs::create_dir_all(home.path().join("bin")).unwrap();
    let args = vec![
        "--registry".into(),
        format!("{host}/token"),
        "--plain-http".into(),
        "--tag".into(),
        "t".into(),
        layout("resize-guard-webhook").display().to_string(),
    ];

    // `docker login` with an identity token leaves it in auths.
    std::fs::write(
        home.path().join("docker/config.json"),
        format!(r#"{{"auths":{{"{host}":{{"identitytoken":"{REFRESH}"}}}}}}"#),
    )
    .unwrap();
    let out = push(home.path(), &args);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "resize-guard-push: {host}: pushed with the identity token from auths["
        )),
        "{}",
        text(&out)
    );
    // The refresh-token grant, for the repository's pull and push (the registry names the actions
    // in no fixed order).
    let forms = server.forms.lock().unwrap().clone();
    let granted = forms.iter().any(|f| {
        let Some(form) = f.strip_prefix("POST /token HTTP/1.1") else {
            return false;
        };
        let fields: Vec<(&str, String)> = form
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k, decode(v)))
            .collect();
        let field = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.as_str())
        };
        let mut actions: Vec<&str> = field("scope")
            .and_then(|s| s.strip_prefix("repository:token/resize-guard-webhook:"))
            .map(|a| a.split(',').collect())
            .unwrap_or_default();
        actions.sort_unstable();
        field("grant_type") == Some("refresh_token")
            && field("client_id") == Some("resize-guard-push")
            && field("refresh_token") == Some(REFRESH)
            && field("service") == Some(SERVICE)
            && actions == ["pull", "push"]
    });
    assert!(granted, "{forms:?}\n{}", text(&out));
    let index: Value = serde_json::from_slice(
        &std::fs::read(layout("resize-guard-webhook").join("index.json")).unwrap(),
    )
    .unwrap();
    let bearer = format!(
        "Bearer {}",
        token(&server.key, &["repository:token/resize-guard-webhook:pull"])
    );
    let (status, _, body) = get_with(
        port,
        "/v2/token/resize-guard-webhook/manifests/t",
        INDEX,
        Some(&bearer),
    )
    .unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        sha256(&body),
        index["manifests"][0]["digest"].as_str().unwrap()
    );

    // A helper's `<token>` user is an identity token too; a revoked one fails at the realm.
    let helper = home.path().join("bin/docker-credential-store");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\ncat >/dev/null\necho '{{\"ServerURL\":\"{host}\",\"Username\":\"<token>\",\"Secret\":\"revoked\"}}'\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        home.path().join("docker/config.json"),
        r#"{"credsStore":"store"}"#,
    )
    .unwrap();
    let out = push(home.path(), &args);
    let err = text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not authorized with the identity token from docker-credential-store")
            && err.contains(&format!(
                "POST {realm} (the token realm) answered 401 Unauthorized"
            ))
            && !err.contains("revoked\""),
        "{err}"
    );
    drop(registry);
}
