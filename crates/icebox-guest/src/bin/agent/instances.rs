//! The instances the agent runs. They outlive host sessions: only `stop` (or the VM's end)
//! removes one.

use crate::output::Output;
use crate::reaper::{Children, Status};
use crate::stats;
use crate::system::{INSTANCES_CGROUP, RUN_DIR};
use icebox_guest::protocol::{guest_socket_path, Event, InstanceStats, StartReply, StartRequest};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// Instances' uids: the lowest free one from here (nothing else in the guest uses them).
const FIRST_UID: u32 = 10_000;

pub struct Instance {
    pub id: String,
    uid: u32,
    cgroup: PathBuf,
    pub stdout: Arc<Output>,
    pub stderr: Arc<Output>,
    /// Set once the runtime process exited.
    exit: watch::Receiver<Option<Event>>,
}

impl Instance {
    pub fn exit_event(&self) -> Option<Event> {
        self.exit.borrow().clone()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.cgroup.join(name)
    }
}

pub struct Agent {
    instances: Mutex<HashMap<String, Arc<Instance>>>,
    /// Uids of live instances and of stopped ones whose cgroup could not be emptied.
    uids: Mutex<std::collections::BTreeSet<u32>>,
    children: Children,
    pub events: broadcast::Sender<Event>,
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !id.starts_with('.')
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::write(path, value)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

impl Agent {
    pub fn new(children: Children) -> Agent {
        Agent {
            instances: Mutex::new(HashMap::new()),
            uids: Mutex::new(std::collections::BTreeSet::new()),
            children,
            events: broadcast::channel(1024).0,
        }
    }

    pub fn get(&self, id: &str) -> Option<Arc<Instance>> {
        self.instances.lock().unwrap().get(id).cloned()
    }

    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.instances.lock().unwrap().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Exit events of instances that exited and were not stopped yet (replayed to a new
    /// events stream, so an exit while no host was connected is not lost).
    pub fn exited(&self) -> Vec<Event> {
        self.instances
            .lock()
            .unwrap()
            .values()
            .filter_map(|i| i.exit_event())
            .collect()
    }

    pub async fn start(self: &Arc<Self>, req: StartRequest) -> Result<StartReply, String> {
        if !valid_id(&req.instance) {
            return Err(format!("invalid instance id '{}'", req.instance));
        }
        if self.get(&req.instance).is_some() {
            return Err(format!("instance {} exists", req.instance));
        }
        let uid = self.take_uid();
        let cgroup = Path::new(INSTANCES_CGROUP).join(&req.instance);
        let run_dir = Path::new(RUN_DIR).join(&req.instance);
        let setup = || -> std::io::Result<()> {
            std::fs::create_dir_all(&cgroup)?;
            write(
                &cgroup.join("memory.max"),
                &req.memory_limit_bytes.to_string(),
            )?;
            // No swap in the guest; the file is absent without swap accounting.
            let _ = std::fs::write(cgroup.join("memory.swap.max"), "0");
            // An OOM kill takes the whole instance, as a runtime missing a process is broken.
            write(&cgroup.join("memory.oom.group"), "1")?;
            write(&cgroup.join("pids.max"), &req.pids_max.to_string())?;
            std::fs::create_dir_all(&run_dir)?;
            // The proxy (running as `uid`) binds its socket here.
            let _ = rustix::fs::chown(
                &run_dir,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(uid)),
            );
            Ok(())
        };
        let socket = guest_socket_path(&req.instance);
        let spawned = setup().and_then(|()| {
            let mut cmd = crate::spawn::command(
                &req,
                &socket,
                &cgroup.join("cgroup.procs").to_string_lossy(),
                uid,
            )?;
            self.children.spawn(&mut cmd)
        });
        let (mut child, exit_rx) = match spawned {
            Ok(c) => c,
            Err(e) => {
                if remove_dirs(&cgroup, &run_dir).await {
                    self.uids.lock().unwrap().remove(&uid);
                }
                return Err(format!("cannot start the runtime: {e}"));
            }
        };
        let pid = child.id();
        let stdout = Arc::new(Output::default());
        let stderr = Arc::new(Output::default());
        for (pipe, out) in [
            (child.stdout.take().map(std::os::fd::OwnedFd::from), &stdout),
            (child.stderr.take().map(std::os::fd::OwnedFd::from), &stderr),
        ] {
            if let Some(fd) = pipe {
                match tokio::net::unix::pipe::Receiver::from_owned_fd(fd) {
                    Ok(rx) => {
                        tokio::spawn(out.clone().pump(rx));
                    }
                    Err(e) => eprintln!(
                        "icebox-guest-agent: cannot read output of {}: {e}",
                        req.instance
                    ),
                }
            }
        }
        // std's Child is never waited on: the reaper owns the status.
        drop(child);
        let (exit_tx, exit_watch) = watch::channel(None);
        let instance = Arc::new(Instance {
            id: req.instance.clone(),
            uid,
            cgroup: cgroup.clone(),
            stdout,
            stderr,
            exit: exit_watch,
        });
        self.instances
            .lock()
            .unwrap()
            .insert(req.instance.clone(), instance.clone());
        {
            let events = self.events.clone();
            let instance = instance.clone();
            tokio::spawn(async move {
                let status = exit_rx.await.unwrap_or(Status {
                    code: None,
                    signal: None,
                });
                let oom =
                    stats::cgroup_key(&instance.file("memory.events"), "oom_kill").unwrap_or(0) > 0;
                let event = Event::Exited {
                    instance: instance.id.clone(),
                    code: status.code,
                    signal: status.signal,
                    oom,
                };
                let _ = exit_tx.send(Some(event.clone()));
                let _ = events.send(event);
            });
        }

        if let Some(ms) = req.wait_ready_ms {
            if let Err(e) = wait_ready(&instance, &socket, Duration::from_millis(ms)).await {
                let output = format!("{}{}", instance.stdout.peek(), instance.stderr.peek());
                self.stop(&req.instance).await.ok();
                return Err(format!("{e}. Output:\n{output}"));
            }
        }
        Ok(StartReply { pid })
    }

