//! Child processes of the harness: each writes to its own log file, dies with the harness (a
//! watchdog kills it if the test binary exits without dropping it), and can show its log tail.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running child process and its log.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
    watchdog: Option<Child>,
}

impl Process {
    /// Starts `cmd` with stdout and stderr going to `log`.
    pub fn spawn(name: &str, cmd: Command, log: &Path) -> anyhow::Result<Process> {
        Process::spawn_with_cleanup(name, cmd, log, None)
    }

    /// Like [`Process::spawn`]; when the harness process exits without dropping it, the
    /// watchdog also removes `cleanup` (a temporary directory) after stopping the child, unless
    /// `RESIZE_GUARD_KEEP_TMP` is set.
    pub fn spawn_with_cleanup(
        name: &str,
        mut cmd: Command,
        log: &Path,
        cleanup: Option<&Path>,
    ) -> anyhow::Result<Process> {
        let out = File::create(log)?;
        let err = out.try_clone()?;
        cmd.stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .stdin(Stdio::null())
            .env_remove("HTTP_PROXY")
            .env_remove("HTTPS_PROXY")
            .env_remove("http_proxy")
            .env_remove("https_proxy");
        let child = cmd
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start {name} ({:?}): {e}", cmd.get_program()))?;
        // If this process dies without running destructors (statics are never dropped), the
        // watchdog notices and takes the child down with it.
        let remove = match cleanup {
            Some(dir) if std::env::var_os("RESIZE_GUARD_KEEP_TMP").is_none() => {
                format!(
                    "kill -0 {} 2>/dev/null || rm -rf '{}'; ",
                    std::process::id(),
                    dir.display()
                )
            }
            _ => String::new(),
        };
        let script = format!(
            "while kill -0 {parent} 2>/dev/null && kill -0 {pid} 2>/dev/null; do sleep 0.5; done; \
             kill {pid} 2>/dev/null; sleep 2; kill -9 {pid} 2>/dev/null; {remove}exit 0",
            parent = std::process::id(),
            pid = child.id()
        );
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        Ok(Process {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
            watchdog,
        })
    }

    /// The process name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// How the process ended, once it has (`None` while it runs or if it cannot be asked).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last `bytes` of the log.
    pub fn log_tail(&self, bytes: u64) -> String {
        let Ok(mut f) = File::open(&self.log) else {
            return String::new();
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(bytes)));
        let mut s = String::new();
        let _ = f.read_to_string(&mut s);
        s
    }

    /// Stops the process: SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: std::time::Duration) {
        if !self.is_running() {
            return;
        }
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline {
            if !self.is_running() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the process at once (SIGKILL): nothing it would do on the way out happens.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// OS process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(std::time::Duration::from_secs(3));
        if let Some(w) = self.watchdog.as_mut() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// A free TCP port on 127.0.0.1 for a server started soon after (bound and released).
///
/// Taken *below* the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), so no outgoing
/// connection (kubectl, a client, a watch) can grab it between this call and the server's
/// bind — the OS's own `:0` would hand out an ephemeral port, which any of them may. Ports are
/// spread by process id and never handed out twice by one process.
pub fn free_port() -> anyhow::Result<u16> {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const LOW: u16 = 10_000;
    anyhow::ensure!(
        ephemeral_low > LOW + 1000,
        "ephemeral ports start at {ephemeral_low}: no room below them"
    );
    let span = u32::from(ephemeral_low - LOW);
    let start = (std::process::id().wrapping_mul(7919)) % span;
    let mut given = GIVEN
        .lock()
        .map_err(|_| anyhow::anyhow!("port registry poisoned"))?;
    for i in 0..span {
        let port = LOW + u16::try_from((start + i) % span)?;
        if given.contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return Ok(port);
        }
    }
    anyhow::bail!("no free port between {LOW} and {ephemeral_low}")
}
