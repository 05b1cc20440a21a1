//! The DNS-1123 names of Kubernetes (apimachinery's `validation.IsDNS1123Label` and
//! `IsDNS1123Subdomain`): object names, namespace names, label key prefixes, plugin names.
//!
//! The checks are here once; the words of the error stay with each caller, since upstream
//! words the same fault differently in different places (a name, a key's prefix part).

/// Longest DNS-1123 label (`DNS1123LabelMaxLength`).
pub const LABEL_MAX_LENGTH: usize = 63;

/// Longest DNS-1123 subdomain (`DNS1123SubdomainMaxLength`).
pub const SUBDOMAIN_MAX_LENGTH: usize = 253;

/// Upstream's error for a name that is not a DNS-1123 label (`dns1123LabelErrMsg` with its
/// examples and regex, as `field.Invalid` prints it).
pub const LABEL_ERROR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Upstream's error for a name that is not a DNS-1123 subdomain (`dns1123SubdomainErrorMsg`
/// with its example and regex).
pub const SUBDOMAIN_ERROR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Whether `s` has a DNS-1123 subdomain's form, whatever its length: dot-separated labels of
/// lowercase letters, digits and '-', none empty, none starting or ending with '-'.
pub fn is_subdomain_format(s: &str) -> bool {
    s.split('.').all(|label| {
        !label.is_empty()
            && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    })
}

/// `IsDNS1123Subdomain` finds nothing wrong: the form, and at most 253 characters.
pub fn is_subdomain(s: &str) -> bool {
    s.len() <= SUBDOMAIN_MAX_LENGTH && is_subdomain_format(s)
}

/// `IsDNS1123Label` finds nothing wrong: a subdomain without dots, at most 63 characters.
pub fn is_label(s: &str) -> bool {
    s.len() <= LABEL_MAX_LENGTH && !s.contains('.') && is_subdomain_format(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_lowercase_alphanumerics_and_inner_dashes_up_to_63() {
        for good in ["a", "my-name", "123-abc", "0", &"x".repeat(63)] {
            assert!(is_label(good), "{good:?}");
        }
        for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"x".repeat(64)] {
            assert!(!is_label(bad), "{bad:?}");
        }
    }

    #[test]
    fn subdomains_are_dotted_labels_up_to_253() {
        for good in ["example.com", "a", "a-1.b-2", &format!("{}.{}", "x".repeat(63), "y".repeat(63))] {
            assert!(is_subdomain(good), "{good:?}");
        }
        for bad in ["", ".a", "a.", "a..b", "Example.com", "a.-b", &"x.".repeat(127)] {
            assert!(!is_subdomain(bad), "{bad:?}");
        }
        let long = ["x"; 128].join(".");
        assert!(long.len() > SUBDOMAIN_MAX_LENGTH && is_subdomain_format(&long) && !is_subdomain(&long));
    }
}
