//! [`panic_message`]: the text of a caught panic.
//!
//! Two places catch handler panics — a call's own containment (the caller is
//! answered with the message) and the worker pool's last line of defence (the
//! message is logged) — and both describe the payload the same way, so the
//! words a client reads and the words in the log agree.

use std::any::Any;

/// The message a panic carried: the `&str` or `String` given to `panic!`, or
/// a placeholder for any other payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "non-string panic payload"
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn string_payloads_are_their_message_others_a_placeholder() {
        let literal = std::panic::catch_unwind(|| panic!("boom")).unwrap_err();
        assert_eq!(panic_message(literal.as_ref()), "boom");
        let formatted = std::panic::catch_unwind(|| panic!("boom {}", 42)).unwrap_err();
        assert_eq!(panic_message(formatted.as_ref()), "boom 42");
        let other = std::panic::catch_unwind(|| std::panic::panic_any(7_u32)).unwrap_err();
        assert_eq!(panic_message(other.as_ref()), "non-string panic payload");
    }
}
