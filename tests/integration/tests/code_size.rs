//! Action code up to OpenWhisk's size (issue 23): ~40 MB zips and jars deployed through the
//! real `openwhisk` npm client, invoked cold and warm, updated and deleted; code over the
//! limit, bodies over the limit and bad base64 refused in OpenWhisk's words; an upload's cost
//! in daemon memory bounded; the packages a zip brings winning over the runtime's.
//!
//! The archives are built here, their bulk random (incompressible) bytes: nothing large is
//! committed.

use base64::Engine;
use icebox_core::units::{MIB, MIB_USIZE};
use icebox_integration::{action_path, paths, Auth, Daemon, Reply, StateDir, AUTH};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use zip::write::SimpleFileOptions;

/// The default --max-code-size.
const MAX_CODE: usize = 48 * MIB_USIZE;

fn random_bytes(n: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("reading /dev/urandom");
    bytes
}

/// A zip of `files` (stored, not deflated) plus `bulk` bytes of random data under `bulk_dir`.
fn write_zip(path: &Path, files: &[(&str, &[u8])], bulk_dir: &str, bulk: usize) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let stored = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(false);
    for (name, content) in files {
        zip.start_file(*name, stored).unwrap();
        zip.write_all(content).unwrap();
    }
    add_bulk(&mut zip, bulk_dir, bulk);
    zip.finish().unwrap();
}

fn add_bulk(zip: &mut zip::ZipWriter<std::fs::File>, dir: &str, bulk: usize) {
    let stored = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let mut left = bulk;
    let mut i = 0;
    while left > 0 {
        let n = left.min(4 * MIB_USIZE);
        zip.start_file(format!("{dir}/blob{i}.bin"), stored)
            .unwrap();
        zip.write_all(&random_bytes(n)).unwrap();
        left -= n;
        i += 1;
    }
}

/// A Python action with its own virtualenv: it ships `texttable`, as the runtime image does,
/// but another version, and reports which one it imported.
fn python_zip(path: &Path, bulk: usize, tag: &str) {
    let main = format!(
        "import texttable\n\ndef main(args):\n    return {{'version': texttable.__version__, 'file': texttable.__file__, 'tag': '{tag}'}}\n"
    );
    write_zip(
        path,
        &[
            ("__main__.py", main.as_bytes()),
            ("virtualenv/bin/activate_this.py", b""),
            (
                "virtualenv/lib/python3.11/site-packages/texttable.py",
                b"__version__ = '0.0.1-from-the-zip'\n",
            ),
        ],
        "virtualenv/lib/python3.11/site-packages/bulk",
        bulk,
    );
}

