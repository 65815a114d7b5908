//! The record every data-backed benchmark scenario returns.
//!
//! The benchmark service (a port of jksoa-benchmark) serves the same 10 records from three
//! places — an in-process cache, a JSON file and a database — so that the only thing that
//! changes between the `cache`, `file` and `db` scenarios is *how much the lookup blocks*, not
//! the payload. Keeping the records small (≈60 bytes of content), fixed and deterministic means
//! every scenario sends byte-for-byte identical responses and results are comparable across
//! runs, hosts and frameworks.
//!
//! Ids are `i64` (as are the uids): SQLite `INTEGER` and PostgreSQL `bigint` are signed 64-bit,
//! so `i64` maps to both without conversion or overflow checks. Callers compute the key as
//! `(i % 10 + 1) as i64`, which is always in [`MIN_ID`]`..=`[`MAX_ID`].

use serde::{Deserialize, Serialize};

/// Number of seeded records.
pub const MESSAGE_COUNT: usize = 10;
/// Smallest seeded id.
pub const MIN_ID: i64 = 1;
/// Largest seeded id (`MIN_ID + MESSAGE_COUNT - 1`).
pub const MAX_ID: i64 = 10;

/// One benchmark record, as stored in the cache, the JSON file and the `message` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Primary key, `1..=10` for the seeded records.
    pub id: i64,
    /// Sender user id (`1000 + id` for the seeded records).
    pub from_uid: i64,
    /// Recipient user id (`2000 + id` for the seeded records).
    pub to_uid: i64,
    /// Text body, 40–100 bytes for the seeded records.
    pub content: String,
}

impl Message {
    /// The deterministic seed record for `id` (any id; only `1..=10` are seeded).
    pub fn seed(id: i64) -> Message {
        let from_uid = 1000 + id;
        let to_uid = 2000 + id;
        Message {
            id,
            from_uid,
            to_uid,
            content: format!(
                "message {id} from {from_uid} to {to_uid}: hello from the brisk benchmark"
            ),
        }
    }
}

/// The 10 deterministic records with ids `1..=10`, in id order.
pub fn seed_messages() -> Vec<Message> {
    (MIN_ID..=MAX_ID).map(Message::seed).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_is_ten_deterministic_records() {
        let a = seed_messages();
        assert_eq!(a.len(), MESSAGE_COUNT);
        assert_eq!(a, seed_messages());
        for (i, m) in a.iter().enumerate() {
            assert_eq!(m.id, i as i64 + 1);
            assert_eq!(m.from_uid, 1000 + m.id);
            assert_eq!(m.to_uid, 2000 + m.id);
            assert!(m.content.starts_with(&format!("message {} from", m.id)));
            assert!((40..=100).contains(&m.content.len()), "{}", m.content.len());
        }
        assert_eq!(a.first().map(|m| m.id), Some(MIN_ID));
        assert_eq!(a.last().map(|m| m.id), Some(MAX_ID));
    }

    #[test]
    fn serde_round_trip_uses_plain_field_names() {
        let m = Message::seed(3);
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(
            json,
            r#"{"id":3,"from_uid":1003,"to_uid":2003,"content":"message 3 from 1003 to 2003: hello from the brisk benchmark"}"#
        );
        assert_eq!(serde_json::from_str::<Message>(&json).unwrap(), m);
    }
}
