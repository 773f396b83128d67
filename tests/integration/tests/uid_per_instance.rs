//! A uid per instance (docs/architecture.md): the kernel counts inotify instances, POSIX
//! message-queue bytes and RLIMIT_NPROC per uid, so each crun instance runs as its own uid
//! from `--uid-range` and one instance exhausting those limits leaves every other one its own.

use icebox_integration::{wait_for, Activation, Auth, Daemon, StateDir, AUTH};
use serde_json::{json, Value};
use std::time::Duration;

/// Reports its credentials; exhausts inotify instances and message-queue bytes (and keeps
/// them: the instance stays warm holding them); creates one of each; keeps child processes;
/// forks once under an RLIMIT_NPROC just above its own instance's task count.
const PY_LIMITS: &str = r#"
import ctypes, errno, os, subprocess, sys

libc = ctypes.CDLL(None, use_errno=True)
HELD = []

class MqAttr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long),
                ("msgsize", ctypes.c_long), ("curmsgs", ctypes.c_long),
                ("reserved", ctypes.c_long * 4)]

def inotify():
    fd = libc.inotify_init1(0)
    return fd, ctypes.get_errno()

def queue(name):
    attr = MqAttr(0, 10, 8192, 0)
    fd = libc.mq_open(name.encode(), os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(attr))
    return fd, ctypes.get_errno()

def name(err):
    return errno.errorcode.get(err, str(err))

def exhaust(make):
    made = 0
    while made < 100000:
        fd, err = make(made)
        if fd < 0:
            return made, name(err)
        HELD.append(fd)
        made += 1
    return made, None

def one(make, close):
    fd, err = make()
    if fd < 0:
        return name(err)
    close(fd)
    return "ok"

FORK_UNDER_NPROC = r'''
import os, resource
me = os.getuid()
tasks = 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.stat("/proc/" + pid).st_uid == me:
            tasks += len(os.listdir("/proc/" + pid + "/task"))
    except OSError:
        pass
limit = tasks + 8
resource.setrlimit(resource.RLIMIT_NPROC, (limit, resource.getrlimit(resource.RLIMIT_NPROC)[1]))
try:
    pid = os.fork()
except OSError as e:
    print("%d %s" % (limit, e.strerror))
else:
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print("%d ok" % limit)
'''

def main(args):
    op = args.get("op")
    if op == "exhaust":
        inotify_made, inotify_stop = exhaust(lambda i: inotify())
        mq_made, mq_stop = exhaust(lambda i: queue("/held-%d" % i))
        return {"inotify": inotify_made, "inotify_stop": inotify_stop,
                "mq": mq_made, "mq_stop": mq_stop}
    if op == "one":
        return {"inotify": one(inotify, os.close),
                "mq": one(lambda: queue("/probe-%d" % os.getpid()),
                          lambda fd: (libc.mq_close(fd), libc.mq_unlink(b"/probe-%d" % os.getpid())))}
    if op == "children":
        for _ in range(args["n"]):
            HELD.append(subprocess.Popen(["sleep", "600"]))
        return {"children": len(HELD)}
    if op == "fork_under_nproc":
        out = subprocess.run([sys.executable, "-c", FORK_UNDER_NPROC],
                             capture_output=True, text=True)
        limit, _, result = out.stdout.strip().partition(" ")
        return {"limit": int(limit or 0), "fork": result, "stderr": out.stderr}
    st = os.stat("/tmp")
    return {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
            "tmp_uid": st.st_uid, "home_writable": os.access(os.environ.get("HOME", "/tmp"), os.W_OK)}
"#;

fn deploy(d: &Daemon, names: &[&str]) {
    for name in names {
        d.deploy(name, "python:3", PY_LIMITS, json!({"memory": 128}));
    }
}

fn call(d: &Daemon, name: &str, args: Value) -> Value {
    d.invoke(name, args).expect_success().result().clone()
}

fn uid_of(d: &Daemon, name: &str) -> u64 {
    let who = call(d, name, json!({}));
    assert_eq!(who["uid"], who["euid"], "{who}");
    who["uid"].as_u64().expect("uid")
}

