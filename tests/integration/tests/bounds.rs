//! Bounds on what an action can make the node hold (issue 18 §3): the host's file table, the
//! daemon's memory for activation output, and an instance's memory filled through tmpfs.

use icebox_core::units::{MIB, MIB_USIZE};
use icebox_integration::{refused_start, wait_for, Activation, Daemon};
use serde_json::json;

use std::time::{Duration, Instant};

/// Forks `children` processes that each open /dev/null until the kernel refuses, hold the
/// files while the parent counts them and reads the host's open-file count, then exit.
const PY_OPEN_FILES: &str = r#"
import os

def main(args):
    counts, held = [], []
    for _ in range(args["children"]):
        r, w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.close(go_w)
            # The earlier children's release pipes: held here, they would never see EOF.
            for _, earlier in held:
                os.close(earlier)
            n = 0
            try:
                while n < args["cap"]:
                    os.open("/dev/null", os.O_RDONLY)
                    n += 1
            except OSError:
                pass
            os.write(w, str(n).encode())
            os.read(go_r, 1)
            os._exit(0)
        os.close(w)
        os.close(go_r)
        counts.append(int(os.read(r, 64) or b"0"))
        os.close(r)
        held.append((pid, go_w))
    with open("/proc/sys/fs/file-nr") as f:
        host_open = int(f.read().split()[0])
    for pid, go_w in held:
        os.close(go_w)
        os.waitpid(pid, 0)
    return {"opened": sum(counts), "most_in_one": max(counts), "host_open": host_open}
"#;

fn file_max() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/file-max")
        .expect("fs.file-max")
        .trim()
        .parse()
        .expect("a number")
}

#[test]
fn an_action_opening_files_in_many_processes_stays_within_its_share_of_file_max() {
    let (max_instances, pids_max) = (64u64, 64u64);
    let d = Daemon::start(&[
        "--max-instances",
        &max_instances.to_string(),
        "--pids-max",
        &pids_max.to_string(),
        "--prewarm",
        "none",
    ]);
    d.deploy(
        "opener",
        "python:3",
        PY_OPEN_FILES,
        json!({"memory": 256, "timeout": 120000}),
    );
    // Every instance of the node full at once must stay within half of fs.file-max.
    let share = file_max() / 2 / max_instances;
    let run = d
        .invoke("opener", json!({"children": 48, "cap": 20000}))
        .expect_success();
    let opened = run.result()["opened"].as_u64().expect("opened");
    eprintln!(
        "48 processes opened {opened} files ({} at most in one; host open files then {}); \
         the instance's share of fs.file-max {} is {share}",
        run.result()["most_in_one"],
        run.result()["host_open"],
        file_max()
    );
    assert!(
        opened <= share,
        "one instance opened {opened} files, more than its share {share} of fs.file-max"
    );
    assert!(
        run.result()["most_in_one"].as_u64().unwrap() >= 32,
        "each process can still open files: {}",
        run.result()
    );
    // The instance is unharmed and serves the next activation.
    d.invoke("opener", json!({"children": 1, "cap": 10}))
        .expect_success();
    d.stop();
}

#[test]
fn a_configuration_whose_instances_could_exhaust_file_max_is_refused() {
    let instances = (file_max() / 2 / 64 / 1024 + 1).to_string();
    let state = tempfile::tempdir().expect("state dir");
    let said = refused_start(
        state.path(),
        &["--max-instances", &instances, "--pids-max", "1024"],
    );
    for flag in ["--max-instances", "--pids-max", "fs.file-max"] {
        assert!(said.contains(flag), "the refusal names {flag}:\n{said}");
    }
}

/// Fills each tmpfs of `dirs` in turn (their pages are charged to the instance's memory) until
/// it is full or `mib` MiB are written to it.
const PY_FILL_TMPFS: &str = r#"
import errno, os

def main(args):
    chunk = b"x" * (1024 * 1024)
    written = {}
    for d in args["dirs"]:
        written[d] = 0
        try:
            with open(os.path.join(d, "fill"), "wb", buffering=0) as f:
                for _ in range(args["mib"]):
                    written[d] += f.write(chunk)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    return {"written": written}
"#;

#[test]
fn filling_tmp_until_the_memory_limit_is_a_memory_limit_error() {
    // /tmp larger than the action's memory: the tmpfs fills the memory cgroup first.
    let d = Daemon::start(&["--tmp-size", "1GiB", "--prewarm", "none"]);
    d.deploy(
        "tmpfill",
        "python:3",
        PY_FILL_TMPFS,
        json!({"memory": 128, "timeout": 60000}),
    );
    let run = d.invoke("tmpfill", json!({"dirs": ["/dev/shm", "/tmp"], "mib": 512}));
    assert!(
        !run.succeeded(),
        "512 MiB in a 128 MB instance: {:#}",
        run.record
    );
    assert_eq!(run.status(), "action developer error", "{:#}", run.record);
    assert_eq!(
        run.error(),
        "memory limit exceeded: the action used more than its 128 MB limit and was killed.",
        "{:#}",
        run.record
    );
    // The next activation gets a fresh instance and works.
    d.invoke("tmpfill", json!({"dirs": ["/dev/shm", "/tmp"], "mib": 1}))
        .expect_success();
    d.stop();
}

