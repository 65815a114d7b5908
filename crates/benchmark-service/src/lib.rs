pub mod report;
pub mod store;
