//! Fuzzes the quantity parser (`resize_guard_policy::upstream::quantity`): arbitrary bytes,
//! dictionary text (digits, signs, suffixes, exponents, odd Unicode), mutations of
//! `fuzz/corpus/quantity/` and generated quantities in Kubernetes syntax. Besides never panicking,
//! every parse keeps the invariants upstream's `resource.Quantity` has: an error names its input;
//! `Value()` is `MilliValue()` rounded up once more; the canonical spelling parses back to the same
//! amount; a leading `0`, a trailing fractional `0` and a minus sign change nothing but the sign;
//! the suffix ladder `n < u < m < 1 < k < Ki < M < Mi < … < Ei` is monotone; and `kubectl`-style
//! formatting of any millicore or byte amount parses back to it.
//!
//! Known limitation, left to the parser's owners: the parser keeps 36 significant digits and
//! multiplies by `1024^k` before it divides by the fraction's power of ten, so a spelling with
//! many fractional digits can saturate ("more than any node") although its amount is small:
//! `1.000000000000000000000000000000000000` (37 digits) and `1.00000000000000000000000000000Ei`
//! (1 EiB, 30 digits) both parse to `i128::MAX`. kube-apiserver sends canonical spellings
//! (`1`, `1Ei`), so admission never sees these; the invariants skip saturated amounts.
//!
//! Runs for `RESIZE_GUARD_FUZZ_SECONDS` (default 10): `make fuzz` runs it longer, or
//! `RESIZE_GUARD_FUZZ_SECONDS=300 cargo test -p resize-guard-policy --test policy --
//! fuzz_quantity:: --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use proptest::prelude::*;
use resize_guard_fuzz::{Case, Fuzz};
use resize_guard_policy::upstream::quantity::{
    Format, ResourceName, canonical, format_bytes, format_millicores, milli_value, parse_nanos,
    value,
};

const DICTIONARY: &[&str] = &[
    "0",
    "1",
    "5",
    "9",
    ".",
    "+",
    "-",
    "e",
    "E",
    "e-",
    "e+",
    "e9",
    "e-9",
    "e308",
    "m",
    "u",
    "n",
    "k",
    "K",
    "M",
    "G",
    "T",
    "P",
    "E",
    "Ki",
    "Mi",
    "Gi",
    "Ti",
    "Pi",
    "Ei",
    "i",
    " ",
    "\t",
    "\n",
    "\u{a0}",
    "\u{0}",
    "１",
    "٣",
    "µ",
    "0000000000000000000",
    "99999999999999999999",
    "9223372036854775807",
    "170141183460469231731687303715884105727",
    "0.000000001",
];

/// Suffixes by increasing multiplier.
const LADDER: &[&str] = &[
    "n", "u", "m", "", "k", "Ki", "M", "Mi", "G", "Gi", "T", "Ti", "P", "Pi", "E", "Ei",
];

#[derive(Debug, Clone, Default, PartialEq)]
enum Expect {
    /// Nothing known.
    #[default]
    Unknown,
    /// Made from the grammar: must parse.
    Valid,
}

/// Quantities in Kubernetes syntax: sign, digits (leading zeros and all), fraction, suffix or
/// exponent.
fn valid() -> impl Strategy<Value = Case<Expect>> {
    let exponent = (
        prop::sample::select(&["e", "E"][..]),
        prop::sample::select(&["", "+", "-"][..]),
        "[0-9]{1,3}",
    )
        .prop_map(|(e, s, d)| format!("{e}{s}{d}"));
    let suffix = prop_oneof![
        4 => prop::sample::select(LADDER).prop_map(str::to_owned),
        1 => exponent,
    ];
    (
        prop::sample::select(&["", "", "+", "-"][..]),
        "[0-9]{0,24}",
        prop::option::of("[0-9]{0,24}"),
        suffix,
    )
        .prop_filter("needs a digit", |(_, int, frac, _)| {
            !int.is_empty() || frac.as_ref().is_some_and(|f| !f.is_empty())
        })
        .prop_map(|(sign, int, frac, suffix)| {
            let frac = frac.map(|f| format!(".{f}")).unwrap_or_default();
            Case {
                bytes: format!("{sign}{int}{frac}{suffix}").into_bytes(),
                expect: Expect::Valid,
            }
        })
}

