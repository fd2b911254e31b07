//! A client built the way kubectl builds one (client-go `clientcmd`):
//!
//! | kubectl                      | here                                                         |
//! |------------------------------|--------------------------------------------------------------|
//! | `--kubeconfig FILE`          | that one file; `$KUBECONFIG` is then not read                 |
//! | `KUBECONFIG=a:b`             | every file, merged: the first to set a value wins (kube-rs `Kubeconfig::from_env`, `Kubeconfig::merge`, which follow clientcmd's loading rules) |
//! | neither                      | `~/.kube/config`                                             |
//! | `--context/--cluster/--user` | kube-rs `KubeConfigOptions`                                  |
//! | `--as/--as-group/--as-uid`   | the `Impersonate-*` headers (kube-rs `AuthInfo::impersonate*`) |
//! | `--request-timeout`          | connect, read and write timeouts of each request             |
//! | `-n`, else the context's namespace, else `default` | [`Connection::namespace`]      |
//! | cluster `proxy-url`, `HTTPS_PROXY`, `NO_PROXY` | [`proxy`]: chosen by client-go's rules |
//!
//! The connection also knows where it points ([`Target`]) so errors can say so.

use std::path::PathBuf;

use anyhow::Context as _;
use kube::Client;
use kube::config::{Config, KubeConfigOptions, Kubeconfig};

use crate::args::Global;
use crate::exit::Target;

mod proxy;

/// A connected client and the namespaces commands use.
#[derive(Clone)]
pub struct Connection {
    /// The client.
    pub client: Client,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    /// `--install-namespace`: where resize-guard runs, not where the pods are.
    pub install_namespace: String,
    /// Where the client points.
    pub target: Target,
}

/// Where the kubeconfig came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--kubeconfig`.
    Flag(PathBuf),
    /// `$KUBECONFIG`, its files in order.
    Env(Vec<PathBuf>),
    /// `~/.kube/config`.
    Home,
}

impl Source {
    /// As kubectl picks it: the flag, else a non-empty `$KUBECONFIG`, else the home file.
    pub fn pick(flag: Option<&PathBuf>, env: Option<&std::ffi::OsStr>) -> Source {
        if let Some(path) = flag {
            return Source::Flag(path.clone());
        }
        let mut files: Vec<PathBuf> = Vec::new();
        for p in env.map(std::env::split_paths).into_iter().flatten() {
            // client-go ignores empty entries and reads each file once.
            if !p.as_os_str().is_empty() && !files.contains(&p) {
                files.push(p);
            }
        }
        if files.is_empty() {
            Source::Home
        } else {
            Source::Env(files)
        }
    }

    /// Reads and merges the files.
    pub fn read(&self) -> anyhow::Result<Kubeconfig> {
        let read = |p: &PathBuf| {
            Kubeconfig::read_from(p).with_context(|| format!("reading kubeconfig {}", p.display()))
        };
        match self {
            Source::Flag(p) => read(p),
            // client-go `ClientConfigLoadingRules.Load`: missing files in the list are skipped.
            Source::Env(files) => {
                let present: Vec<&PathBuf> = files.iter().filter(|p| p.exists()).collect();
                anyhow::ensure!(!present.is_empty(), "no file of {} exists", self.describe());
                present
                    .into_iter()
                    .try_fold(Kubeconfig::default(), |merged, p| {
                        merged
                            .merge(read(p)?)
                            .with_context(|| format!("merging kubeconfig {}", p.display()))
                    })
            }
            Source::Home => Kubeconfig::read().context("reading ~/.kube/config"),
        }
    }

    fn describe(&self) -> String {
        match self {
            Source::Flag(p) => format!("--kubeconfig {}", p.display()),
            Source::Env(files) => format!(
                "KUBECONFIG={}",
                std::env::join_paths(files)
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
            Source::Home => "~/.kube/config".into(),
        }
    }
}

impl Connection {
    /// Connects as `global` says.
    pub async fn open(global: &Global) -> anyhow::Result<Connection> {
        let source = Source::pick(
            global.kubeconfig.as_ref(),
            std::env::var_os("KUBECONFIG").as_deref(),
        );
        let kubeconfig = source.read()?;
        let options = KubeConfigOptions {
            context: global.context.clone(),
            cluster: global.cluster.clone(),
            user: global.user.clone(),
        };
        let (context, user) = names(&kubeconfig, &options);
        let cluster_proxy = cluster_proxy_url(&kubeconfig, &options, &context);
        let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .with_context(|| format!("loading kubeconfig ({})", source.describe()))?;
        apply(global, &mut config);
        let (https_proxy, no_proxy) = proxy::from_env();
        config.proxy_url = proxy::choose(
            &config.cluster_url,
            cluster_proxy.as_deref(),
            https_proxy.as_deref(),
            no_proxy.as_deref(),
        )
        .map(|p| {
            p.parse::<http::Uri>()
                .with_context(|| format!("the proxy {p:?} is not a URL"))
        })
        .transpose()?;
        let namespace = global
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let target = Target {
            server: config
                .cluster_url
                .to_string()
                .trim_end_matches('/')
                .to_owned(),
            context,
            user: match &global.as_user {
                Some(a) if user.is_empty() => format!("as {a}"),
                Some(a) => format!("{user} as {a}"),
                None => user,
            },
        };
        let client = Client::try_from(config)
            .with_context(|| format!("building the client for {target}"))?;
        Ok(Connection {
            client,
            namespace,
            install_namespace: global.install_namespace.clone(),
            target,
        })
    }
}

/// The context and user names the options pick (kube-rs `ConfigLoader` picks the same).
fn names(kubeconfig: &Kubeconfig, options: &KubeConfigOptions) -> (String, String) {
    let context = options
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
        .unwrap_or_default();
    let user = options
        .user
        .clone()
        .or_else(|| context_named(kubeconfig, &context).and_then(|c| c.user.clone()))
        .unwrap_or_default();
    (context, user)
}

/// The kubeconfig's context called `name`.
fn context_named<'a>(kubeconfig: &'a Kubeconfig, name: &str) -> Option<&'a kube::config::Context> {
    kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.context.as_ref())
}