#[test]
fn two_warm_instances_of_different_actions_have_their_own_uids() {
    let d = Daemon::start(&[]);
    deploy(&d, &["first", "second"]);
    let first = call(&d, "first", json!({}));
    let second = call(&d, "second", json!({}));
    let (a, b) = (
        first["uid"].as_u64().unwrap(),
        second["uid"].as_u64().unwrap(),
    );
    assert_ne!(a, b, "two live instances share uid {a}");
    for who in [&first, &second] {
        let uid = who["uid"].as_u64().unwrap();
        assert!(
            (100_000..=165_535).contains(&uid),
            "uid {uid} is outside the default --uid-range: {who}"
        );
        assert_eq!(who["gid"], who["uid"], "its group is its own: {who}");
        assert_eq!(who["tmp_uid"], who["uid"], "/tmp is created for it: {who}");
        assert_eq!(who["home_writable"], true, "{who}");
    }
    // Both are still the same warm instances: the uids were not a fluke of restarts.
    assert_eq!(uid_of(&d, "first"), a);
    assert_eq!(uid_of(&d, "second"), b);
    d.stop();
}

#[test]
fn an_instance_that_exhausts_its_inotify_and_message_queues_leaves_others_theirs() {
    // Enough open files per process that the per-user limits (128 inotify instances, the
    // message-queue bytes) are what the hog reaches, not its own RLIMIT_NOFILE; a node this
    // small fits that under the open-file bound.
    let d = Daemon::start(&[
        "--instance-nofile",
        "1024",
        "--pids-max",
        "64",
        "--max-instances",
        "8",
    ]);
    deploy(&d, &["hog", "neighbour"]);
    // The neighbour's instance exists first, as a warm one would.
    assert_eq!(
        call(&d, "neighbour", json!({"op": "one"})),
        json!({"inotify": "ok", "mq": "ok"})
    );

    let hog = call(&d, "hog", json!({"op": "exhaust"}));
    assert_eq!(hog["inotify_stop"], "EMFILE", "{hog}");
    assert_eq!(hog["mq_stop"], "EMFILE", "{hog}");
    assert!(hog["inotify"].as_u64().unwrap() > 0, "{hog}");
    assert!(hog["mq"].as_u64().unwrap() > 0, "{hog}");
    // The hog's own limits stay exhausted (it is warm and holds them) ...
    assert_eq!(
        call(&d, "hog", json!({"op": "one"})),
        json!({"inotify": "EMFILE", "mq": "EMFILE"})
    );
    // ... and are not the neighbour's.
    assert_eq!(
        call(&d, "neighbour", json!({"op": "one"})),
        json!({"inotify": "ok", "mq": "ok"})
    );
    d.stop();
}

#[test]
fn rlimit_nproc_of_one_instance_does_not_count_another_instances_processes() {
    let d = Daemon::start(&[]);
    deploy(&d, &["parent", "forker"]);
    let held = call(&d, "parent", json!({"op": "children", "n": 40}));
    assert_eq!(held["children"], 40, "{held}");
    let fork = call(&d, "forker", json!({"op": "fork_under_nproc"}));
    assert!(
        fork["limit"].as_u64().unwrap() > 0 && fork["limit"].as_u64().unwrap() < 40,
        "{fork}"
    );
    assert_eq!(
        fork["fork"], "ok",
        "a fork under an RLIMIT_NPROC above the forker's own tasks failed: {fork}"
    );
    d.stop();
}

#[test]
fn an_evicted_instances_uid_is_given_to_the_next_and_an_exhausted_range_is_a_clear_error() {
    // A range of its own (no other test daemon takes these uids in between) and no
    // prewarmed instances (they take uids too).
    let d = Daemon::start(&["--uid-range", "170000-170001", "--prewarm", "none"]);
    deploy(&d, &["one", "two", "three"]);
    assert_eq!(uid_of(&d, "one"), 170_000);
    assert_eq!(uid_of(&d, "two"), 170_001);

    let full = d.invoke_raw("three", "blocking=true", b"{}");
    assert!(
        full.body
            .contains("no free uid left in the instance uid range 170000-170001"),
        "{} {}",
        full.status,
        full.body
    );

    let one = d
        .instances()
        .into_iter()
        .find(|i| i["action"] == "guest/one")
        .expect("the instance of one");
    d.request(
        "DELETE",
        &format!("/icebox/v1/instances/{}", one["id"].as_str().unwrap()),
        Auth::Key(AUTH),
        None,
    )
    .expect(200);
    assert_eq!(uid_of(&d, "three"), 170_000, "the evicted instance's uid");
    assert_eq!(uid_of(&d, "two"), 170_001);
    d.stop();
}

