//! `kubectl resize-guard` behind an HTTP proxy, as on a laptop in an office: through a CONNECT
//! proxy on loopback (written here, recording every tunnel it opens and the only resolver of the
//! API server's name), named by `HTTPS_PROXY` (with `NO_PROXY=localhost,127.0.0.1`) or by the
//! kubeconfig cluster's `proxy-url`, the plugin reaches the real kube-apiserver and every request
//! goes through the tunnel; `NO_PROXY` naming the server's domain sends it direct; a proxy that
//! is down fails with exit 3 naming the API server, not a panic.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::{Arc, Mutex};

use resize_guard_harness::env::{EnvOptions, shared};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::command::rg_run;

/// A CONNECT-only HTTP proxy on loopback; `tunnels` holds each CONNECT's `host:port`.
struct Proxy {
    port: u16,
    tunnels: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let tunnels = Arc::new(Mutex::new(Vec::new()));
        let seen = tunnels.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let _ = tunnel(client, seen).await;
                });
            }
        });
        Proxy { port, tunnels }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn tunnels(&self) -> Vec<String> {
        self.tunnels.lock().unwrap().clone()
    }
}

/// Reads a CONNECT request's head, records its target, answers 200 and relays both ways.
async fn tunnel(mut client: TcpStream, seen: Arc<Mutex<Vec<String>>>) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        client.read_exact(&mut byte).await?;
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let Some(target) = head
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("CONNECT "))
        .and_then(|l| l.split(' ').next())
        .map(str::to_owned)
    else {
        client
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            .await?;
        return Ok(());
    };
    seen.lock().unwrap().push(target.clone());
    // The proxy's own name resolution: the test's API server name is loopback.
    let address = match target.strip_prefix(&format!("{NAME}:")) {
        Some(port) => format!("127.0.0.1:{port}"),
        None => target.clone(),
    };
    let mut upstream = TcpStream::connect(&address).await?;
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// The API server's name in the kubeconfigs here: only the proxy resolves it (to loopback), so a
/// request that reaches the API server went through the proxy. (A loopback server address would
/// not do: kubectl, and the plugin, never proxy loopback.)
const NAME: &str = "apiserver.resize-guard.test";

/// The admin kubeconfig with the server renamed to [`NAME`] and `extra` after the server line,
/// written to `dir`.
fn kubeconfig(env: &resize_guard_harness::env::Env, dir: &std::path::Path, extra: &str) -> String {
    let server = env.cp.url();
    let port = server.rsplit(':').next().unwrap();
    let text = std::fs::read_to_string(&env.kubectl().kubeconfig).unwrap();
    let renamed = text.replacen(
        &format!("server: {server}"),
        &format!("server: https://{NAME}:{port}{extra}"),
        1,
    );
    assert_ne!(renamed, text, "the kubeconfig names {server}");
    let path = dir.join(format!("kubeconfig-{}", extra.len()));
    std::fs::write(&path, renamed).unwrap();
    path.display().to_string()
}

/// `kubectl resize-guard status -A` with that kubeconfig, `HTTPS_PROXY` and `NO_PROXY` (empty:
/// unset for the plugin).
async fn status(
    env: &resize_guard_harness::env::Env,
    kubeconfig: &str,
    https_proxy: &str,
    no_proxy: &str,
) -> super::command::Run {
    let vars = [
        ("KUBECONFIG", kubeconfig),
        ("HTTPS_PROXY", https_proxy),
        ("NO_PROXY", no_proxy),
    ];
    rg_run(env, &vars, &["status", "-A"]).await
}

#[tokio::test]
async fn the_plugin_reaches_the_api_server_through_https_proxy_and_proxy_url() {
    let env = shared(EnvOptions::default());
    let _g = env.guard();
    let port = env.cp.url().rsplit(':').next().unwrap().to_owned();
    let target = format!("{NAME}:{port}");
    let dir = tempfile::tempdir().unwrap();
    let renamed = kubeconfig(env, dir.path(), "");

    // HTTPS_PROXY with a NO_PROXY that names the proxy's own host, as a laptop with a local
    // proxy has it: the API server is not excluded, so every request is tunnelled.
    let proxy = Proxy::start().await;
    let out = status(env, &renamed, &proxy.url(), "localhost,127.0.0.1").await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let tunnels = proxy.tunnels();
    assert!(
        !tunnels.is_empty() && tunnels.iter().all(|t| *t == target),
        "every request tunnelled to {target}: {tunnels:?}"
    );

    // The kubeconfig cluster's proxy-url, with no variable set.
    let proxy = Proxy::start().await;
    let with_url = kubeconfig(
        env,
        dir.path(),
        &format!("\n    proxy-url: {}", proxy.url()),
    );
    let out = status(env, &with_url, "", "").await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(!proxy.tunnels().is_empty(), "proxy-url was not used");

    // NO_PROXY naming the server's domain: the plugin goes direct (and cannot resolve the name),
    // the proxy sees nothing.
    let proxy = Proxy::start().await;
    let out = status(env, &renamed, &proxy.url(), ".resize-guard.test").await;
    let says = format!("error: cannot reach the API server https://{target}");
    assert!(
        out.code == 3 && out.stderr.starts_with(&says),
        "{}",
        out.stderr
    );
    assert_eq!(proxy.tunnels(), Vec::<String>::new());

    // A proxy that is down: the API server cannot be reached, and the plugin says so.
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let out = status(env, &renamed, &format!("http://127.0.0.1:{down}"), "").await;
    assert!(
        out.code == 3 && out.stderr.starts_with(&says),
        "{}",
        out.stderr
    );
}
