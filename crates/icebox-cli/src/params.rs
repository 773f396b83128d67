//! `-p KEY VALUE`, `-a KEY VALUE` and `-P file.json`, interpreted as `wsk` does.

use crate::error::{CliError, Result};
use serde_json::{json, Map, Value};
use std::path::Path;

/// A value that parses as JSON is taken as JSON (`5`, `true`, `{"a":1}`, `"quoted"`);
/// anything else is a plain string, so `-p name Ada` needs no quoting.
pub fn parse_value(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// Pairs from clap's flattened `KEY VALUE KEY VALUE…` list, in command-line order.
pub fn pairs(flat: &[String]) -> Vec<(String, Value)> {
    flat.chunks_exact(2)
        .map(|kv| (kv[0].clone(), parse_value(&kv[1])))
        .collect()
}

/// Reads a JSON object from `path` (`-` for stdin).
pub fn read_params_file(path: &Path) -> Result<Map<String, Value>> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| CliError::usage(format!("cannot read parameters from stdin: {e}")))?
    } else {
        std::fs::read_to_string(path).map_err(|e| {
            CliError::usage(format!(
                "cannot read parameter file {}: {e}",
                path.display()
            ))
        })?
    };
    params_from_json(&text, &path.display().to_string())
}

pub fn params_from_json(text: &str, origin: &str) -> Result<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(CliError::usage(format!(
            "{origin} must hold a JSON object, like {{\"name\": \"Ada\"}}"
        ))),
        Err(e) => Err(CliError::usage(format!("{origin} is not valid JSON: {e}"))),
    }
}

/// The file's parameters overlaid by the `-p` ones (the command line wins, later `-p` win).
pub fn merge(file: Option<Map<String, Value>>, flags: Vec<(String, Value)>) -> Map<String, Value> {
    let mut merged = file.unwrap_or_default();
    for (k, v) in flags {
        merged.insert(k, v);
    }
    merged
}

/// OpenWhisk's `[{"key": ..., "value": ...}]` form, one entry per key.
pub fn key_values(map: &Map<String, Value>) -> Value {
    Value::Array(
        map.iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_json_when_they_parse() {
        assert_eq!(parse_value("5"), json!(5));
        assert_eq!(parse_value("2.5"), json!(2.5));
        assert_eq!(parse_value("true"), json!(true));
        assert_eq!(parse_value("null"), Value::Null);
        assert_eq!(parse_value(r#"{"a":[1,2]}"#), json!({"a": [1, 2]}));
        assert_eq!(parse_value(r#""5""#), json!("5"));
    }

    #[test]
    fn other_values_are_strings() {
        assert_eq!(parse_value("Ada"), json!("Ada"));
        assert_eq!(parse_value("hello world"), json!("hello world"));
        assert_eq!(parse_value("{broken"), json!("{broken"));
        assert_eq!(parse_value(""), json!(""));
    }

    #[test]
    fn flags_override_file_and_each_other() {
        let file = params_from_json(r#"{"name": "file", "n": 1}"#, "p.json").unwrap();
        let flags = pairs(&[
            "name".into(),
            "Ada".into(),
            "n".into(),
            "2".into(),
            "n".into(),
            "3".into(),
        ]);
        let merged = merge(Some(file), flags);
        assert_eq!(Value::Object(merged), json!({"name": "Ada", "n": 3}));
    }

    #[test]
    fn param_files_must_hold_an_object() {
        let err = params_from_json("[1,2]", "p.json").unwrap_err();
        assert!(
            matches!(&err, CliError::Usage(m) if m.contains("p.json must hold a JSON object")),
            "{err:?}"
        );
        let err = params_from_json("{", "p.json").unwrap_err();
        assert!(
            matches!(&err, CliError::Usage(m) if m.contains("not valid JSON")),
            "{err:?}"
        );
    }

    #[test]
    fn key_value_form() {
        let merged = merge(
            None,
            pairs(&["b".into(), "1".into(), "a".into(), "x".into()]),
        );
        assert_eq!(
            key_values(&merged),
            json!([{"key": "a", "value": "x"}, {"key": "b", "value": 1}])
        );
    }
}
