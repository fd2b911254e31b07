//! Kubernetes resource quantities, parsed exactly as `k8s.io/apimachinery/pkg/api/resource`.
//!
//! A [`Quantity`](k8s_openapi::apimachinery::pkg::api::resource::Quantity) is a string such as
//! `250m`, `1.5`, `512Mi` or `1e3`. Upstream keeps at most nano precision and rounds anything
//! finer *up*; `MilliValue()` and `Value()` then round up again to milli-units and units. The
//! kubelet and the scheduler compare CPU in millicores (`MilliValue`) and memory in bytes
//! (`Value`), so this module converts to exactly those integers. Values that do not fit in `i64`
//! saturate, which makes them "more than any node" rather than wrapping around.

use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// One billion: nano-units per unit.
const NANOS_PER_UNIT: i128 = 1_000_000_000;
/// Nano-units per milli-unit.
const NANOS_PER_MILLI: i128 = 1_000_000;

/// A quantity string that is not valid Kubernetes quantity syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {input:?}: {problem}")]
pub struct QuantityError {
    /// The string as given.
    pub input: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// Parses a quantity string into nano-units, rounding up as upstream `ParseQuantity` does.
pub fn parse_nanos(input: &str) -> Result<i128, QuantityError> {
    let err = |problem| QuantityError {
        input: input.to_owned(),
        problem,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty string"));
    }
    let (negative, rest) = match s.as_bytes()[0] {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(err("no digits"));
    }
    let (binary_shift, mut exp10) = parse_suffix(suffix).ok_or_else(|| err("unknown suffix"))?;
    // Accumulate the digits without allocating; beyond 36 significant digits an i128 could
    // overflow, and no real quantity has that many.
    let mut mantissa: i128 = 0;
    let mut significant = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        if b == b'.' {
            return Err(err("more than one decimal point"));
        }
        if significant > 0 || b != b'0' {
            significant += 1;
        }
        if significant > 36 {
            return Ok(saturate(negative));
        }
        mantissa = mantissa * 10 + i128::from(b - b'0');
    }
    exp10 += 9 - i32::try_from(frac_part.len()).map_err(|_| err("too many digits"))?;
    let mut value = mantissa;
    for _ in 0..binary_shift {
        value = match value.checked_mul(1024) {
            Some(v) => v,
            None => return Ok(saturate(negative)),
        };
    }
    if exp10 >= 0 {
        for _ in 0..exp10 {
            value = match value.checked_mul(10) {
                Some(v) => v,
                None => return Ok(saturate(negative)),
            };
        }
    } else {
        // Upstream keeps nano precision and rounds the rest up (away from zero for the
        // magnitude; the sign is applied afterwards like `inf.Dec` rounding in `ParseQuantity`).
        let divisor = 10_i128
            .checked_pow(exp10.unsigned_abs())
            .unwrap_or(i128::MAX);
        value = div_ceil(value, divisor);
    }
    Ok(if negative { -value } else { value })
}

fn saturate(negative: bool) -> i128 {
    if negative { i128::MIN } else { i128::MAX }
}

/// The decimal SI suffixes, each a thousand times the one before: `n` is 10^-9, `E` 10^18.
const DECIMAL_SUFFIXES: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
/// The binary suffixes, each 1024 times the one before: `Ki` is 2^10, `Ei` 2^60.
const BINARY_SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// Splits a suffix into (number of 1024 multiplications, power of ten).
fn parse_suffix(suffix: &str) -> Option<(u32, i32)> {
    if let Some((exp10, _)) = (-9..=18)
        .step_by(3)
        .zip(DECIMAL_SUFFIXES)
        .find(|(_, s)| *s == suffix)
    {
        return Some((0, exp10));
    }
    if let Some((shifts, _)) = (1..).zip(BINARY_SUFFIXES).find(|(_, s)| *s == suffix) {
        return Some((shifts, 0));
    }
    let exp = suffix.strip_prefix(['e', 'E'])?;
    let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Absurd exponents saturate instead of looping for ever.
    let e: i32 = exp.parse().ok()?;
    Some((0, e.clamp(-64, 64)))
}

