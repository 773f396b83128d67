//! A real `iceboxd` process for one test: its own state directory and port, its log in a file
//! (printed when the test fails), and on shutdown a check that it left nothing behind.

use crate::cli::CliOutput;
use crate::http::{Auth, Http};
use crate::leaks;
use crate::paths;
use crate::state_dir::StateDir;
use crate::util::tail;
use rustix::process::{kill_process, Pid, Signal};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The API key every test daemon is started with (`--auth`).
pub const AUTH: &str = "4f1c9a52-8e3b-4d7a-b6c0-2e9f13a7d845:icebox-integration-key";
/// The namespace that key owns (the daemon's default).
pub const NAMESPACE: &str = "guest";

const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Shutdown destroys every instance (a few kill rounds each in the worst case).
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Daemon {
    child: Option<Child>,
    state: StateDir,
    port: u16,
    log: PathBuf,
    pub(crate) http: Http,
}

impl Daemon {
    /// A daemon on a fresh state directory; `extra` are more iceboxd flags.
    pub fn start(extra: &[&str]) -> Daemon {
        Self::start_on(&StateDir::new(), extra)
    }

    /// A daemon whose open-file limit (soft and hard) is `nofile`, as on a host with a low
    /// default: what a flood of connections must not exhaust.
    pub fn start_with_nofile(nofile: u64, extra: &[&str]) -> Daemon {
        Self::launch(
            &StateDir::new(),
            &paths::runtimes_dir(),
            extra,
            Some(nofile),
        )
    }

    /// A daemon on an existing state directory (a restart).
    pub fn start_on(state: &StateDir, extra: &[&str]) -> Daemon {
        Self::launch(state, &paths::runtimes_dir(), extra, None)
    }

    /// A daemon with another runtimes directory (e.g. a fixture runtime).
    pub fn start_with_runtimes(runtimes_dir: &std::path::Path, extra: &[&str]) -> Daemon {
        Self::launch(&StateDir::new(), runtimes_dir, extra, None)
    }

    fn launch(
        state: &StateDir,
        runtimes_dir: &std::path::Path,
        extra: &[&str],
        nofile: Option<u64>,
    ) -> Daemon {
        let iceboxd = paths::binary("iceboxd");
        paths::binary("icebox");
        // A free port may be taken by another test between our probe and the daemon's bind.
        for _ in 0..5 {
            let port = free_port();
            let log = state.next_log();
            let mut cmd = Command::new(&iceboxd);
            cmd.arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--state-dir")
                .arg(state.path())
                .arg("--auth")
                .arg(AUTH)
                .arg("--runtimes-dir")
                .arg(runtimes_dir)
                .args(extra);
            clear_icebox_env(&mut cmd);
            if let Some(limit) = nofile {
                use std::os::unix::process::CommandExt;
                // SAFETY: setrlimit only, between fork and exec.
                unsafe {
                    cmd.pre_exec(move || {
                        let lim = libc::rlimit {
                            rlim_cur: limit,
                            rlim_max: limit,
                        };
                        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
            }
            let out = std::fs::File::create(&log).expect("creating the daemon log");
            cmd.env("NO_COLOR", "1")
                .env("ICEBOX_LOG", "info,iceboxd=debug")
                .stdin(Stdio::null())
                .stdout(out.try_clone().expect("log fd"))
                .stderr(out);
            let child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", iceboxd.display()));
            let mut daemon = Daemon {
                child: Some(child),
                state: state.clone(),
                port,
                log,
                http: Http::new(format!("http://127.0.0.1:{port}")),
            };
            match daemon.wait_healthy() {
                Ok(()) => {
                    daemon.require_sandboxes();
                    return daemon;
                }
                Err(log) if log.contains("cannot listen") => {
                    daemon.child = None;
                    continue;
                }
                Err(log) => {
                    daemon.child = None;
                    panic!("iceboxd did not become healthy; its log:\n{log}");
                }
            }
        }
        panic!("could not find a free port for iceboxd after 5 tries");
    }

    /// Ok once /icebox/v1/health answers; Err(log) if the daemon exited or never answered.
    fn wait_healthy(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(r) = self.http.send("GET", "/icebox/v1/health", Auth::None, None) {
                if r.status == 200 {
                    return Ok(());
                }
            }
            let child = self.child.as_mut().expect("a started daemon");
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("(exited with {status})\n{}", self.log_text()));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "(no health answer within {START_TIMEOUT:?})\n{}",
                    self.log_text()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// These tests exercise the real sandbox (cgroup limits, freezer, crun): an unprivileged
    /// daemon falls back to plain processes, where they would fail for the wrong reason.
    fn require_sandboxes(&self) {
        let health = self
            .request("GET", "/icebox/v1/health", Auth::None, None)
            .json();
        assert_eq!(
            health["isolation"], "crun",
            "iceboxd runs without sandboxes ({health}): the integration tests need root and crun \
             (scripts/setup.sh installs crun)"
        );
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        self.http.base()
    }

    pub fn state(&self) -> &StateDir {
        &self.state
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    // ---- CLI ----

    /// Runs `icebox --apihost <this daemon> ARGS` with the daemon's key.
    pub fn cli(&self, args: &[&str]) -> CliOutput {
        self.cli_with_auth(Some(AUTH), args)
    }

    /// Runs the CLI with the given key (None: no key at all).
    pub fn cli_with_auth(&self, auth: Option<&str>, args: &[&str]) -> CliOutput {
        let mut cmd = Command::new(paths::binary("icebox"));
        cmd.arg("--apihost")
            .arg(self.base_url())
            .args(args)
            .current_dir(paths::workspace_root());
        clear_icebox_env(&mut cmd);
        let home = self.state.home();
        cmd.env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"));
        if let Some(key) = auth {
            cmd.env("ICEBOX_AUTH", key);
        }
        CliOutput::run(cmd)
    }

    // ---- shutdown ----

    /// SIGTERM, wait for the exit, then assert nothing of this daemon is left.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if self.child.is_none() {
            return;
        }
        self.terminate();
        let left = leaks::wait_for_no_leftovers(
            self.state.path(),
            self.state.tag(),
            Duration::from_secs(5),
        );
        if !left.is_empty() {
            panic!(
                "iceboxd left these behind after SIGTERM:\n{left}\niceboxd log:\n{}",
                tail(&self.log_text(), 200)
            );
        }
    }

    /// `kill -9` the daemon and wait for it to be gone; its instances stay behind on
    /// purpose (the next daemon on this state dir must clean them up).
    pub fn kill9(mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // Our unreaped child: its pid cannot have been reused.
        if let Some(pid) = Pid::from_raw(child.id().cast_signed()) {
            let _ = kill_process(pid, Signal::TERM);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    assert!(
                        status.success() || std::thread::panicking(),
                        "iceboxd exited with {status} on SIGTERM; its log:\n{}",
                        tail(&self.log_text(), 200)
                    );
                    return;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    if !std::thread::panicking() {
                        panic!(
                            "iceboxd did not stop within {STOP_TIMEOUT:?} of SIGTERM; its log:\n{}",
                            tail(&self.log_text(), 200)
                        );
                    }
                    return;
                }
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- iceboxd log ({}) ----\n{}\n---- end of iceboxd log ----",
                self.log.display(),
                tail(&self.log_text(), 300)
            );
            self.terminate();
            return;
        }
        self.shut_down();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a probe port");
    listener.local_addr().expect("probe address").port()
}

/// Settings from the developer's shell (ICEBOX_*) must not leak into the processes under test.
fn clear_icebox_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("ICEBOX_") {
            cmd.env_remove(key);
        }
    }
}
