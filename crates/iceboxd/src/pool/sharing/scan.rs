//! The deploy-time half of isolate mode's contract (docs/isolates.md): the v8 engine's isolates
//! reach nothing of the host, so an action whose own code requires or imports a Node.js
//! built-in that the engine does not provide is refused at deployment, naming the module,
//! rather than failing at its first activation. The runtime checks again when the module is
//! loaded (runtimes/nodejs/lib/v8-require.js), which also covers what the scan cannot see
//! (a name computed at run time, a dependency in node_modules that needs one).

use std::io::{Read, Seek};

/// Node.js 20's built-in modules (`require('module').builtinModules`, internal ones left out).
const NODE_BUILTINS: &[&str] = &[
    "assert",
    "assert/strict",
    "async_hooks",
    "buffer",
    "child_process",
    "cluster",
    "console",
    "constants",
    "crypto",
    "dgram",
    "diagnostics_channel",
    "dns",
    "dns/promises",
    "domain",
    "events",
    "fs",
    "fs/promises",
    "http",
    "http2",
    "https",
    "inspector",
    "inspector/promises",
    "module",
    "net",
    "os",
    "path",
    "path/posix",
    "path/win32",
    "perf_hooks",
    "process",
    "punycode",
    "querystring",
    "readline",
    "readline/promises",
    "repl",
    "stream",
    "stream/consumers",
    "stream/promises",
    "stream/web",
    "string_decoder",
    "sys",
    "timers",
    "timers/promises",
    "tls",
    "trace_events",
    "tty",
    "url",
    "util",
    "util/types",
    "v8",
    "vm",
    "wasi",
    "worker_threads",
    "zlib",
];

/// The built-ins the v8 engine provides inside the isolate itself (v8-require.js `PROVIDED`).
const PROVIDED: &[&str] = &["buffer", "crypto", "url", "util"];

/// A source file larger than this is not scanned (minified bundles): the run-time check
/// still applies to it.
const MAX_SCANNED_FILE: u64 = 4 << 20;

/// The first host built-in a source file loads, with where it is.
pub fn in_source(code: &str) -> Option<(String, String)> {
    host_builtins(code)
        .into_iter()
        .next()
        .map(|m| (m, "the action's code".into()))
}

/// The same for a zip: its scripts outside `node_modules`.
pub fn in_archive(archive: impl Read + Seek) -> Option<(String, String)> {
    let mut archive = zip::ZipArchive::new(archive).ok()?;
    for i in 0..archive.len() {
        let Ok(mut entry) = archive.by_index(i) else {
            continue;
        };
        let name = entry.name().to_string();
        let script = [".js", ".cjs", ".mjs"].iter().any(|e| name.ends_with(e));
        // Dependencies may require a built-in on a path the action never takes.
        if !script
            || name.split('/').any(|p| p == "node_modules")
            || entry.size() > MAX_SCANNED_FILE
        {
            continue;
        }
        let mut source = String::new();
        if entry.read_to_string(&mut source).is_err() {
            continue;
        }
        if let Some(m) = host_builtins(&source).into_iter().next() {
            return Some((m, name));
        }
    }
    None
}

/// Host built-ins named by `require('…')`, `import … from '…'`, `import '…'` and
/// `import('…')` in one source file, outside comments.
fn host_builtins(source: &str) -> Vec<String> {
    module_names(source)
        .into_iter()
        .filter_map(|spec| {
            let name = spec.strip_prefix("node:").unwrap_or(&spec);
            (NODE_BUILTINS.contains(&name) && !PROVIDED.contains(&name)).then(|| name.to_string())
        })
        .collect()
}

/// String literals that follow `require(`, `import(`, `import` or `from`, skipping comments,
/// other strings and template literals.
fn module_names(source: &str) -> Vec<String> {
    let chars: Vec<char> = source.chars().collect();
    let mut names = Vec::new();
    // The last identifier and whether a `(` followed it: what a literal is an argument of.
    let mut last_word = String::new();
    let mut open_paren = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
            }
            '\'' | '"' | '`' => {
                let start = i + 1;
                i += 1;
                while i < chars.len() && chars[i] != c {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                let literal: String = chars[start..i.min(chars.len())].iter().collect();
                let call = open_paren && (last_word == "require" || last_word == "import");
                let bare = !open_paren && (last_word == "from" || last_word == "import");
                if c != '`' && (call || bare) {
                    names.push(literal);
                }
                last_word.clear();
                open_paren = false;
                i += 1;
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
                {
                    i += 1;
                }
                // `x.require(` is somebody's method, not Node's require.
                let member = start > 0 && chars[start - 1] == '.';
                last_word = if member {
                    String::new()
                } else {
                    chars[start..i].iter().collect()
                };
                open_paren = false;
            }
            '(' if !last_word.is_empty() && !open_paren => {
                open_paren = true;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            _ => {
                last_word.clear();
                open_paren = false;
                i += 1;
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    #[test]
    fn finds_requires_and_imports_of_host_built_ins_only() {
        let src = r#"
            const fs = require('fs');
            const { join } = require("node:path");
            const { Buffer } = require('buffer');
            const lib = require('./lib');
            import net from 'net';
            import 'node:child_process';
            const later = await import('http');
            // require('os') in a comment
            /* import dns from 'dns' */
            const s = "require('zlib')";
            obj.require('tls');
            const t = `${require('util')}`;
        "#;
        assert_eq!(
            host_builtins(src),
            ["fs", "path", "net", "child_process", "http"]
        );
    }

    #[test]
    fn a_zip_is_scanned_without_its_dependencies() {
        let zip = |files: &[(&str, &str)]| {
            let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
            for (name, body) in files {
                w.start_file(*name, zip::write::SimpleFileOptions::default())
                    .unwrap();
                w.write_all(body.as_bytes()).unwrap();
            }
            w.finish().unwrap()
        };
        let clean = zip(&[
            (
                "index.js",
                "const d = require('dep'); exports.main = () => d();",
            ),
            (
                "node_modules/dep/index.js",
                "module.exports = () => require('fs');",
            ),
        ]);
        assert_eq!(in_archive(clean), None);
        let dirty = zip(&[
            ("index.js", "exports.main = require('./lib/io').main;"),
            (
                "lib/io.js",
                "const os = require('os'); exports.main = () => os.cpus();",
            ),
        ]);
        assert_eq!(in_archive(dirty), Some(("os".into(), "lib/io.js".into())));
        assert_eq!(
            in_source("function main() { return require('crypto').randomUUID(); }"),
            None
        );
    }
}
