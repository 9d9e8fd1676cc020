//! A bitonic sorting network on the GPU through Vulkan compute.
//!
//! Sorts `u32`, `i32`, `f32`, `u64`, `i64` and `f64` keys, alone or with `u32` values, ascending
//! or descending, stably on request, for any length from 0 to the device's buffer limits, using no
//! device memory beyond the elements themselves (plus a 16-byte buffer of the recorder's, and
//! host-visible staging for the standalone sorter's upload and download).
//!
//! ```no_run
//! use bitonic_vk::{Context, ContextDesc, Order, Sorter, SorterDesc};
//! # fn main() -> bitonic_vk::Result<()> {
//! let ctx = Context::new(&ContextDesc::default())?;
//! let mut sorter = Sorter::new(&ctx, &SorterDesc::default())?;
//! let mut keys = vec![3.5f32, -0.0, f32::NAN, 0.0, -1.0];
//! let mut values: Vec<u32> = (0..keys.len() as u32).collect();
//! let stats = sorter.sort_pairs(&mut keys, &mut values, Order::Ascending)?;
//! println!("{} passes, {:?} on the GPU", stats.passes, stats.gpu_time);
//! # Ok(()) }
//! ```
//!
//! Two ways in: [`Sorter`] sorts host slices on a device of its own ([`Context`]);
//! [`SortRecorder`] records sorts into a renderer's command buffer, on its device and buffers
//! (its docs give the contract: barriers before and after, the state it overwrites, lifetimes,
//! the GPU-side count). Every knob is a field of [`Tuning`]; the defaults are where each measured
//! fastest.
//!
//! # How it works
//! - **Order images.** Every kernel compares unsigned images whose order is the key order: `i32`
//!   flips the sign bit; `f32` flips the sign bit of positive numbers and every bit of negative
//!   ones, which is IEEE total order exactly as [`f32::total_cmp`]; descending complements the
//!   image. The first pass maps keys to images, the last maps them back. No float is compared.
//! - **The network** is the bitonic sorter in its flip form: indices at or past n are virtual
//!   +infinity keys, never read or written, so any n works with no memory beyond the n elements.
//! - **Four kernels** (`glsl/`): `tile_sort` sorts tiles in shared memory, `global_merge` runs up
//!   to six substages with strides of a tile or more straight on the buffers, fused in registers,
//!   `local_merge` finishes the strides below a tile, and `segment_merge` runs a stage boundary's
//!   substages on cosets of a tile's size. The tile is the largest power of two that fits
//!   `maxComputeSharedMemorySize` (smaller for small sorts), a specialization constant. Each comes
//!   in two builds (`KernelFamily`): compact, one network per chunk in rolled loops (the default
//!   on CPU devices), and unrolled, every chunk size inlined (`glsl/unrolled/`, the default on
//!   GPUs, where it still sorts faster).
//! - **One command buffer** per sort: every pass with a compute-to-compute barrier between
//!   consecutive passes. A CPU model replays the recorded commands element by element and checks
//!   that every pass reading an earlier write sits behind a barrier, since lavapipe and the
//!   validation layer would not catch a missing one.
//!
//! # Features
//! - `cli` (default): the `bitonic-vk` command and its crates. Embedders take
//!   `default-features = false`, which leaves ash, gpu-allocator, bytemuck and thiserror.
//! - `wgpu`: `wgpu::WgpuSorter`, the same sorts on a wgpu renderer's device and buffers
//!   (wgpu's Vulkan backend).
//! - `study` (on with `cli`): the barrier study's timing: `Sorter::study`,
//!   `Sorter::time_repeated`, `Sorter::calibrate` and their types.

mod abi;
mod context;
mod device;
mod error;
mod gpu;
mod keys;
mod network;
mod pipeline_cache;
mod recorder;
mod segment;
mod sorter;
#[cfg(feature = "study")]
mod study;
mod tuning;
#[cfg(feature = "wgpu")]
pub mod wgpu;

#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod hooks;

pub use abi::KernelFamily;
pub use context::{list_devices, Context, ContextDesc, DeviceList, DeviceSelector, DEVICE_ENV, VALIDATION_ENV};
pub use device::{DeviceInfo, DeviceLimits, DeviceType};
pub use error::{Error, Result};
pub use keys::{KeyKind, KeyWidth, Order, SortKey, StableKey};
pub use pipeline_cache::{PipelineCacheDir, PIPELINE_CACHE_ENV};
pub use recorder::{BindDesc, BufferRegion, Recorded, RecorderDesc, SortBinding, SortRecorder};
pub use sorter::{SortStats, Sorter, SorterDesc};
#[cfg(feature = "study")]
pub use study::{BarrierFlavor, Calibration, PassInfo, PassStudy, PassSync, Startup, WarmUp};
pub use tuning::Tuning;
