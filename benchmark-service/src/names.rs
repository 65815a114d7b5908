//! The error text of a name that none of an enum's values has, shared by the suite's named
//! enums (players, scenarios, call modes, connect types, presets): what was asked, and every
//! valid name.

/// The text `unknown WHAT 'GIVEN' (expected one of: a, b, c)`, with backticks around GIVEN.
pub fn unknown<T: strum::VariantNames>(what: &str, given: &str) -> String {
    format!(
        "unknown {what} `{given}` (expected one of: {})",
        T::VARIANTS.join(", ")
    )
}
