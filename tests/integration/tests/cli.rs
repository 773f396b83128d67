//! The `icebox` CLI against a real daemon: deploy and invoke, the node views (`instances`,
//! `memory`, `events`) in both their JSON and human forms, activations, and its errors.

use icebox_core::units::GIB;
use icebox_integration::{wait_for, Daemon, AUTH};
use serde_json::Value;
use std::time::Duration;

#[test]
fn node_views_parse_and_mention_the_instance() {
    let d = Daemon::start(&[]);
    d.cli(&[
        "action",
        "create",
        "hello",
        "examples/python/hello.py",
        "--memory",
        "128",
    ])
    .success();
    let invoked = d
        .cli(&["--json", "action", "invoke", "hello", "-p", "name", "Ada"])
        .success()
        .json();
    assert_eq!(invoked["response"]["result"]["greeting"], "Hello, Ada!");
    let id = invoked["activationId"].as_str().unwrap().to_string();
    let instance = invoked["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|kv| kv["key"] == "icebox.instance")
        .unwrap()["value"]
        .as_str()
        .unwrap()
        .to_string();

    // The human form: result on stdout, a summary naming the instance on stderr.
    let human = d
        .cli(&["action", "invoke", "hello", "-p", "name", "Bob"])
        .success();
    assert!(human.stdout.contains("Hello, Bob!"), "{human}");
    assert!(
        human.stderr.contains(&instance) && human.stderr.contains("warm"),
        "{human}"
    );

    let instances = d.cli(&["instances", "--json"]).success().json();
    let listed = instances
        .as_array()
        .expect("an array")
        .iter()
        .find(|i| i["id"] == instance.as_str())
        .cloned();
    let listed = listed.unwrap_or_else(|| panic!("{instance} in {instances}"));
    assert_eq!(listed["action"], "guest/hello");
    assert_eq!(listed["invocations"], 2);
    let table = d.cli(&["instances"]).success();
    assert!(
        table.stdout.contains(&instance) && table.stdout.contains("guest/hello"),
        "{table}"
    );

    // Measured memory shows up once the manager has sampled the idle instance.
    let memory = wait_for(
        "the idle instance to be measured and charged",
        Duration::from_secs(20),
        || {
            let m = d.cli(&["memory", "--json"]).success().json();
            (m["charged"].as_u64()? > 0).then_some(m)
        },
    );
    assert_eq!(memory["budget"], 2 * GIB, "{memory}");
    assert_eq!(memory["charge_mode"], "uss");
    let kept: u64 = ["idle", "frozen"]
        .iter()
        .filter_map(|s| memory["by_state"][s]["instances"].as_u64())
        .sum();
    assert_eq!(kept, 1, "the one instance is kept alive: {memory}");
    assert!(memory["total"]["uss"].as_u64().unwrap() > 0);
    let human = d.cli(&["memory"]).success();
    assert!(!human.stdout.trim().is_empty(), "{human}");

    let events = d
        .cli(&["--json", "events", "--since", "0"])
        .success()
        .json_lines();
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e["instance"] == instance.as_str())
        .filter_map(|e| e["kind"].as_str())
        .collect();
    for kind in [
        "created",
        "runtime_ready",
        "init_done",
        "run_start",
        "run_end",
    ] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "events come in seq order: {seqs:?}"
    );
    let human = d.cli(&["events", "--since", "0"]).success();
    assert!(
        human.stdout.contains(&instance) && human.stdout.contains("init_done"),
        "{human}"
    );
    let last = *seqs.last().unwrap();
    let none_after = d
        .cli(&["--json", "events", "--since", &last.to_string()])
        .success();
    assert!(
        none_after
            .json_lines()
            .iter()
            .all(|e| e["seq"].as_u64().unwrap() > last),
        "{none_after}"
    );

    let record = d
        .cli(&["--json", "activation", "get", &id])
        .success()
        .json();
    assert_eq!(record["activationId"], id.as_str());
    let result = d.cli(&["activation", "result", &id]).success();
    assert!(result.stdout.contains("Hello, Ada!"), "{result}");
    let list = d.cli(&["--json", "activation", "list"]).success().json();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|a| a["activationId"] == id.as_str()),
        "{list}"
    );
    d.stop();
}

#[test]
fn cli_errors_exit_1_and_say_what_to_do() {
    let d = Daemon::start(&[]);
    d.cli(&["action", "create", "hello", "examples/python/hello.py"])
        .success();

    let (uuid, _) = AUTH.split_once(':').unwrap();
    let wrong = d.cli_with_auth(Some(&format!("{uuid}:wrong")), &["action", "list"]);
    assert_eq!(wrong.code, Some(1), "{wrong}");
    assert!(
        wrong.stderr.contains("rejected the API key") && wrong.stderr.contains("ICEBOX_AUTH"),
        "{wrong}"
    );

    let missing = d.cli_with_auth(None, &["instances"]);
    assert_eq!(missing.code, Some(1), "{missing}");
    assert!(
        missing.stderr.contains("no API key") && missing.stderr.contains("ICEBOX_AUTH"),
        "{missing}"
    );

    let unknown = d.cli(&["action", "invoke", "nope"]);
    assert_eq!(unknown.code, Some(1), "{unknown}");
    assert!(
        unknown.stderr.contains("nope") && unknown.stderr.contains("icebox action list"),
        "{unknown}"
    );

    // A failed activation prints its error and exits 1.
    d.cli(&[
        "action",
        "create",
        "boom",
        "examples/python/hello.py",
        "--main",
        "missing_entry",
    ])
    .success();
    let failed = d.cli(&["action", "invoke", "boom", "--result"]);
    assert_eq!(failed.code, Some(1), "{failed}");
    let result: Value = failed.json();
    assert!(
        result["error"]
            .as_str()
            .unwrap_or("")
            .contains("missing_entry"),
        "{failed}"
    );

    // Wrong usage is 2, before anything is sent.
    let usage = d.cli(&["action", "invoke", "hello", "-p", "only-a-key"]);
    assert_eq!(usage.code, Some(2), "{usage}");

    d.assert_healthy();
    d.stop();
}
