//! `startup`: what a renderer's first sort costs at load time (a new recorder, its first binding
//! and the first sort), cold (an empty pipeline cache) and warm (the cache the cold run wrote).
//! Each run is a process of its own, so that no case finds what an earlier one compiled.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::anyhow;
use bitonic_vk::{ContextDesc, PipelineCacheDir, Sorter, SorterDesc};
use clap::{Args, ValueEnum as _};
use serde::{Deserialize, Serialize};

use crate::args::{GpuArgs, KernelsArg};
use crate::bench::Payload;
use crate::data::KeyType;
use crate::failure::Failure;
use crate::output;
use crate::sizes::{parse_sizes, SizeList};

#[derive(Args)]
pub struct StartupArgs {
    /// Capacities to bind: numbers, powers (2^20), lists and doubling ranges (2^10..2^24).
    #[arg(long, value_parser = parse_sizes, value_name = "LIST", default_value = "2^10,2^16,2^20,2^24")]
    sizes: SizeList,
    /// Key types.
    #[arg(long = "type", value_enum, value_delimiter = ',', default_value = "u32,u64")]
    types: Vec<KeyType>,
    /// Keys alone, key-value pairs, or both.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "keys,pairs")]
    payload: Vec<Payload>,
    /// Processes per case and cache state; each figure is their median.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    runs: u32,
    /// Write every row as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// The build of the kernels (default: compact on a CPU device, unrolled on a GPU).
    #[arg(long, value_name = "compact|unrolled")]
    kernels: Option<KernelsArg>,
    /// Times one case in this process and prints it as JSON (what the runs above are).
    #[arg(long, hide = true, value_name = "TYPE,PAYLOAD,N")]
    one: Option<String>,
    /// The pipeline cache folder of `--one` (none: no pipeline cache).
    #[arg(long, hide = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

/// One process's times, in microseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Run {
    device: String,
    recorder_us: f64,
    bind_us: f64,
    first_sort_us: f64,
    total_us: f64,
    pipelines: usize,
}

/// One case: cold and warm, the medians of their runs.
#[derive(Serialize)]
struct Row {
    device: String,
    key_type: KeyType,
    payload: Payload,
    capacity: u64,
    pipelines: usize,
    cold: Run,
    warm: Run,
}

pub fn run(gpu: &GpuArgs, args: &StartupArgs) -> Result<(), Failure> {
    if let Some(case) = &args.one {
        return one(gpu, case, args.cache_dir.clone(), args.kernels);
    }
    let json_out = output::open_beside_table("--json", args.json.as_ref())?;
    let exe = std::env::current_exe().map_err(|e| Failure::Run(anyhow!("cannot find this program's path: {e}")))?;
    let caches: Vec<String> = ["__GL_SHADER_DISK_CACHE", "MESA_SHADER_CACHE_DISABLE"]
        .iter()
        .filter_map(|v| std::env::var(v).ok().map(|value| format!("{v}={value}")))
        .collect();
    println!(
        "a new recorder, its first bind and first sort, each run a process of its own; ms of host time, median of {} \
         run(s); driver's shader cache: {}",
        args.runs,
        if caches.is_empty() { "as the driver keeps it".to_owned() } else { caches.join(" ") }
    );
    println!(
        "{:<5} {:<6} {:>9} {:>9} | {:>9} {:>9} {:>10} {:>9} | {:>9} {:>9} {:>10} {:>9}",
        "type",
        "load",
        "capacity",
        "pipelines",
        "recorder",
        "bind",
        "first sort",
        "cold",
        "recorder",
        "bind",
        "first sort",
        "warm"
    );
    let mut rows = Vec::new();
    for &capacity in &args.sizes.0 {
        for &key_type in &args.types {
            for &payload in &args.payload {
                let case = format!(
                    "{},{},{capacity}",
                    key_type.name(),
                    if payload == Payload::Pairs { "pairs" } else { "keys" }
                );
                let mut cold = Vec::new();
                let mut warm = Vec::new();
                for _ in 0..args.runs {
                    // A fresh folder: the cold run finds no cache and writes one; the warm runs read it.
                    let dir = tempfile::tempdir()
                        .map_err(|e| Failure::Run(anyhow!("cannot make a temporary pipeline cache folder: {e}")))?;
                    cold.push(child(&exe, gpu, args, &case, dir.path())?);
                    warm.push(child(&exe, gpu, args, &case, dir.path())?);
                }
                let (cold, warm) = (median(cold), median(warm));
                let ms = |us: f64| us / 1000.0;
                println!(
                    "{:<5} {:<6} {:>9} {:>9} | {:>9.1} {:>9.1} {:>10.1} {:>9.1} | {:>9.1} {:>9.1} {:>10.1} {:>9.1}",
                    key_type.name(),
                    if payload == Payload::Pairs { "pairs" } else { "keys" },
                    output::format_count(capacity as f64),
                    cold.pipelines,
                    ms(cold.recorder_us),
                    ms(cold.bind_us),
                    ms(cold.first_sort_us),
                    ms(cold.total_us),
                    ms(warm.recorder_us),
                    ms(warm.bind_us),
                    ms(warm.first_sort_us),
                    ms(warm.total_us),
                );
                rows.push(Row {
                    device: cold.device.clone(),
                    key_type,
                    payload,
                    capacity,
                    pipelines: cold.pipelines,
                    cold,
                    warm,
                });
            }
        }
    }
    if let Some(device) = rows.first().map(|r| r.device.clone()) {
        println!("device: {device}");
    }
    if let Some(out) = json_out {
        out.finish(&output::json(&rows)?)?;
    }
    Ok(())
}

