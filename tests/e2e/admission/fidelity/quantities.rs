//! Quantities as users write them: the values the generator picks (levels, sub-millicore and
//! odd-byte values, past-the-node and near-allocatable values), each with the spellings
//! kube-apiserver accepts for it ("1" and "1000m", "1Gi" and "1073741824", "0.5" and "500m"),
//! and their exact values (nanocores, bytes) so generated pods can be kept valid.
//!
//! The nodes are sized here too: the past-the-node and near-allocatable values are relative
//! to them.

use super::rng::Rng;

/// Allocatable cpu of the generated cases' nodes.
pub const NODE_CPU: &str = "128";
/// Allocatable memory of the generated cases' nodes.
pub const NODE_MEMORY: &str = "512Gi";

const M: u128 = 1_000_000; // nanocores per millicore
const CORE: u128 = 1_000 * M;
const MI: u128 = 1 << 20;
const GI: u128 = 1 << 30;
const NODE_CPU_VALUE: u128 = 128 * CORE;
const NODE_MEMORY_VALUE: u128 = 512 * GI;

/// cpu or memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum R {
    /// cpu, values in nanocores.
    Cpu,
    /// memory, values in bytes.
    Memory,
}

impl R {
    /// Both, cpu first.
    pub const BOTH: [R; 2] = [R::Cpu, R::Memory];

    /// The resource name.
    pub fn key(self) -> &'static str {
        match self {
            R::Cpu => "cpu",
            R::Memory => "memory",
        }
    }

    /// Everyday values.
    pub fn levels(self) -> &'static [(u128, &'static [&'static str])] {
        match self {
            R::Cpu => &[
                (100 * M, &["100m", "0.1"]),
                (250 * M, &["250m"]),
                (500 * M, &["500m", "0.5"]),
                (CORE, &["1", "1000m"]),
                (1500 * M, &["1500m", "1.5"]),
                (2 * CORE, &["2", "2000m"]),
            ],
            R::Memory => &[
                (64 * MI, &["64Mi", "67108864"]),
                (128_000_000, &["128M", "128000k"]),
                (128 * MI, &["128Mi", "134217728"]),
                (256 * MI, &["256Mi", "0.25Gi"]),
                (512 * MI, &["512Mi", "0.5Gi"]),
                (1_000_000_000, &["1G", "1e9"]),
                (GI, &["1Gi", "1073741824", "1024Mi"]),
                (2 * GI, &["2Gi"]),
            ],
        }
    }

    /// Values where rounding matters (sub-millicore cpu, odd byte counts).
    pub fn tiny(self) -> &'static [(u128, &'static [&'static str])] {
        match self {
            R::Cpu => &[
                (M, &["1m"]),
                (1_500_000, &["1500u"]),
                (2 * M, &["2m", "0.002"]),
            ],
            R::Memory => &[(1024, &["1Ki", "1024"]), (1_000_000, &["1M"]), (1, &["1"])],
        }
    }

    /// Past any node of this suite.
    pub fn huge(self) -> &'static [(u128, &'static [&'static str])] {
        match self {
            R::Cpu => &[(200 * CORE, &["200", "200000m"])],
            R::Memory => &[(1024 * GI, &["1Ti", "1024Gi"])],
        }
    }

    /// Within the node's allocatable but more than is usually free.
    pub fn big(self) -> &'static [(u128, &'static [&'static str])] {
        match self {
            R::Cpu => &[(100 * CORE, &["100"])],
            R::Memory => &[(400 * GI, &["400Gi"])],
        }
    }

    /// The generated nodes' allocatable.
    pub fn allocatable(self) -> u128 {
        match self {
            R::Cpu => NODE_CPU_VALUE,
            R::Memory => NODE_MEMORY_VALUE,
        }
    }

    /// A small increment.
    pub fn step(self) -> u128 {
        match self {
            R::Cpu => 100 * M,
            R::Memory => 64 * MI,
        }
    }

    /// Spells an exact value: canonical, or in the smallest unit (`raw`).
    pub fn spell(self, value: u128, raw: bool) -> String {
        match self {
            R::Cpu if !value.is_multiple_of(M) => format!("{value}n"),
            R::Cpu if raw || !value.is_multiple_of(CORE) => format!("{}m", value / M),
            R::Cpu => format!("{}", value / CORE),
            R::Memory if raw => format!("{value}"),
            R::Memory if value.is_multiple_of(GI) => format!("{}Gi", value / GI),
            R::Memory if value.is_multiple_of(MI) => format!("{}Mi", value / MI),
            R::Memory => format!("{value}"),
        }
    }
}

/// A quantity as written, with its exact value (nanocores or bytes).
#[derive(Debug, Clone)]
pub struct Q {
    /// Nanocores or bytes.
    pub value: u128,
    /// As written.
    pub text: String,
}

/// A random value of a table, in one of its spellings.
pub fn from_table(rng: &mut Rng, table: &[(u128, &[&str])]) -> Q {
    let (value, spellings) = rng.pick(table);
    Q {
        value: *value,
        text: (*rng.pick(spellings)).to_owned(),
    }
}

/// Another spelling of the same value.
pub fn respell(rng: &mut Rng, r: R, q: &Q) -> Q {
    let known = r
        .levels()
        .iter()
        .chain(r.tiny())
        .chain(r.huge())
        .find(|(v, _)| *v == q.value);
    let text = match known {
        Some((_, spellings)) if rng.chance(70) => (*rng.pick(spellings)).to_owned(),
        _ => r.spell(q.value, rng.chance(50)),
    };
    Q {
        value: q.value,
        text,
    }
}
