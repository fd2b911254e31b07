//! The standard process metrics, read from `/proc/self` at each scrape (Linux): the names and
//! meanings of Prometheus's Go client (github.com/prometheus/client_golang
//! `prometheus/process_collector_procfsenabled.go`, `processCollect`), so the usual dashboards
//! and alerts work on resize-guard unchanged.
//!
//! | metric | type | source |
//! |---|---|---|
//! | `process_cpu_seconds_total` | counter | `/proc/self/stat` utime + stime, in USER_HZ (100/s) |
//! | `process_resident_memory_bytes` | gauge | `/proc/self/status` `VmRSS` |
//! | `process_virtual_memory_bytes` | gauge | `/proc/self/status` `VmSize` |
//! | `process_open_fds` | gauge | entries of `/proc/self/fd` |
//! | `process_max_fds` | gauge | `/proc/self/limits` `Max open files` (soft) |
//! | `process_start_time_seconds` | gauge | `/proc/stat` `btime` + `/proc/self/stat` starttime |
//!
//! A `/proc` that cannot be read or parsed never fails a scrape nor panics: the metrics that
//! could be read are served, `resize_guard_process_metrics_errors_total` counts the failed
//! reads, and the first failure is logged at WARN (later ones at DEBUG, one scrape every few
//! seconds would otherwise flood the log).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeCounterValue, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Linux reports `/proc` times in USER_HZ, fixed at 100 for user space (`man 5 proc`; the Go
/// client's procfs assumes the same, github.com/prometheus/procfs `proc_stat.go`, `userHZ`).
const USER_HZ: f64 = 100.0;

/// Why a `/proc` file gave no value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcError {
    /// The file could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file had no such field, or not a number there.
    #[error("{path} has no readable {field}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The field looked for.
        field: &'static str,
    },
}

/// What one read of `/proc` found.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessSample {
    /// User + system CPU time, in seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident set size, in bytes.
    pub resident_bytes: Option<u64>,
    /// Virtual memory size, in bytes.
    pub virtual_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit on open file descriptors (`None` too when unlimited).
    pub max_fds: Option<u64>,
    /// Process start, in seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

/// The process collector (register it in the program's unprefixed root registry).
#[derive(Debug)]
pub struct ProcessMetrics {
    /// `/proc` (a test points it elsewhere).
    proc_root: PathBuf,
    errors: AtomicU64,
    warned: AtomicBool,
}

impl Default for ProcessMetrics {
    fn default() -> Self {
        ProcessMetrics::at("/proc")
    }
}

impl ProcessMetrics {
    /// Reads the process's metrics under `proc_root` (normally `/proc`).
    pub fn at(proc_root: impl Into<PathBuf>) -> ProcessMetrics {
        ProcessMetrics {
            proc_root: proc_root.into(),
            errors: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        }
    }

    /// Failed reads so far.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Reads every metric it can; each failed read (a file, or a field of it) is counted and
    /// logged once.
    pub fn sample(&self) -> ProcessSample {
        let own = self.proc_root.join("self");
        let (stat_path, status_path, limits_path, boot_path) = (
            own.join("stat"),
            own.join("status"),
            own.join("limits"),
            self.proc_root.join("stat"),
        );
        let stat = self.ok(read(&stat_path).and_then(|text| parse_stat(&stat_path, &text)));
        let status = self.ok(read(&status_path));
        let boot =
            self.ok(read(&boot_path).and_then(|text| field_value(&boot_path, &text, "btime", 1)));
        let status_field = |key| {
            status
                .as_deref()
                .and_then(|text| self.ok(field_value(&status_path, text, key, 1024)))
                .map(|v| v as u64)
        };
        ProcessSample {
            cpu_seconds: stat.map(|s| s.cpu_ticks / USER_HZ),
            resident_bytes: status_field("VmRSS:"),
            virtual_bytes: status_field("VmSize:"),
            open_fds: self.ok(open_fds(&own.join("fd"))),
            max_fds: self
                .ok(read(&limits_path).and_then(|text| max_open_files(&limits_path, &text)))
                .flatten(),
            start_time_seconds: stat
                .zip(boot)
                .map(|(s, boot)| boot + s.start_ticks / USER_HZ),
        }
    }

