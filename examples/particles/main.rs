//! A headless renderer that embeds the sorter as a game would: particles live in a GPU buffer; a
//! compute pass writes view-space depth keys and indices (culling what the camera cannot see, the
//! count kept on the GPU); the sorter orders them back to front in the same command buffer; a
//! graphics pipeline draws alpha-blended sprites in that order into an offscreen image; the last
//! frame is written as PNG.
//!
//! ```sh
//! cargo run --release --example particles -- --out frame.png [--renderer ash|wgpu] [--count N] [--frames N]
//!     [--warmup N] [--size WxH] [--seed S] [--half] [--zoom Z] [--tile-origins on|off] [--pass-times]
//!     [--check] [--validation] [--device INDEX|NAME]
//! ```
//!
//! It prints each part's GPU time per frame (timestamps: depth pass, sort, draw), medians over
//! the frames; `--pass-times` adds each of the sort's passes (`SortRecorder::record_timed`).
//! `--check` reads back every frame's sorted keys and indices and its image, and
//! compares them with the CPU's (see `scene.rs`). `--renderer wgpu` draws the same frame through
//! wgpu's Vulkan backend (`wgpu_render.rs`), the sort through `bitonic_vk::wgpu::WgpuSorter`.

mod cli;
mod render;
mod scene;
// How the command writes its outputs, shared so that --out treats links, devices and FIFOs alike.
#[path = "../../src/bin/bitonic-vk/sink.rs"]
#[allow(dead_code)]
mod sink;
mod wgpu_render;

fn main() -> std::process::ExitCode {
    cli::main()
}
