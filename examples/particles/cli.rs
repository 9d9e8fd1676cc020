//! The command line: its arguments, the frame loop over either renderer, the checks against
//! `scene.rs`, the timings and the PNG. `main.rs` calls [`main`]; `tests/particles.rs` calls
//! [`run`] with arguments of its own.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Context as _, Result};
use clap::Parser;

use crate::render::{BadRequest, FrameRenderer, Gpu, GpuDesc, Readback, RenderDesc, Renderer, ValidationLog};
use crate::scene;
use crate::sink::{self, Sink};
use crate::wgpu_render::{WgpuGpu, WgpuRenderer};

/// Particles sorted back to front on the GPU and drawn as alpha-blended sprites, headless.
#[derive(Parser, Debug)]
#[command(name = "particles")]
pub struct Args {
    /// Which API draws the frame: ash (the example's own Vulkan objects) or wgpu (wgpu's
    /// Vulkan backend, the sort through `bitonic_vk::wgpu::WgpuSorter`).
    #[arg(long, value_enum, default_value_t = Api::Ash)]
    renderer: Api,
    /// Write the last frame here as PNG: a regular file (or a link to one) through a temporary
    /// file beside it, renamed into place once complete; a device or a FIFO in place.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Particles: a number or a power such as 2^20.
    #[arg(long, default_value = "65536", value_parser = parse_count)]
    count: u32,
    /// Frames timed (the camera moves 3 degrees a frame).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    frames: u32,
    /// Frames rendered before those, untimed.
    #[arg(long, default_value_t = 0)]
    warmup: u32,
    /// Image size, WIDTHxHEIGHT.
    #[arg(long, default_value = "1280x720", value_parser = parse_size)]
    size: (u32, u32),
    /// Seed of the particles.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Render into RGBA16F even where the device blends into RGBA32F.
    #[arg(long)]
    half: bool,
    /// Narrow the view by this factor (focal length x ZOOM, 1 or more): more particles are culled
    /// and the sort takes a smaller GPU-side count, to see what work past the count costs.
    #[arg(long, default_value_t = 1.0, value_parser = parse_zoom)]
    zoom: f32,
    /// Tiles of 16-bit origins for the sort's u32 pairs (`Tuning::tile_origins`): on, off,
    /// or by default the recorder's choice where the device offers `shaderInt16`.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    tile_origins: Option<bool>,
    /// Also time each of the sort's passes (`SortRecorder::record_timed`, a timestamp after each)
    /// and print their medians.
    #[arg(long)]
    pass_times: bool,
    /// Check every frame: the order read back and the image against a CPU reference.
    #[arg(long)]
    check: bool,
    /// VK_LAYER_KHRONOS_validation with synchronization validation; any error fails the run.
    #[arg(long)]
    validation: bool,
    /// The device: an index or part of a name (default: BITONIC_VK_DEVICE, else the first
    /// discrete GPU, integrated, virtual, CPU). The ash renderer only.
    #[arg(long)]
    device: Option<String>,
}

/// The renderers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Api {
    Ash,
    Wgpu,
}

fn parse_zoom(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(z) if (1.0..=1000.0).contains(&z) => Ok(z),
        _ => Err(format!("{s:?}: a zoom factor from 1 to 1000")),
    }
}

fn parse_count(s: &str) -> Result<u32, String> {
    let s = s.trim();
    let n = match s.split_once('^') {
        Some(("2", k)) => k
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|k| *k < 32)
            .map(|k| 1u32 << k)
            .ok_or_else(|| format!("{s:?}: expected 2^K with K in 0..=31"))?,
        Some(_) => return Err(format!("{s:?}: only powers of 2 (2^K) are understood")),
        None => s.parse::<u32>().map_err(|e| format!("{s:?}: {e}"))?,
    };
    if n == 0 {
        return Err("must be at least 1".into());
    }
    Ok(n)
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(|| format!("{s:?}: expected WIDTHxHEIGHT, e.g. 1280x720"))?;
    let side =
        |v: &str| v.trim().parse::<u32>().ok().filter(|v| *v > 0).ok_or_else(|| format!("{s:?}: bad side {v:?}"));
    Ok((side(w)?, side(h)?))
}

