//! icebox across machines (issue 20): a real 3-member etcd, three iceboxd nodes on loopback with
//! their own state directories and cgroups, haproxy in front, driven through the real
//! `openwhisk` npm client and over HTTP; then the faults: nodes stopped and killed, etcd
//! members killed down to a lost quorum, concurrent updates, and nodes that do not belong.

use icebox_core::units::MIB_USIZE;
use icebox_integration::{
    action_path, paths, refused_start, refused_start_with_auth, wait_for, Auth, Daemon, Etcd,
    Haproxy, StateDir, AUTH,
};
use rustix::process::{kill_process, Pid, Signal};
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

/// Short, so the fault tests see a node leave within seconds.
const LEASE: &str = "2s";

fn node(etcd: &Etcd, id: &str, extra: &[&str]) -> Daemon {
    node_on(etcd, id, &StateDir::new(), extra)
}

/// A node on a given state directory (a restart).
fn node_on(etcd: &Etcd, id: &str, state: &StateDir, extra: &[&str]) -> Daemon {
    let url = etcd.url();
    let mut args = vec![
        "--cluster",
        url.as_str(),
        "--node-id",
        id,
        "--cluster-lease",
        LEASE,
        "--prewarm",
        "none",
    ];
    args.extend_from_slice(extra);
    Daemon::start_on(state, &args)
}

fn cluster_view(d: &Daemon) -> Value {
    d.get_json("/icebox/v1/cluster")
}

