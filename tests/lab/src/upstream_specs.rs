//! Kubernetes' own in-place resize e2e specs run as a suite of ours (`make upstream-e2e`,
//! `resize-guard-upstream-e2e`): what a run's ginkgo JUnit report says of each spec
//! ([`parse_junit`]), the checked-in expectations table (`third_party/upstream-e2e/expected.tsv`,
//! [`Expectations`]) and the comparison of the two ([`compare`]). A spec whose outcome differs
//! from the table is a [`Difference`]: the run fails and prints each one.
//!
//! The table has one line per spec: its name as the report gives it (without ginkgo's `[It] `),
//! then one column per mode — without resize-guard, then with it (and metrics-server) — each
//! `pass`, `deviation: <why it fails here>` or `skip: <why it does not run here>`. A spec the
//! [`Mode::Gate`] run covers (upstream's own resize preemption, its alpha gate on) has a third
//! column for it. [`PreemptionTimes`] reads how long that spec's preemptor waited from the run's
//! log, for either side.

use std::collections::BTreeMap;
use std::fmt;

/// One spec's outcome in a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It ran and passed.
    Passed,
    /// It ran and failed (or panicked, timed out, was interrupted): ginkgo's status, its message.
    Failed(String),
    /// It did not run (filtered out, or skipped at run time): ginkgo's message.
    Skipped(String),
}

/// What the table expects of one spec in one mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Passes, as upstream expects.
    Pass,
    /// Fails here, for the reason given.
    Deviation(String),
    /// Does not run here, for the reason given.
    Skip(String),
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expected::Pass => write!(f, "pass"),
            Expected::Deviation(r) => write!(f, "deviation: {r}"),
            Expected::Skip(r) => write!(f, "skip: {r}"),
        }
    }
}

/// The modes of a run, in the table's column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The cluster as upstream tests it.
    Without,
    /// resize-guard installed from `deploy/`, and metrics-server.
    With,
    /// No resize-guard, the alpha gate `InPlacePodVerticalScalingSchedulerPreemption` on in every
    /// component: only the specs of that gate run.
    Gate,
}

impl Mode {
    /// The mode's name on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Without => "without-resize-guard",
            Mode::With => "with-resize-guard",
            Mode::Gate => "gate-on-without-resize-guard",
        }
    }
}

/// What the table expects of one spec, per mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// [`Mode::Without`].
    pub without: Expected,
    /// [`Mode::With`].
    pub with: Expected,
    /// [`Mode::Gate`], for the specs that run there.
    pub gate: Option<Expected>,
}

/// The expectations table: spec name → what each mode does.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    /// Every spec the table names, in name order.
    pub specs: BTreeMap<String, Row>,
}

impl Expectations {
    /// Parses the table (`#` comments and blank lines ignored). A bad line is an error naming it.
    pub fn parse(text: &str) -> anyhow::Result<Expectations> {
        let mut specs = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let cols: Vec<&str> = line.split('\t').collect();
            let (name, without, with, gate) = match cols[..] {
                [name, without, with] => (name, without, with, None),
                [name, without, with, gate] => (name, without, with, Some(gate)),
                _ => anyhow::bail!(
                    "line {}: expected 3 or 4 tab-separated columns (spec, without, with[, gate]), got {}",
                    i + 1,
                    cols.len()
                ),
            };
            let parse = |s: &str| {
                expected(s).ok_or_else(|| {
                    anyhow::anyhow!(
                        "line {}: {s:?}: expected pass, deviation: <reason> or skip: <reason>",
                        i + 1
                    )
                })
            };
            let entry = Row {
                without: parse(without)?,
                with: parse(with)?,
                gate: gate.map(parse).transpose()?,
            };
            anyhow::ensure!(
                specs.insert(name.to_owned(), entry).is_none(),
                "line {}: {name:?} is in the table twice",
                i + 1
            );
        }
        Ok(Expectations { specs })
    }

    /// What the table expects of `spec` in `mode` (`None`: nothing, it does not run there).
    pub fn get(&self, spec: &str, mode: Mode) -> Option<&Expected> {
        self.specs.get(spec).and_then(|row| match mode {
            Mode::Without => Some(&row.without),
            Mode::With => Some(&row.with),
            Mode::Gate => row.gate.as_ref(),
        })
    }
}