/// The `proxy-url` of the cluster the options (else the context) pick.
fn cluster_proxy_url(
    kubeconfig: &Kubeconfig,
    options: &KubeConfigOptions,
    context: &str,
) -> Option<String> {
    let cluster = options
        .cluster
        .clone()
        .or_else(|| context_named(kubeconfig, context).map(|c| c.cluster.clone()))?;
    kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == cluster)
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.proxy_url.clone())
}

/// Impersonation and timeouts, which override the kubeconfig's as kubectl's flags do.
fn apply(global: &Global, config: &mut Config) {
    if let Some(user) = &global.as_user {
        config.auth_info.impersonate = Some(user.clone());
        config.auth_info.impersonate_groups =
            (!global.as_group.is_empty()).then(|| global.as_group.clone());
        config.auth_info.impersonate_uid = global.as_uid.clone();
    }
    if let Some(t) = global.request_timeout.0 {
        config.connect_timeout = Some(t);
        config.read_timeout = Some(t);
        config.write_timeout = Some(t);
        // The read timeout then counts from each request, not from when its pooled connection
        // went idle (kube-rs `Config::reset_reader_on_write`).
        config.reset_reader_on_write = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn the_flag_overrides_a_kubeconfig_merge_list() {
        let flag = PathBuf::from("/k/one");
        assert_eq!(
            Source::pick(Some(&flag), Some(OsStr::new("/a:/b"))),
            Source::Flag(flag)
        );
        assert_eq!(
            Source::pick(None, Some(OsStr::new("/a::/b"))),
            Source::Env(vec!["/a".into(), "/b".into()])
        );
        assert_eq!(
            Source::pick(None, Some(OsStr::new("/a:/b:/a"))),
            Source::Env(vec!["/a".into(), "/b".into()])
        );
        assert_eq!(Source::pick(None, Some(OsStr::new(""))), Source::Home);
        assert_eq!(Source::pick(None, None), Source::Home);
    }

    #[test]
    fn the_first_file_to_set_a_value_wins() {
        let dir = std::env::temp_dir().join(format!("rg-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a");
        let b = dir.join("b");
        std::fs::write(
            &a,
            "apiVersion: v1\nkind: Config\ncurrent-context: mine\ncontexts:\n- name: mine\n  \
             context: {cluster: c, user: u, namespace: shop}\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "apiVersion: v1\nkind: Config\ncurrent-context: theirs\nclusters:\n- name: c\n  \
             cluster: {server: 'https://10.0.0.1:6443'}\nusers:\n- name: u\n  user: {token: t}\n\
             contexts:\n- name: mine\n  context: {cluster: other, user: other}\n",
        )
        .unwrap();
        let merged = Source::Env(vec![a.clone(), b.clone()]).read().unwrap();
        assert_eq!(merged.current_context.as_deref(), Some("mine"));
        assert_eq!(merged.contexts.len(), 1);
        let (context, user) = names(&merged, &KubeConfigOptions::default());
        assert_eq!((context.as_str(), user.as_str()), ("mine", "u"));
        // Missing files in the list are skipped, as kubectl skips them; all missing is an error.
        let merged = Source::Env(vec![dir.join("missing"), a]).read().unwrap();
        assert_eq!(merged.current_context.as_deref(), Some("mine"));
        let err = Source::Env(vec![dir.join("missing")]).read().unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            format!(
                "no file of KUBECONFIG={} exists",
                dir.join("missing").display()
            )
        );
        std::fs::write(&b, "clusters: [oops").unwrap();
        let err = Source::Env(vec![b.clone()]).read().unwrap_err();
        assert!(
            format!("{err:#}").starts_with(&format!("reading kubeconfig {}: ", b.display())),
            "{err:#}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
