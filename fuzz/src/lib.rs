//! The time-boxed fuzz loop behind the four fuzz targets (`shared/tests/policy/fuzz_{policy,
//! quantity,selector}.rs`, `webhook/tests/review/fuzz_review.rs`), a dev-dependency of their
//! crates.
//!
//! Stable Rust has no `cargo fuzz`, so each target is a proptest strategy run for a wall-clock
//! budget instead of a case count: [`Fuzz::run`] first replays every seed file of
//! `fuzz/corpus/<target>/`, then draws inputs — fresh ones and byte-level mutations of the seeds
//! ([`Fuzz::mutated`]: bit flips, truncation, insertion of dictionary tokens, splicing, repeating
//! a chunk) — until the deadline. A failing input is shrunk by proptest, written to
//! `target/fuzz-artifacts/<target>/`, and the test fails printing it; it then belongs in the
//! corpus and in a regression unit test next to the code it broke.
//!
//! Environment: `RESIZE_GUARD_FUZZ_SECONDS` (default 10, `0` replays the corpus only) and
//! `RESIZE_GUARD_FUZZ_SEED` (a u64; printed on every run so a failure can be replayed).

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngSeed, TestCaseResult, TestError, TestRunner};

/// Seconds each target runs for when `RESIZE_GUARD_FUZZ_SECONDS` is not set: four targets stay
/// well under a minute in `cargo test`.
pub const DEFAULT_SECONDS: f64 = 10.0;

/// Largest input the mutators grow a seed to.
const MAX_LEN: usize = 64 * 1024;

/// One input: the bytes under test and what the generator that made them knows about them
/// (`E::default()` for seeds and mutated or random bytes, about which nothing is known).
#[derive(Clone)]
pub struct Case<E> {
    /// The bytes (or UTF-8 text) handed to the code under test.
    pub bytes: Vec<u8>,
    /// The generator's expectation.
    pub expect: E,
}

impl<E> Case<E> {
    /// The bytes as text, replacing invalid UTF-8 (for the `&str` parsers).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

impl<E: Default> Case<E> {
    /// A case about which nothing is known.
    pub fn raw(bytes: Vec<u8>) -> Self {
        Case {
            bytes,
            expect: E::default(),
        }
    }
}

impl<E: fmt::Debug> fmt::Debug for Case<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(&self.bytes) {
            Ok(s) => write!(f, "text {s:?}")?,
            Err(_) => write!(f, "bytes {:?}", self.bytes)?,
        }
        write!(f, ", expectation {:?}", self.expect)
    }
}

/// A seed file.
#[derive(Debug, Clone)]
pub struct Seed {
    /// File name inside `fuzz/corpus/<target>/`.
    pub name: String,
    /// Its contents.
    pub bytes: Vec<u8>,
}

/// One fuzz target: its name, corpus and budget.
pub struct Fuzz {
    target: &'static str,
    seeds: Arc<Vec<Seed>>,
    budget: Duration,
}