/// A Node.js action with its own node_modules: `mustache`, which the runtime ships (4.2.0),
/// in another version.
fn nodejs_zip(path: &Path, bulk: usize, tag: &str) {
    let index = format!(
        "const mustache = require('mustache');\nexports.main = () => ({{ version: mustache.version, file: require.resolve('mustache'), tag: '{tag}' }});\n"
    );
    write_zip(
        path,
        &[
            ("package.json", br#"{"name": "big", "main": "index.js"}"#),
            ("index.js", index.as_bytes()),
            (
                "node_modules/mustache/package.json",
                br#"{"name": "mustache", "version": "0.0.1-from-the-zip", "main": "mustache.js"}"#,
            ),
            (
                "node_modules/mustache/mustache.js",
                b"module.exports = { version: '0.0.1-from-the-zip', render: () => '' };\n",
            ),
        ],
        "node_modules/bulk",
        bulk,
    );
}

/// The examples jar (its `Hello` class) with random resources added.
fn java_jar(path: &Path, bulk: usize, tag: &str) {
    let examples = std::fs::File::open(paths::java_examples_jar()).unwrap();
    let mut source = zip::ZipArchive::new(examples).unwrap();
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..source.len() {
        let entry = source.by_index_raw(i).unwrap();
        zip.raw_copy_file(entry).unwrap();
    }
    zip.start_file(format!("bulk/{tag}.txt"), SimpleFileOptions::default())
        .unwrap();
    zip.write_all(tag.as_bytes()).unwrap();
    add_bulk(&mut zip, "bulk", bulk);
    zip.finish().unwrap();
}

fn run_client(d: &Daemon, vars: &[(&str, &str)]) -> Value {
    let mut cmd = Command::new("node");
    cmd.arg("large_code.js")
        .current_dir(paths::openwhisk_client_dir())
        .env("OW_APIHOST", d.base_url())
        .env("OW_API_KEY", AUTH);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("running node (is Node.js installed?)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the openwhisk client failed ({}):\n{stdout}\n{stderr}\n{}",
        out.status,
        d.log_text()
    );
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn code_usage(d: &Daemon) -> Value {
    d.get_json("/icebox/v1/health")["code"].clone()
}

/// Deploys `first` (then `second` as the update) through the npm client and checks what the
/// client saw; returns it for the runtime-specific checks.
fn deploy_cycle(
    d: &Daemon,
    name: &str,
    kind: &str,
    main: Option<&str>,
    first: &Path,
    second: &Path,
) -> Value {
    // At /init a runtime holds the base64, the decoded archive and (Python, Node.js) its files
    // extracted to a tmpfs charged to the instance: 40 MB of archive needs more than the
    // default 256 MB (the runtime is killed during /init at 256, sometimes for Node.js,
    // always for Java).
    let mut vars = vec![
        ("ACTION", name),
        ("KIND", kind),
        ("FILE", first.to_str().unwrap()),
        ("UPDATE", second.to_str().unwrap()),
        ("MEMORY", "512"),
    ];
    if let Some(main) = main {
        vars.push(("MAIN", main));
    }
    let seen = run_client(d, &vars);
    assert_eq!(seen["created"]["version"], "0.0.1", "{seen}");
    assert_eq!(
        seen["created"]["binary"], true,
        "an archive without the flag: {seen}"
    );
    for phase in ["cold", "warm", "afterUpdate"] {
        assert_eq!(seen[phase]["status"], "success", "{phase}: {seen}");
    }
    assert_eq!(seen["updated"]["version"], "0.0.2", "{seen}");
    let size = std::fs::metadata(first).unwrap().len();
    assert_eq!(
        seen["fetchedCodeLength"],
        size.div_ceil(3) * 4,
        "GET gives the whole archive back as base64"
    );
    assert_eq!(seen["deleted"], name);
    assert_eq!(
        code_usage(d)["files"],
        0,
        "the deleted action's code is gone from the store: {seen}"
    );
    seen
}

fn cold_start(seen: &Value, phase: &str) -> bool {
    seen[phase]["annotations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|a| a["key"] == "initTime")
}

#[test]
fn a_40_mb_python_zip_with_its_virtualenv_deploys_runs_updates_and_goes() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("v1.zip"), dir.path().join("v2.zip"));
    python_zip(&first, 40 * MIB_USIZE, "v1");
    python_zip(&second, 40 * MIB_USIZE, "v2");
    let d = Daemon::start(&["--prewarm", "none"]);
    let seen = deploy_cycle(&d, "big-python", "python:3", None, &first, &second);
    assert!(
        cold_start(&seen, "cold") && !cold_start(&seen, "warm"),
        "{seen}"
    );
    assert_eq!(seen["cold"]["result"]["tag"], "v1", "{seen}");
    assert_eq!(seen["afterUpdate"]["result"]["tag"], "v2", "{seen}");
    // The zip's virtualenv wins over the runtime's own texttable.
    for phase in ["cold", "warm", "afterUpdate"] {
        let result = &seen[phase]["result"];
        assert_eq!(result["version"], "0.0.1-from-the-zip", "{phase}: {seen}");
        assert!(
            result["file"]
                .as_str()
                .unwrap_or("")
                .contains("/virtualenv/"),
            "{seen}"
        );
    }
    d.stop();
}

#[test]
fn a_40_mb_nodejs_zip_with_its_node_modules_deploys_runs_updates_and_goes() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("v1.zip"), dir.path().join("v2.zip"));
    nodejs_zip(&first, 40 * MIB_USIZE, "v1");
    nodejs_zip(&second, 40 * MIB_USIZE, "v2");
    let d = Daemon::start(&["--prewarm", "none"]);
    let seen = deploy_cycle(&d, "big-node", "nodejs:20", None, &first, &second);
    assert!(
        cold_start(&seen, "cold") && !cold_start(&seen, "warm"),
        "{seen}"
    );
    assert_eq!(seen["cold"]["result"]["tag"], "v1", "{seen}");
    assert_eq!(seen["afterUpdate"]["result"]["tag"], "v2", "{seen}");
    // The zip's node_modules wins over the runtime's mustache 4.2.0 (on NODE_PATH).
    for phase in ["cold", "warm", "afterUpdate"] {
        let result = &seen[phase]["result"];
        assert_eq!(result["version"], "0.0.1-from-the-zip", "{phase}: {seen}");
        assert!(
            result["file"]
                .as_str()
                .unwrap_or("")
                .contains("/node_modules/mustache/"),
            "{seen}"
        );
    }
    d.stop();
}