    fn ok<T>(&self, value: Result<T, ProcError>) -> Option<T> {
        match value {
            Ok(v) => Some(v),
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                let error = crate::error_chain(&e);
                if self.warned.swap(true, Ordering::Relaxed) {
                    tracing::debug!(%error, "process metrics: cannot read /proc");
                } else {
                    tracing::warn!(%error, "process metrics: cannot read /proc; the process_* metrics it feeds are left out (counted in resize_guard_process_metrics_errors_total)");
                }
                None
            }
        }
    }
}

fn read(path: &Path) -> Result<String, ProcError> {
    std::fs::read_to_string(path).map_err(|source| ProcError::Read {
        path: path.to_owned(),
        source,
    })
}

/// The fields of `/proc/self/stat` used here.
#[derive(Debug, Clone, Copy)]
struct Stat {
    cpu_ticks: f64,
    start_ticks: f64,
}

/// `/proc/<pid>/stat`: fields after the `(comm)` (which may hold spaces and parentheses, so
/// the last `)` ends it); utime and stime are fields 14 and 15, starttime 22 (`man 5 proc`).
fn parse_stat(path: &Path, text: &str) -> Result<Stat, ProcError> {
    let bad = |field| ProcError::Parse {
        path: path.to_owned(),
        field,
    };
    let after = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .ok_or(bad("(comm)"))?;
    // `after` starts at field 3 (state).
    let fields: Vec<&str> = after.split_whitespace().collect();
    let number = |n: usize, name| {
        fields
            .get(n - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or(bad(name))
    };
    Ok(Stat {
        cpu_ticks: number(14, "utime")? + number(15, "stime")?,
        start_ticks: number(22, "starttime")?,
    })
}

/// The number after `key` on its line, times `scale` (`VmRSS:   1234 kB` with 1024).
fn field_value(path: &Path, text: &str, key: &'static str, scale: u64) -> Result<f64, ProcError> {
    text.lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|v| v.saturating_mul(scale) as f64)
        .ok_or(ProcError::Parse {
            path: path.to_owned(),
            field: key,
        })
}

/// The soft limit of `Max open files` (`None` when `unlimited`).
fn max_open_files(path: &Path, text: &str) -> Result<Option<u64>, ProcError> {
    let soft = text
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or(ProcError::Parse {
            path: path.to_owned(),
            field: "Max open files",
        })?;
    if soft == "unlimited" {
        return Ok(None);
    }
    soft.parse().map(Some).map_err(|_| ProcError::Parse {
        path: path.to_owned(),
        field: "Max open files",
    })
}

fn open_fds(dir: &Path) -> Result<u64, ProcError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ProcError::Read {
        path: dir.to_owned(),
        source,
    })?;
    Ok(entries.filter(Result::is_ok).count() as u64)
}

/// The gauges' names and help texts, in the order of [`ProcessSample::gauges`].
const GAUGES: [(&str, &str); 5] = [
    (
        "process_resident_memory_bytes",
        "Resident memory size in bytes",
    ),
    (
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes",
    ),
    ("process_open_fds", "Number of open file descriptors"),
    ("process_max_fds", "Maximum number of open file descriptors"),
    (
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds",
    ),
];

impl ProcessSample {
    /// The gauges' values, in the order of [`GAUGES`].
    fn gauges(&self) -> [Option<f64>; 5] {
        let float = |v: Option<u64>| v.map(|v| v as f64);
        [
            float(self.resident_bytes),
            float(self.virtual_bytes),
            float(self.open_fds),
            float(self.max_fds),
            self.start_time_seconds,
        ]
    }
}

