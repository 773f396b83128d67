//! Where the API host and key come from: flag, then environment (`ICEBOX_APIHOST`,
//! `ICEBOX_AUTH`), then the config file `~/.config/icebox/config`, then the default host.
//! The environment is read here rather than by clap so that usage messages do not echo it.

use crate::error::{CliError, Result};
use std::path::PathBuf;

pub const DEFAULT_APIHOST: &str = "http://127.0.0.1:8740";

/// The settings a command runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Base URL without a trailing slash, e.g. `http://127.0.0.1:8740`.
    pub apihost: String,
    /// `uuid:key`, when known. Only `health` works without it.
    pub auth: Option<String>,
}

/// The keys of a config file; unknown keys are rejected so that typos do not go unnoticed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FileConfig {
    pub apihost: Option<String>,
    pub auth: Option<String>,
}

/// Parses `KEY=VALUE` lines. Blank lines and `#` comments are skipped; keys are
/// case-insensitive; a value may be wrapped in single or double quotes.
pub fn parse_config(text: &str, origin: &str) -> Result<FileConfig> {
    let mut config = FileConfig::default();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let lineno = index + 1;
        let Some((key, value)) = line.split_once('=') else {
            return Err(CliError::failed(format!(
                "{origin} line {lineno}: expected KEY=VALUE (APIHOST=... or AUTH=uuid:key), found '{line}'"
            )));
        };
        let value = unquote(value.trim()).to_string();
        match key.trim().to_ascii_uppercase().as_str() {
            "APIHOST" => config.apihost = Some(value),
            "AUTH" => config.auth = Some(value),
            other => {
                return Err(CliError::failed(format!(
                    "{origin} line {lineno}: unknown key '{other}' (known keys: APIHOST, AUTH)"
                )))
            }
        }
    }
    Ok(config)
}

fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(quote) && value.ends_with(quote) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

/// `$XDG_CONFIG_HOME/icebox/config`, else `$HOME/.config/icebox/config`.
pub fn config_path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".config"),
    };
    Some(base.join("icebox").join("config"))
}

/// Accepts `host:port` as well as full URLs, since people type both.
pub fn normalize_apihost(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    if host.contains("://") {
        host.to_string()
    } else {
        format!("http://{host}")
    }
}

pub fn validate_auth(auth: &str) -> Result<()> {
    match auth.split_once(':') {
        Some((uuid, key)) if !uuid.is_empty() && !key.is_empty() => Ok(()),
        _ => Err(CliError::usage(
            "the API key must have the form uuid:key (as in <state-dir>/auth)",
        )),
    }
}

/// Combines the flags with the environment and the config file; empty values count as unset.
pub fn resolve(apihost: Option<String>, auth: Option<String>) -> Result<Settings> {
    let set = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
    let apihost = set(apihost).or_else(|| set(std::env::var("ICEBOX_APIHOST").ok()));
    let auth = set(auth).or_else(|| set(std::env::var("ICEBOX_AUTH").ok()));
    let file = if apihost.is_none() || auth.is_none() {
        read_config_file()?
    } else {
        FileConfig::default()
    };
    let settings = merge(apihost, auth, file);
    if let Some(auth) = &settings.auth {
        validate_auth(auth)?;
    }
    Ok(settings)
}

fn merge(apihost: Option<String>, auth: Option<String>, file: FileConfig) -> Settings {
    let apihost = apihost
        .or(file.apihost)
        .unwrap_or_else(|| DEFAULT_APIHOST.to_string());
    Settings {
        apihost: normalize_apihost(&apihost),
        auth: auth.or(file.auth).map(|a| a.trim().to_string()),
    }
}

fn read_config_file() -> Result<FileConfig> {
    let Some(path) = config_path() else {
        return Ok(FileConfig::default());
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_config(&text, &path.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileConfig::default()),
        Err(e) => Err(CliError::failed(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys_comments_and_quotes() {
        let text = "# icebox\n\nAPIHOST = http://10.0.0.5:8740\nauth='23bc:abcd'\n";
        let c = parse_config(text, "cfg").unwrap();
        assert_eq!(c.apihost.as_deref(), Some("http://10.0.0.5:8740"));
        assert_eq!(c.auth.as_deref(), Some("23bc:abcd"));
    }

    #[test]
    fn value_may_contain_equals_sign() {
        let c = parse_config("AUTH=\"u:k==\"", "cfg").unwrap();
        assert_eq!(c.auth.as_deref(), Some("u:k=="));
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let err = parse_config("APIHOST=x\njunk", "/home/me/.config/icebox/config").unwrap_err();
        assert!(
            err.to_string()
                .contains("/home/me/.config/icebox/config line 2"),
            "{err}"
        );
        let err = parse_config("HOST=x", "cfg").unwrap_err();
        assert!(err.to_string().contains("unknown key 'HOST'"), "{err}");
    }

    #[test]
    fn flags_win_over_file_and_default_applies_last() {
        let file = FileConfig {
            apihost: Some("10.0.0.5:9000".into()),
            auth: Some("f:file".into()),
        };
        let s = merge(Some("http://h:1/".into()), None, file);
        assert_eq!(s.apihost, "http://h:1");
        assert_eq!(s.auth.as_deref(), Some("f:file"));
        let s = merge(None, Some("u:k".into()), FileConfig::default());
        assert_eq!(s.apihost, DEFAULT_APIHOST);
        assert_eq!(s.auth.as_deref(), Some("u:k"));
    }

    #[test]
    fn apihost_gets_a_scheme() {
        assert_eq!(normalize_apihost("127.0.0.1:8740"), "http://127.0.0.1:8740");
        assert_eq!(
            normalize_apihost("https://edge.example/"),
            "https://edge.example"
        );
    }

    #[test]
    fn auth_needs_uuid_and_key() {
        assert!(validate_auth("23bc46b1-71f6-4ed5-8c54-816aa4f8c502:123zO3xZ").is_ok());
        assert!(matches!(validate_auth("nocolon"), Err(CliError::Usage(_))));
        assert!(validate_auth(":key").is_err());
        assert!(validate_auth("uuid:").is_err());
    }
}
