//! Reading a Containerfile into stages of instructions, for exactly the subset the resize-guard
//! images use: `FROM scratch` or an earlier stage (`AS name`), `ARG`, `COPY src dest`, `USER`,
//! `ENTRYPOINT` in exec form and `LABEL key=value`. Everything else (RUN, ENV, CMD, WORKDIR, ADD,
//! flags such as `--chown`, shell-form ENTRYPOINT, ...) is rejected with the line it is on, so an
//! image built here never silently differs from one docker or buildah builds from the same file.
//!
//! Lines are joined at a trailing `\`, `#` comment lines are dropped (also inside a continued
//! instruction), and words keep their quoting until [`crate::spec`] expands them with the build
//! arguments: parsing needs no argument values.

use crate::error::ImageError;
use crate::words;

/// A parsed Containerfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Containerfile {
    /// `ARG`s before the first `FROM`: usable in `FROM` lines only.
    pub global_args: Vec<ArgDecl>,
    /// The stages in file order; the last one is the image.
    pub stages: Vec<Stage>,
}

/// `ARG NAME[=default]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgDecl {
    /// The argument's name.
    pub name: String,
    /// Its default, still quoted and unexpanded.
    pub default: Option<String>,
}

/// One `FROM` and the instructions up to the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// Line of the `FROM`.
    pub line: usize,
    /// What it starts from, unexpanded: `scratch` or an earlier stage's name.
    pub base: String,
    /// The `AS` name, lowercased as docker does.
    pub name: Option<String>,
    /// The stage's instructions in order.
    pub instructions: Vec<Instruction>,
}

/// An instruction and the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    /// 1-based line of the instruction's first line.
    pub line: usize,
    /// What it does.
    pub step: Step,
}

/// The supported instructions after `FROM`; words are still quoted and unexpanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `ARG NAME[=default]`.
    Arg(ArgDecl),
    /// `COPY src dest`: one source, no flags.
    Copy {
        /// Source, relative to the build context.
        src: String,
        /// Destination in the image.
        dest: String,
    },
    /// `USER user[:group]`.
    User(String),
    /// `ENTRYPOINT ["exe", "arg", ...]`: never variable-expanded (docker does not either).
    Entrypoint(Vec<String>),
    /// `LABEL key=value ...`.
    Label(Vec<(String, String)>),
}

/// Parses a Containerfile's text.
pub fn parse(text: &str) -> Result<Containerfile, ImageError> {
    let mut file = Containerfile {
        global_args: Vec::new(),
        stages: Vec::new(),
    };
    for (line, instruction) in logical_lines(text)? {
        let (keyword, rest) = instruction
            .split_once(char::is_whitespace)
            .unwrap_or((instruction.as_str(), ""));
        let rest = rest.trim();
        let keyword = keyword.to_ascii_uppercase();
        reject_flags(line, &keyword, rest)?;
        let step = match keyword.as_str() {
            "FROM" => {
                file.stages.push(parse_from(line, rest)?);
                continue;
            }
            "ARG" => Step::Arg(parse_arg(line, rest)?),
            "COPY" => parse_copy(line, rest)?,
            "USER" => Step::User(single_word(line, "USER", rest)?),
            "ENTRYPOINT" => Step::Entrypoint(parse_exec_form(line, rest)?),
            "LABEL" => Step::Label(parse_labels(line, rest)?),
            other => {
                return Err(ImageError::parse(
                    line,
                    format!(
                        "{other} is not supported: resize-guard-image builds without a container \
                         engine and reads only FROM scratch, ARG, COPY, USER, ENTRYPOINT and LABEL"
                    ),
                ));
            }
        };
        match (file.stages.last_mut(), step) {
            (Some(stage), step) => stage.instructions.push(Instruction { line, step }),
            (None, Step::Arg(arg)) => file.global_args.push(arg),
            (None, _) => {
                return Err(ImageError::parse(
                    line,
                    format!("{keyword} before the first FROM"),
                ));
            }
        }
    }
    if file.stages.is_empty() {
        return Err(ImageError::parse(1, "no FROM instruction"));
    }
    Ok(file)
}

