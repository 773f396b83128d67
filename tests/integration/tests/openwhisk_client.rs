//! OpenWhisk compatibility: the real `openwhisk` npm client (pinned in
//! tests/integration/openwhisk-client/package.json) creates, invokes, lists and reads
//! activations against iceboxd, unchanged.

use icebox_integration::{paths, wait_for, Daemon, AUTH};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

const CLIENT_VERSION: &str = "3.21.9";

fn client_dir() -> std::path::PathBuf {
    let dir = paths::workspace_root().join("tests/integration/openwhisk-client");
    let installed = dir.join("node_modules/openwhisk/package.json");
    let text = std::fs::read_to_string(&installed).unwrap_or_else(|_| {
        panic!(
            "{} is missing: run `npm ci` in tests/integration/openwhisk-client (`make test` does it)",
            installed.display()
        )
    });
    let version = serde_json::from_str::<Value>(&text).expect("package.json")["version"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert_eq!(
        version,
        CLIENT_VERSION,
        "the openwhisk client in node_modules is not the pinned one: run `npm ci` in {}",
        dir.display()
    );
    dir
}

#[test]
fn the_openwhisk_npm_client_works_unchanged() {
    let dir = client_dir();
    let d = Daemon::start(&[]);
    let out = Command::new("node")
        .arg("check.js")
        .current_dir(&dir)
        .env("OW_APIHOST", d.base_url())
        .env("OW_API_KEY", AUTH)
        .output()
        .expect("running node (is Node.js installed?)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the openwhisk client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));

    assert_eq!(seen["created"]["name"], "ow-hello", "{seen}");
    assert_eq!(
        seen["created"]["kind"], "nodejs:20",
        "the alias nodejs:default resolves: {seen}"
    );
    assert_eq!(seen["listedActions"], serde_json::json!(["ow-hello"]));
    assert_eq!(seen["fetchedAction"], "ow-hello");
    assert_eq!(seen["result"]["greeting"], "Hello, OpenWhisk!");
    assert_eq!(seen["activationStatus"], "success");

    let id = seen["activationId"].as_str().expect("an activation id");
    assert!(
        seen["listedActivations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == id),
        "{seen}"
    );
    assert_eq!(seen["fetched"]["activationId"], id);
    assert_eq!(seen["fetched"]["result"]["greeting"], "Hello, again!");
    assert_eq!(seen["fetchedResult"]["result"]["greeting"], "Hello, again!");
    let logs = seen["fetchedLogs"]["logs"].as_array().expect("logs");
    assert!(
        logs.iter().any(|l| l
            .as_str()
            .unwrap_or("")
            .contains("hello from the openwhisk client test")),
        "{seen}"
    );
    assert_eq!(seen["missingStatus"], 404);
    assert_eq!(seen["deleted"], "ow-hello");

    // The non-blocking activation the client started finishes and is recorded.
    let queued = seen["nonBlockingId"]
        .as_str()
        .expect("a non-blocking activation id");
    let record = wait_for(
        "the non-blocking activation to be recorded",
        Duration::from_secs(30),
        || {
            let r = d.get(&format!("/api/v1/namespaces/_/activations/{queued}"));
            (r.status == 200).then(|| r.json())
        },
    );
    assert_eq!(record["response"]["result"]["greeting"], "Hello, later!");
    d.stop();
}
