//! The command line: the arguments `bitonic-vk` takes and how its failures map to exit codes.

use bitonic_vk::{ContextDesc, DeviceSelector, Error, Order};
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
    /// A file of u32 values, one per key, to move with the keys.
    #[arg(long, requires = "values_output", value_name = "FILE")]
    pub values: Option<PathBuf>,
    /// Where to write the values in sorted-key order.
    #[arg(long, requires = "values", value_name = "FILE")]
    pub values_output: Option<PathBuf>,
    /// Keys to sort: raw little-endian keys of --type.
    pub input: PathBuf,
    /// Where to write the sorted keys (written whole, or not at all).
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
