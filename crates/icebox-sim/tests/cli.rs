//! Runs the real binary on the shared trace samples (../shared/traces from the repository).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_icebox-sim");

/// ../shared/traces beside the repository, or ICEBOX_SIM_TRACES (for worktrees elsewhere).
/// Missing samples fail the test, as in the bench suite: a skip would pass unnoticed.
fn traces() -> PathBuf {
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/traces");
    let dir =
        std::env::var_os("ICEBOX_SIM_TRACES").map_or_else(|| PathBuf::from(default), PathBuf::from);
    assert!(
        dir.is_dir(),
        "trace samples not found at {} (they live in ../shared/traces beside the repository, \
         or set ICEBOX_SIM_TRACES)",
        dir.display()
    );
    dir
}

fn profiles() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/profiles/thesis-table-4.1.json"
    )
    .to_string()
}

fn sim(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("runs icebox-sim")
}

fn ok(args: &[&str]) -> String {
    let out = sim(args);
    assert!(
        out.status.success(),
        "icebox-sim {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn help_documents_every_flag() {
    let help = ok(&["--help"]);
    for flag in [
        "--trace",
        "--expansion",
        "--seed",
        "--window",
        "--busiest",
        "--warmup",
        "--repeat",
        "--profiles",
        "--mapping",
        "--durations",
        "--cold-start-ms",
        "--default-memory-mb",
        "--default-duration-ms",
        "--nodes",
        "--node-memory",
        "--node-cores",
        "--placement",
        "--keepalive",
        "--evict",
        "--sharing",
        "--concurrency",
        "--technique",
        "--desiccant-config",
        "--hybrid-config",
        "--out",
        "--no-plots",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

#[test]
fn sweeps_the_busiest_window_of_the_2019_sample_into_a_comparison() {
    let t = traces();
    let out = tempfile::tempdir().unwrap();
    let trace = format!("azure2019:{}", t.join("azure2019-sample100").display());
    let stdout = ok(&[
        "--trace",
        &trace,
        "--busiest",
        "5m",
        "--warmup",
        "5m",
        "--profiles",
        &profiles(),
        "--sharing",
        "shared,isolate",
        "--keepalive",
        "infinite",
        "--evict",
        "frequency",
        "--nodes",
        "4",
        "--node-memory",
        "2GiB,16GiB",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(
        stdout.contains("memory for equal cold starts (reference: shared none infinite)"),
        "{stdout}"
    );
    let s = summary(out.path());
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for r in runs {
        let m = &r["metrics"];
        assert!(m["invocations"].as_u64().unwrap() > 0);
        assert!(m["cold_starts"].as_u64().unwrap() <= m["invocations"].as_u64().unwrap());
        // Reported (a wall-clock speed, so not compared with anything).
        assert!(m["events_per_s"].is_number(), "{m}");
    }
    // More memory never means more cold starts with infinite keep-alive, in either mode.
    let cold = |i: usize| runs[i]["metrics"]["cold_starts"].as_u64().unwrap();
    assert!(cold(1) <= cold(0) && cold(3) <= cold(2));
    assert_eq!(
        s["workload"]["window_end_minute"].as_f64().unwrap()
            - s["workload"]["window_start_minute"].as_f64().unwrap(),
        5.0
    );
    for f in ["timeline.csv", "cold_starts_vs_memory.png", "timeline.png"] {
        assert!(out.path().join(f).is_file(), "{f} missing");
    }
    let timeline = std::fs::read_to_string(out.path().join("timeline.csv")).unwrap();
    assert!(
        timeline.starts_with("run,second,memory_mib,active_mib,instances,busy_instances,queued\n")
    );
    // 4 runs × 300 counted seconds.
    assert_eq!(timeline.lines().count(), 1 + 4 * 300);
}

#[test]
fn the_same_seed_gives_the_same_result_and_another_seed_another() {
    let t = traces();
    let trace = format!("azure2019:{}", t.join("azure2019-sample100").display());
    let run = |seed: &str| {
        let out = tempfile::tempdir().unwrap();
        ok(&[
            "--trace",
            &trace,
            "--window",
            "600:610",
            "--profiles",
            &profiles(),
            "--seed",
            seed,
            "--sharing",
            "isolate",
            "--nodes",
            "2",
            "--node-memory",
            "1GiB",
            "--out",
            out.path().to_str().unwrap(),
            "--no-plots",
        ]);
        let m = summary(out.path())["runs"][0]["metrics"].clone();
        (
            m["cold_starts"].as_u64(),
            m["latency_ms_p99"].as_f64(),
            m["memory_gib_s"].as_f64(),
        )
    };
    assert_eq!(run("7"), run("7"));
    assert_ne!(run("7"), run("8"));
}

#[test]
fn replays_the_2021_sample_and_an_events_file() {
    let t = traces();
    let trace = format!(
        "azure2021:{}",
        t.join("azure2021-sample/invocations.csv").display()
    );
    let stdout = ok(&[
        "--trace",
        &trace,
        "--durations",
        "trace",
        "--keepalive",
        "ttl:1m,hybrid",
        "--technique",
        "none,desiccant",
    ]);
    assert_eq!(
        stdout.lines().filter(|l| l.contains(" 320G ")).count(),
        4,
        "{stdout}"
    );
    assert!(
        stdout.contains("199"),
        "all 199 invocations replayed: {stdout}"
    );

    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.csv");
    std::fs::write(
        &events,
        "time_ms,function,duration_ms\n0,a,100\n50,a,100\n5000,b,20\n",
    )
    .unwrap();
    let stdout = ok(&[
        "--trace",
        &format!("events:{}", events.display()),
        "--nodes",
        "1",
        "--node-memory",
        "1GiB",
        "--durations",
        "trace",
    ]);
    let row = stdout.lines().nth(1).unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    // process ttl: 3 invocations, 3 cold starts (a twice concurrently, b once).
    assert_eq!(&cols[cols.len() - 12..cols.len() - 10], ["3", "3"], "{row}");
}

#[test]
fn input_errors_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("bad.csv");
    std::fs::write(&events, "time_ms,function\n0,a\nlater,b\n").unwrap();
    let out = sim(&["--trace", &format!("events:{}", events.display())]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.csv:3: time_ms 'later' is not a number"),
        "{err}"
    );

    let prof = dir.path().join("p.json");
    std::fs::write(
        &prof,
        r#"{"version": 1, "functions": {"f": {"cold_start_ms": "slow"}}}"#,
    )
    .unwrap();
    std::fs::write(&events, "time_ms,function\n0,a\n").unwrap();
    let out = sim(&[
        "--trace",
        &format!("events:{}", events.display()),
        "--profiles",
        prof.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("p.json: at functions.f.cold_start_ms"),
        "{err}"
    );
}
