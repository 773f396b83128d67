//! A real etcd cluster for the cluster tests: Debian's `etcd` (package etcd-server), members on
//! loopback with their own data directories, killed and restarted by PID.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HEALTHY_WITHIN: Duration = Duration::from_secs(30);

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

pub struct Etcd {
    dir: tempfile::TempDir,
    token: String,
    members: Vec<Member>,
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a probe port");
    listener.local_addr().expect("probe address").port()
}

impl Etcd {
    /// `n` members forming one new cluster, healthy when this returns.
    pub fn start(n: usize) -> Etcd {
        let dir = tempfile::Builder::new()
            .prefix("icebox-etcd-")
            .tempdir()
            .expect("creating a temp dir");
        let members = (0..n)
            .map(|i| Member {
                name: format!("m{i}"),
                client_port: free_port(),
                peer_port: free_port(),
                child: None,
            })
            .collect();
        let token = format!("icebox-it-{}", std::process::id());
        let mut etcd = Etcd {
            dir,
            token,
            members,
        };
        for i in 0..n {
            etcd.spawn(i);
        }
        for i in 0..n {
            etcd.wait_healthy(i);
        }
        etcd
    }

    /// `etcd://127.0.0.1:P1,...` for iceboxd's --cluster.
    pub fn url(&self) -> String {
        let endpoints: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect();
        format!("etcd://{}", endpoints.join(","))
    }

    fn log(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.log", self.members[i].name))
    }

    fn spawn(&mut self, i: usize) {
        let initial: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect();
        let m = &self.members[i];
        let log = std::fs::File::create(self.log(i)).expect("etcd log");
        let child = Command::new("etcd")
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(self.dir.path().join(&m.name))
            .arg("--listen-client-urls")
            .arg(format!("http://127.0.0.1:{}", m.client_port))
            .arg("--advertise-client-urls")
            .arg(format!("http://127.0.0.1:{}", m.client_port))
            .arg("--listen-peer-urls")
            .arg(format!("http://127.0.0.1:{}", m.peer_port))
            .arg("--initial-advertise-peer-urls")
            .arg(format!("http://127.0.0.1:{}", m.peer_port))
            .arg("--initial-cluster")
            .arg(initial.join(","))
            .arg("--initial-cluster-state")
            .arg("new")
            .arg("--initial-cluster-token")
            .arg(&self.token)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .expect("starting etcd (scripts/setup.sh installs the etcd-server package)");
        self.members[i].child = Some(child);
    }

    fn wait_healthy(&self, i: usize) {
        let url = format!("http://127.0.0.1:{}/health", self.members[i].client_port);
        let deadline = Instant::now() + HEALTHY_WITHIN;
        while Instant::now() < deadline {
            if let Ok(r) = ureq::get(&url).timeout(Duration::from_secs(2)).call() {
                if r.into_string().unwrap_or_default().contains("\"true\"") {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "etcd member {i} is not healthy; its log:\n{}",
            std::fs::read_to_string(self.log(i)).unwrap_or_default()
        );
    }

    /// SIGKILLs member `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data directory.
    pub fn restart(&mut self, i: usize) {
        self.spawn(i);
    }

    /// Waits until member `i` answers healthy (a quorum is back).
    pub fn wait_member(&self, i: usize) {
        self.wait_healthy(i);
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// haproxy in front of some nodes: round robin with a health check on /icebox/v1/health, as
/// docs/cluster.md configures it.
pub struct Haproxy {
    _dir: tempfile::TempDir,
    child: Child,
    port: u16,
}

impl Haproxy {
    pub fn start(backends: &[u16]) -> Haproxy {
        let dir = tempfile::Builder::new()
            .prefix("icebox-haproxy-")
            .tempdir()
            .expect("creating a temp dir");
        let port = free_port();
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, p)| {
                format!("    server n{i} 127.0.0.1:{p} check inter 500ms fall 2 rise 1\n")
            })
            .collect();
        let cfg = format!(
            "global\n    maxconn 256\n\ndefaults\n    mode http\n    timeout connect 2s\n    \
             timeout client 120s\n    timeout server 120s\n\nfrontend icebox\n    bind \
             127.0.0.1:{port}\n    default_backend nodes\n\nbackend nodes\n    balance \
             roundrobin\n    option httpchk GET /icebox/v1/health\n{servers}"
        );
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, cfg).expect("writing haproxy.cfg");
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting haproxy (scripts/setup.sh installs it)");
        let haproxy = Haproxy {
            _dir: dir,
            child,
            port,
        };
        let deadline = Instant::now() + HEALTHY_WITHIN;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "haproxy did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        haproxy
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
