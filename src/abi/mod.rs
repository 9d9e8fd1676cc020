//! What the host and the shaders share: the tables of `table.rs` (read by `build.rs` too) and
//! the push-constant block generated from them.

// Read by build.rs too, so some items are dead to the crate.
#[allow(dead_code)]
mod table;

pub use table::*;

include!(concat!(env!("OUT_DIR"), "/push_constants.rs"));