/// The workspace root: the parent of this crate's directory (`fuzz/`).
fn workspace_root(manifest_dir: &str) -> PathBuf {
    Path::new(manifest_dir)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

impl Fuzz {
    /// Loads `fuzz/corpus/<target>/`. An empty or missing corpus fails: a deleted corpus must
    /// not pass silently.
    pub fn new(target: &'static str) -> Fuzz {
        let dir = workspace_root(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus")
            .join(target);
        let mut seeds: Vec<Seed> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("fuzz {target}: cannot read corpus {}: {e}", dir.display()))
            .filter_map(Result::ok)
            .filter(|e| e.path().is_file())
            .map(|e| Seed {
                name: e.file_name().to_string_lossy().into_owned(),
                bytes: std::fs::read(e.path()).unwrap_or_default(),
            })
            .collect();
        seeds.sort_by(|a, b| a.name.cmp(&b.name));
        assert!(
            !seeds.is_empty(),
            "fuzz {target}: corpus {} is empty",
            dir.display()
        );
        let seconds = std::env::var("RESIZE_GUARD_FUZZ_SECONDS")
            .ok()
            .map(|s| {
                s.trim().parse::<f64>().unwrap_or_else(|_| {
                    panic!("RESIZE_GUARD_FUZZ_SECONDS={s:?} is not a number of seconds")
                })
            })
            .unwrap_or(DEFAULT_SECONDS)
            .max(0.0);
        Fuzz {
            target,
            seeds: Arc::new(seeds),
            budget: Duration::from_secs_f64(seconds),
        }
    }

    /// The seed files, sorted by name.
    pub fn seeds(&self) -> &[Seed] {
        &self.seeds
    }

    /// Seeds mutated at the byte level: 1–8 of bit flips, byte overwrites, truncation,
    /// deletion, insertion of random bytes or of a dictionary token, splicing in the tail of
    /// another seed, and repeating a chunk up to 200 times (deep nesting from a `[` or `{`).
    pub fn mutated(&self, dictionary: &'static [&'static str]) -> BoxedStrategy<Vec<u8>> {
        let seeds = self.seeds.clone();
        let mutation = prop_oneof![
            1 => (any::<Index>(), 0..8u8).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
            1 => (any::<Index>(), any::<u8>()).prop_map(|(at, b)| Mutation::Set(at, b)),
            1 => any::<Index>().prop_map(Mutation::Truncate),
            1 => (any::<Index>(), 1..32usize).prop_map(|(at, n)| Mutation::Delete(at, n)),
            1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
                .prop_map(|(at, b)| Mutation::Insert(at, b)),
            3 => (any::<Index>(), any::<Index>()).prop_map(|(at, t)| Mutation::Token(at, t)),
            1 => (any::<Index>(), any::<Index>(), any::<Index>())
                .prop_map(|(at, seed, from)| Mutation::Splice(at, seed, from)),
            1 => (any::<Index>(), 1..8usize, 2..200usize)
                .prop_map(|(at, len, times)| Mutation::Repeat(at, len, times)),
        ];
        (any::<Index>(), prop::collection::vec(mutation, 1..8))
            .prop_map(move |(seed, mutations)| {
                let mut bytes = seed.get(&seeds).bytes.clone();
                for m in &mutations {
                    m.apply(&mut bytes, &seeds, dictionary);
                }
                bytes
            })
            .boxed()
    }

    /// Replays the corpus through `check`, then runs `strategy` through it until the budget
    /// is spent; prints `fuzz <target>: N executions in S s, 0 failures` and panics on the first
    /// failure (a panic in `check` or an `Err`), after shrinking it.
    pub fn run<E, S>(&self, strategy: S, check: impl Fn(Case<E>) -> TestCaseResult)
    where
        E: fmt::Debug + Clone + Default,
        S: Strategy<Value = Case<E>>,
    {
        let target = self.target;
        let started = Instant::now();
        let mut failures = Vec::new();
        for seed in self.seeds.iter() {
            let case = Case::raw(seed.bytes.clone());
            match catch_unwind(AssertUnwindSafe(|| check(case))) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(format!("{}: {e}", seed.name)),
                Err(_) => failures.push(format!("{}: panicked (see above)", seed.name)),
            }
        }
        assert!(
            failures.is_empty(),
            "fuzz {target}: corpus replay failed:\n{}",
            failures.join("\n")
        );

        let seed = std::env::var("RESIZE_GUARD_FUZZ_SEED")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0)
            });
        let mut runner = TestRunner::new(Config {
            failure_persistence: None,
            rng_seed: RngSeed::Fixed(seed),
            max_shrink_iters: 20_000,
            max_shrink_time: 120_000,
            ..Config::default()
        });
        let deadline = started + self.budget;
        let mut executions = 0_u64;
        let mut slowest: (Duration, Case<E>) = (Duration::ZERO, Case::raw(Vec::new()));
        while Instant::now() < deadline {
            let tree = strategy
                .new_tree(&mut runner)
                .unwrap_or_else(|e| panic!("fuzz {target}: cannot generate an input: {e}"));
            let input = tree.current();
            let t = Instant::now();
            let result = runner.run_one(tree, &check);
            if t.elapsed() > slowest.0 {
                slowest = (t.elapsed(), input);
            }
            match result {
                Ok(_) => executions += 1,
                Err(TestError::Fail(reason, case)) => {
                    let artifact = self.save_artifact(&case.bytes);
                    panic!(
                        "fuzz {target}: failure after {executions} executions \
                         (RESIZE_GUARD_FUZZ_SEED={seed}): {reason}\n\
                         minimal input ({}): {case:?}",
                        artifact
                    );
                }
                Err(TestError::Abort(reason)) => panic!("fuzz {target}: aborted: {reason}"),
            }
        }
        println!(
            "fuzz {target}: {executions} executions in {:.1} s, 0 failures \
             ({} corpus files replayed, RESIZE_GUARD_FUZZ_SEED={seed})",
            started.elapsed().as_secs_f64(),
            self.seeds.len(),
        );
        let shown: String = format!("{:?}", slowest.1).chars().take(160).collect();
        println!(
            "fuzz {target}: slowest input {} ms ({} bytes): {shown}",
            slowest.0.as_millis(),
            slowest.1.bytes.len()
        );
    }

    /// Writes a failing input under `target/fuzz-artifacts/<target>/`; returns where (or why not).
    fn save_artifact(&self, bytes: &[u8]) -> String {
        let dir = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root(env!("CARGO_MANIFEST_DIR")).join("target"))
            .join("fuzz-artifacts")
            .join(self.target);
        // FNV-1a: a stable name for the same input.
        let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
        let path = dir.join(format!("crash-{hash:016x}"));
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, bytes)) {
            Ok(()) => format!("saved to {}", path.display()),
            Err(e) => format!("not saved: {e}"),
        }
    }
}