fn expected(s: &str) -> Option<Expected> {
    let reason = |r: &str| Some(r.trim().to_owned()).filter(|r| !r.is_empty());
    if s == "pass" {
        Some(Expected::Pass)
    } else if let Some(r) = s.strip_prefix("deviation:") {
        reason(r).map(Expected::Deviation)
    } else if let Some(r) = s.strip_prefix("skip:") {
        reason(r).map(Expected::Skip)
    } else {
        None
    }
}

/// Every spec of a ginkgo JUnit report (`--ginkgo.junit-report`) whose name contains `focus`:
/// name (without `[It] `) → outcome. Suite-level entries (`[BeforeSuite]`, `[ReportAfterSuite]`
/// …) are left out; only `[It]` leaves are specs.
pub fn parse_junit(xml: &str, focus: &str) -> anyhow::Result<BTreeMap<String, Outcome>> {
    let mut specs = BTreeMap::new();
    let mut rest = xml;
    while let Some(start) = rest.find("<testcase ") {
        rest = &rest[start..];
        let head_end = rest
            .find('>')
            .ok_or_else(|| anyhow::anyhow!("unterminated <testcase"))?;
        let head = &rest[..head_end];
        let (body, next) = if head.ends_with('/') {
            ("", &rest[head_end + 1..])
        } else {
            let end = rest
                .find("</testcase>")
                .ok_or_else(|| anyhow::anyhow!("<testcase> without </testcase>"))?;
            (&rest[head_end + 1..end], &rest[end..])
        };
        rest = next;
        let name = attribute(head, "name")
            .ok_or_else(|| anyhow::anyhow!("<testcase> without a name: {head}"))?;
        let Some(name) = name.strip_prefix("[It] ") else {
            continue;
        };
        if !name.contains(focus) {
            continue;
        }
        let status = attribute(head, "status").unwrap_or_default();
        let outcome = match status.as_str() {
            "passed" => Outcome::Passed,
            "skipped" | "pending" => Outcome::Skipped(message(body, "skipped")),
            "" => anyhow::bail!("{name}: <testcase> without a status"),
            other => {
                let m = message(body, "failure");
                let m = if m.is_empty() {
                    message(body, "error")
                } else {
                    m
                };
                Outcome::Failed(format!("{other}: {m}"))
            }
        };
        specs.insert(name.to_owned(), outcome);
    }
    Ok(specs)
}

/// Outcomes of the same specs from several runs (a spec runs in one, the others filter it
/// out): the one where it ran wins; skipped only if it was skipped everywhere.
pub fn merge(
    runs: impl IntoIterator<Item = BTreeMap<String, Outcome>>,
) -> BTreeMap<String, Outcome> {
    let mut merged: BTreeMap<String, Outcome> = BTreeMap::new();
    for run in runs {
        for (name, outcome) in run {
            match merged.get(&name) {
                Some(Outcome::Passed | Outcome::Failed(_)) => {}
                Some(Outcome::Skipped(_)) if matches!(outcome, Outcome::Skipped(_)) => {}
                _ => {
                    merged.insert(name, outcome);
                }
            }
        }
    }
    merged
}

/// A spec whose outcome is not what the table says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The spec.
    pub spec: String,
    /// What the table says (`None`: the table does not name it).
    pub expected: Option<Expected>,
    /// What the run says (`None`: the report does not name it).
    pub observed: Option<Outcome>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let expected = self
            .expected
            .as_ref()
            .map_or("not in the table".to_owned(), ToString::to_string);
        let observed = match &self.observed {
            None => "not in the report".to_owned(),
            Some(Outcome::Passed) => "passed".to_owned(),
            Some(Outcome::Failed(m)) => format!("FAILED: {}", first_lines(m, 6)),
            Some(Outcome::Skipped(m)) => format!("skipped: {}", first_lines(m, 2)),
        };
        write!(
            f,
            "{}\n    expected: {expected}\n    observed: {observed}",
            self.spec
        )
    }
}

/// How one mode's run compares with the table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Specs that passed as the table says.
    pub passed: usize,
    /// Specs that failed as the table says (a known deviation).
    pub deviations: usize,
    /// Specs skipped as the table says.
    pub skipped: usize,
    /// Everything else.
    pub differences: Vec<Difference>,
}