fn node_ids(d: &Daemon) -> Vec<String> {
    cluster_view(d)["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .filter_map(|n| n["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn wait_members(d: &Daemon, want: &[&str]) {
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want.sort();
    wait_for(
        &format!("the cluster view of {} to be {want:?}", d.base_url()),
        Duration::from_secs(30),
        || (node_ids(d) == want).then_some(()),
    );
}

fn three_nodes(etcd: &Etcd) -> [Daemon; 3] {
    let nodes = [
        node(etcd, "n1", &[]),
        node(etcd, "n2", &[]),
        node(etcd, "n3", &[]),
    ];
    for d in &nodes {
        wait_members(d, &["n1", "n2", "n3"]);
    }
    nodes
}

fn hello_instances(d: &Daemon) -> usize {
    d.instances()
        .iter()
        .filter(|i| i["action"] == "guest/hello")
        .count()
}

fn put(d: &Daemon, name: &str, code: &str, overwrite: bool) -> icebox_integration::Reply {
    let path = format!(
        "{}{}",
        action_path(name),
        if overwrite { "?overwrite=true" } else { "" }
    );
    let body = json!({"exec": {"kind": "nodejs:20", "code": code}, "limits": {"timeout": 3000}});
    d.request(
        "PUT",
        &path,
        Auth::Key(AUTH),
        Some(body.to_string().as_bytes()),
    )
}

const ECHO: &str = "function main(p) { return {echo: p.x || null}; }";

#[test]
fn one_api_from_any_node_with_warm_aware_placement_behind_haproxy() {
    let etcd = Etcd::start(3);
    let nodes = three_nodes(&etcd);
    let front = Haproxy::start(&nodes.iter().map(Daemon::port).collect::<Vec<_>>());

    // Created on n1, invoked 50 times through haproxy (which spreads them round robin).
    let out = Command::new("node")
        .arg("cluster.js")
        .current_dir(paths::openwhisk_client_dir())
        .env("CREATE_HOST", nodes[0].base_url())
        .env("INVOKE_HOST", front.url())
        .env("OW_AUTH", AUTH)
        .env("N", "50")
        .output()
        .expect("running node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the openwhisk client failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let activations = seen["activations"].as_array().unwrap();
    assert_eq!(activations.len(), 50);
    for (i, a) in activations.iter().enumerate() {
        assert_eq!(a["result"], json!({"hello": format!("c{i}")}));
    }
    let cold = activations.iter().filter(|a| a["cold"] == true).count();
    assert_eq!(cold, 1, "one cold start, then warm hits: {activations:?}");
    // ... all on one node: one instance of the action in the whole cluster.
    let per_node: Vec<usize> = nodes.iter().map(hello_instances).collect();
    assert_eq!(
        per_node.iter().sum::<usize>(),
        1,
        "instances per node {per_node:?}"
    );

    // Any activation from any node, record, result and logs.
    for a in activations.iter().step_by(10) {
        let id = a["id"].as_str().unwrap();
        for d in &nodes {
            let record = d
                .request(
                    "GET",
                    &format!("/api/v1/namespaces/_/activations/{id}"),
                    Auth::Key(AUTH),
                    None,
                )
                .expect(200)
                .json();
            assert_eq!(record["activationId"], id);
            d.request(
                "GET",
                &format!("/api/v1/namespaces/_/activations/{id}/result"),
                Auth::Key(AUTH),
                None,
            )
            .expect(200);
        }
    }
    // An unknown id is still a 404 in OpenWhisk's words, from every node.
    for d in &nodes {
        d.request(
            "GET",
            "/api/v1/namespaces/_/activations/00000000000000000000000000000000",
            Auth::Key(AUTH),
            None,
        )
        .expect(404);
    }

    // Namespaces and keys made on one node work on the others.
    let key = nodes[1]
        .request(
            "PUT",
            "/icebox/v1/namespaces/team",
            Auth::Key(AUTH),
            Some(b"{}"),
        )
        .expect(200);
    drop(key);
    let created = nodes[1]
        .request(
            "POST",
            "/icebox/v1/namespaces/team/keys",
            Auth::Key(AUTH),
            None,
        )
        .expect(200)
        .json();
    let team_key = created["auth"].as_str().unwrap().to_string();
    wait_for("the team key on n3", Duration::from_secs(10), || {
        (nodes[2]
            .request(
                "GET",
                "/api/v1/namespaces/_/actions",
                Auth::Key(&team_key),
                None,
            )
            .status
            == 200)
            .then_some(())
    });

    // Code over etcd's inline size travels by hash from the node that stored it.
    let zip = big_zip();
    let b64 = base64_of(&zip);
    let body = json!({"exec": {"kind": "nodejs:20", "code": b64, "binary": true}});
    nodes[0]
        .request(
            "PUT",
            &action_path("big"),
            Auth::Key(AUTH),
            Some(body.to_string().as_bytes()),
        )
        .expect(200);
    let fetched = wait_for("the big action on n3", Duration::from_secs(30), || {
        let r = nodes[2].request("GET", &action_path("big"), Auth::Key(AUTH), None);
        (r.status == 200).then(|| r.json())
    });
    assert_eq!(fetched["exec"]["code"].as_str().unwrap(), b64);

    // The cluster view and metrics say what happened.
    let view = cluster_view(&nodes[2]);
    assert_eq!(view["state"], "ok");
    assert_eq!(view["nodes"].as_array().unwrap().len(), 3);
    let metrics: String = (0..3)
        .map(|i| nodes[i].get("/metrics").body)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(metrics.contains("icebox_cluster_nodes 3"), "{metrics}");
    assert!(metrics.contains("icebox_cluster_placements_total{reason=\"warm\"}"));
    assert!(metrics.contains("icebox_cluster_forwards_total{outcome=\"answered\"}"));

    // The CLI shows the same.
    let cli = nodes[0].cli(&["cluster", "--json"]).success().json();
    assert_eq!(cli["nodes"].as_array().unwrap().len(), 3);
}

fn big_zip() -> Vec<u8> {
    use std::io::{Read, Write};
    let mut random = vec![0u8; 2 * MIB_USIZE];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut random))
        .unwrap();
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut buf);
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        zip.start_file("index.js", stored).unwrap();
        zip.write_all(b"exports.main = () => ({big: true});")
            .unwrap();
        zip.start_file("blob.bin", stored).unwrap();
        zip.write_all(&random).unwrap();
        zip.finish().unwrap();
    }
    buf.into_inner()
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn invoke_on(d: &Daemon, name: &str, x: &str) -> icebox_integration::Reply {
    d.request(
        "POST",
        &format!("{}?blocking=true", action_path(name)),
        Auth::Key(AUTH),
        Some(json!({"x": x}).to_string().as_bytes()),
    )
}

fn signal(d: &Daemon, sig: Signal) {
    // The daemon this test started (its child, not reaped).
    let pid = Pid::from_raw(d.pid().cast_signed()).expect("the daemon's pid");
    kill_process(pid, sig).expect("a signal to the daemon");
}

/// The node holding the warm instance of `name`, by the cluster view of `d`.
fn warm_node(d: &Daemon, name: &str) -> Option<String> {
    let view = cluster_view(d);
    view["nodes"].as_array()?.iter().find_map(|n| {
        n["warm_actions"]
            .as_array()?
            .iter()
            .any(|a| a == &json!(format!("guest/{name}")))
            .then(|| n["id"].as_str().unwrap().to_string())
    })
}

