//! Query-string flags, one rule for every boolean: OpenWhisk's clients send `true`/`false`,
//! and `1`/`0` mean the same. Anything else is refused rather than guessed: a client that
//! wrote `blocking=maybe` finds out at once instead of getting a non-blocking invocation.

use super::ApiError;

pub fn flag(name: &str, value: Option<&str>, default: bool) -> Result<bool, ApiError> {
    let Some(v) = value else {
        return Ok(default);
    };
    let v = v.trim();
    if v.eq_ignore_ascii_case("true") || v == "1" {
        Ok(true)
    } else if v.eq_ignore_ascii_case("false") || v == "0" {
        Ok(false)
    } else {
        Err(ApiError::bad_request(format!(
            "The query parameter '{name}' must be true or false, not '{v}'."
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::flag;

    #[test]
    fn one_rule_for_every_boolean() {
        for v in ["true", "TRUE", "1", " true "] {
            assert!(flag("x", Some(v), false).unwrap(), "{v}");
        }
        for v in ["false", "False", "0"] {
            assert!(!flag("x", Some(v), true).unwrap(), "{v}");
        }
        assert!(flag("x", None, true).unwrap());
        assert!(!flag("x", None, false).unwrap());
    }

    #[test]
    fn anything_else_is_refused_and_named() {
        for v in ["maybe", "yes", "no", "", "2"] {
            let e = flag("blocking", Some(v), false).unwrap_err();
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
            assert!(e.message.contains("'blocking'"), "{}", e.message);
        }
    }
}
