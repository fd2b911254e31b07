//! `check --wait[=TIMEOUT]`: runs every check until none fails, as `kubectl wait` waits for a
//! condition — after `kubectl apply -k deploy/` the webhook configuration exists at once, while
//! its endpoints, its `caBundle`, the controller's Lease and the first decision through the
//! webhook come later. Each time the failing checks change it says which on stderr (stdout
//! keeps the one report, so `-o json` stays one document). A check run that errors (the API
//! server briefly unreachable) is tried again; when the time is up the last outcome stands: the
//! report with its failed checks (exit 4), or the error.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::{Report, Wait};
use crate::table::Mark;

/// How long between two runs of the checks.
pub const INTERVAL: Duration = Duration::from_secs(2);

/// Runs `attempt` every `interval` until its report has no failed check, for at most `timeout`.
pub async fn wait<F, Fut>(
    timeout: Duration,
    interval: Duration,
    mut attempt: F,
) -> anyhow::Result<Report>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Report>>,
{
    let start = Instant::now();
    let deadline = start + timeout;
    let mut attempts = 0u32;
    let mut last: Option<anyhow::Result<Report>> = None;
    let mut said = String::new();
    loop {
        attempts += 1;
        let outcome = tokio::time::timeout_at(deadline, attempt()).await;
        let finished = Instant::now() >= deadline;
        let wait = |timed_out: bool| Wait {
            timeout_seconds: timeout.as_secs(),
            waited_seconds: start.elapsed().as_secs(),
            attempts,
            timed_out,
        };
        match outcome {
            Ok(Ok(mut report)) if report.failed == 0 => {
                report.wait = Some(wait(false));
                return Ok(report);
            }
            Ok(Ok(report)) => {
                progress(&mut said, failing(&report));
                last = Some(Ok(report));
            }
            Ok(Err(e)) => {
                progress(&mut said, format!("{e:#}"));
                last = Some(Err(e));
            }
            // The time ran out during this run: the previous outcome stands.
            Err(_) => {}
        }
        if finished || Instant::now() >= deadline {
            return match last {
                Some(Ok(mut report)) => {
                    report.wait = Some(wait(true));
                    Ok(report)
                }
                Some(Err(e)) => Err(e.context(format!(
                    "check --wait: still failing after {attempts} attempt(s) in {}s",
                    timeout.as_secs()
                ))),
                None => anyhow::bail!(
                    "check --wait: no run of the checks finished within {}s",
                    timeout.as_secs()
                ),
            };
        }
        tokio::time::sleep_until((Instant::now() + interval).min(deadline)).await;
    }
}

/// The failed checks in one line: how many, and the first few.
fn failing(report: &Report) -> String {
    const SHOWN: usize = 3;
    let texts: Vec<&str> = report
        .checks
        .iter()
        .filter(|l| l.mark == Mark::Fail)
        .map(|l| l.text.as_str())
        .collect();
    let mut out = format!(
        "{} failing: {}",
        texts.len(),
        texts[..texts.len().min(SHOWN)].join("; ")
    );
    if texts.len() > SHOWN {
        out.push_str(&format!("; and {} more", texts.len() - SHOWN));
    }
    out
}

/// Says what is being waited for on stderr, once per change.
fn progress(said: &mut String, now: String) {
    if *said != now {
        eprintln!("waiting: {now}");
        *said = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Line, Mode};
    use std::cell::Cell;

    fn report(failing: usize) -> Report {
        let checks = (0..failing)
            .map(|i| super::super::fail("s", format!("broken {i}"), "fix it"))
            .chain([Line {
                section: "s",
                mark: Mark::Ok,
                text: "fine".into(),
                fix: None,
            }])
            .collect();
        Report::new(Mode::Installed, checks, Vec::new(), None)
    }

    #[tokio::test]
    async fn it_returns_the_first_report_with_no_failed_check() {
        let runs = Cell::new(0);
        let r = wait(Duration::from_secs(10), Duration::from_millis(10), || {
            runs.set(runs.get() + 1);
            let n = runs.get();
            async move {
                match n {
                    1 => Ok(report(2)),
                    2 => anyhow::bail!("connection refused"),
                    _ => Ok(report(0)),
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(r.failed, 0);
        let w = r.wait.unwrap();
        assert_eq!((w.attempts, w.timed_out, w.timeout_seconds), (3, false, 10));
    }

    #[test]
    fn progress_names_the_first_failed_checks() {
        assert_eq!(failing(&report(2)), "2 failing: broken 0; broken 1");
        assert_eq!(
            failing(&report(5)),
            "5 failing: broken 0; broken 1; broken 2; and 2 more"
        );
    }

    #[tokio::test]
    async fn when_time_is_up_the_last_report_stands_with_its_failures() {
        let r = wait(
            Duration::from_millis(300),
            Duration::from_millis(20),
            || async { Ok(report(1)) },
        )
        .await
        .unwrap();
        assert_eq!(r.failed, 1);
        let w = r.wait.unwrap();
        assert!(w.timed_out);
        assert!(w.attempts >= 2, "{w:?}");
    }

    #[tokio::test]
    async fn an_error_to_the_end_is_the_error() {
        let e = wait(
            Duration::from_millis(100),
            Duration::from_millis(20),
            || async { anyhow::bail!("connection refused") },
        )
        .await
        .unwrap_err();
        assert!(format!("{e:#}").contains("connection refused"), "{e:#}");
        // A run that never finishes is cut off at the deadline.
        let start = std::time::Instant::now();
        let e = wait(
            Duration::from_millis(100),
            Duration::from_millis(20),
            || async { std::future::pending::<anyhow::Result<Report>>().await },
        )
        .await
        .unwrap_err();
        assert!(
            e.to_string().contains("no run of the checks finished"),
            "{e}"
        );
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
