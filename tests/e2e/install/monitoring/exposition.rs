//! Reading `/metrics` as Prometheus does: a loopback scrape, and the body parsed by Prometheus's
//! own scrape parser (`scrapeparse`: `model/textparse.New` with the response's Content-Type).

use std::collections::{BTreeMap, BTreeSet};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What both programs serve.
pub(super) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// What kube-apiserver serves.
pub(super) const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET path` on a loopback health port: (Content-Type, body).
pub(super) async fn scrape(port: u16, path: &str) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_owned())
        })
        .expect("a Content-Type");
    (content_type, body.to_owned())
}

/// One parsed exposition: family types and samples (name, labels text, value).
#[derive(Debug, Default)]
pub(super) struct Parsed {
    pub(super) types: BTreeMap<String, String>,
    pub(super) samples: Vec<(String, String, f64)>,
}

impl Parsed {
    pub(super) fn names(&self) -> BTreeSet<String> {
        self.samples.iter().map(|(n, _, _)| n.clone()).collect()
    }

    pub(super) fn value(&self, name: &str, label: &str) -> Option<f64> {
        self.samples
            .iter()
            .find(|(n, l, _)| n == name && l.contains(label))
            .map(|s| s.2)
    }

    /// The sum of every series of `name` whose labels contain each of `labels`, 0 without one.
    pub(super) fn sum(&self, name: &str, labels: &[&str]) -> f64 {
        self.samples
            .iter()
            .filter(|(n, l, _)| n == name && labels.iter().all(|want| l.contains(want)))
            .map(|s| s.2)
            .sum()
    }

    /// The cumulative counts of histogram buckets `name` (`…_bucket`) over every series whose
    /// labels contain each of `labels`, by `le` in increasing order (`+Inf` last).
    pub(super) fn buckets(&self, name: &str, labels: &[&str]) -> Vec<(f64, f64)> {
        let mut by_le: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        for (n, l, v) in &self.samples {
            if n != name || !labels.iter().all(|want| l.contains(want)) {
                continue;
            }
            let le = label_value(l, "le").expect("a bucket's le");
            let le: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            by_le.entry(le.to_bits()).or_insert((le, 0.0)).1 += v;
        }
        let mut buckets: Vec<(f64, f64)> = by_le.into_values().collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        buckets
    }
}

/// The value of `key` in a label set printed as Prometheus prints one (`{a="1", b="2"}`).
pub(super) fn label_value<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    let start = labels.find(&format!("{key}=\""))? + key.len() + 2;
    let len = labels[start..].find('"')?;
    Some(&labels[start..start + len])
}

/// Parses `body` as Prometheus's scrape loop would for `content_type`; panics with the parser's
/// error.
pub(super) fn parse(content_type: &str, body: &str) -> Parsed {
    use std::io::Write;
    let mut child = std::process::Command::new(super::tool("scrapeparse"))
        .arg(content_type)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "Prometheus's parser refused the body ({content_type}): {}\n{body}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut parsed = Parsed::default();
    for line in stdout.lines() {
        let mut f = line.splitn(4, ' ');
        match (f.next(), f.next(), f.next(), f.next()) {
            (Some("TYPE"), Some(name), Some(typ), None) => {
                parsed.types.insert(name.to_owned(), typ.to_owned());
            }
            (Some("SAMPLE"), Some(name), Some(value), Some(labels)) => {
                parsed
                    .samples
                    .push((name.to_owned(), labels.to_owned(), value.parse().unwrap()))
            }
            _ => panic!("unexpected scrapeparse line {line:?}"),
        }
    }
    parsed
}