/// Runs `--one case` in a new process with the pipeline cache in `dir`.
fn child(
    exe: &std::path::Path,
    gpu: &GpuArgs,
    args: &StartupArgs,
    case: &str,
    dir: &std::path::Path,
) -> Result<Run, Failure> {
    let mut command = Command::new(exe);
    command.args(["startup", "--one", case, "--cache-dir"]).arg(dir);
    if let Some(kernels) = args.kernels.and_then(|k| k.to_possible_value()) {
        command.arg("--kernels").arg(kernels.get_name());
    }
    if let Some(device) = &gpu.device {
        command.args(["--device", device]);
    }
    if gpu.validation {
        command.arg("--validation");
    }
    let output = command.stderr(std::process::Stdio::inherit()).output();
    let output = output.map_err(|e| Failure::Run(anyhow!("cannot run {}: {e}", exe.display())))?;
    if !output.status.success() {
        return Err(Failure::Run(anyhow!("the run of {case} failed ({}); its error is above", output.status)));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| Failure::Run(anyhow!("the run of {case} printed no result ({e})")))
}

/// The run of median total time.
fn median(mut runs: Vec<Run>) -> Run {
    runs.sort_by(|a, b| a.total_us.total_cmp(&b.total_us));
    runs.swap_remove(runs.len() / 2)
}

/// Times one case here and prints it as JSON.
fn one(gpu: &GpuArgs, case: &str, cache_dir: Option<PathBuf>, kernels: Option<KernelsArg>) -> Result<(), Failure> {
    let bad = || Failure::Input(anyhow!("--one takes TYPE,keys|pairs,N, not `{case}`"));
    let mut parts = case.split(',');
    let (Some(key_type), Some(payload), Some(n), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let key_type = KeyType::from_str(key_type, true).map_err(|_| bad())?;
    let pairs = match payload {
        "keys" => false,
        "pairs" => true,
        _ => return Err(bad()),
    };
    let n: usize = crate::sizes::parse_size(n).map_err(|e| Failure::Input(anyhow!("--one: {e}")))? as usize;
    let desc =
        ContextDesc { pipeline_cache: cache_dir.map_or(PipelineCacheDir::Off, PipelineCacheDir::At), ..gpu.desc() };
    let ctx = bitonic_vk::Context::new(&desc)?;
    let device = format!("{} ({})", ctx.device_info().name, ctx.device_info().driver);
    let mut desc = SorterDesc::default();
    desc.tuning.kernels = kernels.map(KernelsArg::family);
    let mut sorter = Sorter::new(&ctx, &desc)?;
    let startup = sorter.time_startup(key_type.kind(), pairs, n)?;
    drop(sorter);
    ctx.save_pipeline_cache()?;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let run = Run {
        device,
        recorder_us: us(startup.recorder),
        bind_us: us(startup.bind),
        first_sort_us: us(startup.first_sort),
        total_us: us(startup.total()),
        pipelines: startup.pipelines,
    };
    println!("{}", serde_json::to_string(&run).map_err(|e| Failure::Run(anyhow!("cannot encode JSON: {e}")))?);
    Ok(())
}