/// One byte-level edit of a seed. Positions are [`Index`]es, scaled to the input's length.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(Index, u8),
    Set(Index, u8),
    Truncate(Index),
    Delete(Index, usize),
    Insert(Index, Vec<u8>),
    Token(Index, Index),
    Splice(Index, Index, Index),
    Repeat(Index, usize, usize),
}

impl Mutation {
    fn apply(&self, bytes: &mut Vec<u8>, seeds: &[Seed], dictionary: &[&str]) {
        // A position in 0..=len (insertion point) and in 0..len (an existing byte).
        let gap = |at: &Index, len: usize| at.index(len + 1);
        match self {
            Mutation::Flip(at, bit) if !bytes.is_empty() => {
                let i = at.index(bytes.len());
                bytes[i] ^= 1 << bit;
            }
            Mutation::Set(at, b) if !bytes.is_empty() => {
                let i = at.index(bytes.len());
                bytes[i] = *b;
            }
            Mutation::Truncate(at) => bytes.truncate(gap(at, bytes.len())),
            Mutation::Delete(at, n) => {
                let i = gap(at, bytes.len());
                let end = (i + n).min(bytes.len());
                bytes.drain(i..end);
            }
            Mutation::Insert(at, b) => {
                let i = gap(at, bytes.len());
                bytes.splice(i..i, b.iter().copied());
            }
            Mutation::Token(at, t) if !dictionary.is_empty() => {
                let i = gap(at, bytes.len());
                let token = t.get(dictionary).as_bytes();
                bytes.splice(i..i, token.iter().copied());
            }
            Mutation::Splice(at, seed, from) => {
                let other = &seed.get(seeds).bytes;
                let i = gap(at, bytes.len());
                let j = gap(from, other.len());
                bytes.truncate(i);
                bytes.extend_from_slice(&other[j..]);
            }
            Mutation::Repeat(at, len, times) if !bytes.is_empty() => {
                let i = at.index(bytes.len());
                let chunk = bytes[i..(i + len).min(bytes.len())].to_vec();
                let extra = chunk.len() * (times - 1);
                if bytes.len() + extra <= MAX_LEN {
                    let repeated = chunk.repeat(times - 1);
                    bytes.splice(i..i, repeated);
                }
            }
            _ => {}
        }
        bytes.truncate(MAX_LEN);
    }
}

/// Text made of dictionary tokens and arbitrary characters (more likely to get past a lexer
/// than random bytes).
pub fn tokens(dictionary: &'static [&'static str], max: usize) -> BoxedStrategy<Vec<u8>> {
    let piece = prop_oneof![
        3 => prop::sample::select(dictionary).prop_map(str::to_owned),
        1 => any::<char>().prop_map(String::from),
        1 => "[ -~]{1,4}",
    ];
    prop::collection::vec(piece, 0..max)
        .prop_map(|pieces| pieces.concat().into_bytes())
        .boxed()
}

/// Arbitrary bytes, up to `max` of them.
pub fn bytes(max: usize) -> BoxedStrategy<Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max).boxed()
}
