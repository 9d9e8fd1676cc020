//! The command line: `bitonic-vk`'s commands and the `sort` command's arguments; the arguments
//! the commands share are in args.rs, each command's own beside it.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

use crate::args::GpuArgs;
use crate::data::KeyType;
use crate::{bench, passes, startup};

#[derive(Parser)]
#[command(
    name = "bitonic-vk",
    version,
    about = "Sort on the GPU with a bitonic sorting network through Vulkan compute"
)]
pub struct Cli {
    #[command(flatten)]
    pub gpu: GpuArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Sort a file of raw little-endian keys (4 or 8 bytes each, as --type says), and optionally a
    /// file of u32 values.
    Sort(SortArgs),
    /// List every Vulkan device with the limits that matter here, marking the one chosen.
    Devices,
    /// Sweep sizes, key types, payloads, orders and distributions: GPU and wall times, CPU
    /// baselines, every result checked.
    Bench(bench::BenchArgs),
    /// The barrier study: per-pass GPU times of one sort, and how barrier flavours, a submit per
    /// pass and fusion change them.
    Passes(passes::PassesArgs),
    /// What a first sort costs at load time: a new recorder, its first bind (the pipelines) and
    /// its first sort, cold and with a warm pipeline cache, each in a process of its own.
    Startup(startup::StartupArgs),
}

#[derive(Args)]
pub struct SortArgs {
    /// Key type of INPUT (floats sort in IEEE total order, as total_cmp).
    #[arg(long = "type", value_enum, default_value = "u32")]
    pub key_type: KeyType,
    /// Largest key first.
    #[arg(long)]
    pub descending: bool,
    /// Keep equal keys in input order (their values with them); 4-byte key types, with --values.
    #[arg(long, requires = "values")]
    pub stable: bool,
    /// A file of u32 values, one per key, to move with the keys (`-`: standard input).
    #[arg(long, requires = "values_output", value_name = "FILE")]
    pub values: Option<PathBuf>,
    /// Where to write the values in sorted-key order (as OUTPUT is written).
    #[arg(long, requires = "values", value_name = "FILE")]
    pub values_output: Option<PathBuf>,
    /// Keys to sort: raw little-endian keys of --type (`-`: standard input).
    pub input: PathBuf,
    /// Where to write the sorted keys: a regular file (or a link to one) is written whole or not at
    /// all, through a temporary file renamed over it; `-` (standard output), a device, a FIFO or a
    /// socket is written in place.
    pub output: PathBuf,
}