/// Prints `log_mib` MiB in 4 KiB lines and returns a `result_mib` MiB string. (9 MiB of lines
/// with their timestamps stay under the action's 10 MiB `limits.logs`: only the node's budget
/// cuts them.)
const PY_CHATTY: &str = r#"
import sys

def main(args):
    line = "x" * 4095
    for _ in range(args["log_mib"] * 256):
        print(line)
    sys.stdout.flush()
    return {"blob": "y" * (args["result_mib"] * 1024 * 1024)}
"#;

fn vm_rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("daemon status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kb * 1024
}

#[test]
fn concurrent_chatty_actions_are_held_within_the_output_budget_and_the_memory_goes_back() {
    let copies = 32;
    // The default --output-budget.
    let budget = 128 * MIB;
    let d = Daemon::start(&[
        "--max-instances",
        &copies.to_string(),
        "--pool-memory",
        "8GiB",
        "--prewarm",
        "none",
    ]);
    d.deploy(
        "chatty",
        "python:3",
        PY_CHATTY,
        json!({"memory": 256, "timeout": 120000}),
    );
    // Every instance exists before the baseline: what grows is output, not instances.
    std::thread::scope(|s| {
        for _ in 0..copies {
            s.spawn(|| {
                d.invoke("chatty", json!({"log_mib": 0, "result_mib": 0}))
                    .expect_success()
            });
        }
    });
    let before = vm_rss_bytes(d.pid());

    let peak = std::sync::atomic::AtomicU64::new(before);
    let done = std::sync::atomic::AtomicBool::new(false);
    let params = serde_json::to_vec(&json!({"log_mib": 9, "result_mib": 4})).unwrap();
    let runs: Vec<_> = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(vm_rss_bytes(d.pid()), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let workers: Vec<_> = (0..copies)
            .map(|_| {
                s.spawn(|| {
                    // A response refused for want of room is a whisk internal error: HTTP 500.
                    let reply = d.invoke_raw("chatty", "blocking=true", &params);
                    assert!([200, 500, 502].contains(&reply.status), "{}", reply.status);
                    Activation {
                        record: reply.json(),
                        http_status: reply.status,
                    }
                })
            })
            .collect();
        let joined: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        // The sampler stops before any failure is raised, or the scope would never end.
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        joined
            .into_iter()
            .map(|r| r.unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    // Records are held until the registry has them (32 of ~13 MiB take a while to write when
    // other tests load the machine): memory can only go back after that.
    let written = wait_unwritten_zero(&d);
    // Give the allocator's trim (off the request path) a moment, then read what is left.
    let settle_by = Instant::now() + Duration::from_secs(10);
    let settled = loop {
        if vm_rss_bytes(d.pid()) < before + budget {
            break true;
        }
        if Instant::now() >= settle_by {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let after = vm_rss_bytes(d.pid());
    let peak = peak.into_inner();
    eprintln!(
        "daemon RSS: {} MiB before, {} MiB at the peak of {copies} concurrent activations \
         printing 9 MiB and returning 4 MiB, {} MiB after (budget {} MiB); records written \
         {written:?} after the burst",
        before / MIB,
        peak / MIB,
        after / MIB,
        budget / MIB
    );

    // Log lines may take half of the budget.
    let marker = format!(
        "Logs were truncated because the total bytes size exceeds the limit of {} bytes.",
        budget / 2
    );
    let mut cut_by_node = 0;
    for run in &runs {
        let logs = run.logs();
        let kept: u64 = logs.iter().map(|l| l.len() as u64).sum();
        assert!(
            kept <= 10 * MIB + 1024,
            "logs are cut at the action's limit"
        );
        if logs.last() == Some(&marker) {
            cut_by_node += 1;
        }
        if run.succeeded() {
            assert_eq!(
                run.result()["blob"].as_str().map(str::len),
                Some(4 * MIB_USIZE)
            );
        } else {
            assert_eq!(run.status(), "whisk internal error", "{}", run.error());
            assert!(run.error().contains("--output-budget"), "{}", run.error());
        }
    }
    assert!(
        cut_by_node > 0,
        "{copies} × 13 MiB of output cannot all be held within {} MiB",
        budget / MIB
    );
    assert!(
        peak < before + 640 * MIB,
        "the daemon grew by {} MiB holding output",
        (peak - before) / MIB
    );
    assert!(
        settled,
        "the daemon still holds {} MiB more than before the burst",
        after.saturating_sub(before) / MIB
    );
    d.assert_healthy();
    d.stop();
}

/// Waits (bounded) until the daemon holds no activation record the registry does not have yet;
/// returns how long that took.
fn wait_unwritten_zero(d: &Daemon) -> Duration {
    let started = Instant::now();
    wait_for(
        "every record written to the registry",
        Duration::from_secs(120),
        || {
            let metrics = d.get("/metrics").body;
            metrics
                .lines()
                .any(|l| l.trim() == "icebox_activations_unwritten 0")
                .then_some(())
        },
    );
    started.elapsed()
}