#[test]
fn a_40_mb_java_jar_deploys_runs_updates_and_goes() {
    paths::java_proxy_jar();
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("v1.jar"), dir.path().join("v2.jar"));
    java_jar(&first, 40 * MIB_USIZE, "v1");
    java_jar(&second, 40 * MIB_USIZE, "v2");
    let d = Daemon::start(&["--prewarm", "none"]);
    let seen = deploy_cycle(&d, "big-java", "java:17", Some("Hello"), &first, &second);
    assert!(
        cold_start(&seen, "cold") && !cold_start(&seen, "warm"),
        "{seen}"
    );
    d.stop();
}

fn put_zip(d: &Daemon, name: &str, zip: &[u8]) -> Reply {
    let body = json!({"exec": {
        "kind": "python:3",
        "binary": true,
        "code": base64::engine::general_purpose::STANDARD.encode(zip),
    }});
    d.put_action(name, &body)
}

/// /proc/<pid>/status's VmHWM (the peak resident set), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in kB");
    kb * 1024
}

#[test]
fn a_48_mib_upload_costs_the_daemon_about_one_copy_of_its_body() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("max.zip");
    // Exactly at the limit, archive overhead included.
    python_zip(&path, MAX_CODE - 64 * 1024, "max");
    let mut zip = std::fs::read(&path).unwrap();
    assert!(zip.len() <= MAX_CODE);
    let d = Daemon::start(&["--prewarm", "none"]);
    d.assert_healthy();
    let before = peak_rss(d.pid());
    let reply = put_zip(&d, "max", &zip);
    let after = peak_rss(d.pid());
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body_len = zip.len().div_ceil(3) * 4;
    let growth = after.saturating_sub(before);
    eprintln!(
        "48 MiB upload ({} bytes of zip, {body_len} of base64): daemon VmHWM {} -> {} MiB (+{} MiB)",
        zip.len(),
        before / MIB,
        after / MIB,
        growth / MIB
    );
    // The body is held once (the gate's budget); decoding streams into the code store.
    assert!(
        growth < (body_len as u64) * 3 / 2,
        "VmHWM grew by {growth} bytes for a {body_len}-byte body"
    );
    assert_eq!(
        code_usage(&d)["bytes"],
        zip.len(),
        "one decoded copy on disk"
    );
    // The same archive again (an update, another action) is stored once.
    assert_eq!(put_zip(&d, "max-again", &zip).status, 200);
    assert_eq!(code_usage(&d)["files"], 1);
    let inv = d.invoke("max", json!({}));
    assert_eq!(
        inv.record["response"]["result"]["tag"], "max",
        "{}",
        inv.record
    );

    // One byte over the code limit: OpenWhisk's 413 for its "exec".
    zip.resize(MAX_CODE + 1, 0);
    let reply = put_zip(&d, "over", &zip);
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(
        reply.error_message(),
        format!(
            "exec larger than allowed: {} > {MAX_CODE} bytes.",
            MAX_CODE + 1
        )
    );
    assert_eq!(
        d.request("GET", &action_path("over"), Auth::Key(AUTH), None)
            .status,
        404
    );
    assert_eq!(
        code_usage(&d)["files"],
        1,
        "nothing kept of the refused upload"
    );
    d.stop();
}

#[test]
fn a_49_mib_zip_through_the_npm_client_is_refused_with_413() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("too-big.zip");
    python_zip(&path, 49 * MIB_USIZE, "too-big");
    let d = Daemon::start(&["--prewarm", "none"]);
    let seen = run_client(
        &d,
        &[
            ("REFUSE", "1"),
            ("ACTION", "too-big"),
            ("KIND", "python:3"),
            ("FILE", path.to_str().unwrap()),
        ],
    );
    assert_eq!(seen["status"], 413, "{seen}");
    let message = seen["error"]["error"].as_str().unwrap_or("");
    assert!(
        message.starts_with(
            "The request content was malformed:\nEntityStreamSizeException: incoming entity size ("
        ) && message.contains("exceeded size limit (68157440 bytes)!"),
        "{seen}"
    );
    assert!(seen["error"]["code"].is_string(), "{seen}");
    d.stop();
}

