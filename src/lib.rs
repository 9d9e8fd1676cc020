//! A bitonic sorting network on the GPU through Vulkan compute.
//!
//! Sorts `u32`, `i32`, `f32`, `u64`, `i64` and `f64` keys, alone or with `u32` values, ascending
//! or descending, stably on request, for any length from 0 to the device's buffer limits, using no
//! device memory beyond the elements themselves (plus host-visible staging for the upload and
//! download).
//!
//! ```no_run
//! use bitonic_vk::{Context, ContextDesc, Order};
//! # fn main() -> bitonic_vk::Result<()> {
//! let ctx = Context::new(&ContextDesc::default())?;
//! let mut sorter = ctx.sorter()?;
//! let mut keys = vec![3.5f32, -0.0, f32::NAN, 0.0, -1.0];
//! let mut values: Vec<u32> = (0..keys.len() as u32).collect();
//! let stats = sorter.sort_pairs(&mut keys, &mut values, Order::Ascending)?;
//! println!("{} passes, {:?} on the GPU", stats.passes, stats.gpu_time);
//! # Ok(()) }
//! ```
//!
//! Two ways in: [`Sorter`] sorts host slices on a device of its own ([`Context`]); [`SortRecorder`]
//! records sorts into a renderer's command buffer, on its device and buffers (see [`embed`] for
//! the contract: barriers before and after, the state it overwrites, lifetimes, the GPU-side
//! count).
//!
//! # How it works
//! - **Order images.** Every kernel compares `u32` images whose unsigned order is the key order:
//!   `i32` flips the sign bit; `f32` flips the sign bit of positive numbers and every bit of
//!   negative ones, which is IEEE total order exactly as [`f32::total_cmp`]
//!   (-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN); descending complements the image.
//!   The first pass maps keys to images, the last maps them back. No float is ever compared.
//! - **The network** is the bitonic sorter in its flip form (see [`plan`]): indices at or past n
//!   are virtual +infinity keys, never read or written. Inside a kernel they are held as the
//!   largest order image, which never moves (a comparator moves its pair only when the lower
//!   index holds the strictly greater image), so a key equal to `u32::MAX` or +NaN is never
//!   confused with one. Any n works, with no memory beyond the n elements.
//! - **Three kernels**: `tile_sort` sorts tiles in shared memory, `global_merge` runs up to five
//!   consecutive substages (six for 4-byte keys alone from 2048 tiles) with strides of a tile or
//!   more straight on the buffers, `local_merge`
//!   finishes the strides below a tile (in windows of two or four tiles, the strides of a tile
//!   or of two too, where that saves a global pass: see [`plan`]). Each invocation runs up to
//!   five (six) substages on a group of 32 (64) elements in registers (register fusion,
//!   `glsl/fused.glsl`), the flip included; the local kernels' shared-memory chunks take 4
//!   ([`pipelines::local_chunk`] says when 5; 3 in sorts of up to 2^15 elements and for 4-byte
//!   keys alone in segment tiles of 2048, [`sorter::segment_chunk_for`]), and in the
//!   tile sort a chunk may span a stage boundary (`glsl/local.glsl`, `cross_group`). The tile
//!   is the largest power of two that fits `maxComputeSharedMemorySize` (smaller for small
//!   sorts), passed as a specialization constant.
//! - **One command buffer** per sort: upload, every pass with a compute-to-compute barrier between
//!   consecutive passes, download; one submit and one fence wait. Dispatches larger than
//!   `maxComputeWorkGroupCount[0]` are split.
//!
//! # Barriers
//! Every pass reads what the pass before it wrote, so [`record::record_passes`] puts a
//! `COMPUTE_SHADER/SHADER_WRITE -> COMPUTE_SHADER/SHADER_READ|SHADER_WRITE` memory barrier between
//! each pair. CPU implementations run dispatches one after another and the synchronization
//! validation layer does not report a missing barrier between two dispatches on one buffer, so the
//! recorded command stream is also checked on the CPU by [`model`], element by element.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod context;
pub mod embed;
pub mod error;
pub mod keys;
#[doc(hidden)]
pub mod model;
pub mod pipelines;
pub mod plan;
pub mod push;
pub mod record;
pub mod shaders;
pub mod sorter;
pub mod timing;

pub use context::{
    list_devices, Context, ContextDesc, DeviceInfo, DeviceLimits, DeviceList, DeviceSelector, DeviceType,
};
pub use embed::{BindDesc, BufferRegion, Recorded, RecorderDesc, SortBinding, SortRecorder};
pub use error::{Error, Result};
pub use keys::{KeyKind, KeyWidth, Order, SortKey, StableKey};
pub use record::BarrierFlavor;
pub use sorter::{Calibration, PassStudy, PassSync, SortStats, Sorter, SorterDesc};