/// Compares a run's outcomes with the table's column for `mode`.
pub fn compare(observed: &BTreeMap<String, Outcome>, table: &Expectations, mode: Mode) -> Verdict {
    let mut v = Verdict::default();
    for (spec, outcome) in observed {
        let expected = table.get(spec, mode);
        if expected.is_none() && mode == Mode::Gate && matches!(outcome, Outcome::Skipped(_)) {
            // Not a spec of the gate's: its run filters it out.
            continue;
        }
        match (expected, outcome) {
            (Some(Expected::Pass), Outcome::Passed) => v.passed += 1,
            (Some(Expected::Deviation(_)), Outcome::Failed(_)) => v.deviations += 1,
            (Some(Expected::Skip(_)), Outcome::Skipped(_)) => v.skipped += 1,
            _ => v.differences.push(Difference {
                spec: spec.clone(),
                expected: expected.cloned(),
                observed: Some(outcome.clone()),
            }),
        }
    }
    for spec in table.specs.keys() {
        if !observed.contains_key(spec) && table.get(spec, mode).is_some() {
            v.differences.push(Difference {
                spec: spec.clone(),
                expected: table.get(spec, mode).cloned(),
                observed: None,
            });
        }
    }
    v
}

/// The specs whose outcome differs between two modes' runs (pass vs fail; skips count too).
pub fn between_modes(
    without: &BTreeMap<String, Outcome>,
    with: &BTreeMap<String, Outcome>,
) -> Vec<String> {
    let kind = |o: Option<&Outcome>| match o {
        Some(Outcome::Passed) => "passed",
        Some(Outcome::Failed(_)) => "failed",
        Some(Outcome::Skipped(_)) => "skipped",
        None => "absent",
    };
    let mut names: Vec<&String> = without.keys().chain(with.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| kind(without.get(*n)) != kind(with.get(*n)))
        .map(|n| {
            format!(
                "{n}: {} without, {} with",
                kind(without.get(n)),
                kind(with.get(n))
            )
        })
        .collect()
}

/// An XML attribute's unescaped value in a start tag.
fn attribute(head: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = head.find(&key)? + key.len();
    let len = head[start..].find('"')?;
    Some(unescape(&head[start..start + len]))
}

/// The `message` attribute and text of the first `<tag …>` in `body`, unescaped.
fn message(body: &str, tag: &str) -> String {
    let Some(start) = body.find(&format!("<{tag}")) else {
        return String::new();
    };
    let el = &body[start..];
    let head_end = el.find('>').unwrap_or(el.len());
    let mut m = attribute(&el[..head_end], "message").unwrap_or_default();
    if !el[..head_end].ends_with('/')
        && let Some(end) = el.find(&format!("</{tag}>"))
    {
        let text = unescape(el[(head_end + 1).min(end)..end].trim());
        if !text.is_empty() && text != m {
            if !m.is_empty() {
                m.push('\n');
            }
            m.push_str(&text);
        }
    }
    m
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';') else {
            break;
        };
        let entity = &rest[1..end];
        let ch = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match ch {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// How long the preemptor of upstream's `deferred-resize-preemption` spec waited, read from the
/// `STEP:` lines of the run's log (ginkgo's `-v` output with `GINKGO_TIME_FORMAT` set to
/// [`STEP_TIME_FORMAT`]): from the step that resizes it (it is then Deferred) and from the step
/// that lifts the node's opt-out, to the step after its resize was verified actuated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PreemptionTimes {
    /// Resize asked (then Deferred) → the preemptor's new resources in place, in seconds.
    pub deferred_to_resized: f64,
    /// The node's `disableResizePreemption` removed → the same, in seconds.
    pub allowed_to_resized: f64,
}

/// The time format the runner gives ginkgo for its `STEP:` lines (RFC 3339 with milliseconds).
pub const STEP_TIME_FORMAT: &str = "2006-01-02T15:04:05.000Z07:00";

impl PreemptionTimes {
    /// The spec's step that resizes the preemptor.
    const RESIZED: &str = "STEP: Resize high-priority preemptor pod";
    /// Its step that removes the node's opt-out.
    const ALLOWED: &str = "STEP: Remove disable policy from node";
    /// Its step after the preemptor's resize was verified.
    const DONE: &str = "STEP: Verify that mid-priority pod";