#[test]
fn each_limit_has_its_flag_and_openwhisks_answer() {
    let d = Daemon::start(&[
        "--prewarm",
        "none",
        "--max-code-size",
        "1MiB",
        "--max-payload",
        "64KiB",
        "--max-body",
        "2MiB",
    ]);
    d.deploy_echo();
    // Invocation parameters over --max-payload.
    let params = format!("{{\"a\": \"{}\"}}", "x".repeat(70_000));
    let reply = d.invoke_raw("echo", "blocking=true", params.as_bytes());
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(
        reply.error_message(),
        format!(
            "Request larger than allowed: {} > 65536 bytes.",
            params.len()
        )
    );
    // Code over --max-code-size, text or archive.
    let text = "# padding\n".repeat(110_000) + "def main(args):\n    return args\n";
    let reply = d.put_action("text", &json!({"exec": {"kind": "python:3", "code": text}}));
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(
        reply.error_message(),
        format!("exec larger than allowed: {} > 1048576 bytes.", text.len())
    );
    let reply = put_zip(&d, "zip", &random_bytes(MIB_USIZE + 3));
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(
        reply.error_message(),
        format!(
            "exec larger than allowed: {} > 1048576 bytes.",
            MIB_USIZE + 3
        )
    );
    // A body over --max-body, whatever it holds.
    let body = vec![b' '; 2 * MIB_USIZE + 1];
    let reply = d.invoke_raw("echo", "blocking=true", &body);
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(
        reply.error_message(),
        format!("The request content was malformed:\nEntityStreamSizeException: incoming entity size ({}) exceeded size limit (2097152 bytes)! This is the node's request-body limit (--max-body).", 2 * MIB_USIZE + 1)
    );
    let health = code_usage(&d);
    assert_eq!(health["max_code_size"], MIB_USIZE, "{health}");
    d.stop();
}

#[test]
fn bad_base64_is_a_clear_400_and_keeps_the_old_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.zip");
    python_zip(&path, 1024, "good");
    let d = Daemon::start(&["--prewarm", "none"]);
    assert_eq!(put_zip(&d, "a", &std::fs::read(&path).unwrap()).status, 200);
    let bad = json!({"exec": {"kind": "python:3", "binary": true, "code": "UEsDBA@@not base64"}});
    let reply = d.request(
        "PUT",
        &format!("{}?overwrite=true", action_path("a")),
        Auth::Key(AUTH),
        Some(bad.to_string().as_bytes()),
    );
    assert_eq!(reply.status, 400, "{}", reply.body);
    let message = reply.error_message();
    assert!(
        message.starts_with("exec.binary is true but exec.code is not base64: "),
        "{message}"
    );
    assert!(reply.json()["code"].is_string(), "{}", reply.body);
    let inv = d.invoke("a", json!({}));
    assert_eq!(
        inv.record["response"]["result"]["tag"], "good",
        "{}",
        inv.record
    );
    assert_eq!(code_usage(&d)["files"], 1, "{}", d.log_text());
    d.stop();
}

#[test]
fn stored_code_outlives_a_restart_and_goes_with_its_last_action() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("one.zip"), dir.path().join("two.zip"));
    python_zip(&one, 1024, "one");
    python_zip(&two, 1024, "two");
    let (one, two) = (std::fs::read(&one).unwrap(), std::fs::read(&two).unwrap());
    let state = StateDir::new();
    let first = Daemon::start_on(&state, &["--prewarm", "none"]);
    assert_eq!(put_zip(&first, "a", &one).status, 200);
    assert_eq!(put_zip(&first, "b", &one).status, 200);
    assert_eq!(code_usage(&first)["files"], 1, "one archive, one file");
    first.stop();

    let second = Daemon::start_on(&state, &["--prewarm", "none"]);
    assert_eq!(code_usage(&second)["files"], 1);
    let inv = second.invoke("a", json!({}));
    assert_eq!(
        inv.record["response"]["result"]["tag"], "one",
        "{}",
        inv.record
    );
    // An update of one of them to another archive: both files are in use.
    let body = json!({"exec": {"kind": "python:3", "binary": true,
        "code": base64::engine::general_purpose::STANDARD.encode(&two)}});
    let reply = second.request(
        "PUT",
        &format!("{}?overwrite=true", action_path("a")),
        Auth::Key(AUTH),
        Some(body.to_string().as_bytes()),
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(code_usage(&second)["files"], 2);
    let inv = second.invoke("a", json!({}));
    assert_eq!(
        inv.record["response"]["result"]["tag"], "two",
        "{}",
        inv.record
    );
    second
        .request("DELETE", &action_path("b"), Auth::Key(AUTH), None)
        .expect(200);
    assert_eq!(code_usage(&second)["files"], 1, "b's archive went with b");
    let inv = second.invoke("a", json!({}));
    assert_eq!(
        inv.record["response"]["result"]["tag"], "two",
        "{}",
        inv.record
    );
    second.stop();
}