/// Encodes one counter (the encoder adds `_total` to `name`).
fn encode_counter<N: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> Result<(), fmt::Error> {
    let c = ConstCounter::new(value);
    let m = encoder.encode_descriptor(name, help, None, c.metric_type())?;
    c.encode(m)
}

impl Collector for ProcessMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let s = self.sample();
        if let Some(v) = s.cpu_seconds {
            encode_counter(
                &mut encoder,
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                v,
            )?;
        }
        for ((name, help), value) in GAUGES.into_iter().zip(s.gauges()) {
            if let Some(v) = value {
                let g = ConstGauge::new(v);
                let m = encoder.encode_descriptor(name, help, None, g.metric_type())?;
                g.encode(m)?;
            }
        }
        encode_counter(
            &mut encoder,
            "resize_guard_process_metrics_errors",
            "Failed reads of /proc for the process_* metrics",
            self.errors(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_metric_of_this_process_on_linux() {
        let m = ProcessMetrics::default();
        let s = m.sample();
        assert_eq!(m.errors(), 0, "{s:?}");
        assert!(s.resident_bytes.unwrap() > 1 << 20, "{s:?}");
        assert!(s.virtual_bytes.unwrap() >= s.resident_bytes.unwrap());
        assert!(s.open_fds.unwrap() >= 3);
        assert!(s.max_fds.unwrap_or(u64::MAX) >= s.open_fds.unwrap());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = s.start_time_seconds.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 3600.0,
            "{start} vs {now}"
        );
        assert!(s.cpu_seconds.unwrap() >= 0.0);
    }

    #[test]
    fn an_unreadable_proc_is_counted_and_leaves_only_the_error_counter() {
        let m = ProcessMetrics::at("/nonexistent/proc");
        assert_eq!(m.sample(), ProcessSample::default());
        assert_eq!(m.errors(), 5);
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(m));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(!text.contains("process_resident"), "{text}");
        assert!(
            text.contains("resize_guard_process_metrics_errors_total 10"),
            "{text}"
        );
    }

    #[test]
    fn parses_a_stat_line_whose_command_holds_spaces_and_parentheses() {
        let dir = std::env::temp_dir().join(format!("rg-proc-{}", std::process::id()));
        let own = dir.join("self");
        std::fs::create_dir_all(own.join("fd")).unwrap();
        std::fs::write(own.join("fd/0"), "").unwrap();
        // Fields 1..22: utime=250 (14), stime=50 (15), starttime=1000 (22).
        std::fs::write(
            own.join("stat"),
            "42 (a (b) c) S 1 1 1 0 -1 4194560 0 0 0 0 250 50 0 0 20 0 1 0 1000 0 0\n",
        )
        .unwrap();
        std::fs::write(
            own.join("status"),
            "Name:\tx\nVmSize:\t  2048 kB\nVmRSS:\t 1024 kB\n",
        )
        .unwrap();
        std::fs::write(
            own.join("limits"),
            "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 4096                 files\n",
        )
        .unwrap();
        std::fs::write(dir.join("stat"), "cpu 1 2 3\nbtime 1700000000\n").unwrap();
        let m = ProcessMetrics::at(&dir);
        let s = m.sample();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(ProcessMetrics::at(&dir)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(m.errors(), 0);
        crate::exposition::assert_lines(
            &text,
            &[
                "process_cpu_seconds_total 3.0",
                "process_resident_memory_bytes 1048576.0",
                "process_virtual_memory_bytes 2097152.0",
                "process_open_fds 1.0",
                "process_max_fds 1024.0",
                "process_start_time_seconds 1700000010.0",
                "resize_guard_process_metrics_errors_total 0",
            ],
        );
        assert_eq!(
            s,
            ProcessSample {
                cpu_seconds: Some(3.0),
                resident_bytes: Some(1024 * 1024),
                virtual_bytes: Some(2048 * 1024),
                open_fds: Some(1),
                max_fds: Some(1024),
                start_time_seconds: Some(1_700_000_010.0),
            }
        );
    }
}
