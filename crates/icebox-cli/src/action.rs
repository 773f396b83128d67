//! `icebox action …`: deploy, read, list, delete and invoke actions.

use crate::client::{segment, Client, NAMESPACE};
use crate::error::{CliError, Result};
use crate::output::{emit, emit_bytes, emit_json, emit_line};
use crate::params;
use crate::table::{self, Align, Table};
use base64::Engine;
use clap::{Args, Subcommand};
use serde_json::{json, Map, Value};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum ActionCommand {
    /// Deploy a new action from a source file or archive (fails if the name is taken)
    #[command(after_help = DEPLOY_EXAMPLES)]
    Create(DeployArgs),
    /// Replace an action's code and settings (creates it if missing); settings not given keep their values
    #[command(after_help = DEPLOY_EXAMPLES)]
    Update(DeployArgs),
    /// Show an action's settings, or with --code its code
    Get {
        /// Action name
        name: String,
        /// Print only the code: source text, or the raw zip/jar bytes (redirect those to a file)
        #[arg(long)]
        code: bool,
    },
    /// List the deployed actions, most recently updated first
    List {
        /// Show at most this many actions (the daemon allows up to 200)
        #[arg(long, default_value_t = 30, value_name = "N")]
        limit: u32,
        /// Skip this many actions first
        #[arg(long, default_value_t = 0, value_name = "N")]
        skip: u32,
    },
    /// Delete an action and evict its instances
    Delete {
        /// Action name
        name: String,
    },
    /// Run an action and print its result (exit status 1 when the activation failed)
    #[command(after_help = INVOKE_EXAMPLES)]
    Invoke(InvokeArgs),
}

