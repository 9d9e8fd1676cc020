//! The `bitonic-vk` command: sort binary files, list Vulkan devices, benchmark the sort.

mod bench;
mod cli;
mod data;
mod input;
mod output;
mod passes;
mod sizes;

use std::fs;
use std::process::ExitCode;

use bitonic_vk::{list_devices, Context, Order, SortKey, Sorter};
use clap::Parser as _;

use cli::{Cli, Command, Failure, GpuArgs, OrderArg, SortArgs};
use data::KeyType;
use output::Staged;

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

fn words_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
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
    let input::Inputs { mut keys, mut values } =
        input::load(&args.input, args.values.as_deref(), |path| fs::read(path)).map_err(Failure::Input)?;
    // Create the outputs' temporary files first, so an unwritable output fails before any work.
    let mut keys_out = Staged::new(&args.output)?;
    let mut values_out = output::stage(args.values_output.as_ref())?;
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
