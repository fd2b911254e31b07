//! Test-only injected panics (feature `testing`, never in a release build; the controller's
//! hidden `--inject-panic` flag exists only with it): a supervision test makes a chosen task
//! panic at a chosen moment by creating an object with a chosen name.
//!
//! `reconcile=<pod>` panics the controller's reconcile loop when it reconciles pod `<pod>` (any
//! namespace; `controller/src/leading.rs`); `watch-pods=<pod>` and `watch-nodes=<node>` panic
//! the cluster view's pod or node watch task when it receives that object
//! (`cluster/src/view/watches.rs`).

/// Where a panic is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// The controller's reconcile of a pod.
    Reconcile,
    /// A watch task of the cluster view, by the resource it watches (`pods`, `nodes`: the
    /// view's `Watched::as_str`).
    Watch(&'static str),
}

/// The panics to inject: each site with the name of the object that triggers it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InjectedPanics {
    sites: Vec<(Site, String)>,
}

impl InjectedPanics {
    /// Parses `site=name` specs (`reconcile=app`, `watch-pods=trigger`, `watch-nodes=n9`).
    pub fn parse<'a>(specs: impl IntoIterator<Item = &'a str>) -> Result<InjectedPanics, String> {
        let mut sites = Vec::new();
        for spec in specs {
            let (site, name) = spec
                .split_once('=')
                .ok_or_else(|| format!("--inject-panic {spec:?}: want <site>=<name>"))?;
            let site = match site {
                "reconcile" => Site::Reconcile,
                "watch-pods" => Site::Watch("pods"),
                "watch-nodes" => Site::Watch("nodes"),
                other => {
                    return Err(format!(
                        "--inject-panic {spec:?}: unknown site {other:?} (reconcile, watch-pods, watch-nodes)"
                    ));
                }
            };
            sites.push((site, name.to_owned()));
        }
        Ok(InjectedPanics { sites })
    }

    /// Panics if a panic is injected at `site` for the object `name`.
    pub fn check(&self, site: Site, name: &str) {
        if self.sites.iter().any(|(s, n)| *s == site && n == name) {
            panic!("injected panic (test-only --inject-panic) at {site:?} on {name}");
        }
    }

    /// True when nothing is injected.
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sites_and_panics_only_on_the_named_object() {
        let p = InjectedPanics::parse(["reconcile=app", "watch-pods=trigger"]).unwrap();
        p.check(Site::Reconcile, "other");
        p.check(Site::Watch("nodes"), "app");
        let panicked = std::panic::catch_unwind(|| p.check(Site::Reconcile, "app"));
        assert!(panicked.is_err());
        let panicked = std::panic::catch_unwind(|| p.check(Site::Watch("pods"), "trigger"));
        assert!(panicked.is_err());
        assert!(InjectedPanics::parse(["reconcile"]).is_err());
        assert!(InjectedPanics::parse(["elsewhere=x"]).is_err());
        assert!(InjectedPanics::parse([]).unwrap().is_empty());
    }
}