const DEPLOY_EXAMPLES: &str = "\
The kind comes from the file's extension: .py → python:3, .js → nodejs:20, .jar → java:17.
A .zip holds Python or Node.js code: give --kind. Archives (.zip, .jar) are sent as base64.
Java actions need --main CLASS (or CLASS#METHOD).

Examples:
  icebox action create hello examples/python/hello.py
  icebox action create greet app.zip --kind nodejs:20 --memory 128 -p greeting Hi
  icebox action create echo echo.jar --main example.Echo --timeout 5000
  icebox action update hello hello.py --concurrency 4";

const INVOKE_EXAMPLES: &str = "\
Values of -p are JSON when they parse as JSON (5, true, {\"a\":1}, \"text\"), else strings.
-p values override those of -P; both override the action's default parameters.

Output: the result on stdout and a summary line (activation id, cold/warm start, instance,
duration) on stderr; with --json the whole activation record; with --result only the result.
A failed activation still prints, and exits with status 1.

Examples:
  icebox action invoke hello -p name Ada
  icebox action invoke hello -P params.json --result
  icebox action invoke hello --no-wait";

#[derive(Debug, Args)]
pub struct DeployArgs {
    /// Action name
    pub name: String,
    /// Code: a source file (.py, .js), a zip (.zip, Python or Node.js) or a jar (.jar, Java)
    pub file: PathBuf,
    /// Runtime kind: python:3, nodejs:20, java:17 (or python:default, nodejs:default, java:default)
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// Entry point: a function name (default main), or for Java CLASS or CLASS#METHOD
    #[arg(long, value_name = "NAME")]
    pub main: Option<String>,
    /// Memory limit in MB (32..8192; default 256)
    #[arg(long, value_name = "MB")]
    pub memory: Option<u64>,
    /// Timeout in milliseconds (100..600000; default 60000)
    #[arg(long, value_name = "MS")]
    pub timeout: Option<u64>,
    /// Concurrent activations per instance (1..500; default 1)
    #[arg(long, value_name = "N")]
    pub concurrency: Option<u32>,
    /// Default parameter, passed to every invocation unless it sets KEY itself (repeatable)
    #[arg(short = 'p', long = "param", num_args = 2, value_names = ["KEY", "VALUE"])]
    pub params: Vec<String>,
    /// Default parameters from a JSON object file
    #[arg(short = 'P', long = "param-file", value_name = "FILE")]
    pub param_file: Option<PathBuf>,
    /// Annotation (repeatable; VALUE parsed like -p)
    #[arg(short = 'a', long = "annotation", num_args = 2, value_names = ["KEY", "VALUE"])]
    pub annotations: Vec<String>,
}

#[derive(Debug, Args)]
pub struct InvokeArgs {
    /// Action name
    pub name: String,
    /// Parameter (repeatable); VALUE is JSON when it parses as JSON, else a string
    #[arg(short = 'p', long = "param", num_args = 2, value_names = ["KEY", "VALUE"])]
    pub params: Vec<String>,
    /// Parameters from a JSON object file (- for stdin)
    #[arg(short = 'P', long = "param-file", value_name = "FILE")]
    pub param_file: Option<PathBuf>,
    /// Ask only for the result: no activation record, no summary line (also with --json)
    #[arg(short = 'r', long)]
    pub result: bool,
    /// Do not wait: print the activation id and return at once
    #[arg(long, conflicts_with = "result")]
    pub no_wait: bool,
}

pub fn run(client: &Client, json_out: bool, command: ActionCommand) -> Result<()> {
    match command {
        ActionCommand::Create(args) => deploy(client, json_out, args, false),
        ActionCommand::Update(args) => deploy(client, json_out, args, true),
        ActionCommand::Get { name, code } => get(client, json_out, &name, code),
        ActionCommand::List { limit, skip } => list(client, json_out, limit, skip),
        ActionCommand::Delete { name } => delete(client, json_out, &name),
        ActionCommand::Invoke(args) => invoke(client, json_out, args),
    }
}

pub fn action_path(name: &str) -> String {
    format!("{NAMESPACE}/actions/{}", segment(name))
}

fn not_found(name: &str) -> String {
    format!("action '{name}' does not exist; `icebox action list` shows the deployed actions")
}

// ---- deploy ----

const KINDS: &str = "python:3, nodejs:20, java:17";

/// The kind to deploy `file` as: `--kind` if given, else from the extension.
pub fn infer_kind(file: &Path, kind: Option<&str>) -> Result<String> {
    if let Some(kind) = kind {
        return Ok(kind.to_string());
    }
    let ext = file
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("py") => Ok("python:3".into()),
        Some("js" | "mjs" | "cjs") => Ok("nodejs:20".into()),
        Some("jar") => Ok("java:17".into()),
        Some("zip") => Err(CliError::usage(format!(
            "{} is a zip, which can hold Python or Node.js code: add --kind python:3 or --kind nodejs:20",
            file.display()
        ))),
        Some("java") => Err(CliError::usage(format!(
            "{} is Java source: compile it into a jar and deploy the jar with --main CLASS",
            file.display()
        ))),
        _ => Err(CliError::usage(format!(
            "cannot tell the runtime of {} from its extension: add --kind ({KINDS})",
            file.display()
        ))),
    }
}

fn is_java(kind: &str) -> bool {
    kind.starts_with("java:")
}

/// Zip and jar files both start with a local file header.
pub fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06")
}

/// `exec.code` and `exec.binary` for the file's bytes: archives go as base64, text as is.
pub fn encode_code(file: &Path, bytes: Vec<u8>) -> Result<(String, bool)> {
    let ext = file
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let archive_ext = matches!(ext.as_deref(), Some("zip" | "jar"));
    if is_zip(&bytes) {
        return Ok((
            base64::engine::general_purpose::STANDARD.encode(bytes),
            true,
        ));
    }
    if archive_ext {
        return Err(CliError::usage(format!(
            "{} is not a valid zip/jar archive",
            file.display()
        )));
    }
    String::from_utf8(bytes)
        .map(|text| (text, false))
        .map_err(|_| {
            CliError::usage(format!(
                "{} is neither UTF-8 source text nor a zip/jar archive",
                file.display()
            ))
        })
}

