//! Call metadata: string key/values carried in a request's meta section
//! (authentication tokens, trace ids, caller names).
//!
//! Stored as a small vector rather than a map: calls carry a handful of entries
//! at most, a linear scan beats hashing at that size, and an empty `Metadata`
//! does not allocate — the common case costs nothing.

/// Ordered string key/values attached to a call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    entries: Vec<(String, String)>,
}

impl Metadata {
    /// Empty metadata (no allocation).
    pub fn new() -> Self {
        Metadata::default()
    }

    /// Sets `key` to `value`, replacing an earlier value of the same key.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        let value = value.into();
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.entries.push((key, value)),
        }
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(i).1)
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_replaces_and_keeps_order() {
        let mut m = Metadata::new();
        m.insert("a", "1");
        m.insert("b", "2");
        m.insert("a", "3");
        assert_eq!(m.get("a"), Some("3"));
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![("a", "3"), ("b", "2")]);
        assert_eq!(m.remove("a").as_deref(), Some("3"));
        assert_eq!(m.len(), 1);
    }
}
