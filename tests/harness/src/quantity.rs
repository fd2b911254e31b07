//! Kubernetes quantities for the harness's own checks: [`parse_milli`] turns `1930m`, `4Gi`,
//! `1e3` into thousandths of their unit. A small parser of its own, so the harness never checks
//! the kubelet or resize-guard with the code under test.

use anyhow::Context;

/// A Kubernetes quantity in thousandths of its unit (millicores, milli-bytes), rounded up like
/// `resource.Quantity.MilliValue`. A small parser of its own so the harness does not check the
/// kubelet with the code under test.
pub fn parse_milli(s: &str) -> anyhow::Result<i128> {
    let s = s.trim();
    const BINARY: [(&str, u32); 6] = [
        ("Ki", 10),
        ("Mi", 20),
        ("Gi", 30),
        ("Ti", 40),
        ("Pi", 50),
        ("Ei", 60),
    ];
    const DECIMAL: [(&str, i32); 8] = [
        ("n", -9),
        ("u", -6),
        ("m", -3),
        ("k", 3),
        ("M", 6),
        ("G", 9),
        ("T", 12),
        ("P", 15),
    ];
    let (number, scale2, scale10) = if let Some((n, p)) = BINARY
        .iter()
        .find_map(|(suf, p)| s.strip_suffix(suf).map(|n| (n, *p)))
    {
        (n, p, 0)
    } else if let Some(pos) = s.find(['e', 'E']).filter(|&i| i + 1 < s.len()) {
        let exp: i32 = s[pos + 1..]
            .parse()
            .with_context(|| format!("quantity {s:?}: exponent"))?;
        (&s[..pos], 0, exp)
    } else if let Some(n) = s.strip_suffix('E') {
        (n, 0, 18)
    } else if let Some((n, e)) = DECIMAL
        .iter()
        .find_map(|(suf, e)| s.strip_suffix(suf).map(|n| (n, *e)))
    {
        (n, 0, e)
    } else {
        (s, 0, 0)
    };
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        anyhow::bail!("{s:?} is not a quantity");
    }
    // mantissa × 10^(scale10 + 3 − frac digits) × 2^scale2, rounded up.
    let mantissa: i128 = format!("{int}{frac}")
        .parse()
        .with_context(|| format!("quantity {s:?}"))?;
    let exp10 = scale10 + 3 - i32::try_from(frac.len()).context("quantity too long")?;
    let mut value = mantissa
        .checked_mul(1i128 << scale2)
        .context("quantity overflows")?;
    if exp10 >= 0 {
        value = value
            .checked_mul(
                10i128
                    .checked_pow(exp10.unsigned_abs())
                    .context("quantity overflows")?,
            )
            .context("quantity overflows")?;
    } else {
        let div = 10i128
            .checked_pow(exp10.unsigned_abs())
            .context("quantity too precise")?;
        value = (value + div - 1) / div;
    }
    Ok(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_to_thousandths() {
        for (s, want) in [
            ("2", 2000),
            ("1930m", 1930),
            ("70m", 70),
            ("0.5", 500),
            ("4Gi", 4 * 1024 * 1024 * 1024 * 1000),
            ("1.5Gi", 3 * 512 * 1024 * 1024 * 1000),
            ("200Mi", 200 * 1024 * 1024 * 1000),
            ("1k", 1_000_000),
            ("1e3", 1_000_000),
            ("1E", 1_000_000_000_000_000_000_000),
            ("1n", 1),
            ("0", 0),
            ("-1", -1000),
        ] {
            assert_eq!(parse_milli(s).unwrap(), want, "{s}");
        }
        for bad in ["", "m", "1x", "abc", "1.2.3"] {
            assert!(parse_milli(bad).is_err(), "{bad}");
        }
    }
}
