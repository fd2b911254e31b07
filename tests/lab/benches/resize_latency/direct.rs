//! The serving path without kube-apiserver: the AdmissionReview kube-apiserver last sent the
//! no-op webhook, posted to each webhook as kube-apiserver's Go client calls one (TLS with ALPN
//! `h2`, one kept-alive HTTP/2 connection per webhook, one call at a time), interleaved call by
//! call in an order rotated each time, from a thread and runtime of its own (as the API server
//! is a process of its own). What a webhook's answer costs on the wire, minus everything the
//! API server does around the call.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rustls::pki_types::ServerName;

type Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// A webhook to call: where, and the CA that signed its serving certificate.
pub struct Target {
    pub addr: SocketAddr,
    pub ca_pem: String,
}

async fn connect(target: &Target) -> Sender {
    let config = resize_guard_harness::tls::client_config(&target.ca_pem, &[b"h2"]).unwrap();
    let tcp = tokio::net::TcpStream::connect(target.addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(
        tls.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "the webhook speaks HTTP/2, as kube-apiserver calls it"
    );
    let (sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    sender
}

async fn call(sender: &mut Sender, body: &Bytes) -> Duration {
    let t = Instant::now();
    sender.ready().await.unwrap();
    let req = http::Request::post("https://127.0.0.1/mutate?timeout=10s")
        .header("content-type", "application/json")
        .header("accept", "application/json, */*")
        .body(Full::new(body.clone()))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let elapsed = t.elapsed();
    let answer: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        answer["response"]["allowed"],
        serde_json::json!(true),
        "{answer}"
    );
    elapsed
}

/// `calls` calls to each target (after `calls / 10` to warm up), interleaved; each target's
/// samples in call order, so that sample `i` of two targets were taken side by side.
pub fn measure(targets: Vec<Target>, body: Bytes, calls: usize) -> Vec<Vec<Duration>> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut senders = Vec::new();
            for target in &targets {
                senders.push(connect(target).await);
            }
            let n = senders.len();
            let mut samples = vec![Vec::with_capacity(calls); n];
            for i in 0..calls + calls / 10 {
                for k in 0..n {
                    let t = (k + i) % n;
                    let d = call(&mut senders[t], &body).await;
                    if i >= calls / 10 {
                        samples[t].push(d);
                    }
                }
            }
            samples
        })
    })
    .join()
    .unwrap()
}

/// The median over `i` of `a[i] - b[i]`, ms: calls taken side by side, paired.
pub fn paired_median_ms(a: &[Duration], b: &[Duration]) -> f64 {
    let mut d: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x.as_secs_f64() - y.as_secs_f64()) * 1e3)
        .collect();
    d.sort_by(f64::total_cmp);
    d.get(d.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The mean, ms.
pub fn mean_ms(samples: &[Duration]) -> f64 {
    samples.iter().map(Duration::as_secs_f64).sum::<f64>() / samples.len().max(1) as f64 * 1e3
}