/// Joins continued lines and drops blanks and comments: `(first line number, instruction text)`.
fn logical_lines(text: &str) -> Result<Vec<(usize, String)>, ImageError> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = raw.trim();
        if trimmed.starts_with('#') {
            let directive = trimmed.trim_start_matches('#').trim().to_ascii_lowercase();
            if current.is_none() && out.is_empty() && directive.starts_with("escape") {
                return Err(ImageError::parse(
                    number,
                    "the escape parser directive is not supported; `\\` is the escape character",
                ));
            }
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        let (body, continued) = match trimmed.strip_suffix('\\') {
            Some(body) => (body, true),
            None => (trimmed, false),
        };
        let (start, mut text) = current.take().unwrap_or((number, String::new()));
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(body.trim_end());
        if continued {
            current = Some((start, text));
        } else {
            out.push((start, text));
        }
    }
    if let Some((start, _)) = current {
        return Err(ImageError::parse(
            start,
            "the file ends inside a continued line",
        ));
    }
    Ok(out)
}

/// Flags (`--chown`, `--chmod`, `--from`, `--platform`, ...) change what docker builds, so none
/// is accepted.
fn reject_flags(line: usize, keyword: &str, rest: &str) -> Result<(), ImageError> {
    match rest.split_whitespace().next() {
        Some(flag) if flag.starts_with("--") => Err(ImageError::parse(
            line,
            format!("{keyword} {flag}: flags are not supported"),
        )),
        _ => Ok(()),
    }
}

fn parse_from(line: usize, rest: &str) -> Result<Stage, ImageError> {
    let words = split(line, rest)?;
    let (base, name) = match words.as_slice() {
        [base] => (base.clone(), None),
        [base, as_, name] if as_.eq_ignore_ascii_case("AS") => {
            (base.clone(), Some(name.to_ascii_lowercase()))
        }
        _ => {
            return Err(ImageError::parse(
                line,
                "expected FROM <scratch|stage> [AS <name>]",
            ));
        }
    };
    Ok(Stage {
        line,
        base,
        name,
        instructions: Vec::new(),
    })
}

fn parse_arg(line: usize, rest: &str) -> Result<ArgDecl, ImageError> {
    let word = single_word(line, "ARG", rest)?;
    let (name, default) = match word.split_once('=') {
        Some((name, default)) => (name.to_string(), Some(default.to_string())),
        None => (word, None),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(ImageError::parse(
            line,
            format!("ARG name {name:?} is not a plain name"),
        ));
    }
    Ok(ArgDecl { name, default })
}

fn parse_copy(line: usize, rest: &str) -> Result<Step, ImageError> {
    if rest.starts_with('[') {
        return Err(ImageError::parse(
            line,
            "COPY in JSON form is not supported",
        ));
    }
    match split(line, rest)?.as_slice() {
        [src, dest] => Ok(Step::Copy {
            src: src.clone(),
            dest: dest.clone(),
        }),
        _ => Err(ImageError::parse(
            line,
            "expected COPY <src> <dest> (exactly one source)",
        )),
    }
}

fn parse_exec_form(line: usize, rest: &str) -> Result<Vec<String>, ImageError> {
    let argv: Vec<String> = serde_json::from_str(rest).map_err(|_| {
        ImageError::parse(
            line,
            "ENTRYPOINT must be in exec form, a JSON array of strings: shell form needs \
             /bin/sh, which a scratch image does not have",
        )
    })?;
    if argv.is_empty() {
        return Err(ImageError::parse(line, "ENTRYPOINT is empty"));
    }
    if argv.iter().any(|arg| arg.contains('$')) {
        return Err(ImageError::parse(
            line,
            "ENTRYPOINT contains `$`, but docker and buildah do not expand variables in exec \
             form: write the path literally (one stage per binary)",
        ));
    }
    Ok(argv)
}

fn parse_labels(line: usize, rest: &str) -> Result<Vec<(String, String)>, ImageError> {
    let words = split(line, rest)?;
    if words.is_empty() {
        return Err(ImageError::parse(line, "LABEL needs key=value pairs"));
    }
    words
        .into_iter()
        .map(|word| match word.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
            _ => Err(ImageError::parse(
                line,
                format!("LABEL {word:?}: expected key=value (the legacy `LABEL key value` form is not supported)"),
            )),
        })
        .collect()
}

fn single_word(line: usize, keyword: &str, rest: &str) -> Result<String, ImageError> {
    match split(line, rest)?.as_slice() {
        [word] => Ok(word.clone()),
        _ => Err(ImageError::parse(
            line,
            format!("{keyword} takes exactly one word"),
        )),
    }
}

fn split(line: usize, rest: &str) -> Result<Vec<String>, ImageError> {
    words::split(rest).map_err(|problem| ImageError::parse(line, problem))
}

#[cfg(test)]
mod tests;
