//! The `bitonic-vk` command: sort binary files, list Vulkan devices, benchmark the sort.

mod bench;
mod data;
mod output;
mod passes;
mod sizes;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::anyhow;
use bitonic_vk::{list_devices, Context, ContextDesc, DeviceSelector, Error, Order, SortKey, Sorter, StableKey};
use clap::{Args, Parser, Subcommand, ValueEnum};

use data::KeyType;
use output::Staged;

#[derive(Parser)]
#[command(
    name = "bitonic-vk",
    version,
    about = "Sort on the GPU with a bitonic sorting network through Vulkan compute"
)]
struct Cli {
    #[command(flatten)]
    gpu: GpuArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct GpuArgs {
    /// Device to use: an index from `bitonic-vk devices`, or part of a device's name
    /// (default: BITONIC_VK_DEVICE, else a discrete GPU, integrated, virtual, then CPU).
    #[arg(long, global = true, value_name = "INDEX|NAME")]
    device: Option<String>,
    /// Turn on the Khronos validation layer with synchronization validation (also
    /// BITONIC_VK_VALIDATION=1).
    #[arg(long, global = true)]
    validation: bool,
}

impl GpuArgs {
    fn desc(&self) -> ContextDesc {
        ContextDesc {
            device: self.device.as_deref().map(|d| d.parse().unwrap_or(DeviceSelector::Name(d.to_owned()))),
            validation: self.validation.then_some(true),
        }
    }
}

#[derive(Subcommand)]
enum Command {
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

/// A sort order on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OrderArg {
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
struct SortArgs {
    /// Key type of INPUT (floats sort in IEEE total order, as total_cmp).
    #[arg(long = "type", value_enum, default_value = "u32")]
    key_type: KeyType,
    /// Largest key first.
    #[arg(long)]
    descending: bool,
    /// Keep equal keys in input order (their values with them); 4-byte key types, with --values.
    #[arg(long, requires = "values")]
    stable: bool,
    /// A file of u32 values, one per key, to move with the keys.
    #[arg(long, requires = "values_output", value_name = "FILE")]
    values: Option<PathBuf>,
    /// Where to write the values in sorted-key order.
    #[arg(long, requires = "values", value_name = "FILE")]
    values_output: Option<PathBuf>,
    /// Keys to sort: raw little-endian keys of --type.
    input: PathBuf,
    /// Where to write the sorted keys (written whole, or not at all).
    output: PathBuf,
}

/// A failure: bad input (exit code 2) or a failure while running (exit code 1).
enum Failure {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Sort(args) => sort(&cli.gpu, args),
        Command::Devices => devices(&cli.gpu),
        Command::Bench(args) => bench::run(&cli.gpu, args),
        Command::Passes(args) => passes::run(&cli.gpu, args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
        Err(Failure::Run(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Reads a file of 4-byte little-endian words.
fn read_words(path: &Path, what: &str) -> Result<Vec<u32>, Failure> {
    let bytes =
        fs::read(path).map_err(|e| Failure::Input(anyhow!("cannot read {what} file {}: {e}", path.display())))?;
    if bytes.len() % 4 != 0 {
        return Err(Failure::Input(anyhow!(
            "{what} file {} is {} bytes, not a multiple of 4: it must hold raw little-endian 4-byte {what}",
            path.display(),
            bytes.len()
        )));
    }
    Ok(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

fn words_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Sorts keys held as 4-byte words (two per 8-byte key, low word first) as keys of type K.
fn sort_as<K: SortKey>(
    sorter: &mut Sorter,
    words: &mut [u32],
    values: Option<&mut [u32]>,
    order: Order,
) -> bitonic_vk::Result<()> {
    // A copy of K's alignment: the words of an 8-byte key need not be 8-byte aligned. Key files
    // are little-endian, as the host is.
    let mut keys: Vec<K> = vec![K::zeroed(); words.len() * 4 / size_of::<K>()];
    bytemuck::cast_slice_mut::<K, u32>(&mut keys).copy_from_slice(words);
    match values {
        Some(v) => sorter.sort_pairs(&mut keys, v, order),
        None => sorter.sort(&mut keys, order),
    }?;
    words.copy_from_slice(bytemuck::cast_slice(&keys));
    Ok(())
}

/// Sorts 4-byte keys held as words stably, their values with them.
fn sort_stable_as<K: StableKey>(
    sorter: &mut Sorter,
    words: &mut [u32],
    values: &mut [u32],
    order: Order,
) -> bitonic_vk::Result<()> {
    sorter.sort_pairs_stable(bytemuck::cast_slice_mut::<u32, K>(words), values, order).map(|_| ())
}

fn sort(gpu: &GpuArgs, args: &SortArgs) -> Result<(), Failure> {
    let key_bytes = args.key_type.bytes();
    if args.stable && key_bytes != 4 {
        return Err(Failure::Input(anyhow!(
            "--stable sorts 4-byte keys (u32, i32, f32), not {}: a stable sort packs each key with its index into 8 bytes",
            args.key_type.name()
        )));
    }
    let mut keys = read_words(&args.input, "keys")?;
    if keys.len() % (key_bytes / 4) != 0 {
        return Err(Failure::Input(anyhow!(
            "keys file {} is {} bytes, not a multiple of {key_bytes}: it must hold raw little-endian {} keys",
            args.input.display(),
            keys.len() * 4,
            args.key_type.name()
        )));
    }
    let n = keys.len() / (key_bytes / 4);
    let mut values = match &args.values {
        Some(path) => {
            let v = read_words(path, "values")?;
            if v.len() != n {
                return Err(Failure::Input(anyhow!(
                    "values file {} holds {} values but keys file {} holds {n} keys: they must match one to one",
                    path.display(),
                    v.len(),
                    args.input.display(),
                )));
            }
            Some(v)
        }
        None => None,
    };
    // Create the outputs' temporary files first, so an unwritable output fails before any work.
    let mut keys_out = Staged::new(&args.output)?;
    let mut values_out = output::stage(args.values_output.as_ref())?;
    if n > 1 {
        let ctx = Context::new(&gpu.desc())?;
        let mut sorter = ctx.sorter()?;
        let order = if args.descending { Order::Descending } else { Order::Ascending };
        let v = values.as_deref_mut();
        match (args.key_type, v) {
            (KeyType::U32, Some(v)) if args.stable => sort_stable_as::<u32>(&mut sorter, &mut keys, v, order),
            (KeyType::I32, Some(v)) if args.stable => sort_stable_as::<i32>(&mut sorter, &mut keys, v, order),
            (KeyType::F32, Some(v)) if args.stable => sort_stable_as::<f32>(&mut sorter, &mut keys, v, order),
            (KeyType::U32, v) => sort_as::<u32>(&mut sorter, &mut keys, v, order),
            (KeyType::I32, v) => sort_as::<i32>(&mut sorter, &mut keys, v, order),
            (KeyType::F32, v) => sort_as::<f32>(&mut sorter, &mut keys, v, order),
            (KeyType::U64, v) => sort_as::<u64>(&mut sorter, &mut keys, v, order),
            (KeyType::I64, v) => sort_as::<i64>(&mut sorter, &mut keys, v, order),
            (KeyType::F64, v) => sort_as::<f64>(&mut sorter, &mut keys, v, order),
        }?;
    }
    // Both files complete before either replaces its target.
    keys_out.write(&words_bytes(&keys))?;
    if let (Some(out), Some(v)) = (values_out.as_mut(), &values) {
        out.write(&words_bytes(v))?;
    }
    if let Some(out) = values_out {
        out.persist()?;
    }
    keys_out.persist()
}

fn devices(gpu: &GpuArgs) -> Result<(), Failure> {
    let list = list_devices(&gpu.desc())?;
    for d in &list.devices {
        let mark = if d.index == list.chosen { "*" } else { " " };
        let l = &d.limits;
        println!(
            "{mark} {}: {} ({}, Vulkan {}{})",
            d.index,
            d.name,
            d.device_type,
            d.api_version,
            if d.driver.is_empty() { String::new() } else { format!(", {}", d.driver) }
        );
        if !d.usable() {
            println!("      not usable: needs a compute queue and Vulkan 1.1");
        }
        println!("      maxComputeSharedMemorySize     {} bytes", l.max_compute_shared_memory_size);
        println!("      subgroup size                  {}", l.subgroup_size);
        println!("      maxComputeWorkGroupCount[0]    {}", l.max_compute_work_group_count_x);
        println!("      maxComputeWorkGroupInvocations {}", l.max_compute_work_group_invocations);
        println!("      maxStorageBufferRange          {} bytes", l.max_storage_buffer_range);
        println!("      maxMemoryAllocationSize        {} bytes", l.max_memory_allocation_size);
        println!("      device-local memory            {} bytes", d.device_local_memory);
        println!("      VK_KHR_synchronization2        {}", if d.synchronization2 { "yes" } else { "no" });
        if l.timestamp_valid_bits > 0 {
            println!(
                "      timestamps                     {} valid bits, {} ns per tick",
                l.timestamp_valid_bits, l.timestamp_period
            );
        } else {
            println!("      timestamps                     not supported on the compute queue");
        }
    }
    println!("(* = the device bitonic-vk uses; choose another with --device or BITONIC_VK_DEVICE)");
    Ok(())
}