fn evict_all(d: &Daemon, name: &str) {
    for i in d.instances() {
        if i["action"] == format!("guest/{name}") {
            d.request(
                "DELETE",
                &format!("/icebox/v1/instances/{}", i["id"].as_str().unwrap()),
                Auth::Key(AUTH),
                None,
            )
            .expect(200);
        }
    }
}

/// A cold start of `name` that the daemon restored from its snapshot.
fn restored(d: &Daemon, name: &str) -> Activation {
    evict_all(d, name);
    let a = d.invoke(name, json!({})).expect_success();
    assert!(
        a.annotation("icebox.restore").is_some_and(Value::is_string),
        "not a restore: {a:?}"
    );
    a
}

#[test]
fn restored_instances_run_as_their_snapshots_uid_which_no_other_action_gets_across_a_restart() {
    let state = StateDir::new();
    let flags = ["--uid-range", "170010-170013", "--prewarm", "none"];
    let d = Daemon::start_on(&state, &flags);
    let body = json!({"exec": {"kind": "python:3", "code": PY_LIMITS},
                      "annotations": [{"key": "icebox.snapshot", "value": true}]});
    d.put_action("snap", &body).expect(200);
    d.invoke("snap", json!({})).expect_success();
    wait_for("the snapshot", Duration::from_secs(60), || {
        d.get_json("/icebox/v1/snapshots")
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["action"] == "guest/snap" && s["state"] == "ready")
            .cloned()
    });
    evict_all(&d, "snap");
    // Three fresh instances and the pinned uid fill the range of four: had the pin not held,
    // one of them would have taken it (the lowest free uid goes first).
    let others = ["other1", "other2", "other3"];
    deploy(&d, &others);
    let fresh = |d: &Daemon| others.map(|o| uid_of(d, o));
    let before = fresh(&d);
    let pinned = restored(&d, "snap").result()["uid"].as_u64().unwrap();
    assert!((170_010..=170_013).contains(&pinned), "{pinned}");
    assert!(
        !before.contains(&pinned),
        "{before:?} took the snapshot's uid {pinned}"
    );
    d.stop();

    // The next daemon pins the snapshot's uid again before any restore asks for it.
    let d = Daemon::start_on(&state, &flags);
    let after = fresh(&d);
    assert!(
        !after.contains(&pinned),
        "after a restart {after:?} took the snapshot's uid {pinned}"
    );
    assert_eq!(restored(&d, "snap").result()["uid"], pinned);
    d.stop();
}

#[test]
fn after_a_crash_the_next_daemon_frees_the_uids_of_the_instances_left_behind() {
    let state = StateDir::new();
    let flags = ["--uid-range", "170020-170021", "--prewarm", "none"];
    let d = Daemon::start_on(&state, &flags);
    deploy(&d, &["left"]);
    // Its instance holds children and exhausted limits when the daemon dies.
    assert_eq!(uid_of(&d, "left"), 170_020);
    call(&d, "left", json!({"op": "children", "n": 5}));
    call(&d, "left", json!({"op": "exhaust"}));
    d.kill9();

    let d = Daemon::start_on(&state, &flags);
    deploy(&d, &["next"]);
    assert_eq!(
        uid_of(&d, "next"),
        170_020,
        "the orphan's uid comes back once it is cleaned up"
    );
    assert_eq!(
        call(&d, "next", json!({"op": "one"})),
        json!({"inotify": "ok", "mq": "ok"}),
        "nothing of the orphan is still charged to the uid"
    );
    d.stop();
}
