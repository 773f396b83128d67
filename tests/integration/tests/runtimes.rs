//! The three runtimes end to end through the CLI: deploy the examples with `icebox action
//! create`, run them with `icebox action invoke --result`, hello and alloc with a parameter.

use icebox_core::units::MIB;
use icebox_integration::{paths, Daemon};
use serde_json::Value;

/// `icebox action invoke NAME -p K V ... --result`, parsed.
fn invoke_result(d: &Daemon, name: &str, params: &[(&str, &str)]) -> Value {
    let mut args = vec!["action", "invoke", name];
    for (k, v) in params {
        args.extend(["-p", k, v]);
    }
    args.push("--result");
    d.cli(&args).success().json()
}

fn create(d: &Daemon, name: &str, file: &str, main: Option<&str>, memory_mb: Option<&str>) {
    let mut args = vec!["action", "create", name, file];
    if let Some(main) = main {
        args.extend(["--main", main]);
    }
    if let Some(mb) = memory_mb {
        args.extend(["--memory", mb]);
    }
    d.cli(&args).success();
}

/// Where an example lives, and its entry point (Java names a class; the others use `main`).
struct Example<'a> {
    file: &'a str,
    main: Option<&'a str>,
}

/// hello with a name, then alloc with `mb`; returns alloc's result.
fn hello_and_alloc(d: &Daemon, kind: &str, hello: Example<'_>, alloc: Example<'_>) -> Value {
    create(d, "hello", hello.file, hello.main, None);
    let greeting = invoke_result(d, "hello", &[("name", "Ada")]);
    assert_eq!(greeting["greeting"], "Hello, Ada!", "{greeting}");

    create(d, "alloc", alloc.file, alloc.main, Some("512"));
    let stored = d
        .cli(&["--json", "action", "get", "alloc"])
        .success()
        .json();
    assert_eq!(
        stored["exec"]["kind"], kind,
        "the kind follows from the file: {stored}"
    );
    assert_eq!(stored["limits"]["memory"], 512);
    invoke_result(d, "alloc", &[("mb", "16")])
}

#[test]
fn python_hello_and_alloc() {
    let d = Daemon::start(&[]);
    let alloc = hello_and_alloc(
        &d,
        "python:3",
        Example {
            file: "examples/python/hello.py",
            main: None,
        },
        Example {
            file: "examples/python/alloc.py",
            main: None,
        },
    );
    assert_eq!(alloc["requested_mb"], 16, "{alloc}");
    assert!(
        alloc["allocated_bytes"].as_u64().unwrap() >= 16 * MIB,
        "{alloc}"
    );
    d.stop();
}

#[test]
fn nodejs_hello_and_alloc() {
    let d = Daemon::start(&[]);
    let alloc = hello_and_alloc(
        &d,
        "nodejs:20",
        Example {
            file: "examples/nodejs/hello.js",
            main: None,
        },
        Example {
            file: "examples/nodejs/alloc.js",
            main: None,
        },
    );
    assert_eq!(alloc["mb"], 16, "{alloc}");
    assert!(
        alloc["heap_growth_bytes"].as_u64().unwrap() >= 16 * MIB,
        "{alloc}"
    );
    d.stop();
}

#[test]
fn java_hello_and_alloc() {
    paths::java_proxy_jar();
    let jar = paths::java_examples_jar();
    let jar = jar.to_str().expect("utf-8 path");
    let d = Daemon::start(&[]);
    let alloc = hello_and_alloc(
        &d,
        "java:17",
        Example {
            file: jar,
            main: Some("Hello"),
        },
        Example {
            file: jar,
            main: Some("Alloc"),
        },
    );
    assert_eq!(alloc["allocated_mb"], 16, "{alloc}");
    assert_eq!(alloc["objects"], 16 * 1024, "{alloc}");
    d.stop();
}