/// The PUT body for `args` with the file's bytes already read.
pub fn deploy_body(
    args: &DeployArgs,
    bytes: Vec<u8>,
    param_file: Option<Map<String, Value>>,
    update: bool,
) -> Result<Value> {
    let kind = infer_kind(&args.file, args.kind.as_deref())?;
    let (code, binary) = encode_code(&args.file, bytes)?;
    if is_java(&kind) {
        if !binary {
            return Err(CliError::usage(format!(
                "Java actions are deployed as a jar; {} is not one",
                args.file.display()
            )));
        }
        if args.main.is_none() {
            return Err(CliError::usage(
                "Java actions need --main CLASS (or CLASS#METHOD), the class with `public static JsonObject main(JsonObject)`",
            ));
        }
    }
    let mut exec = json!({"kind": kind, "code": code, "binary": binary});
    if let Some(main) = &args.main {
        exec["main"] = json!(main);
    }
    let mut body = json!({"exec": exec});
    let mut limits = Map::new();
    if let Some(memory) = args.memory {
        limits.insert("memory".into(), json!(memory));
    }
    if let Some(timeout) = args.timeout {
        limits.insert("timeout".into(), json!(timeout));
    }
    if let Some(concurrency) = args.concurrency {
        limits.insert("concurrency".into(), json!(concurrency));
    }
    if !limits.is_empty() {
        body["limits"] = Value::Object(limits);
    }
    // On update, leaving these out keeps the stored ones, as `wsk action update` does.
    let has_params = !args.params.is_empty() || param_file.is_some();
    if has_params || !update {
        let merged = params::merge(param_file, params::pairs(&args.params));
        body["parameters"] = params::key_values(&merged);
    }
    if !args.annotations.is_empty() || !update {
        let merged = params::merge(None, params::pairs(&args.annotations));
        body["annotations"] = params::key_values(&merged);
    }
    Ok(body)
}

fn deploy(client: &Client, json_out: bool, args: DeployArgs, update: bool) -> Result<()> {
    let bytes = std::fs::read(&args.file)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", args.file.display())))?;
    let param_file = args
        .param_file
        .as_deref()
        .map(params::read_params_file)
        .transpose()?;
    let body = deploy_body(&args, bytes, param_file, update)?;
    let mut call = client.put(action_path(&args.name)).json(body);
    if update {
        call = call.query("overwrite", "true");
    } else {
        call = call.explain(
            409,
            format!(
                "action '{}' already exists; replace it with `icebox action update {} {}`",
                args.name,
                args.name,
                args.file.display()
            ),
        );
    }
    let stored = call.send()?;
    if json_out {
        emit_json(&stored);
    } else {
        // `update` of a name that did not exist creates it (OpenWhisk's overwrite=true).
        let verb = if update && stored["version"].as_str() != Some("0.0.1") {
            "updated"
        } else {
            "created"
        };
        let version = stored["version"].as_str().unwrap_or("?");
        let kind = stored["exec"]["kind"].as_str().unwrap_or("?");
        emit_line(&format!(
            "ok: {verb} action {} ({kind}, version {version})",
            args.name
        ));
    }
    Ok(())
}

// ---- get / list / delete ----

fn get(client: &Client, json_out: bool, name: &str, code: bool) -> Result<()> {
    let action = client
        .get(action_path(name))
        .query("code", code)
        .explain(404, not_found(name))
        .send()?;
    if json_out {
        emit_json(&action);
    } else if code {
        print_code(name, &action)?;
    } else {
        emit(&describe(&action));
    }
    Ok(())
}