fn div_ceil(value: i128, divisor: i128) -> i128 {
    let q = value / divisor;
    if value % divisor > 0 { q + 1 } else { q }
}

fn to_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

/// Upstream `Quantity.MilliValue()` of an exact amount in nano-units: thousandths, rounded up.
pub fn milli_of_nanos(nanos: i128) -> i64 {
    to_i64(div_ceil(nanos, NANOS_PER_MILLI))
}

/// Upstream `Quantity.Value()` of an exact amount in nano-units: units, rounded up.
pub fn units_of_nanos(nanos: i128) -> i64 {
    to_i64(div_ceil(nanos, NANOS_PER_UNIT))
}

/// Upstream `Quantity.MilliValue()`: the value in thousandths, rounded up.
pub fn milli_value(q: &Quantity) -> Result<i64, QuantityError> {
    parse_nanos(&q.0).map(|n| to_i64(div_ceil(n, NANOS_PER_MILLI)))
}

/// Upstream `Quantity.Value()`: the value in units, rounded up.
pub fn value(q: &Quantity) -> Result<i64, QuantityError> {
    parse_nanos(&q.0).map(|n| to_i64(div_ceil(n, NANOS_PER_UNIT)))
}

/// How a quantity string is written, which decides how upstream prints values derived from it
/// (`resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `Ki`, `Mi`, … suffixes.
    BinarySi,
    /// `m`, `k`, `M`, … suffixes or none.
    DecimalSi,
    /// `e3`-style exponents.
    DecimalExponent,
}

impl Format {
    /// The format of a quantity string, as `ParseQuantity` decides it.
    pub fn of(input: &str) -> Format {
        let s = input.trim_start_matches(['+', '-']);
        let suffix = s.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        if suffix.ends_with('i') {
            Format::BinarySi
        } else if suffix.starts_with(['e', 'E']) {
            Format::DecimalExponent
        } else {
            Format::DecimalSi
        }
    }
}

/// `Quantity.String()` of an exact amount in `format`: the canonical spelling upstream prints
/// in its messages (`CanonicalizeBytes`): binary suffixes only for whole values of at least 1024
/// that a power of 1024 divides; otherwise the smallest power-of-1000 suffix that keeps the
/// mantissa whole.
pub fn canonical(nanos: i128, format: Format) -> String {
    if format == Format::BinarySi
        && nanos % NANOS_PER_UNIT == 0
        && nanos.abs() >= 1024 * NANOS_PER_UNIT
    {
        let mut units = nanos / NANOS_PER_UNIT;
        let mut k = 0;
        while k < 6 && units % 1024 == 0 {
            units /= 1024;
            k += 1;
        }
        return format!("{units}{}", ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][k]);
    }
    if nanos == 0 {
        return "0".to_owned();
    }
    // nanos = m × 10^-9; move whole thousands into the exponent.
    let (mut m, mut e) = (nanos, -9i32);
    while m % 1000 == 0 && e < 18 {
        m /= 1000;
        e += 3;
    }
    if format == Format::DecimalExponent {
        return if e == 0 {
            m.to_string()
        } else {
            format!("{m}e{e}")
        };
    }
    let suffix = match e {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        _ => "E",
    };
    format!("{m}{suffix}")
}

/// Formats millicores the way `kubectl` shows CPU: `250m`, `2` for whole cores.
pub fn format_millicores(milli: i64) -> String {
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else {
        format!("{milli}m")
    }
}

/// Formats bytes with the largest binary suffix that divides them exactly: `512Mi`, `1536Ki`.
pub fn format_bytes(bytes: i64) -> String {
    const UNITS: [(&str, i64); 5] = [
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
        ("", 1),
    ];
    for (suffix, size) in UNITS {
        if bytes != 0 && bytes % size == 0 {
            return format!("{}{suffix}", bytes / size);
        }
    }
    bytes.to_string()
}

