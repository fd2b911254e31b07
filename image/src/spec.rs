//! From a parsed [`Containerfile`] and build arguments to the [`ImageSpec`] of its last stage,
//! with docker's scoping: `ARG`s before the first `FROM` serve `FROM` lines only; a stage sees
//! the `ARG`s it declares (a bare `ARG NAME` takes the global value); a stage built `FROM` an
//! earlier one inherits its files, user, entrypoint and labels but none of its `ARG`s.
//!
//! Stricter than docker where docker would be silent: a build argument that no `ARG` declares,
//! and a variable with no value, are errors rather than an empty string in a label.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use crate::containerfile::{ArgDecl, Containerfile, Step};
use crate::error::ImageError;
use crate::words;

/// The `PATH` docker and buildah give an image built `FROM scratch` (there is no `ENV` here).
pub const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What the image holds and how it runs, fully expanded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageSpec {
    /// One layer per `COPY`, in order.
    pub copies: Vec<CopySpec>,
    /// Environment, `NAME=value`: [`DEFAULT_PATH`] on a scratch image.
    pub env: Vec<String>,
    /// `USER`, if any.
    pub user: Option<String>,
    /// `ENTRYPOINT`, if any.
    pub entrypoint: Option<Vec<String>>,
    /// `LABEL`s, later ones overriding earlier ones.
    pub labels: BTreeMap<String, String>,
}

/// One `COPY` of a file from the build context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopySpec {
    /// Source, relative to the build context, with normal components only.
    pub src: PathBuf,
    /// Absolute destination path in the image, e.g. `/usr/local/bin/resize-guard-webhook`.
    pub dest: String,
}

/// Resolves the last stage of `file` with `build_args` (`--build-arg NAME=value`).
pub fn resolve(
    file: &Containerfile,
    build_args: &BTreeMap<String, String>,
) -> Result<ImageSpec, ImageError> {
    for name in build_args.keys() {
        let declared = file.global_args.iter().any(|arg| &arg.name == name)
            || file.stages.iter().any(|stage| {
                stage
                    .instructions
                    .iter()
                    .any(|i| matches!(&i.step, Step::Arg(arg) if &arg.name == name))
            });
        if !declared {
            return Err(ImageError::resolve(format!(
                "build argument {name} is not declared by any ARG"
            )));
        }
    }
    let mut globals = Vars::default();
    for arg in &file.global_args {
        globals.declare(arg, build_args, &Vars::default(), 0)?;
    }
    let last = file.stages.len().saturating_sub(1);
    resolve_stage(file, last, build_args, &globals)
}

fn resolve_stage(
    file: &Containerfile,
    index: usize,
    build_args: &BTreeMap<String, String>,
    globals: &Vars,
) -> Result<ImageSpec, ImageError> {
    let Some(stage) = file.stages.get(index) else {
        return Err(ImageError::resolve("no stages"));
    };
    let base = globals
        .expand(stage.line, &stage.base)?
        .to_ascii_lowercase();
    let mut spec = if base == "scratch" {
        ImageSpec {
            env: vec![DEFAULT_PATH.to_string()],
            ..ImageSpec::default()
        }
    } else {
        let Some(parent) = file.stages[..index]
            .iter()
            .rposition(|s| s.name.as_deref() == Some(base.as_str()))
        else {
            return Err(ImageError::parse(
                stage.line,
                format!(
                    "FROM {base}: only `scratch` or an earlier stage's name is supported (no \
                     base image is pulled)"
                ),
            ));
        };
        resolve_stage(file, parent, build_args, globals)?
    };
    let mut vars = Vars::default();
    for instruction in &stage.instructions {
        let line = instruction.line;
        match &instruction.step {
            Step::Arg(arg) => vars.declare(arg, build_args, globals, line)?,
            Step::Copy { src, dest } => {
                let src = vars.expand(line, src)?;
                let dest = vars.expand(line, dest)?;
                spec.copies.push(copy_spec(line, &src, &dest)?);
            }
            Step::User(user) => spec.user = Some(vars.expand(line, user)?),
            Step::Entrypoint(argv) => spec.entrypoint = Some(argv.clone()),
            Step::Label(pairs) => {
                for (key, value) in pairs {
                    let key = vars.expand(line, key)?;
                    let value = vars.expand(line, value)?;
                    spec.labels.insert(key, value);
                }
            }
        }
    }
    Ok(spec)
}

/// Checks a COPY's source (a plain relative path) and makes its destination absolute (a
/// destination ending in `/` is a directory, as in docker).
fn copy_spec(line: usize, src: &str, dest: &str) -> Result<CopySpec, ImageError> {
    let src_path = Path::new(src);
    let plain = |path: &Path| path.components().all(|c| matches!(c, Component::Normal(_)));
    if src.is_empty() || !plain(src_path) || src.contains(['*', '?', '[']) {
        return Err(ImageError::parse(
            line,
            format!("COPY source {src:?} must be a plain relative path (no `..`, `/`, globs)"),
        ));
    }
    let mut dest = format!("/{}", dest.trim_start_matches('/'));
    if dest.ends_with('/') {
        let Some(name) = src_path.file_name().and_then(|n| n.to_str()) else {
            return Err(ImageError::parse(line, "COPY source has no file name"));
        };
        dest.push_str(name);
    }
    let relative = Path::new(dest.trim_start_matches('/'));
    if !plain(relative) || relative.as_os_str().is_empty() {
        return Err(ImageError::parse(
            line,
            format!("COPY destination {dest:?} must be a plain path (no `..`)"),
        ));
    }
    Ok(CopySpec {
        src: src_path.to_path_buf(),
        dest,
    })
}

/// Declared arguments in one scope: `None` is declared without a value.
#[derive(Debug, Default)]
struct Vars(HashMap<String, Option<String>>);

impl Vars {
    fn declare(
        &mut self,
        arg: &ArgDecl,
        build_args: &BTreeMap<String, String>,
        globals: &Vars,
        line: usize,
    ) -> Result<(), ImageError> {
        let value = match (build_args.get(&arg.name), &arg.default) {
            (Some(given), _) => Some(given.clone()),
            (None, Some(default)) => Some(self.expand(line, default)?),
            (None, None) => globals.0.get(&arg.name).cloned().flatten(),
        };
        self.0.insert(arg.name.clone(), value);
        Ok(())
    }

    fn expand(&self, line: usize, word: &str) -> Result<String, ImageError> {
        words::expand(word, &|name| self.0.get(name).cloned().flatten()).map_err(|problem| {
            ImageError::parse(
                line,
                format!("{problem} (declare it with an ARG in scope, with a default or a build argument)"),
            )
        })
    }
}

#[cfg(test)]
mod tests;
