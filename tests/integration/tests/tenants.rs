//! More than one tenant on a node (issue 18 §1): namespaces with their own keys, made and
//! revoked with the CLI and the admin key; every action, activation, instance and event
//! scoped to its namespace; OpenWhisk's per-namespace quotas and a keep-alive memory share.
//! Each test runs a real iceboxd; the two-tenant test drives it with the real `openwhisk`
//! npm client.

use icebox_integration::{paths, wait_for, Auth, Daemon, AUTH};
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

/// `icebox namespace create NAME ARGS…` and `icebox key create NAME --json`: the new key.
fn tenant(d: &Daemon, name: &str, limits: &[&str]) -> String {
    let mut args = vec!["namespace", "create", name];
    args.extend_from_slice(limits);
    d.cli(&args).success();
    let key = d.cli(&["--json", "key", "create", name]).success().json();
    assert_eq!(key["namespace"], name);
    key["auth"].as_str().expect("the new key").to_string()
}

fn deploy_as(d: &Daemon, key: &str, name: &str, code: &str) {
    let body = serde_json::to_vec(&json!({"exec": {"kind": "python:3", "code": code}})).unwrap();
    let reply = d.request(
        "PUT",
        &format!("/api/v1/namespaces/_/actions/{name}"),
        Auth::Key(key),
        Some(&body),
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
}

fn invoke_as(d: &Daemon, key: &str, name: &str) -> icebox_integration::Reply {
    d.request(
        "POST",
        &format!("/api/v1/namespaces/_/actions/{name}?blocking=true"),
        Auth::Key(key),
        Some(b"{}"),
    )
}

fn get_as(d: &Daemon, key: &str, path: &str) -> icebox_integration::Reply {
    d.request("GET", path, Auth::Key(key), None)
}

const ECHO: &str = "def main(args):\n    return {'ok': True}\n";

#[test]
fn two_tenants_through_the_openwhisk_client_see_only_their_own() {
    let d = Daemon::start(&[]);
    let key_a = tenant(&d, "alpha", &[]);
    let key_b = tenant(&d, "beta", &[]);
    let dir = paths::workspace_root().join("tests/integration/openwhisk-client");
    let out = Command::new("node")
        .arg("tenants.js")
        .current_dir(&dir)
        .env("OW_APIHOST", d.base_url())
        .env("KEY_A", &key_a)
        .env("NS_A", "alpha")
        .env("KEY_B", &key_b)
        .env("NS_B", "beta")
        .output()
        .expect("running node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap();

    // The same action name in two namespaces is two actions.
    assert_eq!(
        seen["aResult"],
        json!({"tenant": "A", "name": "x"}),
        "{seen}"
    );
    assert_eq!(seen["bResult"]["tenant"], "B", "{seen}");
    assert_eq!(seen["aActivationNamespace"], "alpha");
    assert_eq!(seen["aSubject"], "alpha");
    assert_eq!(seen["aNamespaces"], json!(["alpha"]), "{seen}");
    assert_eq!(seen["aActions"], json!(["only-a", "shared-name"]));
    assert_eq!(seen["bActions"], json!(["shared-name"]));
    assert!(
        seen["bActivations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n == "shared-name"),
        "B lists only its own activations: {seen}"
    );
    for (what, status) in seen["bOnA"].as_object().unwrap() {
        assert_eq!(status, 404, "B's {what} on A's namespace: {seen}");
    }
    assert_eq!(seen["aStill"]["tenant"], "A");

    // The node views: B sees its instance only; A's instance is not there for B.
    let mine = |key: &str| -> Vec<Value> {
        get_as(&d, key, "/icebox/v1/instances")
            .expect(200)
            .json()
            .as_array()
            .unwrap()
            .clone()
    };
    let b_view = mine(&key_b);
    assert!(!b_view.is_empty());
    assert!(
        b_view.iter().all(|i| i["action"] == "beta/shared-name"),
        "{b_view:?}"
    );
    let a_instance = mine(&key_a)
        .into_iter()
        .find(|i| i["action"] == "alpha/only-a")
        .expect("A's instance")["id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/icebox/v1/instances/{a_instance}");
    assert_eq!(get_as(&d, &key_b, &path).status, 404);
    assert_eq!(get_as(&d, &key_b, &format!("{path}/stats")).status, 404);
    let evict = d.request("DELETE", &path, Auth::Key(&key_b), None);
    assert_eq!(evict.status, 404, "B cannot evict A's instance");
    assert!(d.instance(&a_instance).is_some(), "A's instance lives on");
    let events = get_as(&d, &key_b, "/icebox/v1/events?since=0&follow=false");
    let events = icebox_integration::parse_sse(&events.expect(200).body);
    assert!(!events.is_empty());
    assert!(
        events.iter().all(|e| e["action"] == "beta/shared-name"),
        "B's events: {events:?}"
    );
    // The admin key sees both tenants.
    let all: Vec<String> = d
        .instances()
        .iter()
        .map(|i| i["action"].as_str().unwrap().to_string())
        .collect();
    assert!(
        all.iter().any(|a| a.starts_with("alpha/")) && all.iter().any(|a| a.starts_with("beta/"))
    );
    // Namespaces and keys are the admin's to manage.
    let refused = get_as(&d, &key_a, "/icebox/v1/namespaces");
    assert_eq!(refused.status, 403, "{}", refused.body);
    d.stop();
}

#[test]
fn quotas_answer_429_with_openwhisk_text_and_keys_and_namespaces_go() {
    let d = Daemon::start(&[]);
    let per_minute = tenant(&d, "metered", &["--invocations-per-minute", "3"]);
    deploy_as(&d, &per_minute, "echo", ECHO);
    for _ in 0..3 {
        invoke_as(&d, &per_minute, "echo").expect(200);
    }
    let refused = invoke_as(&d, &per_minute, "echo").expect(429);
    assert_eq!(
        refused.error_message(),
        "Too many requests in the last minute (count: 4, allowed: 3)."
    );
    // The admin's namespace has no quota: the node is not throttled for it.
    d.deploy("echo", "python:3", ECHO, json!({}));
    for _ in 0..5 {
        d.invoke("echo", json!({}));
    }

    let one_at_a_time = tenant(&d, "narrow", &["--concurrent-invocations", "1"]);
    deploy_as(
        &d,
        &one_at_a_time,
        "sleepy",
        "import time\ndef main(args):\n    time.sleep(3)\n    return {}\n",
    );
    let first = {
        let d_url = d.base_url().to_string();
        let key = one_at_a_time.clone();
        std::thread::spawn(move || {
            icebox_integration::Http::new(d_url)
                .send(
                    "POST",
                    "/api/v1/namespaces/_/actions/sleepy?blocking=true",
                    Auth::Key(&key),
                    Some(b"{}"),
                )
                .unwrap()
        })
    };
    wait_for(
        "the first invocation to run",
        Duration::from_secs(60),
        || {
            let ns: Value = d.get_json("/icebox/v1/namespaces");
            ns.as_array()
                .unwrap()
                .iter()
                .any(|n| n["name"] == "narrow" && n["inFlight"] == 1)
                .then_some(())
        },
    );
    let refused = invoke_as(&d, &one_at_a_time, "sleepy").expect(429);
    assert_eq!(
        refused.error_message(),
        "Too many concurrent requests in flight (count: 2, allowed: 1)."
    );
    assert_eq!(first.join().unwrap().status, 200);
    invoke_as(&d, &one_at_a_time, "sleepy").expect(200);

    // A revoked key is refused at once.
    let uuid = per_minute.split(':').next().unwrap();
    d.cli(&["key", "revoke", uuid]).success();
    assert_eq!(invoke_as(&d, &per_minute, "echo").status, 401);

    // A namespace with actions goes only with --force, and takes them along.
    let del = d.cli(&["namespace", "delete", "narrow"]);
    assert_ne!(del.code, Some(0), "{del}");
    assert!(del.stderr.contains("force"), "{del}");
    d.cli(&["namespace", "delete", "narrow", "--force"])
        .success();
    assert_eq!(invoke_as(&d, &one_at_a_time, "sleepy").status, 401);
    let listed = d.cli(&["--json", "namespace", "list"]).success().json();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert!(!names.contains(&"narrow"), "{names:?}");
    assert!(d
        .instances()
        .iter()
        .all(|i| !i["action"].as_str().unwrap().starts_with("narrow/")));
    // Its records went with it: re-created, the namespace starts empty.
    let again = tenant(&d, "narrow", &[]);
    let records = get_as(&d, &again, "/api/v1/namespaces/_/activations").expect(200);
    assert_eq!(records.json(), json!([]));
    d.stop();
}

#[test]
fn a_namespace_over_its_memory_share_loses_its_own_idle_instances_only() {
    let d = Daemon::start(&[]);
    let small = tenant(&d, "small", &["--memory-share", "1KiB"]);
    let roomy = tenant(&d, "roomy", &[]);
    deploy_as(&d, &small, "echo", ECHO);
    deploy_as(&d, &roomy, "echo", ECHO);
    invoke_as(&d, &roomy, "echo").expect(200);
    invoke_as(&d, &small, "echo").expect(200);
    let evicted = wait_for(
        "small's idle instance to be evicted for its share",
        Duration::from_secs(60),
        || {
            d.events()
                .into_iter()
                .find(|e| e["action"] == "small/echo" && e["kind"] == "evicted")
        },
    );
    assert_eq!(evicted["detail"], "namespace_share", "{evicted}");
    assert!(
        d.instances().iter().any(|i| i["action"] == "roomy/echo"),
        "the neighbour's instance stays"
    );
    d.stop();
}

#[test]
fn the_admin_key_is_stored_hashed_and_the_node_key_still_works() {
    let d = Daemon::start(&[]);
    d.deploy("echo", "python:3", ECHO, json!({}));
    d.invoke("echo", json!({}));
    let db = d.state().path().join("icebox.db");
    let bytes = std::fs::read(&db).unwrap();
    let secret = AUTH.split_once(':').unwrap().1;
    assert!(
        !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the admin secret is not in the registry in clear"
    );
    let ns = d.get_json("/icebox/v1/namespaces");
    assert!(ns.as_array().unwrap().iter().any(|n| n["name"] == "guest"));
    d.stop();
}