    /// The times in `log`, `None` unless all three steps are there.
    pub fn read(log: &str) -> Option<PreemptionTimes> {
        let at = |step: &str| -> Option<k8s_openapi::jiff::Timestamp> {
            let line = log.lines().find(|l| l.contains(step))?;
            line.rsplit_once("@ ")?.1.trim().parse().ok()
        };
        let (resized, allowed, done) = (at(Self::RESIZED)?, at(Self::ALLOWED)?, at(Self::DONE)?);
        let secs = |from: k8s_openapi::jiff::Timestamp| done.duration_since(from).as_secs_f64();
        Some(PreemptionTimes {
            deferred_to_resized: secs(resized),
            allowed_to_resized: secs(allowed),
        })
    }
}

fn first_lines(s: &str, n: usize) -> String {
    s.lines().take(n).collect::<Vec<_>>().join("\n      ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" disabled="0" errors="0" failures="1" time="10">
  <testsuite name="Kubernetes in-place resize e2e specs" tests="4">
    <testcase name="[SynchronizedBeforeSuite]" classname="x" status="passed" time="0"></testcase>
    <testcase name="[It] [sig-node] Pod InPlace Resize Container Guaranteed &amp; more [NodeConformance]" classname="x" status="passed" time="3.1">
      <system-out>ok</system-out>
    </testcase>
    <testcase name="[It] [sig-node] Pod InPlace Resize Container oom &quot;score&quot;" classname="x" status="failed" time="5">
      <failure message="Expected &lt;string&gt;: 0 to equal -997" type="failed">[FAILED] mismatch&#xA;at line 3</failure>
    </testcase>
    <testcase name="[It] [sig-node] Pod InPlace Resize Memory-Backed Volume x" classname="x" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[It] [sig-apps] Deployment unrelated" classname="x" status="skipped" time="0"/>
  </testsuite>
</testsuites>"#;

    #[test]
    fn junit_report_gives_each_focused_spec_its_outcome() {
        let specs = parse_junit(REPORT, "Pod InPlace Resize").unwrap();
        assert_eq!(specs.len(), 3, "{specs:?}");
        assert_eq!(
            specs["[sig-node] Pod InPlace Resize Container Guaranteed & more [NodeConformance]"],
            Outcome::Passed
        );
        let Outcome::Failed(m) = &specs["[sig-node] Pod InPlace Resize Container oom \"score\""]
        else {
            panic!("{specs:?}")
        };
        assert!(
            m.starts_with("failed: Expected <string>: 0 to equal -997"),
            "{m}"
        );
        assert!(m.contains("mismatch\nat line 3"), "{m}");
        assert!(matches!(
            specs["[sig-node] Pod InPlace Resize Memory-Backed Volume x"],
            Outcome::Skipped(_)
        ));
    }

    #[test]
    fn a_broken_report_is_an_error() {
        assert!(parse_junit("<testcase name=\"[It] Pod InPlace Resize a\"", "Pod").is_err());
        assert!(parse_junit("<testcase name=\"[It] a\" status=\"passed\">", "a").is_err());
    }

    fn table() -> Expectations {
        Expectations::parse(
            "# spec\twithout\twith\n\
             a\tpass\tpass\n\
             b\tdeviation: oom_score_adj 0\tdeviation: oom_score_adj 0\n\
             c\tpass\tdeviation: refused by the memory rule\n\
             d\tskip: alpha gate\tskip: alpha gate\n",
        )
        .unwrap()
    }

    fn run(entries: &[(&str, Outcome)]) -> BTreeMap<String, Outcome> {
        entries
            .iter()
            .map(|(n, o)| ((*n).to_owned(), o.clone()))
            .collect()
    }

    #[test]
    fn outcomes_matching_the_table_are_counted_and_the_rest_are_differences() {
        let failed = || Outcome::Failed("x".to_owned());
        let skipped = || Outcome::Skipped(String::new());
        let observed = run(&[
            ("a", Outcome::Passed),
            ("b", failed()),
            ("c", failed()),
            ("d", skipped()),
        ]);
        let without = compare(&observed, &table(), Mode::Without);
        assert_eq!(
            (without.passed, without.deviations, without.skipped),
            (1, 1, 1)
        );
        assert_eq!(without.differences.len(), 1);
        assert_eq!(without.differences[0].spec, "c");
        assert_eq!(without.differences[0].expected, Some(Expected::Pass));
        let with = compare(&observed, &table(), Mode::With);
        assert!(with.differences.is_empty(), "{:?}", with.differences);
        assert_eq!((with.passed, with.deviations, with.skipped), (1, 2, 1));

        // A deviation that now passes, a spec the table lacks, a spec the report lacks.
        let observed = run(&[
            ("a", Outcome::Passed),
            ("b", Outcome::Passed),
            ("d", skipped()),
            ("e", Outcome::Passed),
        ]);
        let v = compare(&observed, &table(), Mode::With);
        let specs: Vec<&str> = v.differences.iter().map(|d| d.spec.as_str()).collect();
        assert_eq!(specs, ["b", "e", "c"]);
        assert!(v.differences[2].to_string().contains("not in the report"));
    }

    #[test]
    fn the_gate_run_is_judged_only_on_the_specs_with_a_gate_column() {
        let t = Expectations::parse("a\tpass\tpass\np\tskip: alpha\tpass\tpass\n").unwrap();
        assert_eq!(t.get("a", Mode::Gate), None);
        assert_eq!(t.get("p", Mode::Gate), Some(&Expected::Pass));
        // `a` filtered out, `p` passed: as the table says.
        let observed = run(&[
            ("a", Outcome::Skipped("filtered".into())),
            ("p", Outcome::Passed),
        ]);
        let v = compare(&observed, &t, Mode::Gate);
        assert!(v.differences.is_empty(), "{:?}", v.differences);
        assert_eq!(v.passed, 1);
        // `p` failing, or `a` running, are differences; so is `p` missing.
        let observed = run(&[("a", Outcome::Passed), ("p", Outcome::Failed("x".into()))]);
        assert_eq!(compare(&observed, &t, Mode::Gate).differences.len(), 2);
        let v = compare(
            &run(&[("a", Outcome::Skipped(String::new()))]),
            &t,
            Mode::Gate,
        );
        assert_eq!(v.differences.len(), 1);
        assert_eq!(v.differences[0].spec, "p");
    }

    #[test]
    fn the_preemptors_wait_is_read_from_the_step_lines() {
        let log = "\
STEP: Creating a kubernetes client @ 2026-12-06T10:00:00.000Z
STEP: Resize high-priority preemptor pod 'preemptor-pod' to 50% CPU (exceeds free node capacity, should defer) @ 2026-12-06T10:00:02.500Z
STEP: Assert that victim pod 'victim-pod' is NOT preempted while policy is disabled @ 2026-12-06T10:00:03.000Z
STEP: Remove disable policy from node 'n' to enable resize preemption @ 2026-12-06T10:00:13.000Z
STEP: Verify that mid-priority pod 'midpri-pod' is preserved and successfully actuated after victim eviction @ 2026-12-06T10:00:20.250Z
";
        let t = PreemptionTimes::read(log).unwrap();
        assert!((t.deferred_to_resized - 17.75).abs() < 1e-9, "{t:?}");
        assert!((t.allowed_to_resized - 7.25).abs() < 1e-9, "{t:?}");
        // A run that stopped before the preemptor was resized has no times.
        assert_eq!(
            PreemptionTimes::read(log.rsplit_once("STEP: Verify").unwrap().0),
            None
        );
    }

    #[test]
    fn a_bad_table_line_is_an_error_naming_it() {
        let e = Expectations::parse("a\tpass\n").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = Expectations::parse("a\tpass\tmaybe\n").unwrap_err();
        assert!(e.to_string().contains("\"maybe\""), "{e}");
        let e = Expectations::parse("a\tpass\tdeviation:\n").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = Expectations::parse("a\tpass\tpass\na\tpass\tpass\n").unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
    }

    #[test]
    fn merged_runs_keep_where_a_spec_ran_and_modes_differ_by_kind() {
        let ran = run(&[("a", Outcome::Passed), ("s", Outcome::Skipped("f".into()))]);
        let serial = run(&[
            ("a", Outcome::Skipped("filtered".into())),
            ("s", Outcome::Failed("x".into())),
        ]);
        let merged = merge([ran, serial]);
        assert_eq!(merged["a"], Outcome::Passed);
        assert_eq!(merged["s"], Outcome::Failed("x".into()));
        let with = run(&[
            ("a", Outcome::Failed("y".into())),
            ("s", Outcome::Failed("z".into())),
        ]);
        assert_eq!(
            between_modes(&merged, &with),
            ["a: passed without, failed with"]
        );
    }
}
