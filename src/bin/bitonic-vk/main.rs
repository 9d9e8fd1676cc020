//! The `bitonic-vk` command: sort binary files, list Vulkan devices, benchmark the sort.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use bitonic_vk::{
    list_devices, Context, ContextDesc, DeviceSelector, DeviceType, Error, Order, SortKey, Sorter, SorterDesc,
};
use clap::{Args, Parser, Subcommand, ValueEnum};
use rand::{Rng, SeedableRng};

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
    /// Sort a file of raw little-endian 4-byte keys (and optionally a file of u32 values).
    Sort(SortArgs),
    /// List every Vulkan device with the limits that matter here, marking the one chosen.
    Devices,
    /// Sort random u32 keys at a few sizes, check each result, and report GPU times.
    Bench(BenchArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum KeyType {
    U32,
    I32,
    F32,
}

#[derive(Args)]
struct SortArgs {
    /// Key type of INPUT (f32 sorts in IEEE total order, as f32::total_cmp).
    #[arg(long = "type", value_enum, default_value = "u32")]
    key_type: KeyType,
    /// Largest key first.
    #[arg(long)]
    descending: bool,
    /// A file of u32 values, one per key, to move with the keys.
    #[arg(long, requires = "values_output", value_name = "FILE")]
    values: Option<PathBuf>,
    /// Where to write the values in sorted-key order.
    #[arg(long, requires = "values", value_name = "FILE")]
    values_output: Option<PathBuf>,
    /// Keys to sort: raw little-endian 4-byte keys.
    input: PathBuf,
    /// Where to write the sorted keys (written whole, or not at all).
    output: PathBuf,
}

#[derive(Args)]
struct BenchArgs {
    /// Sizes to run, comma-separated: numbers or powers such as 2^20 [default: 2^10,2^16,2^20,2^24,
    /// capped at 2^20 on a CPU device and by the device's limits].
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sizes: Vec<u64>,
    /// Timed sorts per size (GPU time: back to back in one command buffer; wall time: one
    /// submission each). Warm-up and timed sorts together: at most 240.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=200))]
    reps: u32,
    /// Untimed sorts per size before the timed ones.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=40))]
    warmup: u32,
    /// Seed of the random keys.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Cap the elements per tile of the local kernels (a power of two); the default is the
    /// largest that fits the device's shared memory.
    #[arg(long, value_name = "ELEMENTS")]
    max_tile: Option<u32>,
    /// Cap the substages fused in registers per global pass and per local chunk (1 to 4; 1 is one
    /// substage per global pass, as NVIDIA's CUDA sample does).
    #[arg(long, value_name = "N")]
    max_fused: Option<u32>,
    /// Invocations per workgroup of the local kernels (a power of two; default: a quarter of the
    /// tile, at most 1024).
    #[arg(long, value_name = "N")]
    local_wg: Option<u32>,
    /// After each size, sort once more with a timestamp after every pass and print each pass's
    /// GPU time and bandwidth.
    #[arg(long)]
    per_pass: bool,
}

fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let value = match s.split_once('^') {
        Some(("2", exp)) => {
            let exp: u32 = exp.parse().map_err(|_| format!("`{s}`: the exponent must be a whole number"))?;
            1u64.checked_shl(exp).filter(|_| exp < 63).ok_or_else(|| format!("`{s}` is too large"))?
        }
        Some(_) => return Err(format!("`{s}`: only powers of two are written with ^ (such as 2^20)")),
        None => s.parse().map_err(|_| format!("`{s}` is not a size: write a number or a power such as 2^20"))?,
    };
    Ok(value)
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
            | Error::InvalidOption { .. } => Failure::Input(e.into()),
            e => Failure::Run(e.into()),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Sort(args) => sort(&cli.gpu, args),
        Command::Devices => devices(&cli.gpu),
        Command::Bench(args) => bench(&cli.gpu, args),
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

/// A temporary file beside `path`, renamed over it only once it is complete.
fn staged_output(path: &Path) -> Result<tempfile::NamedTempFile, Failure> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if path.is_dir() {
        return Err(Failure::Input(anyhow!("cannot write output {}: it is a directory", path.display())));
    }
    tempfile::Builder::new()
        .prefix(".bitonic-vk-")
        .tempfile_in(dir)
        .map_err(|e| Failure::Input(anyhow!("cannot write output {}: {e}", path.display())))
}

