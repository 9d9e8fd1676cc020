//! The particle example (`examples/particles/`) on the default device, with the validation layer
//! and synchronization validation: its depth pass, the embedded sort and its draw, checked frame
//! by frame. The sorted keys must be back to front over the GPU-side count, the indices distinct,
//! every particle visible beyond doubt drawn; the image must match a reference composited on the
//! CPU in the same order within `scene::tolerance`, and the reverse order
//! must not (so the comparison does see the order). Any error-severity validation message fails
//! the test, the leak report at device destruction included. The wgpu renderer runs through the
//! example's command line (`cli::run`), and beside the ash renderer on the same frame.

#[path = "../examples/particles/scene.rs"]
#[allow(dead_code)]
mod scene;

#[path = "../examples/particles/render.rs"]
#[allow(dead_code)]
mod render;

#[path = "../examples/particles/wgpu_render.rs"]
#[allow(dead_code)]
mod wgpu_render;

#[path = "../examples/particles/cli.rs"]
#[allow(dead_code)]
mod cli;

#[path = "../src/bin/bitonic-vk/sink.rs"]
#[allow(dead_code)]
mod sink;

use clap::Parser as _;
use render::{FrameRenderer, Gpu, GpuDesc, Readback, RenderDesc, Renderer};
use wgpu_render::{WgpuGpu, WgpuRenderer};

/// Renders `frames` frames of a scene and checks each; returns the number of sprites drawn.
fn render_and_check(gpu: &Gpu, desc: RenderDesc, frames: &[u32]) -> Vec<u32> {
    let mut renderer = Renderer::new(gpu, desc).expect("renderer");
    if let Some(asked) = desc.tile_origins {
        assert_eq!(renderer.tile_origins(), asked, "{desc:?}: the binding's tiles are not the ones asked for");
    }
    let size = (desc.width, desc.height);
    let mut drawn = Vec::new();
    for &i in frames {
        let (frame, check) = render_checked(&mut renderer, desc, i);
        let (_, indices) = frame.sorted.as_ref().expect("sorted keys and indices");
        let image = frame.image.as_deref().expect("image");
        println!(
            "{} particles {}x{} frame {i} ({:?}): {} drawn, key error {:.1e}; image max diff {:?}, mean {:?} (1/255)",
            desc.count,
            desc.width,
            desc.height,
            renderer.precision,
            frame.count,
            check.order.max_key_error,
            check.diff.max,
            check.diff.mean
        );
        if frame.count >= 100 {
            // The same sprites front to back: the comparison must see the difference.
            let reversed: Vec<u32> = indices[..frame.count as usize].iter().rev().copied().collect();
            let wrong =
                scene::composite(&frame.constants, renderer.particles(), &reversed, size.0, size.1, renderer.precision);
            let diff = scene::compare(image, &wrong);
            println!("  front to back instead: max diff {:?} (1/255)", diff.max);
            assert!(
                diff.max.iter().take(3).any(|&d| d > 10.0 * scene::tolerance(renderer.precision).0),
                "the reversed order is not told apart: {diff:?}"
            );
        }
        if let (true, Some(t)) = (desc.pass_times, &frame.timings) {
            // Every pass timed, each taking some time (a pass read in the wrong order would wrap
            // to hours), from the end of the depth pass to the last pass's end, which comes
            // before the frame's timestamp after the sort and its barrier.
            assert!(!t.passes.is_empty() && t.passes.iter().all(|p| *p > 0.0), "{desc:?}: passes {:?}", t.passes);
            let sum: f64 = t.passes.iter().sum();
            assert!(sum <= t.sort + 1e-3, "{desc:?}: the passes take {sum} us of a {} us sort", t.sort);
        }
        drawn.push(frame.count);
    }
    drawn
}

/// Renders frame `i` with everything read back, and checks it against the CPU.
fn render_checked(renderer: &mut dyn FrameRenderer, desc: RenderDesc, i: u32) -> (render::Frame, scene::FrameCheck) {
    let frame = renderer.render_frame(i, Readback { image: true, sorted: true }).expect("frame");
    let (keys, indices) = frame.sorted.as_ref().expect("sorted keys and indices");
    let image = frame.image.as_deref().expect("image");
    let sorted = scene::SortedFrame { count: frame.count, keys, indices };
    let size = (desc.width, desc.height);
    let check = scene::check_frame(&frame.constants, renderer.particles(), &sorted, image, size, renderer.precision())
        .unwrap_or_else(|e| panic!("{desc:?}, frame {i}: {e:#}"));
    (frame, check)
}

/// A scene of `count` particles in a `width` x `height` RGBA32F image (where the device blends
/// into it), the default view, and the recorder's own choice of tiles.
fn scene(count: u32, width: u32, height: u32, seed: u64) -> RenderDesc {
    RenderDesc { count, width, height, seed, half: false, zoom: 1.0, tile_origins: None, pass_times: false }
}

