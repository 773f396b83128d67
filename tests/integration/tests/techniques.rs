//! The per-action technique choice (`iceboxd --techniques auto`, annotation
//! `icebox.techniques`; docs/techniques.md) against the real daemon and runtimes: the choice
//! and its reasons are shown per instance (API and `icebox instances`), an unknown technique
//! is refused at deployment, and a snapshot build that fails turns snapshots off for that
//! action, which keeps running, with an event saying why.

use icebox_integration::{wait_for, Auth, Daemon, AUTH};
use serde_json::{json, Value};
use std::time::Duration;

const PY: &str = r#"
def main(args):
    if args.get("fail"):
        raise Exception("warm-up refused")
    return {"ok": True}
"#;

fn deploy(d: &Daemon, name: &str, annotations: Value) -> u16 {
    let body = json!({"exec": {"kind": "python:3", "code": PY}, "annotations": annotations});
    d.put_action(name, &body).status
}

fn techniques_of(d: &Daemon, name: &str) -> Value {
    d.instances()
        .into_iter()
        .find(|i| i["action"] == format!("guest/{name}"))
        .unwrap_or_else(|| panic!("an instance of {name}"))["techniques"]
        .clone()
}

#[test]
fn an_unknown_technique_is_refused_at_deployment_and_nothing_is_stored() {
    let d = Daemon::start(&["--prewarm", "none"]);
    let body = json!({"exec": {"kind": "python:3", "code": PY},
        "annotations": [{"key": "icebox.techniques", "value": ["reclaim", "zswap"]}]});
    let reply = d.put_action("bad", &body).expect(400);
    let error: Value = serde_json::from_str(&reply.body).unwrap();
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("unknown technique 'zswap'"),
        "{error}"
    );
    assert!(
        error["code"].is_string() || error["code"].is_number(),
        "{error}"
    );
    let not_a_list = json!({"exec": {"kind": "python:3", "code": PY},
        "annotations": [{"key": "icebox.techniques", "value": "reclaim"}]});
    d.put_action("bad", &not_a_list).expect(400);
    d.request(
        "GET",
        &icebox_integration::action_path("bad"),
        Auth::Key(AUTH),
        None,
    )
    .expect(404);
}

#[test]
fn auto_shows_each_actions_choice_and_reasons_and_the_annotation_overrides() {
    let d = Daemon::start(&["--prewarm", "none", "--techniques", "auto"]);
    assert_eq!(deploy(&d, "measured", json!([])), 200);
    assert_eq!(
        deploy(
            &d,
            "listed",
            json!([{"key": "icebox.techniques", "value": ["snapshot"]}])
        ),
        200
    );
    d.invoke("measured", json!({})).expect_success();
    d.invoke("listed", json!({})).expect_success();

    let measured = techniques_of(&d, "measured");
    assert_eq!(measured["mode"], "auto", "{measured}");
    // The node's default --reclaim-mode desiccant offers reclaim; a Python runtime has a
    // collector and has not been reclaimed yet.
    assert_eq!(
        measured["reasons"]["reclaim"], "garbage_not_measured",
        "{measured}"
    );
    assert_eq!(
        measured["reasons"]["stemcell"], "not_available",
        "{measured}"
    );
    assert_eq!(
        measured["reasons"]["sharing"], "no_concurrency",
        "{measured}"
    );
    // One cold start: too few for a snapshot, whatever its time.
    let snapshot = measured["reasons"]["snapshot"].as_str().unwrap();
    assert!(
        ["cold_starts_rare", "start_fast", "not_available"].contains(&snapshot),
        "{measured}"
    );
    assert!(measured["on"]
        .as_array()
        .unwrap()
        .contains(&json!("reclaim")));

    let listed = techniques_of(&d, "listed");
    assert_eq!(listed["mode"], "annotation", "{listed}");
    assert!(!listed["on"].as_array().unwrap().contains(&json!("reclaim")));
    assert_eq!(listed["reasons"]["reclaim"], "annotation");
    // The instance the list left Desiccant out of runs without it.
    let instance = d
        .instances()
        .into_iter()
        .find(|i| i["action"] == "guest/listed")
        .unwrap();
    assert_eq!(instance["reclaim_mode"], "vanilla", "{instance}");

    // `icebox instances` shows the column.
    let table = d.cli(&["instances"]).success().stdout;
    let header = table.lines().next().unwrap();
    assert!(header.contains("TECHNIQUES"), "{table}");
    let row = table
        .lines()
        .find(|l| l.contains("guest/measured"))
        .unwrap();
    assert!(row.contains("reclaim"), "{table}");
}

#[test]
fn a_snapshot_build_that_fails_turns_snapshots_off_and_the_action_keeps_running() {
    let d = Daemon::start(&["--prewarm", "none"]);
    let snapshots_here = d.get_json("/icebox/v1/health")["isolations"]
        .as_array()
        .is_some_and(|l| l.iter().any(|i| i["snapshots"] == true));
    // The template's warm-up run fails: a real build failure in the daemon, whether or not
    // CRIU is ever reached.
    let status = deploy(
        &d,
        "warmfail",
        json!([
            {"key": "icebox.snapshot", "value": "warm"},
            {"key": "icebox.snapshot_warmup", "value": {"fail": true}}
        ]),
    );
    assert_eq!(status, 200);
    let snapshot_state = || {
        d.get_json("/icebox/v1/snapshots")
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["action"] == "guest/warmfail")
            .map(|s| s["state"].clone())
    };
    if !snapshots_here && snapshot_state().is_none() {
        // This node's backend cannot take snapshots: no build is ever tried.
        eprintln!("skipped: no snapshot-capable backend on this node");
        return;
    }
    wait_for("the build to fail", Duration::from_secs(60), || {
        snapshot_state().filter(|s| s == "failed")
    });
    let changed = wait_for(
        "a techniques_changed event",
        Duration::from_secs(10),
        || {
            d.events()
                .into_iter()
                .find(|e| e["kind"] == "techniques_changed" && e["action"] == "guest/warmfail")
        },
    );
    let detail = changed["detail"].as_str().unwrap();
    assert!(detail.contains("-snapshot (failed)"), "{changed}");
    assert!(detail.contains("warm-up"), "{changed}");

    // The action keeps running, cold start after cold start, without a new build.
    for _ in 0..2 {
        for i in d.instances() {
            if i["action"] == "guest/warmfail" {
                let id = i["id"].as_str().unwrap();
                d.request(
                    "DELETE",
                    &format!("/icebox/v1/instances/{id}"),
                    Auth::Key(AUTH),
                    None,
                )
                .expect(200);
            }
        }
        let a = d.invoke("warmfail", json!({})).expect_success();
        assert_eq!(a.start_kind(), "cold", "{a:?}");
    }
    let techniques = techniques_of(&d, "warmfail");
    assert_eq!(techniques["reasons"]["snapshot"], "failed", "{techniques}");
    assert!(
        techniques["failed"]["snapshot"]
            .as_str()
            .unwrap()
            .contains("snapshot build"),
        "{techniques}"
    );
    assert_eq!(snapshot_state().unwrap(), "failed");
    let builds = d
        .events()
        .into_iter()
        .filter(|e| e["action"] == "guest/warmfail" && e["detail"] == "snapshot template")
        .count();
    assert_eq!(builds, 1, "no build after the failure");
}