fn print_code(name: &str, action: &Value) -> Result<()> {
    let code = action["exec"]["code"].as_str().unwrap_or_default();
    if !action["exec"]["binary"].as_bool().unwrap_or(false) {
        emit_line(code);
        return Ok(());
    }
    if std::io::stdout().is_terminal() {
        return Err(CliError::usage(format!(
            "the code of '{name}' is a zip/jar archive; redirect it to a file: icebox action get {name} --code > {name}.zip"
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(code)
        .map_err(|e| CliError::failed(format!("iceboxd returned code that is not base64: {e}")))?;
    emit_bytes(&bytes);
    Ok(())
}

/// The settings of an action as aligned `key  value` lines.
pub fn describe(action: &Value) -> String {
    let exec = &action["exec"];
    let limits = &action["limits"];
    let form = if exec["binary"].as_bool().unwrap_or(false) {
        "archive"
    } else {
        "source"
    };
    let mut lines = vec![
        (
            "action",
            format!(
                "{}/{}",
                str_of(&action["namespace"]),
                str_of(&action["name"])
            ),
        ),
        ("version", str_of(&action["version"])),
        ("kind", format!("{} ({form})", str_of(&exec["kind"]))),
        ("main", exec["main"].as_str().unwrap_or("main").to_string()),
        (
            "limits",
            format!(
                "memory {} MB, timeout {}, concurrency {}",
                limits["memory"],
                limits["timeout"]
                    .as_u64()
                    .map(table::duration_ms)
                    .unwrap_or_else(|| "?".into()),
                limits["concurrency"]
            ),
        ),
    ];
    if let Some(updated) = action["updated"].as_u64() {
        lines.push((
            "updated",
            format!(
                "{} UTC ({})",
                table::utc_time(updated),
                table::ago(updated, table::now_ms())
            ),
        ));
    }
    let mut out: String = lines.iter().map(|(k, v)| format!("{k:<12}{v}\n")).collect();
    for (title, field) in [("parameters", "parameters"), ("annotations", "annotations")] {
        let Some(items) = action[field].as_array().filter(|a| !a.is_empty()) else {
            continue;
        };
        out.push_str(&format!("{title}\n"));
        for kv in items {
            out.push_str(&format!("  {} = {}\n", str_of(&kv["key"]), kv["value"]));
        }
    }
    out
}

pub fn str_of(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_else(|| {
        if v.is_null() {
            "?".into()
        } else {
            v.to_string()
        }
    })
}

fn list(client: &Client, json_out: bool, limit: u32, skip: u32) -> Result<()> {
    let actions = client
        .get(format!("{NAMESPACE}/actions"))
        .query("limit", limit)
        .query("skip", skip)
        .send()?;
    if json_out {
        emit_json(&actions);
        return Ok(());
    }
    let items = actions.as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        emit_line("no actions; deploy one with `icebox action create NAME FILE`");
        return Ok(());
    }
    emit(&actions_table(&items, table::now_ms()));
    Ok(())
}

pub fn actions_table(items: &[Value], now: u64) -> String {
    let mut t = Table::new(&[
        ("NAME", Align::Left),
        ("KIND", Align::Left),
        ("VERSION", Align::Left),
        ("MEMORY", Align::Right),
        ("TIMEOUT", Align::Right),
        ("CONCURRENCY", Align::Right),
        ("UPDATED", Align::Left),
    ]);
    for a in items {
        let limits = &a["limits"];
        t.push(vec![
            str_of(&a["name"]),
            str_of(&a["exec"]["kind"]),
            str_of(&a["version"]),
            limits["memory"]
                .as_u64()
                .map(|m| format!("{m} MB"))
                .unwrap_or_else(|| "-".into()),
            limits["timeout"]
                .as_u64()
                .map(table::duration_ms)
                .unwrap_or_else(|| "-".into()),
            limits["concurrency"]
                .as_u64()
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            a["updated"]
                .as_u64()
                .map(|u| table::ago(u, now))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    t.render()
}

fn delete(client: &Client, json_out: bool, name: &str) -> Result<()> {
    let deleted = client
        .delete(action_path(name))
        .explain(404, not_found(name))
        .send()?;
    if json_out {
        emit_json(&deleted);
    } else {
        emit_line(&format!("ok: deleted action {name}"));
    }
    Ok(())
}

// ---- invoke ----

/// What the daemon answered to an invocation.
#[derive(Debug, PartialEq)]
pub enum InvokeReply {
    /// 202: not waited for, or still running after the daemon's 60 s blocking wait.
    Accepted(String),
    /// The activation finished; `body` is its record, or its result with `--result`.
    Finished { success: bool, body: Value },
}

/// Classifies an invocation answer. 502 and 500 carry the failed activation itself, except a
/// 500 that is an error body from before any activation started.
pub fn invoke_reply(
    status: u16,
    body: Value,
    result_only: bool,
) -> std::result::Result<InvokeReply, String> {
    if status == 202 {
        let id = body["activationId"]
            .as_str()
            .ok_or("iceboxd answered 202 without an activationId")?;
        return Ok(InvokeReply::Accepted(id.to_string()));
    }
    let looks_like_error_body = body.get("code").is_some_and(Value::is_string)
        && body.get("error").is_some_and(Value::is_string)
        && body.get("activationId").is_none();
    if status == 500 && looks_like_error_body {
        return Err(format!(
            "iceboxd failed (500): {} (transaction {})",
            str_of(&body["error"]),
            str_of(&body["code"])
        ));
    }
    let success = if result_only {
        status == 200
    } else {
        body["response"]["success"]
            .as_bool()
            .unwrap_or(status == 200)
    };
    Ok(InvokeReply::Finished { success, body })
}

fn invoke(client: &Client, json_out: bool, args: InvokeArgs) -> Result<()> {
    let file = args
        .param_file
        .as_deref()
        .map(params::read_params_file)
        .transpose()?;
    let parameters = params::merge(file, params::pairs(&args.params));
    let blocking = !args.no_wait;
    let reply = client
        .post(action_path(&args.name))
        .query("blocking", blocking)
        .query("result", args.result && blocking)
        .json(Value::Object(parameters))
        .explain(404, not_found(&args.name))
        .send_accepting(&[500, 502])?;
    match invoke_reply(reply.status, reply.body, args.result).map_err(CliError::failed)? {
        InvokeReply::Accepted(id) => {
            if json_out {
                emit_json(&json!({"activationId": id}));
            } else if args.no_wait {
                emit_line(&format!("ok: invoked {} with id {id}", args.name));
                eprintln!("see it with `icebox activation get {id}` once it has finished");
            } else {
                emit_line(&format!("ok: invoked {} with id {id}", args.name));
                eprintln!(
                    "the activation is still running after iceboxd's 60 s wait; see it later with `icebox activation get {id}`"
                );
            }
            Ok(())
        }
        InvokeReply::Finished { success, body } => {
            if json_out || args.result {
                emit_json(&body);
                if !json_out && !success {
                    eprintln!("error: the activation of {} failed", args.name);
                }
            } else {
                eprintln!("{}", summary_line(&args.name, &body));
                emit_json(&body["response"]["result"]);
                if !success {
                    let id = str_of(&body["activationId"]);
                    eprintln!("see its logs with `icebox activation logs {id}`");
                }
            }
            if success {
                Ok(())
            } else {
                Err(CliError::ActivationFailed)
            }
        }
    }
}

/// `ok: invoked hello · activation 8f2d… · cold start on i-7f3a · 42ms (wait 7ms, init 21ms)`.
pub fn summary_line(name: &str, record: &Value) -> String {
    let response = &record["response"];
    let head = if response["success"].as_bool().unwrap_or(false) {
        format!("ok: invoked {name}")
    } else {
        format!(
            "error: {name} failed ({})",
            response["status"].as_str().unwrap_or("unknown status")
        )
    };
    let mut parts = vec![
        head,
        format!("activation {}", str_of(&record["activationId"])),
    ];
    let start = annotation(record, "icebox.start").and_then(Value::as_str);
    let instance = annotation(record, "icebox.instance").and_then(Value::as_str);
    match (start, instance) {
        (Some(s), Some(i)) => parts.push(format!("{s} start on {i}")),
        (Some(s), None) => parts.push(format!("{s} start")),
        _ => {}
    }
    if let Some(duration) = record["duration"].as_u64() {
        let mut detail = Vec::new();
        if let Some(wait) = annotation(record, "waitTime").and_then(Value::as_u64) {
            detail.push(format!("wait {}", table::duration_ms(wait)));
        }
        if let Some(init) = annotation(record, "initTime").and_then(Value::as_u64) {
            detail.push(format!("init {}", table::duration_ms(init)));
        }
        let detail = if detail.is_empty() {
            String::new()
        } else {
            format!(" ({})", detail.join(", "))
        };
        parts.push(format!("{}{detail}", table::duration_ms(duration)));
    }
    parts.join(" · ")
}

pub fn annotation<'a>(record: &'a Value, key: &str) -> Option<&'a Value> {
    record["annotations"]
        .as_array()?
        .iter()
        .find(|kv| kv["key"] == key)
        .map(|kv| &kv["value"])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(file: &str) -> DeployArgs {
        DeployArgs {
            name: "hello".into(),
            file: PathBuf::from(file),
            kind: None,
            main: None,
            memory: None,
            timeout: None,
            concurrency: None,
            params: vec![],
            param_file: None,
            annotations: vec![],
        }
    }

    #[test]
    fn kind_from_extension() {
        assert_eq!(
            infer_kind(Path::new("a/hello.py"), None).unwrap(),
            "python:3"
        );
        assert_eq!(
            infer_kind(Path::new("hello.JS"), None).unwrap(),
            "nodejs:20"
        );
        assert_eq!(
            infer_kind(Path::new("hello.mjs"), None).unwrap(),
            "nodejs:20"
        );
        assert_eq!(infer_kind(Path::new("hello.jar"), None).unwrap(), "java:17");
        assert_eq!(
            infer_kind(Path::new("hello.zip"), Some("nodejs:20")).unwrap(),
            "nodejs:20"
        );
        assert_eq!(
            infer_kind(Path::new("hello.py"), Some("python:default")).unwrap(),
            "python:default"
        );
    }

    #[test]
    fn zip_and_unknown_extensions_need_kind() {
        let err = infer_kind(Path::new("app.zip"), None).unwrap_err();
        assert!(
            matches!(&err, CliError::Usage(m) if m.contains("--kind python:3 or --kind nodejs:20")),
            "{err:?}"
        );
        let err = infer_kind(Path::new("script"), None).unwrap_err();
        assert!(
            matches!(&err, CliError::Usage(m) if m.contains("add --kind")),
            "{err:?}"
        );
        let err = infer_kind(Path::new("Hello.java"), None).unwrap_err();
        assert!(
            matches!(&err, CliError::Usage(m) if m.contains("compile it into a jar")),
            "{err:?}"
        );
    }

    #[test]
    fn archives_are_base64_and_text_is_sent_as_is() {
        let zip = b"PK\x03\x04rest-of-archive".to_vec();
        let (code, binary) = encode_code(Path::new("app.zip"), zip.clone()).unwrap();
        assert!(binary);
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(code)
                .unwrap(),
            zip
        );
        // Content decides, not only the name: a zip without extension is still binary.
        assert!(encode_code(Path::new("bundle"), zip).unwrap().1);
        let (code, binary) =
            encode_code(Path::new("a.py"), b"def main(a):\n  return a\n".to_vec()).unwrap();
        assert!(!binary);
        assert_eq!(code, "def main(a):\n  return a\n");
    }

    #[test]
    fn broken_archives_and_binary_junk_are_refused() {
        assert!(matches!(
            encode_code(Path::new("a.jar"), b"not a jar".to_vec()),
            Err(CliError::Usage(_))
        ));
        assert!(matches!(
            encode_code(Path::new("a.py"), vec![0xff, 0xfe, 0x00]),
            Err(CliError::Usage(_))
        ));
    }

    #[test]
    fn create_body_carries_exec_limits_params_and_annotations() {
        let mut a = args("hello.py");
        a.main = Some("handler".into());
        a.memory = Some(128);
        a.timeout = Some(5000);
        a.params = vec!["name".into(), "Ada".into(), "n".into(), "5".into()];
        a.annotations = vec!["web-export".into(), "true".into()];
        let file = params::params_from_json(r#"{"name": "file", "extra": [1]}"#, "p").unwrap();
        let body =
            deploy_body(&a, b"def handler(a): return a".to_vec(), Some(file), false).unwrap();
        assert_eq!(
            body,
            json!({
                "exec": {"kind": "python:3", "code": "def handler(a): return a", "binary": false, "main": "handler"},
                "limits": {"memory": 128, "timeout": 5000},
                "parameters": [
                    {"key": "extra", "value": [1]},
                    {"key": "n", "value": 5},
                    {"key": "name", "value": "Ada"}
                ],
                "annotations": [{"key": "web-export", "value": true}]
            })
        );
    }

    #[test]
    fn create_sends_empty_lists_and_update_leaves_them_out() {
        let body = deploy_body(&args("a.js"), b"function main(){}".to_vec(), None, false).unwrap();
        assert_eq!(body["parameters"], json!([]));
        assert_eq!(body["annotations"], json!([]));
        assert!(body.get("limits").is_none());
        let body = deploy_body(&args("a.js"), b"function main(){}".to_vec(), None, true).unwrap();
        assert!(body.get("parameters").is_none() && body.get("annotations").is_none());
        assert_eq!(
            body["exec"],
            json!({"kind": "nodejs:20", "code": "function main(){}", "binary": false})
        );
    }

    #[test]
    fn java_needs_a_jar_and_main() {
        let jar = b"PK\x03\x04jar".to_vec();
        let err = deploy_body(&args("echo.jar"), jar.clone(), None, false).unwrap_err();
        assert!(
            matches!(&err, CliError::Usage(m) if m.contains("--main CLASS")),
            "{err:?}"
        );
        let mut a = args("echo.jar");
        a.main = Some("example.Echo".into());
        let body = deploy_body(&a, jar, None, false).unwrap();
        assert_eq!(body["exec"]["kind"], "java:17");
        assert_eq!(body["exec"]["binary"], true);
        assert_eq!(body["exec"]["main"], "example.Echo");
        let mut a = args("Echo.txt");
        a.kind = Some("java:17".into());
        a.main = Some("Echo".into());
        let err = deploy_body(&a, b"class Echo {}".to_vec(), None, false).unwrap_err();
        assert!(
            matches!(&err, CliError::Usage(m) if m.contains("deployed as a jar")),
            "{err:?}"
        );
    }

    fn record(success: bool) -> Value {
        json!({
            "activationId": "8f2d", "duration": 42,
            "response": {"status": if success {"success"} else {"action developer error"}, "statusCode": if success {0} else {2}, "success": success, "result": {"x": 1}},
            "annotations": [
                {"key": "path", "value": "guest/hello"}, {"key": "waitTime", "value": 7},
                {"key": "initTime", "value": 21}, {"key": "icebox.start", "value": "cold"},
                {"key": "icebox.instance", "value": "i-7f3a"}
            ]
        })
    }

    #[test]
    fn invocation_outcomes() {
        assert_eq!(
            invoke_reply(202, json!({"activationId": "ab"}), false).unwrap(),
            InvokeReply::Accepted("ab".into())
        );
        assert_eq!(
            invoke_reply(200, record(true), false).unwrap(),
            InvokeReply::Finished {
                success: true,
                body: record(true)
            }
        );
        assert!(matches!(
            invoke_reply(502, record(false), false).unwrap(),
            InvokeReply::Finished { success: false, .. }
        ));
        // With --result the status code is all there is to tell failure from success.
        assert!(matches!(
            invoke_reply(502, json!({"error": "boom"}), true).unwrap(),
            InvokeReply::Finished { success: false, .. }
        ));
        assert!(matches!(
            invoke_reply(200, json!({"error": "fine"}), true).unwrap(),
            InvokeReply::Finished { success: true, .. }
        ));
        let err = invoke_reply(500, json!({"error": "db down", "code": "tx1"}), false).unwrap_err();
        assert_eq!(err, "iceboxd failed (500): db down (transaction tx1)");
        assert!(invoke_reply(202, json!({}), false).is_err());
    }

    #[test]
    fn summary_names_start_instance_and_times() {
        assert_eq!(
            summary_line("hello", &record(true)),
            "ok: invoked hello · activation 8f2d · cold start on i-7f3a · 42ms (wait 7ms, init 21ms)"
        );
        assert!(summary_line("hello", &record(false))
            .starts_with("error: hello failed (action developer error)"));
    }

    #[test]
    fn list_table() {
        let items = vec![json!({
            "name": "hello", "version": "0.0.2", "exec": {"kind": "python:3", "binary": false},
            "limits": {"memory": 256, "timeout": 60000, "concurrency": 1, "logs": 10}, "updated": 1_000
        })];
        assert_eq!(
            actions_table(&items, 61_000),
            "NAME   KIND      VERSION  MEMORY  TIMEOUT  CONCURRENCY  UPDATED\n\
             hello  python:3  0.0.2    256 MB    1m00s            1  1m00s ago\n"
        );
    }
}
