//! Warnings a request collects on its way, answered as `Warning: 299 - "..."` headers (RFC 7234
//! form, as upstream's `warning.AddWarning` recorder writes them): unknown and duplicate fields
//! under `fieldValidation=Warn`, upstream's default. The collector is task-local, so code deep
//! in a write adds to the warnings of the request it serves without threading them through
//! every call; writes made outside a request (the bootstrap, side effects run by [`crate::rest::wait`]
//! on another future) have no collector and their warnings go nowhere, as upstream's internal
//! writes have no client to warn.

use std::cell::RefCell;
use std::future::Future;

tokio::task_local! {
    static WARNINGS: RefCell<Vec<String>>;
}

/// Adds a warning to the request being served (once: upstream's recorder drops repeats).
pub fn add(message: impl Into<String>) {
    let message = message.into();
    let _ = WARNINGS.try_with(|w| {
        let mut w = w.borrow_mut();
        if !w.contains(&message) {
            w.push(message);
        }
    });
}

/// Runs a request, returning its answer and the warnings it collected.
pub async fn collect<F: Future>(request: F) -> (F::Output, Vec<String>) {
    WARNINGS
        .scope(RefCell::new(Vec::new()), async move {
            let out = request.await;
            let warnings = WARNINGS.with(|w| std::mem::take(&mut *w.borrow_mut()));
            (out, warnings)
        })
        .await
}

/// The `Warning` header value of one warning: code 299, agent `-`, the text quoted with `"` and
/// `\` escaped (Go's `strconv.Quote`-free form upstream's `headerrecorder` writes).
pub fn header_value(message: &str) -> String {
    let mut quoted = String::with_capacity(message.len() + 8);
    for c in message.chars() {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    format!("299 - \"{quoted}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_header_quotes_the_text_as_upstream() {
        assert_eq!(header_value(r#"unknown field "spec.foo""#), r#"299 - "unknown field \"spec.foo\"""#);
    }

    #[tokio::test]
    async fn warnings_reach_only_the_request_that_added_them_once_each() {
        let ((), warnings) = collect(async {
            add("a");
            add("a");
            add("b");
        })
        .await;
        assert_eq!(warnings, ["a", "b"]);
        add("outside any request"); // no collector: dropped, no panic
    }
}
