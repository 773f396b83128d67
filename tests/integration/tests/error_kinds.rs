//! Every failed activation record says why in a machine-readable `icebox.error` annotation
//! beside OpenWhisk's message (docs/api.md), so a harness groups failures without matching
//! message text; a success carries none.

use icebox_integration::{Activation, Daemon};
use serde_json::{json, Value};

const PY_CASES: &str = r#"
import os, time

def main(args):
    case = args.get("case")
    if case == "error":
        return {"error": "the action says no"}
    if case == "sleep":
        time.sleep(30)
    if case == "exit":
        os._exit(3)
    if case == "memory":
        hog = []
        while True:
            hog.append(bytearray(16 << 20))
    if case == "number":
        return 5
    return {"ok": True}
"#;

fn kind(a: &Activation) -> Option<&str> {
    a.annotation("icebox.error").and_then(Value::as_str)
}

#[test]
fn failed_activations_carry_their_kind_and_successes_none() {
    let d = Daemon::start(&["--prewarm", "none"]);
    d.deploy(
        "cases",
        "python:3",
        PY_CASES,
        json!({"memory": 128, "timeout": 3000}),
    );
    let ok = d.invoke("cases", json!({}));
    assert!(ok.succeeded(), "{:#}", ok.record);
    assert_eq!(kind(&ok), None, "{:#}", ok.record);

    for (case, expected) in [
        ("error", "application_error"),
        ("number", "bad_response"),
        ("sleep", "timeout"),
        ("exit", "exited"),
        ("memory", "out_of_memory"),
    ] {
        let a = d.invoke("cases", json!({ "case": case }));
        assert!(!a.succeeded(), "{case}: {:#}", a.record);
        assert_eq!(kind(&a), Some(expected), "{case}: {:#}", a.record);
        assert!(
            !a.error().is_empty(),
            "{case}: the message stays: {:#}",
            a.record
        );
    }

    // The action's code does not load: an /init failure of its own kind.
    d.deploy(
        "broken",
        "python:3",
        "def main(args:\n    return {}\n",
        json!({"memory": 128}),
    );
    let a = d.invoke("broken", json!({}));
    assert!(!a.succeeded(), "{:#}", a.record);
    let k = kind(&a).unwrap_or_default();
    assert!(k.starts_with("init_"), "{k}: {:#}", a.record);

    // Records read back later carry the same.
    let again = d.activation(a.id());
    assert_eq!(kind(&again), Some(k));
    d.assert_healthy();
}