/// A bad argument found after parsing (exit code 2, like clap's).
#[derive(Debug)]
struct BadArgument(String);

impl std::fmt::Display for BadArgument {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadArgument {}

/// Parses the process's arguments and runs; exit code 2 for a bad argument, 1 for a failure.
pub fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<BadArgument>().is_some() || e.downcast_ref::<BadRequest>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Opens `out` before any work, so that an unwritable path is reported at once.
fn prepare_output(out: &Path) -> Result<Sink> {
    if sink::is_stdio(out) {
        return Err(BadArgument("--out -: standard output carries the frame times: give --out a file".into()).into());
    }
    Sink::open(out).map_err(|e| BadArgument(format!("--out {}: cannot write it: {e}", out.display())).into())
}

fn write_png(out: &mut Sink, size: (u32, u32), rgb: &[u8]) -> Result<()> {
    let mut writer = BufWriter::new(out);
    let mut encoder = png::Encoder::new(&mut writer, size.0, size.1);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut png = encoder.write_header()?;
    png.write_image_data(rgb)?;
    png.finish()?;
    writer.flush()?;
    Ok(())
}

/// Median, min and max.
fn stats(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 { values[n / 2] } else { 0.5 * (values[n / 2 - 1] + values[n / 2]) };
    (median, values[0], values[n - 1])
}

/// Renders the frames `args` asks for, on the renderer it names.
pub fn run(args: &Args) -> Result<()> {
    let output = args.out.as_deref().map(prepare_output).transpose()?;
    let (width, height) = args.size;
    let desc = RenderDesc {
        count: args.count,
        width,
        height,
        seed: args.seed,
        half: args.half,
        zoom: args.zoom,
        tile_origins: args.tile_origins,
        pass_times: args.pass_times,
    };
    // Each arm drops its renderer, then its device and instance, before the log is read.
    let (log, result) = match args.renderer {
        Api::Ash => {
            let gpu = Gpu::new(&GpuDesc { validation: args.validation, device: args.device.clone() })?;
            let result = Renderer::new(&gpu, desc).and_then(|mut r| render_frames(args, &gpu.name, &mut r, output));
            (gpu.validation_log(), result)
        }
        Api::Wgpu => {
            if let Some(device) = &args.device {
                return Err(BadArgument(format!(
                    "--device {device}: the wgpu renderer takes wgpu's default Vulkan adapter; \
                     choose a device with --renderer ash"
                ))
                .into());
            }
            let gpu = WgpuGpu::new(args.validation)?;
            let result = WgpuRenderer::new(&gpu, desc).and_then(|mut r| render_frames(args, &gpu.name, &mut r, output));
            (gpu.validation_log(), result)
        }
    };
    report_validation(args.validation, &log, result)
}

/// Fails a run that the validation layer (or wgpu's validation) found errors in; read after the
/// device and instance are gone, since their destruction reports leaks.
fn report_validation(validation: bool, log: &ValidationLog, result: Result<()>) -> Result<()> {
    if validation {
        let errors = log.lock().unwrap_or_else(|e| e.into_inner()).len();
        match (&result, errors) {
            (Ok(()), 0) => println!("validation: no errors"),
            (Ok(()), n) => return Err(anyhow!("{n} validation error(s), printed above")),
            (Err(_), 0) => {}
            (Err(_), n) => eprintln!("{n} validation error(s), printed above"),
        }
    }
    result
}

fn render_frames(args: &Args, device: &str, renderer: &mut dyn FrameRenderer, output: Option<Sink>) -> Result<()> {
    let (width, height) = args.size;
    println!(
        "device: {}; {} particles (seed {}), {}x{} {}, {} frame(s) timed after {} warm-up; sort tiles of {}",
        device,
        args.count,
        args.seed,
        width,
        height,
        renderer.format_name(),
        args.frames,
        args.warmup,
        if renderer.tile_origins() { "keys and 16-bit origins" } else { "keys and values" }
    );
    let total = args.warmup + args.frames;
    let (mut depth, mut sort, mut draw, mut frame_total) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut passes: Vec<Vec<f64>> = Vec::new();
    let mut drawn = Vec::new();
    let mut last_image = None;
    for i in 0..total {
        let last = i + 1 == total;
        let readback = Readback { image: args.check || (last && output.is_some()), sorted: args.check };
        let frame = renderer.render_frame(i, readback).with_context(|| format!("frame {i}"))?;
        if args.check {
            let (keys, indices) = frame.sorted.as_ref().ok_or_else(|| anyhow!("frame {i}: nothing read back"))?;
            let image = frame.image.as_deref().ok_or_else(|| anyhow!("frame {i}: no image read back"))?;
            let sorted = scene::SortedFrame { count: frame.count, keys, indices };
            let check = scene::check_frame(
                &frame.constants,
                renderer.particles(),
                &sorted,
                image,
                args.size,
                renderer.precision(),
            )
            .with_context(|| format!("frame {i}: check failed"))?;
            let d = &check.diff;
            let rgba = |v: [f32; 4], digits: usize| v.map(|x| format!("{x:.digits$}")).join(" ");
            println!(
                "frame {i}: {} sprites back to front (key error {:.1e}); image - CPU reference, RGBA in 1/255: \
                 max {}, mean {}",
                check.order.count,
                check.order.max_key_error,
                rgba(d.max, 3),
                rgba(d.mean, 4),
            );
        }
        if i >= args.warmup {
            drawn.push(frame.count);
            if let Some(t) = frame.timings {
                depth.push(t.depth);
                sort.push(t.sort);
                draw.push(t.draw);
                frame_total.push(t.depth + t.sort + t.draw);
                passes.resize(t.passes.len(), Vec::new());
                for (times, t) in passes.iter_mut().zip(t.passes) {
                    times.push(t);
                }
            }
        }
        if last {
            last_image = frame.image;
        }
    }
    let (lo, hi) = (drawn.iter().min().copied().unwrap_or(0), drawn.iter().max().copied().unwrap_or(0));
    println!("sprites drawn per frame (the GPU-side count): {lo}..{hi} of {}", args.count);
    if depth.is_empty() {
        println!("no timestamps on this queue: no GPU times");
    } else {
        println!("GPU time per frame (timestamps), median (min..max) over {} frames:", depth.len());
        for (name, values) in
            [("depth", &mut depth), ("sort", &mut sort), ("draw", &mut draw), ("total", &mut frame_total)]
        {
            let (median, min, max) = stats(values);
            println!("  {name:<6} {median:>10.1} us  ({min:.1}..{max:.1})");
        }
        if !passes.is_empty() {
            println!("the sort's passes (each from the end of the one before, its barrier included):");
            for (i, values) in passes.iter_mut().enumerate() {
                let (median, min, max) = stats(values);
                println!("  pass {i:<2} {median:>8.1} us  ({min:.1}..{max:.1})");
            }
        }
    }
    if let (Some(mut sink), Some(out)) = (output, &args.out) {
        let image = last_image.ok_or_else(|| anyhow!("the last frame's image was not read back"))?;
        write_png(&mut sink, args.size, &scene::to_rgb8(&image))
            .and_then(|()| {
                sink.sync()?;
                Ok(sink.persist()?)
            })
            .with_context(|| format!("--out {}: cannot write it", out.display()))?;
        println!("wrote {} ({width}x{height}, frame {})", out.display(), total - 1);
    }
    Ok(())
}