fn write_words(
    mut file: tempfile::NamedTempFile,
    words: &[u32],
    path: &Path,
) -> Result<tempfile::NamedTempFile, Failure> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    file.write_all(&bytes)
        .and_then(|()| file.as_file().sync_all())
        .map_err(|e| Failure::Run(anyhow!("cannot write output {}: {e}", path.display())))?;
    Ok(file)
}

fn sort_as<K: SortKey>(
    sorter: &mut Sorter,
    keys: &mut [u32],
    values: Option<&mut [u32]>,
    order: Order,
) -> bitonic_vk::Result<()> {
    let keys: &mut [K] = bytemuck::cast_slice_mut(keys);
    match values {
        Some(v) => sorter.sort_pairs(keys, v, order),
        None => sorter.sort(keys, order),
    }
    .map(|_| ())
}

fn sort(gpu: &GpuArgs, args: &SortArgs) -> Result<(), Failure> {
    let mut keys = read_words(&args.input, "keys")?;
    let mut values = match &args.values {
        Some(path) => {
            let v = read_words(path, "values")?;
            if v.len() != keys.len() {
                return Err(Failure::Input(anyhow!(
                    "values file {} holds {} values but keys file {} holds {} keys: they must match one to one",
                    path.display(),
                    v.len(),
                    args.input.display(),
                    keys.len()
                )));
            }
            Some(v)
        }
        None => None,
    };
    // Create the outputs' temporary files first, so an unwritable output fails before any work.
    let keys_out = staged_output(&args.output)?;
    let values_out = match &args.values_output {
        Some(path) => Some(staged_output(path)?),
        None => None,
    };
    if keys.len() > 1 {
        let ctx = Context::new(&gpu.desc())?;
        let mut sorter = ctx.sorter()?;
        let order = if args.descending { Order::Descending } else { Order::Ascending };
        let v = values.as_deref_mut();
        match args.key_type {
            KeyType::U32 => sort_as::<u32>(&mut sorter, &mut keys, v, order),
            KeyType::I32 => sort_as::<i32>(&mut sorter, &mut keys, v, order),
            KeyType::F32 => sort_as::<f32>(&mut sorter, &mut keys, v, order),
        }?;
    }
    let keys_out = write_words(keys_out, &keys, &args.output)?;
    let values_out = match (values_out, &values, &args.values_output) {
        (Some(file), Some(v), Some(path)) => Some((write_words(file, v, path)?, path)),
        _ => None,
    };
    if let Some((file, path)) = values_out {
        file.persist(path).map_err(|e| Failure::Run(anyhow!("cannot write output {}: {}", path.display(), e.error)))?;
    }
    keys_out
        .persist(&args.output)
        .map_err(|e| Failure::Run(anyhow!("cannot write output {}: {}", args.output.display(), e.error)))?;
    Ok(())
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

/// How long `bench` keeps the GPU busy before timing, and in batches of about how long.
const WARM_UP: Duration = Duration::from_millis(500);
const WARM_BATCH: Duration = Duration::from_millis(100);

fn median(sorted: &[Duration]) -> Duration {
    sorted[sorted.len() / 2]
}

fn bench(gpu: &GpuArgs, args: &BenchArgs) -> Result<(), Failure> {
    let ctx = Context::new(&gpu.desc())?;
    let info = ctx.device_info().clone();
    let desc = SorterDesc {
        max_tile: args.max_tile,
        max_fused_substages: args.max_fused,
        local_workgroup_size: args.local_wg,
        ..SorterDesc::default()
    };
    let mut sorter = Sorter::new(&ctx, &desc)?;
    let cpu = info.device_type == DeviceType::Cpu;
    println!("device: {} ({}, Vulkan {})", info.name, info.device_type, info.api_version);
    if cpu {
        println!(
            "note: this is a CPU implementation of Vulkan (such as lavapipe), not a GPU: its times measure the CPU"
        );
    }
    let mut sizes = args.sizes.clone();
    if sizes.is_empty() {
        sizes = vec![1 << 10, 1 << 16, 1 << 20, 1 << 24];
        if cpu {
            sizes.retain(|&n| n <= 1 << 20);
            println!("note: default sizes capped at 2^20 on a CPU device; pass --sizes to choose");
        }
    }
    let max = sorter.max_elements();
    if let Some(&too_big) = sizes.iter().find(|&&n| n > max) {
        return Err(Failure::Input(anyhow!(
            "size {too_big} is over this device's limit of {max} elements: choose smaller --sizes"
        )));
    }
    // The pass model: bytes per pass over a vec4 copy's bandwidth, plus a dispatch and a barrier
    // per pass, both measured here and now.
    let calibration_size = if cpu { 1 << 20 } else { (1u64 << 24).min(max) } as usize;
    let calibration = sorter.calibrate(calibration_size, if cpu { 50 } else { 500 }, if cpu { 3 } else { 10 })?;
    if let Some(c) = &calibration {
        println!(
            "pass model: vec4 copy of {calibration_size} u32 moves {:.0} GB/s (read + write); empty dispatch + barrier {:.2} us, empty dispatch alone {:.2} us",
            c.copy_bytes_per_second / 1e9,
            c.dispatch_and_barrier.as_secs_f64() * 1e6,
            c.dispatch_alone.as_secs_f64() * 1e6
        );
    }
    println!(
        "{:>10} {:>6} {:>6} {:>12} {:>12} {:>12} {:>10} {:>12} {:>10} {:>6}  check",
        "n", "kind", "passes", "gpu ms med", "gpu ms min", "gpu ms max", "Mkeys/s", "wall ms med", "model ms", "/model"
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    for &n in &sizes {
        let input: Vec<u32> = (0..n).map(|_| rng.random()).collect();
        let mut expect = input.clone();
        expect.sort_unstable();
        for pairs in [false, true] {
            let (mut wall_times, mut passes) = (Vec::new(), 0);
            for rep in 0..args.warmup + args.reps {
                let mut keys = input.clone();
                let mut values: Vec<u32> = (0..n as u32).collect();
                let start = Instant::now();
                let stats = if pairs {
                    sorter.sort_pairs(&mut keys, &mut values, Order::Ascending)?
                } else {
                    sorter.sort(&mut keys, Order::Ascending)?
                };
                let wall = start.elapsed();
                passes = stats.passes;
                check(&input, &expect, &keys, pairs.then_some(&values[..]))
                    .with_context(|| format!("n = {n}, {}", if pairs { "pairs" } else { "keys" }))
                    .map_err(Failure::Run)?;
                if rep >= args.warmup {
                    wall_times.push(wall);
                }
            }
            // GPU times from back-to-back sorts in one command buffer: between separate sorts the
            // host checks results and the GPU drops to its idle clock, and after an idle spell its
            // clock takes a few hundred milliseconds of steady work to come back. So first keep it
            // busy for half a second, in command buffers of about 0.1 s each.
            let mut keys = input.clone();
            let mut values: Vec<u32> = (0..n as u32).collect();
            let estimate = median(&wall_times).max(Duration::from_micros(1));
            let batch = (WARM_BATCH.as_secs_f64() / estimate.as_secs_f64()).clamp(1.0, 240.0) as u32;
            let warm_until = Instant::now() + WARM_UP;
            while Instant::now() < warm_until {
                let (mut k, mut v) = (keys.clone(), values.clone());
                sorter.time_repeated(&mut k, pairs.then_some(&mut v[..]), Order::Ascending, batch)?;
            }
            let timed = sorter.time_repeated(
                &mut keys,
                pairs.then_some(&mut values[..]),
                Order::Ascending,
                args.warmup + args.reps,
            )?;
            check(&input, &expect, &keys, pairs.then_some(&values[..]))
                .with_context(|| format!("n = {n}, {}, back-to-back sorts", if pairs { "pairs" } else { "keys" }))
                .map_err(Failure::Run)?;
            let mut gpu_times: Vec<Duration> = timed.into_iter().skip(args.warmup as usize).collect();
            gpu_times.sort();
            wall_times.sort();
            let ms = |d: Duration| format!("{:.4}", d.as_secs_f64() * 1e3);
            let (med, min, max, rate) = if gpu_times.is_empty() {
                ("-".to_owned(), "-".to_owned(), "-".to_owned(), "-".to_owned())
            } else {
                let m = median(&gpu_times);
                (
                    ms(m),
                    ms(gpu_times[0]),
                    ms(gpu_times[gpu_times.len() - 1]),
                    format!("{:.1}", n as f64 / m.as_secs_f64() / 1e6),
                )
            };
            let bytes_per_pass = n as f64 * if pairs { 8.0 } else { 4.0 } * 2.0;
            let (model, ratio) = match (&calibration, gpu_times.is_empty()) {
                (Some(c), false) => {
                    let predicted = c.predict(passes, bytes_per_pass);
                    (ms(predicted), format!("{:.2}", median(&gpu_times).as_secs_f64() / predicted.as_secs_f64()))
                }
                _ => ("-".to_owned(), "-".to_owned()),
            };
            println!(
                "{n:>10} {:>6} {passes:>6} {med:>12} {min:>12} {max:>12} {rate:>10} {:>12} {model:>10} {ratio:>6}  ok",
                if pairs { "pairs" } else { "keys" },
                ms(median(&wall_times))
            );
            if args.per_pass {
                print_passes(&mut sorter, &input, pairs)?;
            }
        }
    }
    println!(
        "gpu ms: timestamps from the first pass to the last, over {} sorts run back to back on the GPU after {} warm-up sorts; wall ms: separate sorts including upload and download; model ms: passes x (bytes per pass / copy bandwidth + dispatch and barrier)",
        args.reps, args.warmup
    );
    Ok(())
}

/// Sorts `input` once with a timestamp after every pass and prints what each pass cost.
fn print_passes(sorter: &mut Sorter, input: &[u32], pairs: bool) -> Result<(), Failure> {
    let plan = sorter.plan(input.len(), pairs, bitonic_vk::KeyKind::U32, Order::Ascending)?;
    let mut keys = input.to_vec();
    let mut values: Vec<u32> = (0..input.len() as u32).collect();
    sorter.set_pass_timestamps(true);
    let stats = if pairs {
        sorter.sort_pairs(&mut keys, &mut values, Order::Ascending)
    } else {
        sorter.sort(&mut keys, Order::Ascending)
    };
    sorter.set_pass_timestamps(false);
    let stats = stats?;
    // Every pass reads and writes each element once at most (keys, and values with pairs).
    let bytes = input.len() as f64 * if pairs { 8.0 } else { 4.0 } * 2.0;
    println!(
        "    {:>4} {:>12} {:>5} {:>10} {:>3} {:>10} {:>10} {:>8}",
        "pass", "kind", "stage", "inc", "dir", "groups", "us", "GB/s"
    );
    for (i, (pass, time)) in plan.passes.iter().zip(&stats.pass_times).enumerate() {
        let us = time.as_secs_f64() * 1e6;
        println!(
            "    {i:>4} {:>12} {:>5} {:>10} {:>3} {:>5} {:>10} {us:>10.2} {:>8.0}",
            pass.kind.name(),
            pass.stage,
            pass.push.inc,
            pass.push.dir,
            pass.substages,
            pass.workgroups,
            bytes / us / 1e3
        );
    }
    Ok(())
}

/// Checks a result against the CPU's sort: keys in order, and each value pointing at an input key
/// equal to the key beside it, with every value used once.
fn check(input: &[u32], expect: &[u32], keys: &[u32], values: Option<&[u32]>) -> anyhow::Result<()> {
    if let Some(i) = (0..keys.len()).find(|&i| keys[i] != expect[i]) {
        anyhow::bail!("wrong result: key {i} is {} but the CPU sort has {}", keys[i], expect[i]);
    }
    if let Some(values) = values {
        let mut seen = vec![false; input.len()];
        for (i, &v) in values.iter().enumerate() {
            let slot = seen.get_mut(v as usize).ok_or_else(|| anyhow!("value {i} is {v}, out of range"))?;
            anyhow::ensure!(!std::mem::replace(slot, true), "value {v} appears twice");
            anyhow::ensure!(input[v as usize] == keys[i], "pair {i} split: key {} with value {v}", keys[i]);
        }
    }
    Ok(())
}
