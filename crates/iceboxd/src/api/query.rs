//! Query-string flags, one rule for every boolean: OpenWhisk's clients send `true`/`false`,
//! and `1`/`yes`, `0`/`no` mean the same. An absent or unrecognised value is the default.

pub fn flag(value: Option<&str>, default: bool) -> bool {
    match value.map(str::trim) {
        Some(v)
            if ["true", "1", "yes"]
                .iter()
                .any(|t| v.eq_ignore_ascii_case(t)) =>
        {
            true
        }
        Some(v)
            if ["false", "0", "no"]
                .iter()
                .any(|f| v.eq_ignore_ascii_case(f)) =>
        {
            false
        }
        _ => default,
    }
}

#[cfg(test)]
mod tests {
    use super::flag;

    #[test]
    fn one_rule_for_every_boolean() {
        for v in ["true", "TRUE", "1", "yes"] {
            assert!(flag(Some(v), false), "{v}");
        }
        for v in ["false", "0", "no", "No"] {
            assert!(!flag(Some(v), true), "{v}");
        }
        assert!(flag(None, true));
        assert!(!flag(None, false));
        assert!(!flag(Some("maybe"), false));
        assert!(flag(Some(""), true));
    }
}
