//! Do the installed programs run this plugin's release? A plugin of another release judges with
//! other rules than the programs it explains, so a difference is worth a look (‼), not a
//! failure: the install itself may be healthy. Read by `crate::versions`.

use super::Line;
use crate::table::Mark;
use crate::versions::{Versions, runs};

const S: &str = "release";

/// The release lines: one per program whose release cannot be told, then the comparison.
pub fn lines(v: &Versions) -> Vec<Line> {
    let mut out: Vec<Line> = v
        .programs
        .iter()
        .filter_map(|p| {
            p.error.as_ref().map(|e| {
                super::line(
                    S,
                    Mark::Warn,
                    format!("cannot tell which release {} runs: {e}", p.deployment),
                )
            })
        })
        .collect();
    let known: Vec<_> = v.programs.iter().filter(|p| p.version.is_some()).collect();
    let skewed = v.skewed();
    if !skewed.is_empty() {
        out.push(Line {
            section: S,
            mark: Mark::Warn,
            text: format!(
                "kubectl resize-guard is {}, but {}",
                v.plugin,
                runs(&skewed)
            ),
            fix: Some(format!(
                "install the plugin of the installed release (kubectl krew upgrade resize-guard, or \
                 that release's archive), or upgrade resize-guard to {}",
                v.plugin
            )),
        });
    } else if !known.is_empty() {
        out.push(super::line(
            S,
            Mark::Ok,
            format!("{}, the release of this plugin", runs(&known)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::versions::{Program, compare};

    fn program(name: &str, version: Option<&str>) -> Program {
        Program {
            deployment: format!("rg/{name}"),
            image: None,
            version: version.map(str::to_owned),
            source: version.map(|_| "imageTag"),
            error: version.is_none().then(|| "no such Deployment".to_owned()),
        }
    }

    #[test]
    fn the_same_release_passes_and_another_is_worth_a_look() {
        let same = compare(
            "0.2.0",
            vec![
                program("w", Some("0.2.0")),
                program("c", Some("0.2.0-g1a2b3c4")),
            ],
        );
        let l = lines(&same);
        assert_eq!(l.len(), 1);
        assert_eq!(
            (l[0].mark, l[0].text.as_str()),
            (
                Mark::Ok,
                "rg/w runs 0.2.0 (image tag), rg/c runs 0.2.0-g1a2b3c4 (image tag), the release of \
                 this plugin"
            )
        );
        let skewed = compare(
            "0.2.0",
            vec![program("w", Some("0.1.0")), program("c", None)],
        );
        let l = lines(&skewed);
        assert_eq!(
            l.iter()
                .map(|l| (l.mark, l.text.as_str()))
                .collect::<Vec<_>>(),
            [
                (
                    Mark::Warn,
                    "cannot tell which release rg/c runs: no such Deployment"
                ),
                (
                    Mark::Warn,
                    "kubectl resize-guard is 0.2.0, but rg/w runs 0.1.0 (image tag)"
                ),
            ]
        );
        assert!(
            l[1].fix
                .as_deref()
                .unwrap()
                .contains("upgrade resize-guard to 0.2.0")
        );
    }
}
