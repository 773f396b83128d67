//! Non-blocking invocations and reading their activation records, results and logs later.

use icebox_integration::{wait_for, Activation, Daemon};
use serde_json::json;
use std::time::Duration;

/// Waits until the activation is recorded (404 while it still runs).
fn fetch_when_done(d: &Daemon, id: &str) -> Activation {
    let path = format!("/api/v1/namespaces/_/activations/{id}");
    let record = wait_for("the activation to finish", Duration::from_secs(60), || {
        let reply = d.get(&path);
        match reply.status {
            200 => Some(reply.json()),
            404 => None,
            other => panic!("GET {path}: unexpected {other}: {}", reply.body),
        }
    });
    Activation {
        record,
        http_status: 0,
    }
}

const PY_CHATTY: &str = "import sys\n\ndef main(args):\n    print('stdout line for', args['who'])\n    print('stderr line for', args['who'], file=sys.stderr)\n    return {'who': args['who']}\n";
const JS_CHATTY: &str = "function main(params) {\n  console.log('stdout line for ' + params.who);\n  console.error('stderr line for ' + params.who);\n  return { who: params.who };\n}\n";

#[test]
fn non_blocking_invocations_are_readable_later_with_result_and_logs() {
    let d = Daemon::start(&[]);
    d.deploy("py-chatty", "python:3", PY_CHATTY, json!({"memory": 128}));
    d.deploy("js-chatty", "nodejs:20", JS_CHATTY, json!({"memory": 128}));

    for (name, who) in [("py-chatty", "Ada"), ("js-chatty", "Grace")] {
        let accepted = d
            .invoke_raw(
                name,
                "blocking=false",
                json!({"who": who}).to_string().as_bytes(),
            )
            .expect(202)
            .json();
        let id = accepted["activationId"]
            .as_str()
            .expect("202 carries the activationId")
            .to_string();
        assert_eq!(id.len(), 32, "{accepted}");
        assert!(
            accepted.get("response").is_none(),
            "a non-blocking answer has no result yet: {accepted}"
        );

        let record = fetch_when_done(&d, &id).expect_success();
        assert_eq!(record.id(), id);
        assert_eq!(record.record["name"], name);
        assert_eq!(record.result()["who"], who);
        for field in [
            "start",
            "end",
            "duration",
            "annotations",
            "namespace",
            "subject",
            "version",
        ] {
            assert!(
                record.record.get(field).is_some(),
                "{field} in {:#}",
                record.record
            );
        }

        let result = d.get_json(&format!("/api/v1/namespaces/_/activations/{id}/result"));
        assert_eq!(result["success"], true, "{result}");
        assert_eq!(result["status"], "success");
        assert_eq!(result["result"]["who"], who);

        let logs = d.get_json(&format!("/api/v1/namespaces/_/activations/{id}/logs"));
        let lines: Vec<&str> = logs["logs"]
            .as_array()
            .expect("logs array")
            .iter()
            .filter_map(|l| l.as_str())
            .collect();
        let has = |stream: &str| {
            lines
                .iter()
                .any(|l| l.contains(&format!("{stream}: {stream} line for {who}")))
        };
        assert!(
            has("stdout") && has("stderr"),
            "logs hold both streams in OpenWhisk's format: {lines:?}"
        );
        assert!(
            lines
                .iter()
                .all(|l| !l.contains("XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX")),
            "sentinels are removed: {lines:?}"
        );

        let listed = d.get_json(&format!("/api/v1/namespaces/_/activations?name={name}"));
        assert!(
            listed
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["activationId"] == id.as_str()),
            "{listed}"
        );
    }

    // result=true is ignored without blocking: still 202 with an id.
    d.invoke_raw(
        "py-chatty",
        "blocking=false&result=true",
        br#"{"who": "x"}"#,
    )
    .expect(202);
    // A blocking invocation with result=true answers with the result only.
    let only = d
        .invoke_raw(
            "py-chatty",
            "blocking=true&result=true",
            br#"{"who": "Lin"}"#,
        )
        .expect(200)
        .json();
    assert_eq!(only, json!({"who": "Lin"}));
    d.stop();
}