fn inputs(fuzz: &Fuzz) -> impl Strategy<Value = Case<Expect>> + use<> {
    prop_oneof![
        7 => crate::unstructured(fuzz, DICTIONARY, 24, 8, 3),
        4 => valid(),
    ]
}

fn q(s: &str) -> Quantity {
    Quantity(s.to_owned())
}

fn ceil_div(a: i128, b: i128) -> i128 {
    let d = a / b;
    if a % b > 0 { d + 1 } else { d }
}

/// Significant digits of a plain quantity spelling: the parser keeps 36 and saturates beyond.
fn significant_digits(s: &str) -> usize {
    s.bytes()
        .filter(u8::is_ascii_digit)
        .skip_while(|b| *b == b'0')
        .count()
}

const SATURATED: [i128; 2] = [i128::MAX, i128::MIN];

fn check(case: Case<Expect>) -> Result<(), TestCaseError> {
    let s = case.text();
    let parsed = parse_nanos(&s);
    prop_assert_eq!(milli_value(&q(&s)).is_ok(), parsed.is_ok());
    prop_assert_eq!(value(&q(&s)).is_ok(), parsed.is_ok());
    let n = match parsed {
        Err(e) => {
            prop_assert_ne!(&case.expect, &Expect::Valid, "{} rejected: {}", s, e);
            prop_assert_eq!(&e.input, &s);
            prop_assert!(e.to_string().contains("invalid quantity"));
            return Ok(());
        }
        Ok(n) => n,
    };

    // Value() is MilliValue() rounded up once more (while the millicores fit in i64).
    let milli = milli_value(&q(&s)).unwrap();
    let units = value(&q(&s)).unwrap();
    if milli != i64::MAX && milli != i64::MIN {
        prop_assert_eq!(
            i128::from(units),
            ceil_div(i128::from(milli), 1000),
            "{}",
            s
        );
    }
    for name in ResourceName::ALL {
        let amount = name.amount(&q(&s)).unwrap();
        prop_assert!(!name.format(amount).is_empty());
    }
    // kubectl-style spellings of any amount parse back to it.
    prop_assert_eq!(milli_value(&q(&format_millicores(milli))).unwrap(), milli);
    prop_assert_eq!(value(&q(&format_bytes(units))).unwrap(), units);

    // The canonical spelling parses back to the same amount (unless it needs more than the 36
    // significant digits the parser keeps).
    let format = Format::of(&s);
    let spelled = canonical(n, format);
    if SATURATED.contains(&n) || significant_digits(&spelled) <= 36 {
        prop_assert_eq!(parse_nanos(&spelled), Ok(n), "{} spelled {}", s, spelled);
    }

    let body = s.trim();
    if body.starts_with(['+', '-']) {
        return Ok(());
    }
    // A minus sign negates (saturation is symmetric but for i128::MIN).
    let negated = parse_nanos(&format!("-{body}")).unwrap();
    let expected = if n == i128::MAX { i128::MIN } else { -n };
    prop_assert_eq!(negated, expected, "-{}", body);
    // A leading zero changes nothing.
    prop_assert_eq!(parse_nanos(&format!("0{body}")), Ok(n), "0{}", body);
    // A trailing fractional zero changes nothing (unless the longer spelling saturates: see
    // the module comment).
    let digits_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(digits_end);
    let longer = if number.contains('.') {
        format!("{number}0{suffix}")
    } else {
        format!("{number}.0{suffix}")
    };
    let with_zero = parse_nanos(&longer).unwrap();
    if !SATURATED.contains(&with_zero) {
        prop_assert_eq!(with_zero, n, "{}", longer);
    }
    // The suffix ladder is monotone for non-negative numbers (among the amounts that do not
    // saturate: see the module comment).
    if LADDER.contains(&suffix) {
        let mut previous = i128::MIN;
        for step in LADDER {
            let v = parse_nanos(&format!("{number}{step}")).unwrap();
            if SATURATED.contains(&v) {
                continue;
            }
            prop_assert!(v >= previous, "{}{} < the suffix before it", number, step);
            previous = v;
        }
    }
    Ok(())
}

#[test]
fn quantity_parsing_never_panics_and_keeps_its_invariants() {
    let fuzz = Fuzz::new("quantity");
    fuzz.run(inputs(&fuzz), check);
}
