//! The floor of a program's start-up on a real API server: how long kube-apiserver takes to send
//! every pod as a streaming list (what both programs ask for first) to a client that reads the
//! bytes and decodes nothing. Timed alone, and two at once — the webhook and the controller
//! start together on an install, and share the API server's CPU.

use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, StreamExt};

/// One client's streaming list of all pods: the time until the initial-events-end bookmark,
/// and the bytes read.
#[derive(Debug, Clone, Copy, Default)]
pub struct BareList {
    /// From the request to the end-of-initial-events bookmark.
    pub elapsed: Duration,
    /// Bytes of watch events read.
    pub bytes: u64,
}

/// Lists every pod as kube's watcher does with streaming lists (`sendInitialEvents=true`,
/// `resourceVersion=0`, `resourceVersionMatch=NotOlderThan`), reading lines until the bookmark
/// that ends the initial events.
pub async fn streaming_list(client: &kube::Client) -> anyhow::Result<BareList> {
    let request = http::Request::get(
        "/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true\
         &resourceVersion=0&resourceVersionMatch=NotOlderThan&timeoutSeconds=600",
    )
    .body(Vec::new())?;
    let started = Instant::now();
    let body = client.request_stream(request).await?;
    let mut lines = body.lines();
    let mut bytes = 0u64;
    while let Some(line) = lines.next().await {
        let line = line?;
        bytes += line.len() as u64 + 1;
        if line.starts_with(r#"{"type":"BOOKMARK""#) && line.contains("k8s.io/initial-events-end") {
            return Ok(BareList {
                elapsed: started.elapsed(),
                bytes,
            });
        }
    }
    anyhow::bail!("the watch ended before its initial events did ({bytes} bytes read)")
}

/// Lists every pod in pages of `limit` as kube's watcher does without streaming lists (no
/// `resourceVersion`: a consistent list), reading each page's bytes and only its `continue`
/// token (the list's metadata comes before its items).
pub async fn paged_list(client: &kube::Client, limit: usize) -> anyhow::Result<BareList> {
    let started = Instant::now();
    let mut bytes = 0u64;
    let mut token = String::new();
    loop {
        let mut uri = format!("/api/v1/pods?limit={limit}");
        if !token.is_empty() {
            uri.push_str("&continue=");
            uri.push_str(&token);
        }
        let page = client
            .request_text(http::Request::get(uri).body(Vec::new())?)
            .await?;
        bytes += page.len() as u64;
        let head = &page[..page.find(r#""items""#).unwrap_or(page.len())];
        token = match head.split_once(r#""continue":""#) {
            Some((_, rest)) => rest.split('"').next().unwrap_or_default().to_owned(),
            None => String::new(),
        };
        if token.is_empty() {
            return Ok(BareList {
                elapsed: started.elapsed(),
                bytes,
            });
        }
    }
}

/// [`streaming_list`] alone, then two at once: `(alone, the slower of the two)`.
pub async fn alone_and_paired(client: &kube::Client) -> anyhow::Result<(BareList, BareList)> {
    let alone = streaming_list(client).await?;
    let (a, b) = futures::join!(streaming_list(client), streaming_list(client));
    let (a, b) = (a?, b?);
    Ok((alone, if a.elapsed >= b.elapsed { a } else { b }))
}
