//! Words of an instruction line, the way docker and buildah read them: [`split`] cuts a line at
//! unquoted whitespace and keeps quotes and backslashes, [`expand`] then removes the quoting and
//! substitutes `$NAME` / `${NAME}` (inside double quotes and unquoted, never inside single
//! quotes). Only that subset is read; `${NAME:-default}` and friends are rejected, and so is a
//! variable with no value, where docker would silently substitute an empty string.

/// Cuts `line` into words at whitespace outside quotes; quotes and backslashes stay in the words.
pub fn split(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            (None, '"' | '\'') => {
                quote = Some(c);
                word.push(c);
            }
            (Some(q), c) if c == q => {
                quote = None;
                word.push(c);
            }
            (None | Some('"'), '\\') => {
                word.push(c);
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            _ => word.push(c),
        }
    }
    if let Some(q) = quote {
        return Err(format!("unterminated {q} quote"));
    }
    if !word.is_empty() {
        words.push(word);
    }
    Ok(words)
}

/// Removes quoting from `word` and substitutes variables through `lookup` (`None`: the variable
/// is not declared or has no value, which is an error naming it).
pub fn expand(word: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut chars = word.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), c) => out.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, '\\') => out.extend(chars.next()),
            (Some('"'), '\\') => match chars.peek() {
                Some(&next @ ('$' | '"' | '\\')) => {
                    out.push(next);
                    chars.next();
                }
                _ => out.push('\\'),
            },
            (_, '$') => {
                let name = variable_name(&mut chars)?;
                match name {
                    None => out.push('$'),
                    Some(name) => match lookup(&name) {
                        Some(value) => out.push_str(&value),
                        None => return Err(format!("${name} has no value")),
                    },
                }
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

/// Reads the name after a `$`: `${NAME}` or `$NAME`; `None` for a lone `$`.
fn variable_name(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> Result<Option<String>, String> {
    let is_name_char = |c: &char| c.is_ascii_alphanumeric() || *c == '_';
    if chars.next_if_eq(&'{').is_some() {
        let mut name = String::new();
        loop {
            match chars.next() {
                Some('}') if !name.is_empty() => return Ok(Some(name)),
                Some(c) if is_name_char(&c) => name.push(c),
                Some(c) => {
                    return Err(format!(
                        "only ${{NAME}} and $NAME are supported, found {c:?} in ${{{name}..."
                    ));
                }
                None => return Err(format!("unterminated ${{{name}")),
            }
        }
    }
    let mut name = String::new();
    while let Some(c) = chars.next_if(is_name_char) {
        name.push(c);
    }
    Ok((!name.is_empty()).then_some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        (name == "V").then(|| "1.2".to_string())
    }

    #[test]
    fn splits_at_unquoted_whitespace_keeping_quotes() {
        let words = split(r#"a="x y"  b='p q' c\ d"#).unwrap();
        assert_eq!(words, [r#"a="x y""#, "b='p q'", r"c\ d"]);
        assert!(split(r#"a="x"#).is_err());
    }

    #[test]
    fn expands_variables_outside_single_quotes() {
        assert_eq!(expand(r#""v${V}-$V""#, &vars).unwrap(), "v1.2-1.2");
        assert_eq!(expand("'$V'", &vars).unwrap(), "$V");
        assert_eq!(expand(r#""a \"b\" \$V""#, &vars).unwrap(), r#"a "b" $V"#);
        assert_eq!(expand(r"c\ d$", &vars).unwrap(), "c d$");
    }

    #[test]
    fn rejects_unknown_variables_and_modifiers() {
        assert_eq!(expand("$X", &vars).unwrap_err(), "$X has no value");
        assert!(expand("${V:-x}", &vars).is_err());
        assert!(expand("${V", &vars).is_err());
    }
}
