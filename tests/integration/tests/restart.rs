//! Restarts on the same state directory: a clean stop keeps every action and activation; a
//! `kill -9` with live instances leaves orphans that the next start removes before serving.

use icebox_integration::{leaks, paths, wait_for, Daemon, StateDir};
use rustix::process::{kill_process, Pid, Signal};
use serde_json::{json, Value};
use std::time::Duration;

fn example(path: &str) -> String {
    std::fs::read_to_string(paths::workspace_root().join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn action_names(d: &Daemon) -> Vec<String> {
    let list = d.get_json("/api/v1/namespaces/_/actions");
    let mut names: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn a_restart_keeps_actions_and_activations() {
    let state = StateDir::new();
    let first = Daemon::start_on(&state, &[]);
    first.deploy(
        "py",
        "python:3",
        &example("examples/python/hello.py"),
        json!({"memory": 128, "timeout": 5000}),
    );
    first.deploy(
        "js",
        "nodejs:20",
        &example("examples/nodejs/hello.js"),
        json!({"memory": 192}),
    );
    let before_py = first
        .invoke("py", json!({"name": "before"}))
        .expect_success();
    let before_js = first
        .invoke("js", json!({"name": "before"}))
        .expect_success();
    let stored_py = first.get_json("/api/v1/namespaces/_/actions/py");
    first.stop();

    let second = Daemon::start_on(&state, &[]);
    assert_eq!(action_names(&second), ["js", "py"]);
    let py = second.get_json("/api/v1/namespaces/_/actions/py");
    for field in ["exec", "limits", "version", "parameters"] {
        assert_eq!(py[field], stored_py[field], "{field} survived the restart");
    }
    assert_eq!(
        second.get_json("/api/v1/namespaces/_/actions/js")["limits"]["memory"],
        192
    );

    for before in [&before_py, &before_js] {
        let again = second.activation(before.id());
        assert_eq!(
            again.record["response"],
            before.record["response"],
            "activation {} is still readable",
            before.id()
        );
        assert_eq!(again.start_kind(), "cold");
    }
    let listed: Vec<Value> = second
        .get_json("/api/v1/namespaces/_/activations?limit=50")
        .as_array()
        .cloned()
        .unwrap();
    for before in [&before_py, &before_js] {
        assert!(
            listed.iter().any(|a| a["activationId"] == before.id()),
            "activation {} is listed",
            before.id()
        );
    }

    let after_py = second
        .invoke("py", json!({"name": "after"}))
        .expect_success();
    assert_eq!(after_py.result()["greeting"], "Hello, after!");
    assert_eq!(
        after_py.start_kind(),
        "cold",
        "instances do not survive a restart; actions do"
    );
    second.invoke("js", json!({})).expect_success();
    second.stop();
}

#[test]
#[expect(
    clippy::cast_possible_truncation,
    reason = "a pid the daemon reported fits in u32"
)]
fn kill_9_leaves_no_orphans_after_the_next_start() {
    let state = StateDir::new();
    // A long pause grace keeps a fresh instance idle (not frozen) until we freeze it on purpose.
    let first = Daemon::start_on(&state, &["--pause-grace", "2s"]);
    let sleepy =
        "import time\n\ndef main(args):\n    time.sleep(args.get('sleep', 0))\n    return {}\n";
    for name in ["frozen", "idle", "busy"] {
        first.deploy(
            name,
            "python:3",
            sleepy,
            json!({"memory": 128, "timeout": 120000}),
        );
    }
    let frozen = first
        .invoke("frozen", json!({}))
        .expect_success()
        .instance()
        .to_string();
    wait_for(
        "the first instance to freeze",
        Duration::from_secs(20),
        || (first.instance(&frozen)?["state"] == "frozen").then_some(()),
    );
    let idle = first
        .invoke("idle", json!({}))
        .expect_success()
        .instance()
        .to_string();
    first
        .invoke_raw("busy", "blocking=false", br#"{"sleep": 600}"#)
        .expect(202);
    let busy = wait_for("the busy instance to run", Duration::from_secs(20), || {
        let i = first
            .instances()
            .into_iter()
            .find(|i| i["action"] == "guest/busy" && i["state"] == "running")?;
        Some(i["id"].as_str()?.to_string())
    });

    // Every instance of the first daemon, prewarmed runtimes included, is about to be orphaned.
    let instances = first.instances();
    let ids: Vec<String> = instances
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    for ours in [&frozen, &idle, &busy] {
        assert!(ids.contains(ours), "{ours} in {ids:?}");
    }
    let pids: Vec<u32> = instances
        .iter()
        .flat_map(|i| i["pids"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.as_u64())
        .map(|p| p as u32)
        .collect();
    assert!(
        !pids.is_empty(),
        "instances report their pids: {instances:?}"
    );
    let state_of = |id: &str| instances.iter().find(|i| i["id"] == id).unwrap()["state"].clone();
    assert_eq!(state_of(&frozen), "frozen");
    assert_eq!(state_of(&busy), "running");

    first.kill9();
    // The orphans are really there: nothing cleaned up after the killed daemon.
    assert!(
        pids.iter().any(|p| leaks::pid_alive(*p)),
        "the instances outlive a kill -9"
    );
    for id in [&frozen, &idle, &busy] {
        assert!(
            leaks::instance_cgroup_exists(state.tag(), id),
            "instance {id} still has its cgroup"
        );
    }
    // ...and the leak check every test's shutdown relies on sees them.
    let orphans = state.leftovers();
    assert!(
        orphans.processes.iter().any(|p| pids.contains(&p.pid)),
        "the leak check finds the orphans:\n{orphans}"
    );
    assert!(!orphans.cgroups.is_empty());

    let second = Daemon::start_on(&state, &[]);
    // Start-up cleanup runs before the daemon serves: by the time health answers it is done.
    let alive: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|p| leaks::pid_alive(*p))
        .collect();
    assert!(
        alive.is_empty(),
        "processes of the killed daemon's instances are still alive: {alive:?}"
    );
    for id in &ids {
        assert!(
            !leaks::instance_cgroup_exists(state.tag(), id),
            "instance {id}'s cgroup was removed"
        );
        assert!(
            !state.path().join("instances").join(id).exists(),
            "instance {id}'s directory was removed"
        );
        assert!(
            !state.path().join("crun").join(id).exists(),
            "crun's record of {id} was removed"
        );
    }
    // What runs for this state dir now is the new daemon and the instances it lists (its own
    // prewarmed runtimes); crun calls starting those may be in flight for a moment.
    wait_for(
        "only the new daemon's own processes to remain",
        Duration::from_secs(20),
        || {
            let listed = second.instances();
            assert!(
                listed
                    .iter()
                    .all(|i| !ids.contains(&i["id"].as_str().unwrap().to_string())),
                "{listed:?}"
            );
            let own: Vec<u64> = listed
                .iter()
                .flat_map(|i| i["pids"].as_array().cloned().unwrap_or_default())
                .filter_map(|p| p.as_u64())
                .collect();
            leaks::processes_of(state.path(), state.tag())
                .iter()
                .all(|p| p.pid == second.pid() || own.contains(&u64::from(p.pid)))
                .then_some(())
        },
    );

    let after = second.invoke("idle", json!({})).expect_success();
    assert_eq!(after.start_kind(), "cold");
    assert!(!ids.contains(&after.instance().to_string()));
    second.stop();
}

/// Issue 18: `kill -9` under 20 clients left some non-blocking (202) activation ids a 404
/// forever. Every id answered with 202 now has a record after the restart: the activation's
/// own, or a `whisk internal error` saying the node restarted before it ended.
#[test]
fn every_202_id_has_a_record_after_kill_9() {
    use icebox_integration::{Auth, AUTH};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    const CLIENTS: usize = 20;
    let state = StateDir::new();
    let d = Daemon::start_on(&state, &["--prewarm", "none"]);
    d.deploy(
        "sleepy",
        "python:3",
        "import time\ndef main(args):\n    time.sleep(args['s'])\n    return {'n': args['n']}\n",
        json!({"memory": 128, "timeout": 60000}),
    );
    let accepted = Mutex::new(Vec::<(String, u64)>::new());
    let killed = AtomicBool::new(false);
    std::thread::scope(|s| {
        for client in 0..CLIENTS {
            let (d, accepted, killed) = (&d, &accepted, &killed);
            s.spawn(move || {
                let http = icebox_integration::Http::new(d.base_url().to_string());
                for i in 0u64.. {
                    // Short and long activations: some end before the kill, some run into it.
                    let params = json!({"n": i, "s": if i % 2 == 0 { 0.0 } else { 2.0 }});
                    let reply = http.send(
                        "POST",
                        "/api/v1/namespaces/_/actions/sleepy?blocking=false",
                        Auth::Key(AUTH),
                        Some(params.to_string().as_bytes()),
                    );
                    match reply {
                        Ok(r) if r.status == 202 => {
                            let id = r.json()["activationId"].as_str().unwrap().to_string();
                            accepted.lock().unwrap().push((id, i));
                        }
                        // A full queue: a later try may fit.
                        Ok(r) if r.status == 429 || r.status == 503 => {
                            std::thread::sleep(Duration::from_millis(20))
                        }
                        Ok(r) => panic!("client {client}: {} {}", r.status, r.body),
                        Err(_) if killed.load(Ordering::SeqCst) => return,
                        Err(e) => panic!("client {client}: {e}"),
                    }
                }
            });
        }
        // Kill once some activations have ended (a short one's record is readable) while
        // the long ones of the moment still run.
        wait_for(
            "a short activation to end",
            Duration::from_secs(120),
            || {
                let ids: Vec<String> = accepted
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|(_, n)| n % 2 == 0)
                    .map(|(id, _)| id.clone())
                    .collect();
                ids.iter()
                    .any(|id| {
                        d.get(&format!("/api/v1/namespaces/_/activations/{id}"))
                            .status
                            == 200
                    })
                    .then_some(())
            },
        );
        // Its batch commits within milliseconds; more 202s meanwhile.
        std::thread::sleep(Duration::from_secs(1));
        killed.store(true, Ordering::SeqCst);
        // The daemon this test started (still running, not yet reaped).
        let pid = Pid::from_raw(d.pid().cast_signed()).expect("the daemon's pid");
        kill_process(pid, Signal::KILL).expect("SIGKILL to the daemon");
    });
    d.kill9();
    let accepted = accepted.into_inner().unwrap();
    assert!(accepted.len() >= CLIENTS, "only {} 202s", accepted.len());

    let again = Daemon::start_on(&state, &["--prewarm", "none"]);
    let (mut ended, mut cut_short, mut missing) = (0, 0, Vec::new());
    for (id, n) in &accepted {
        let reply = again.get(&format!("/api/v1/namespaces/_/activations/{id}"));
        if reply.status == 404 {
            missing.push(id.clone());
            continue;
        }
        let record = reply.expect(200).json();
        let response = &record["response"];
        if response["status"] == "success" {
            assert_eq!(response["result"]["n"], *n, "{record}");
            ended += 1;
        } else {
            assert_eq!(response["status"], "whisk internal error", "{record}");
            let error = response["result"]["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("restarted before the activation ended"),
                "{record}"
            );
            assert_eq!(record["name"], "sleepy", "{record}");
            cut_short += 1;
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} ids answered with 202 have no record after kill -9: {:?}",
        missing.len(),
        accepted.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(
        ended > 0 && cut_short > 0,
        "the kill should fall between activations that ended and ones that ran into it \
         ({ended} ended, {cut_short} cut short)"
    );
    eprintln!(
        "{} ids answered 202: {ended} ended, {cut_short} recorded as cut short by the kill",
        accepted.len()
    );
    again.stop();
}