#[test]
fn particles_are_drawn_back_to_front_as_the_cpu_composites_them() {
    let gpu = Gpu::new(&GpuDesc { validation: true, device: None }).expect("a Vulkan 1.1 device with graphics+compute");
    let log = gpu.validation_log();
    println!("device: {}", gpu.name);

    // 3001 particles (not a power of two), 2 frames 30 degrees apart; some particles are behind
    // the camera or off screen, so the GPU-side count is below the capacity.
    let desc = scene(3001, 192, 160, 7);
    let drawn = render_and_check(&gpu, desc, &[0, 10]);
    for d in &drawn {
        assert!(*d > 1500 && *d < desc.count, "drawn {d} of {}: culling did not run as expected", desc.count);
    }
    assert_ne!(drawn[0], drawn[1], "the two frames look the same");

    // Edge cases: one particle (the sort records nothing), two, and a larger scene in a
    // non-square image.
    render_and_check(&gpu, scene(1, 16, 16, 1), &[0]);
    render_and_check(&gpu, scene(2, 17, 9, 2), &[0]);
    render_and_check(&gpu, scene(20_000, 256, 144, 3), &[5]);
    // A narrow view: most particles culled, the sort's GPU-side count far below its capacity.
    render_and_check(&gpu, RenderDesc { zoom: 6.0, ..scene(20_000, 256, 144, 3) }, &[0]);

    // The sort's pairs in tiles of 16-bit origins, asked for: where the device offers shaderInt16
    // (the example enables it there), drawn and checked as above; elsewhere refused. (A device
    // with shaderInt16 whose workgroups cannot take a sixteenth of the tile would refuse too;
    // lavapipe and the GPUs measured take it.)
    let desc = RenderDesc { tile_origins: Some(true), ..scene(20_000, 256, 144, 3) };
    if gpu.shader_int16 {
        render_and_check(&gpu, desc, &[5]);
    } else {
        let err = Renderer::new(&gpu, desc).err().expect("tile origins without shaderInt16");
        assert!(err.downcast_ref::<render::BadRequest>().is_some(), "{err:#}");
    }

    // The sort timed pass by pass (SortRecorder::record_timed), drawn and checked as above.
    render_and_check(&gpu, RenderDesc { pass_times: true, ..scene(20_000, 256, 144, 3) }, &[5]);

    // The RGBA16F target every device can blend into, each blend rounded to half precision.
    render_and_check(&gpu, RenderDesc { half: true, ..scene(3001, 192, 160, 7) }, &[0]);

    // Over-limit requests are refused with an error, not a panic.
    let err = Renderer::new(&gpu, scene(0, 16, 16, 1)).err().expect("count 0");
    assert!(err.downcast_ref::<render::BadRequest>().is_some(), "{err:#}");
    let err = Renderer::new(&gpu, scene(10, 1 << 20, 16, 1)).err().expect("huge image");
    assert!(err.downcast_ref::<render::BadRequest>().is_some(), "{err:#}");

    // Destroying the device makes the layer report anything left alive.
    drop(gpu);
    let errors = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(errors.is_empty(), "validation errors: {errors:#?}");
}

#[test]
fn the_wgpu_renderer_checks_its_frames_and_writes_the_png() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("frame.png");
    let out_arg = out.to_str().expect("a UTF-8 temporary path");
    let args = cli::Args::try_parse_from([
        "particles",
        "--renderer",
        "wgpu",
        "--count",
        "4096",
        "--size",
        "320x180",
        "--frames",
        "2",
        "--check",
        "--validation",
        "--out",
        out_arg,
    ])
    .expect("arguments");
    cli::run(&args).unwrap_or_else(|e| panic!("particles --renderer wgpu: {e:#}"));

    let file = std::io::BufReader::new(std::fs::File::open(&out).expect("the PNG was written"));
    let mut reader = png::Decoder::new(file).read_info().expect("a PNG header");
    let mut rgb = vec![0; reader.output_buffer_size().expect("a buffer size")];
    let info = reader.next_frame(&mut rgb).expect("the PNG's pixels");
    assert_eq!((info.width, info.height, info.color_type), (320, 180, png::ColorType::Rgb));
    // Not the clear colour alone: sprites were drawn.
    assert!(rgb.chunks_exact(3).any(|p| p != &rgb[..3]), "the image is uniform");
}

#[test]
fn the_ash_and_wgpu_renderers_draw_the_same_frame_in_checked_orders() {
    let desc = scene(4096, 320, 180, 5);
    let frame = 4;
    let ash_gpu = Gpu::new(&GpuDesc { validation: true, device: None }).expect("an ash device");
    let ash_log = ash_gpu.validation_log();
    let (ash, ash_check) = render_checked(&mut Renderer::new(&ash_gpu, desc).expect("ash renderer"), desc, frame);
    drop(ash_gpu);
    let wgpu_gpu = WgpuGpu::new(true).expect("a wgpu device on the Vulkan backend");
    let wgpu_log = wgpu_gpu.validation_log();
    let (wgpu, wgpu_check) =
        render_checked(&mut WgpuRenderer::new(&wgpu_gpu, desc).expect("wgpu renderer"), desc, frame);
    drop(wgpu_gpu);
    println!(
        "frame {frame}: ash drew {} (image max diff {:?}), wgpu drew {} (image max diff {:?}) (1/255)",
        ash.count, ash_check.diff.max, wgpu.count, wgpu_check.diff.max
    );
    assert_eq!(ash.constants, wgpu.constants, "the same camera");
    // The same depth pass on both: the counts differ only by particles within rounding of the
    // culling bounds, if any.
    assert!(ash.count.abs_diff(wgpu.count) <= ash.count / 100, "ash drew {}, wgpu {}", ash.count, wgpu.count);
    for (name, log) in [("ash", ash_log), ("wgpu", wgpu_log)] {
        let errors = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert!(errors.is_empty(), "{name}: validation errors: {errors:#?}");
    }
}
