//! The flip network in pure Rust: the plan of a sort's passes, the command sequence recorded for
//! it, and the CPU model that replays that sequence element by element and checks every barrier.

pub mod commands;
#[cfg(any(test, feature = "test-hooks"))]
pub mod model;
pub mod plan;

#[cfg(any(test, feature = "test-hooks"))]
pub use commands::direct_dispatches;
pub use commands::{dispatch_count, dispatch_rules, record_passes, Encoder, RecordOptions};
pub use plan::{pass_count, Pass, Plan};
