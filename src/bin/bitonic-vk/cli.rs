//! The command line: the arguments `bitonic-vk` takes and how its failures map to exit codes.

use bitonic_vk::{ContextDesc, DeviceSelector, Error, Order, Tuning};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

use crate::data::KeyType;
use crate::{bench, passes};

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

#[derive(Args)]
pub struct GpuArgs {
    /// Device to use: an index from `bitonic-vk devices`, or part of a device's name
    /// (default: BITONIC_VK_DEVICE, else a discrete GPU, integrated, virtual, then CPU).
    #[arg(long, global = true, value_name = "INDEX|NAME")]
    pub device: Option<String>,
    /// Turn on the Khronos validation layer with synchronization validation (also
    /// BITONIC_VK_VALIDATION=1).
    #[arg(long, global = true)]
    pub validation: bool,
}

impl GpuArgs {
    pub fn desc(&self) -> ContextDesc {
        ContextDesc {
            device: self.device.as_deref().map(|d| d.parse().unwrap_or(DeviceSelector::Name(d.to_owned()))),
            validation: self.validation.then_some(true),
        }
    }
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
}

/// The knobs of `bench` and `passes` ([`Tuning`]): each left out takes the default, where it
/// measured fastest.
#[derive(Args)]
pub struct TuningArgs {
    /// Cap the elements per tile of the local kernels (a power of two); the default is the
    /// largest that fits the device's shared memory.
    #[arg(long, value_name = "ELEMENTS")]
    max_tile: Option<u32>,
    /// Cap the substages fused in registers per global pass and per local chunk (1 to 6; by
    /// default 6 for u32/i32/f32 keys alone, else 5); 1 is one substage per global pass, as
    /// NVIDIA's CUDA sample does.
    #[arg(long, value_name = "N")]
    pub max_fused: Option<u32>,
    /// Invocations per workgroup of the local kernels (a power of two; default: a quarter of the
    /// tile, at most 512 with 4-byte keys and 1024 with 8-byte keys).
    #[arg(long, value_name = "N")]
    local_wg: Option<u32>,
    /// Substages per shared-memory chunk of the local kernels (1 to 5; default 3 in small sorts
    /// and for 4-byte keys alone in segment tiles of 2048, 5 for 4-byte keys alone in tiles of
    /// 8192 or more, else 4).
    #[arg(long, value_name = "N")]
    local_chunk: Option<u32>,
    /// The most workgroups of the tile sort, of a local merge and of a segment pass, each looping
    /// over tiles and loading the next ahead (0: one tile per workgroup; default: the device's
    /// multiprocessors where it reports them, else 0).
    #[arg(long, value_name = "N")]
    merge_groups: Option<u32>,
    /// Every pass after the tile sort as a segment pass (on), or none (off); default: where they
    /// paid, on devices that report their multiprocessors.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    segments: Option<bool>,
    /// Elements of the run a segment pass carries uncompared (a power of two from 2); with
    /// --segment-run-long, the short run. Default: 16 or 8 by the sort's size.
    #[arg(long, value_name = "N")]
    segment_run: Option<u32>,
    /// The long run (a power of two, at least --segment-run): each carrying pass takes it
    /// wherever that adds no pass.
    #[arg(long, value_name = "N")]
    segment_run_long: Option<u32>,
    /// Segment passes on a pipeline made for their shape: on = every shape, off = none; by
    /// default the shapes whose chain of chunks has a module of its own.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    shaped_segments: Option<bool>,
    /// Tiles of u32 pairs with 16-bit origins in place of their values (needs shaderInt16): on =
    /// always, off = never; by default where only that tile gives a sort one coset per workgroup.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    tile_origins: Option<bool>,
}

impl TuningArgs {
    pub fn tuning(&self) -> Tuning {
        let mut t = Tuning::default();
        t.max_tile = self.max_tile;
        t.max_fused_substages = self.max_fused;
        t.local_workgroup_size = self.local_wg;
        t.local_chunk_substages = self.local_chunk;
        t.merge_workgroups = self.merge_groups;
        t.segment_merges = self.segments;
        t.segment_run = self.segment_run;
        t.segment_run_long = self.segment_run_long;
        t.shaped_segments = self.shaped_segments;
        t.tile_origins = self.tile_origins;
        t
    }
}

/// Where the GPU time of `bench` and `passes` starts (`SorterDesc::time_from_transfer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TimeFrom {
    /// At the end of an empty compute dispatch after the input's copy, standing for the pass that
    /// wrote the keys.
    Compute,
    /// At the end of the input's copy.
    Transfer,
}

/// A sort order on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    #[value(alias = "asc")]
    Ascending,
    #[value(alias = "desc")]
    Descending,
}

impl From<OrderArg> for Order {
    fn from(o: OrderArg) -> Order {
        match o {
            OrderArg::Ascending => Order::Ascending,
            OrderArg::Descending => Order::Descending,
        }
    }
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

/// A failure: bad input (exit code 2) or a failure while running (exit code 1).
pub enum Failure {
    Input(anyhow::Error),
    Run(anyhow::Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        match e {
            Error::TooLarge { .. }
            | Error::LengthMismatch { .. }
            | Error::NoSuchDevice { .. }
            | Error::InvalidOption { .. }
            | Error::Unsupported { .. } => Failure::Input(e.into()),
            e => Failure::Run(e.into()),
        }
    }
}