    pub async fn stop(&self, id: &str) -> Result<(), String> {
        let Some(instance) = self.instances.lock().unwrap().remove(id) else {
            return Ok(());
        };
        let _ = std::fs::write(instance.file("cgroup.kill"), "1");
        let events = instance.file("cgroup.events");
        for _ in 0..1000 {
            if stats::cgroup_key(&events, "populated") != Some(1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        instance.stdout.close();
        instance.stderr.close();
        // The uid comes back only with an empty cgroup: a process left would keep holding
        // what the kernel counts against it.
        if remove_dirs(&instance.cgroup, &Path::new(RUN_DIR).join(id)).await {
            self.uids.lock().unwrap().remove(&instance.uid);
        } else {
            eprintln!(
                "icebox-guest-agent: the cgroup of {id} could not be removed; uid {} stays taken",
                instance.uid
            );
        }
        Ok(())
    }

    fn take_uid(&self) -> u32 {
        let mut uids = self.uids.lock().unwrap();
        let uid = (FIRST_UID..)
            .find(|u| !uids.contains(u))
            .expect("fewer instances than uids");
        uids.insert(uid);
        uid
    }

    pub async fn set_frozen(&self, id: &str, frozen: bool) -> Result<(), String> {
        let instance = self.get(id).ok_or_else(|| format!("no instance {id}"))?;
        write(
            &instance.file("cgroup.freeze"),
            if frozen { "1" } else { "0" },
        )
        .map_err(|e| e.to_string())?;
        let events = instance.file("cgroup.events");
        for _ in 0..1000 {
            if stats::cgroup_key(&events, "frozen") == Some(u64::from(frozen)) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Err(format!(
            "instance {id} did not become {}",
            if frozen { "frozen" } else { "thawed" }
        ))
    }

    pub fn instance_stats(&self) -> std::collections::BTreeMap<String, InstanceStats> {
        let instances: Vec<Arc<Instance>> =
            self.instances.lock().unwrap().values().cloned().collect();
        instances
            .into_iter()
            .map(|i| {
                let pids: Vec<u32> = std::fs::read_to_string(i.file("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect();
                let mut s = InstanceStats {
                    memory_current: stats::read_u64(&i.file("memory.current")),
                    memory_peak: stats::read_u64(&i.file("memory.peak")),
                    oom_kills: stats::cgroup_key(&i.file("memory.events"), "oom_kill").unwrap_or(0),
                    exited: i.exit_event().is_some(),
                    ..Default::default()
                };
                for pid in &pids {
                    if let Some((uss, pss, rss)) = stats::smaps_rollup(*pid) {
                        s.uss += uss;
                        s.pss += pss;
                        s.rss += rss;
                    }
                }
                s.pids = pids;
                (i.id.clone(), s)
            })
            .collect()
    }
}

async fn wait_ready(instance: &Instance, socket: &str, timeout: Duration) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(Event::Exited {
            code, signal, oom, ..
        }) = instance.exit_event()
        {
            return Err(match (oom, code, signal) {
                (true, _, _) => "the runtime was OOM-killed before it was ready".to_string(),
                (_, Some(c), _) => format!("the runtime exited with code {c} before it was ready"),
                (_, _, Some(s)) => {
                    format!("the runtime was killed by signal {s} before it was ready")
                }
                _ => "the runtime exited before it was ready".to_string(),
            });
        }
        if tokio::net::UnixStream::connect(socket).await.is_ok() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the runtime did not accept on {socket} within {} ms",
                timeout.as_millis()
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// True once the cgroup is gone.
async fn remove_dirs(cgroup: &Path, run_dir: &Path) -> bool {
    let _ = std::fs::remove_dir_all(run_dir);
    // rmdir of a cgroup fails while its last task is still exiting: retry briefly.
    for _ in 0..200 {
        match std::fs::remove_dir(cgroup) {
            Ok(()) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
    false
}