#[test]
fn stopped_and_killed_nodes_leave_placement_and_nothing_runs_twice() {
    let etcd = Etcd::start(3);
    let [n1, n2, n3] = three_nodes(&etcd);
    put(&n1, "echo", ECHO, false).expect(200);
    invoke_on(&n1, "echo", "warm-up").expect(200);
    let warm = wait_for(
        "a warm instance in the view",
        Duration::from_secs(10),
        || warm_node(&n1, "echo"),
    );
    let by_id = |id: &str| -> &Daemon {
        match id {
            "n1" => &n1,
            "n2" => &n2,
            _ => &n3,
        }
    };
    // Enter through a node that does not hold the warm instance: it forwards.
    let entry = ["n1", "n2", "n3"]
        .into_iter()
        .find(|id| *id != warm)
        .unwrap();
    let entry = by_id(entry);
    let stopped = by_id(&warm);
    signal(stopped, Signal::STOP);
    let stopped_at = std::time::Instant::now();
    // Forwarded to the stopped node, which accepts the connection and never answers: a clear
    // error, not a second run elsewhere. Meanwhile its lease lapses and it leaves placement.
    let others: Vec<&str> = ["n1", "n2", "n3"]
        .into_iter()
        .filter(|id| *id != warm)
        .collect();
    let (lost, left_after) = std::thread::scope(|s| {
        let lost = s.spawn(|| invoke_on(entry, "echo", "in-flight"));
        wait_members(entry, &others);
        let left_after = stopped_at.elapsed();
        (lost.join().unwrap(), left_after)
    });
    eprintln!("a SIGSTOPped node left placement {left_after:?} after the signal (lease {LEASE})");
    assert_eq!(lost.status, 502, "{}", lost.body);
    assert!(
        lost.error_message().contains("may have run there") && lost.error_message().contains(&warm),
        "{}",
        lost.body
    );
    for i in 0..5 {
        invoke_on(entry, "echo", &format!("after-{i}")).expect(200);
    }
    signal(stopped, Signal::CONT);
    // It comes back under a new lease.
    wait_members(entry, &["n1", "n2", "n3"]);
    // The lost invocation ran at most once: count the records everywhere.
    let runs = [&n1, &n2, &n3]
        .iter()
        .map(|d| {
            let list = d
                .request(
                    "GET",
                    "/api/v1/namespaces/_/activations?limit=200&docs=true",
                    Auth::Key(AUTH),
                    None,
                )
                .expect(200)
                .json();
            list.as_array()
                .unwrap()
                .iter()
                .filter(|a| a["response"]["result"]["echo"] == "in-flight")
                .count()
        })
        .sum::<usize>();
    assert!(runs <= 1, "the lost invocation ran {runs} times");

    // A killed node: forwards to it fail to connect and go to the next node at once.
    let victim_id = warm_node(&n1, "echo").unwrap_or_else(|| "n3".into());
    let victim = by_id(&victim_id);
    let (victim_pid, victim_state) = (victim.pid(), victim.state().clone());
    let [n1, n2, n3] = [n1, n2, n3].map(|d| {
        if d.pid() == victim_pid {
            d.kill9();
            None
        } else {
            Some(d)
        }
    });
    let alive: Vec<Daemon> = [n1, n2, n3].into_iter().flatten().collect();
    for d in &alive {
        for i in 0..3 {
            invoke_on(d, "echo", &format!("k{i}")).expect(200);
        }
    }
    let live_ids: Vec<String> = alive
        .iter()
        .map(|d| cluster_view(d)["node"].as_str().unwrap().to_string())
        .collect();
    let live_ids: Vec<&str> = live_ids.iter().map(String::as_str).collect();
    wait_members(&alive[0], &live_ids);
    // Restarted on its state directory after the crash: it removes the instances and cgroups
    // the killed run left (its clean stop at the end checks nothing is left) and rejoins.
    let back = node_on(&etcd, &victim_id, &victim_state, &[]);
    assert!(
        back.log_text().contains("left behind by an earlier run"),
        "{}",
        back.log_text()
    );
    wait_members(&alive[0], &["n1", "n2", "n3"]);
    invoke_on(&back, "echo", "after-restart").expect(200);
}

