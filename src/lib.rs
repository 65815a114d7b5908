//! brisk facade (wired up below as crates land).
