//! Where the tested binaries, runtimes, examples and helper scripts are.

use std::path::{Path, PathBuf};

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// `$ICEBOX_BIN_DIR`, else `<workspace>/target/release`: the binaries under test are the
/// release build the Makefile makes, not whatever `cargo test` happens to compile.
pub fn bin_dir() -> PathBuf {
    match std::env::var_os("ICEBOX_BIN_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => workspace_root().join("target/release"),
    }
}

/// A binary under test; panics with the command that builds it when it is missing.
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build --release` in the workspace root \
         (or point ICEBOX_BIN_DIR at the directory holding iceboxd and icebox)",
        path.display()
    );
    path
}

pub fn runtimes_dir() -> PathBuf {
    workspace_root().join("runtimes")
}

/// A file built by a separate tool (Maven, npm); panics with the command that builds it.
pub fn built_artifact(relative: &str, build_command: &str) -> PathBuf {
    let path = workspace_root().join(relative);
    assert!(
        path.exists(),
        "{} is missing: build it with `{build_command}` in the workspace root (`make test` does this)",
        path.display()
    );
    path
}

/// The Java examples jar (examples/java).
pub fn java_examples_jar() -> PathBuf {
    built_artifact(
        "examples/java/target/icebox-examples.jar",
        "mvn -B -q -f examples/java/pom.xml package",
    )
}

/// The Java action proxy the java:17 runtime runs.
pub fn java_proxy_jar() -> PathBuf {
    built_artifact(
        "runtimes/java/target/icebox-java-proxy.jar",
        "mvn -B -q -f runtimes/java/pom.xml package",
    )
}

/// The real `openwhisk` npm client's directory (`make test` runs `npm ci` there), checked to be
/// installed.
pub fn openwhisk_client_dir() -> PathBuf {
    let dir = workspace_root().join("tests/integration/openwhisk-client");
    assert!(
        dir.join("node_modules/openwhisk/package.json").is_file(),
        "run `npm ci` in {} (`make test` does it)",
        dir.display()
    );
    dir
}
