//! The syntax of label keys and values (apimachinery's `validation.IsQualifiedName` and
//! `IsValidLabelValue`), with upstream's words for each fault: the embedded API server checks
//! object labels, annotation keys and Event controllers with these, the MyDeployment plugin its
//! selector and template labels.
//!
//! Each check returns every fault upstream reports, in its order (a name part that is empty is
//! both empty and off the regex, as upstream says twice); an empty list means the input is valid.

use crate::dns1123;

/// Longest label value and name part of a qualified name (`LabelValueMaxLength`,
/// `qualifiedNameMaxLength`).
pub const MAX_LENGTH: usize = 63;

/// `qualifiedNameErrMsg` with its examples and regex, as `RegexError` prints it.
const QUALIFIED_NAME_ERROR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `labelValueErrMsg` with its examples and regex.
const VALUE_ERROR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Whether `s` matches `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`: alphanumerics, '-', '_'
/// and '.', starting and ending with an alphanumeric; the empty string matches.
fn is_token_or_empty(s: &str) -> bool {
    s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && s.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
}

fn too_long(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// `validation.IsQualifiedName`: what is wrong with a label or annotation key (an optional
/// DNS-1123 subdomain prefix and '/', then a name part); empty when it is valid.
pub fn qualified_name_errors(key: &str) -> Vec<String> {
    let mut errs = vec![];
    let name = match key.split('/').collect::<Vec<_>>().as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > dns1123::SUBDOMAIN_MAX_LENGTH {
                    errs.push(format!("prefix part {}", too_long(dns1123::SUBDOMAIN_MAX_LENGTH)));
                }
                if !dns1123::is_subdomain_format(prefix) {
                    errs.push(format!("prefix part {}", dns1123::SUBDOMAIN_ERROR));
                }
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_ERROR} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > MAX_LENGTH {
        errs.push(format!("name part {}", too_long(MAX_LENGTH)));
    }
    if name.is_empty() || !is_token_or_empty(name) {
        errs.push(format!("name part {QUALIFIED_NAME_ERROR}"));
    }
    errs
}

/// `validation.IsValidLabelValue`: what is wrong with a label value; empty when it is valid.
pub fn value_errors(value: &str) -> Vec<String> {
    let mut errs = vec![];
    if value.len() > MAX_LENGTH {
        errs.push(too_long(MAX_LENGTH));
    }
    if !is_token_or_empty(value) {
        errs.push(VALUE_ERROR.into());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_take_an_optional_subdomain_prefix_and_a_name_part_of_up_to_63_characters() {
        for good in ["app", "app.kubernetes.io/name", "a", "A-b_c.d", "example.com/x", &"x".repeat(63)] {
            assert_eq!(qualified_name_errors(good), Vec::<String>::new(), "{good}");
        }
        for bad in ["", "-app", "app-", "a/b/c", "/app", "Example.com/app", "app/", &"x".repeat(64)] {
            assert!(!qualified_name_errors(bad).is_empty(), "{bad:?}");
        }
    }

    #[test]
    fn key_faults_are_worded_and_counted_as_upstream() {
        assert_eq!(qualified_name_errors(""), vec!["name part must be non-empty".to_string(), format!("name part {QUALIFIED_NAME_ERROR}")]);
        assert_eq!(qualified_name_errors(&"x".repeat(64)), vec!["name part must be no more than 63 characters".to_string()]);
        assert_eq!(qualified_name_errors("/app"), vec!["prefix part must be non-empty".to_string()]);
        assert_eq!(qualified_name_errors("Example.com/app"), vec![format!("prefix part {}", dns1123::SUBDOMAIN_ERROR)]);
        let three_parts = qualified_name_errors("a/b/c");
        assert_eq!(three_parts.len(), 1);
        assert!(three_parts[0].starts_with("a qualified name must consist of"), "{three_parts:?}");
    }

    #[test]
    fn values_may_be_empty_or_a_token_of_up_to_63_characters() {
        for good in ["", "nginx", "1.7.9", "my_value", &"v".repeat(63)] {
            assert_eq!(value_errors(good), Vec::<String>::new(), "{good}");
        }
        for bad in ["-x", "x y", "x-", &"v".repeat(64)] {
            assert!(!value_errors(bad).is_empty(), "{bad:?}");
        }
        assert_eq!(value_errors(&format!("{}-", "v".repeat(63))), vec!["must be no more than 63 characters".to_string(), VALUE_ERROR.to_string()]);
    }
}
