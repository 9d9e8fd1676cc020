//! What the host and the shaders share: the tables of `table.rs` (read by `build.rs` too) and
//! the push-constant block and rules generated from them.

// Read by build.rs too, so some items are dead to the crate.
#[allow(dead_code)]
mod table;

pub use table::*;

/// The shared constants and the push-constant block, generated from the tables (some constants
/// serve the shaders and the CPU model alone).
#[allow(dead_code)]
mod block {
    include!(concat!(env!("OUT_DIR"), "/push_constants.rs"));
}

pub use block::*;

/// The rules of [`RULES`] as Rust: the shaders run the same text as GLSL, the CPU model runs
/// this.
#[cfg_attr(not(any(test, feature = "test-hooks")), allow(dead_code))]
mod rules {
    use super::{FLAG_FROM_IMAGE_ON_STORE, NEXT_STAGE_MASK, NEXT_STAGE_SHIFT};
    include!(concat!(env!("OUT_DIR"), "/rules.rs"));
}

#[cfg(any(test, feature = "test-hooks"))]
pub use rules::stores_keys;
pub use rules::DispatchRule;