/// A compute resource resize-guard reasons about. Only CPU and memory can be resized in place
/// and only they decide QoS and feasibility (upstream `isSupportedQoSComputeResource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceName {
    /// `cpu`, counted in millicores.
    Cpu,
    /// `memory`, counted in bytes.
    Memory,
}

impl ResourceName {
    /// Both resources, in the order the kubelet's fit check reports them (cpu, then memory).
    pub const ALL: [ResourceName; 2] = [ResourceName::Cpu, ResourceName::Memory];

    /// The Kubernetes resource key.
    pub fn key(self) -> &'static str {
        match self {
            ResourceName::Cpu => "cpu",
            ResourceName::Memory => "memory",
        }
    }

    /// Converts a quantity to this resource's integer unit (millicores or bytes).
    pub fn amount(self, q: &Quantity) -> Result<i64, QuantityError> {
        match self {
            ResourceName::Cpu => milli_value(q),
            ResourceName::Memory => value(q),
        }
    }

    /// Formats an amount of this resource for people (`550m`, `512Mi`).
    pub fn format(self, amount: i64) -> String {
        match self {
            ResourceName::Cpu => format_millicores(amount),
            ResourceName::Memory => format_bytes(amount),
        }
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity(s.to_owned())
    }

    #[test]
    fn milli_value_parses_like_upstream_and_rounds_up() {
        for (text, want) in [
            ("250m", 250),
            ("1", 1000),
            ("1.5", 1500),
            ("0.1", 100),
            (".5", 500),
            ("2.", 2000),
            ("5e-1", 500),
            ("-250m", -250),
            ("+250m", 250),
            // 100001n is 0.100001m: MilliValue rounds up to 1.
            ("100001n", 1),
            ("1u", 1),
            ("0.0001", 1),
            ("0", 0),
            // Huge values saturate instead of wrapping.
            ("99999999999999999999999999999999999999999", i64::MAX),
        ] {
            assert_eq!(milli_value(&q(text)).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn value_parses_suffixes_and_exponents_and_rounds_fractional_bytes_up() {
        for (text, want) in [
            ("512Mi", 512 * 1024 * 1024),
            ("1Gi", 1 << 30),
            ("1G", 1_000_000_000),
            ("128k", 128_000),
            ("1.5Gi", 3 << 29),
            ("1Ki", 1024),
            ("1e3", 1000),
            ("1E6", 1_000_000),
            ("12e+2", 1200),
            ("0.5", 1),
            ("1500m", 2),
            // Huge values saturate instead of wrapping.
            ("1e60", i64::MAX),
            ("8Ei", i64::MAX),
        ] {
            assert_eq!(value(&q(text)).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn rejects_malformed_quantities_with_the_input_in_the_error() {
        for bad in ["", "abc", "1.2.3", "12Qi", "m", "1e", "1ee3", "1 m", "--1"] {
            let e = parse_nanos(bad).unwrap_err();
            assert_eq!(e.input, bad);
        }
    }

    #[test]
    fn canonical_spelling_matches_quantity_string() {
        for (text, want) in [
            ("0.25Gi", "256Mi"),
            ("1536Mi", "1536Mi"),
            ("1000Mi", "1000Mi"),
            ("1000", "1k"),
            ("1500m", "1500m"),
            ("1.0", "1"),
            ("128M", "128M"),
            ("100Ki", "100Ki"),
            ("0.5Ki", "512"),
            ("1e3", "1e3"),
        ] {
            let spelled = canonical(parse_nanos(text).unwrap(), Format::of(text));
            assert_eq!(spelled, want, "{text}");
        }
        assert_eq!(canonical(0, Format::BinarySi), "0");
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(format_millicores(550), "550m");
        assert_eq!(format_millicores(2000), "2");
        assert_eq!(format_bytes(512 << 20), "512Mi");
        assert_eq!(format_bytes(1 << 30), "1Gi");
        assert_eq!(format_bytes(1000), "1000");
        assert_eq!(format_bytes(0), "0");
    }
}