#[test]
fn etcd_member_loss_changes_nothing_and_a_lost_quorum_degrades_then_recovers() {
    let mut etcd = Etcd::start(3);
    let [n1, n2, _n3] = three_nodes(&etcd);
    put(&n1, "echo", ECHO, false).expect(200);
    invoke_on(&n2, "echo", "a").expect(200);

    etcd.kill(2);
    put(&n2, "second", ECHO, false).expect(200);
    invoke_on(&n1, "second", "b").expect(200);
    invoke_on(&n2, "echo", "c").expect(200);

    etcd.kill(1);
    // No quorum: deployed actions keep running on the node that receives them ...
    for i in 0..3 {
        invoke_on(&n1, "echo", &format!("q{i}")).expect(200);
    }
    // ... writes are refused with the reason, and health says degraded.
    let refused = put(&n1, "third", ECHO, false);
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.error_message().contains("etcd"), "{}", refused.body);
    wait_for("n2 to report degraded", Duration::from_secs(20), || {
        let health = n2.get_json("/icebox/v1/health");
        (health["status"] == "degraded").then_some(())
    });
    let deleted = n2.request("DELETE", &action_path("echo"), Auth::Key(AUTH), None);
    assert_eq!(deleted.status, 503, "{}", deleted.body);

    etcd.restart(1);
    etcd.restart(2);
    etcd.wait_member(1);
    wait_for("n1 to recover", Duration::from_secs(30), || {
        (n1.get_json("/icebox/v1/health")["status"] == "ok").then_some(())
    });
    // Nothing lost, writes work again.
    put(&n1, "third", ECHO, false).expect(200);
    for d in [&n1, &n2] {
        for name in ["echo", "second", "third"] {
            wait_for(
                &format!("{name} on {}", d.base_url()),
                Duration::from_secs(10),
                || {
                    (d.request("GET", &action_path(name), Auth::Key(AUTH), None)
                        .status
                        == 200)
                        .then_some(())
                },
            );
        }
    }
    invoke_on(&n2, "third", "d").expect(200);
}

#[test]
fn concurrent_updates_on_two_nodes_one_wins_the_other_gets_409() {
    let etcd = Etcd::start(3);
    let a = node(&etcd, "a", &[]);
    let b = node(&etcd, "b", &[]);
    wait_members(&a, &["a", "b"]);
    put(&a, "contended", ECHO, false).expect(200);
    // Creating it again without overwrite is OpenWhisk's 409 on every node.
    assert_eq!(put(&b, "contended", ECHO, false).status, 409);
    let mut wins = 0u64;
    let mut conflicts = 0u64;
    for round in 0..20 {
        let barrier = std::sync::Barrier::new(2);
        let code = format!("function main() {{ return {{round: {round}}}; }}");
        let (ra, rb) = std::thread::scope(|s| {
            let ta = s.spawn(|| {
                barrier.wait();
                put(&a, "contended", &code, true)
            });
            let tb = s.spawn(|| {
                barrier.wait();
                put(&b, "contended", &code, true)
            });
            (ta.join().unwrap(), tb.join().unwrap())
        });
        for r in [ra, rb] {
            match r.status {
                200 => wins += 1,
                409 => {
                    assert_eq!(
                        r.error_message(),
                        "Concurrent modification to resource detected."
                    );
                    conflicts += 1;
                }
                other => panic!("an update answered {other}: {}", r.body),
            }
        }
    }
    // Every update that answered 200 is one version: none was lost to another.
    let stored = wait_for("both nodes to agree", Duration::from_secs(10), || {
        let va = a.get_json(&action_path("contended"))["version"].clone();
        let vb = b.get_json(&action_path("contended"))["version"].clone();
        (va == vb).then_some(va)
    });
    assert_eq!(stored, json!(format!("0.0.{}", 1 + wins)));
    assert_eq!(wins + conflicts, 40);
    eprintln!("20 rounds of two concurrent updates: {wins} applied, {conflicts} refused with 409");
}

#[test]
fn nodes_that_do_not_belong_are_refused() {
    let etcd = Etcd::start(3);
    let first = node(&etcd, "n1", &[]);
    let url = etcd.url();
    // Another admin key.
    let other = StateDir::new();
    let text = refused_start_with_auth(
        other.path(),
        "0e5ab1c2-1111-4222-8333-444455556666:another-key",
        &["--cluster", &url, "--node-id", "n2"],
    );
    assert!(
        text.contains("admin key") && text.contains("differs"),
        "{text}"
    );
    // A state directory that joined this cluster, started against another prefix (which then
    // holds a new cluster).
    let state = first.state().clone();
    first.stop();
    let text = refused_start(
        state.path(),
        &[
            "--cluster",
            &url,
            "--node-id",
            "n1",
            "--cluster-prefix",
            "/elsewhere",
        ],
    );
    assert!(text.contains("belongs to cluster"), "{text}");
    // A second live node under an id already taken.
    let taken = node(&etcd, "dup", &[]);
    let text = refused_start(
        StateDir::new().path(),
        &["--cluster", &url, "--node-id", "dup"],
    );
    assert!(text.contains("in use by a live node"), "{text}");
    drop(taken);
}
