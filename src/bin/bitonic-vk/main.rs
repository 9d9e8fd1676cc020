//! The `bitonic-vk` command: sort binary files, list Vulkan devices, benchmark the sort.

mod args;
mod bench;
mod cli;
mod data;
mod failure;
mod input;
mod output;
mod passes;
mod sink;
mod sizes;
mod startup;

use std::fs;
use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::anyhow;
use bitonic_vk::{list_devices, Order, SortKey, Sorter, SorterDesc, StableKey};
use clap::Parser as _;

use args::GpuArgs;
use cli::{Cli, Command, SortArgs};
use data::KeyType;
use failure::Failure;
use output::Output;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Sort(args) => sort(&cli.gpu, args),
        Command::Devices => devices(&cli.gpu),
        Command::Bench(args) => bench::run(&cli.gpu, args),
        Command::Passes(args) => passes::run(&cli.gpu, args),
        Command::Startup(args) => startup::run(&cli.gpu, args),
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
    // Standard input and output are one stream each: two parts of the sort cannot share one.
    if args.values.as_deref().is_some_and(sink::is_stdio) && sink::is_stdio(&args.input) {
        return Err(Failure::Input(anyhow!(
            "--values - and the keys' INPUT - both read standard input: give one of them a file"
        )));
    }
    if let Some(values_output) = &args.values_output {
        if sink::is_stdio(values_output) && sink::is_stdio(&args.output) {
            return Err(Failure::Input(anyhow!(
                "--values-output - and the keys' OUTPUT - both write standard output: give one of them a file"
            )));
        }
        // Two outputs renamed over one file would leave only the last: refuse before any work.
        if output::same_file(values_output, &args.output) {
            return Err(Failure::Input(anyhow!(
                "--values-output {} and the keys' OUTPUT {} are the same file: give the values an output of their own",
                output::shown(values_output),
                output::shown(&args.output)
            )));
        }
    }
    let input::Inputs { mut keys, mut values } =
        input::load(&args.input, args.values.as_deref(), key_bytes, read_input).map_err(Failure::Input)?;
    let n = keys.len() / (key_bytes / 4);
    // Open the outputs first, so that an unwritable output fails before any work.
    let mut keys_out = Output::open(&args.output)?;
    let mut values_out = args.values_output.as_deref().map(Output::open).transpose()?;
    if n > 1 {
        let ctx = gpu.context()?;
        let mut sorter = Sorter::new(&ctx, &SorterDesc::default())?;
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
    // Both outputs complete before either regular file replaces its target.
    keys_out.write(&words_bytes(&keys))?;
    if let (Some(out), Some(v)) = (values_out.as_mut(), &values) {
        out.write(&words_bytes(v))?;
    }
    if let Some(out) = values_out {
        out.persist()?;
    }
    keys_out.persist()
}

/// The bytes of an input file, or of standard input for `-`.
fn read_input(path: &Path) -> std::io::Result<Vec<u8>> {
    if sink::is_stdio(path) {
        let mut bytes = Vec::new();
        std::io::stdin().lock().read_to_end(&mut bytes)?;
        Ok(bytes)
    } else {
        fs::read(path)
    }
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
        let row = |name: &str, value: String| println!("      {name:<32}{value}");
        row("maxComputeSharedMemorySize", format!("{} bytes", l.max_compute_shared_memory_size));
        row("subgroup size", l.subgroup_size.to_string());
        row("maxComputeWorkGroupCount[0]", l.max_compute_work_group_count_x.to_string());
        row("maxComputeWorkGroupInvocations", l.max_compute_work_group_invocations.to_string());
        row("maxStorageBufferRange", format!("{} bytes", l.max_storage_buffer_range));
        row("maxMemoryAllocationSize", format!("{} bytes", l.max_memory_allocation_size));
        row("minStorageBufferOffsetAlignment", format!("{} bytes", l.min_storage_buffer_offset_alignment));
        row("device-local memory", format!("{} bytes", d.device_local_memory));
        row("VK_KHR_synchronization2", if d.synchronization2 { "yes" } else { "no" }.to_owned());
        row(
            "timestamps",
            if l.timestamp_valid_bits > 0 {
                format!("{} valid bits, {} ns per tick", l.timestamp_valid_bits, l.timestamp_period)
            } else {
                "not supported on the compute queue".to_owned()
            },
        );
    }
    println!("(* = the device bitonic-vk uses; choose another with --device or BITONIC_VK_DEVICE)");
    Ok(())
}
