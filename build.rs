//! Compiles every `glsl/*.comp` to SPIR-V, once per payload variant, and generates the items the
//! host and the shaders share: `push_constants.glsl` / `push_constants.rs` (one table below is
//! the single source of the push-constant layout and flag bits) and `shaders.rs` (one `&[u32]`
//! constant per module). A GLSL error or warning fails the build with the file and line.
//!
//! The particle example's shaders (`glsl/particles/`: a compute pass, a vertex and a fragment
//! shader) are not sorting kernels: they are compiled once each, to `$OUT_DIR/particles/*.spv`,
//! and stay out of `shaders.rs`.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The push-constant block of every kernel, in order. Each field is a `uint`.
const PUSH_FIELDS: &[(&str, &str)] = &[
    (
        "n",
        "number of real elements, 0..=2^30; indices >= n are virtual +infinity keys that are never read or written",
    ),
    (
        "inc",
        "global_merge: comparator stride, a power of two >= TILE; windowed local_merge: its largest stride; the looping (persistent) tile_sort, local_merge and segment_merge: the pass's workgroups, the loop's stride (0 for a plain local_merge: one tile each); unused by the other kernels",
    ),
    (
        "dir",
        "global_merge: 1 = first substage of a stage, i is compared with its mirror in its block of 2*inc (the flip); 0 = i is compared with i + inc; segment_merge: 1 = it runs a stage's flip; every comparator puts the smaller image first",
    ),
    (
        "log_block",
        "tile_sort: log2 of the largest block it sorts, 0..=log2(TILE); segment_merge: its shape, low-run bits | high-run bits << SEGMENT_HIGH_SHIFT | SEGMENT_TAIL | q << SEGMENT_HIGH_BIT_SHIFT (q the element bit of its high run's smallest stride); unused by the other kernels",
    ),
    (
        "group_offset",
        "index of this dispatch's first workgroup within its pass (a pass may be split over dispatches)",
    ),
    (
        "flags",
        "key kind (KEY_KIND_MASK) and the FLAG_* bits below",
    ),
];

/// Constants shared by host and shaders: name, value, meaning.
const SHARED_CONSTANTS: &[(&str, u32, &str)] = &[
    ("KEY_KIND_MASK", 0x3, "bits of `flags` holding the key kind"),
    ("KEY_U32", 0, "keys are u32 (u64 in the KEY64 builds)"),
    ("KEY_I32", 1, "keys are i32 (i64 in the KEY64 builds), two's complement"),
    ("KEY_F32", 2, "keys are f32 bits (f64 in the KEY64 builds), in IEEE total order"),
    ("FLAG_DESCENDING", 0x4, "the order image is complemented, so an ascending network sorts in descending key order"),
    ("FLAG_TO_IMAGE_ON_LOAD", 0x8, "the kernel maps keys to their order image as it loads them (first pass of a sort)"),
    (
        "FLAG_FROM_IMAGE_ON_STORE",
        0x10,
        "the kernel maps order images back to keys as it stores them (last pass of a sort)",
    ),
    ("SEGMENT_HIGH_SHIFT", 8, "segment_merge: where its high-run length sits in `log_block`"),
    ("SEGMENT_TAIL", 0x10000, "segment_merge: bit of `log_block` set when it first runs its low run's half-cleaners"),
    (
        "SEGMENT_HIGH_BIT_SHIFT",
        24,
        "segment_merge: where the element bit of its high run's smallest stride sits in `log_block`",
    ),
];

/// Builds: every sorting kernel is compiled once per key width, payload and variant, with the
/// macros of each defined. The standalone sorter uses the lean builds, which know nothing of
/// batches or a GPU-side count, so its sorts run the lean code; embedded sorts use the BATCHED
/// builds (workgroup row y sorts array y, at about 2 % of the time on the H100), with GPU_COUNT
/// where the count is read from binding 2. Each axis: name suffix, Rust variant, macros.
const WIDTHS: &[(&str, &str, &[&str])] = &[("", "Bits32", &[]), ("64", "Bits64", &["KEY64"])];
const PAYLOADS: &[(&str, &str, &[&str])] =
    &[("keys", "Keys", &[]), ("pairs", "Pairs", &["PAIRS"]), ("pairs_origins", "PairsOrigins", &["PAIRS", "ORIGINS"])];
/// The payload whose tiles hold 16-bit origins in place of the values (`ORIGINS`, glsl/local.glsl),
/// built for 4-byte keys alone (an 8-byte key with an origin would not double the tile) and
/// without SMALL (whose tiles of at most 2048 pairs fit shared memory with their values).
const ORIGINS_PAYLOAD: &str = "PairsOrigins";
const VARIANTS: &[(&str, &str, &[&str])] = &[
    ("", "Lean", &[]),
    ("_batched", "Batched", &["BATCHED"]),
    ("_batched_count", "BatchedCount", &["BATCHED", "GPU_COUNT"]),
];

/// The kernels that are also built with `PERSISTENT` (each workgroup loops over tiles or cosets),
/// every build of them picked by the generated `spirv_persistent()`; the plain builds stay as they
/// are.
const PERSISTENT_KERNELS: &[&str] = &["tile_sort", "segment_merge"];

/// The kernels that are also built with `SMALL` (a tile of four elements per invocation for keys,
/// two for pairs, in registers, with subgroup shuffles), every 4-byte-key build of them picked by
/// the generated `spirv_small()` (8-byte keys never take it: `pipelines::small_tile_sort`): a
/// module of its own, since its shuffle capability would keep a device without subgroup shuffles
/// from making a pipeline of the plain build.
const SMALL_KERNELS: &[&str] = &["tile_sort"];
/// The key width of the SMALL builds (a `width` of `WIDTHS`).
const SMALL_WIDTH: &str = "Bits32";
/// The payload whose SMALL kernels are also built with `SMALL_TWO_SLOTS` (two elements per
/// invocation, which pairs' SMALL build always takes), picked by the generated
/// `spirv_small_two_slots()` for tiles of at most 1024 (`pipelines::small_slots`).
const SMALL_TWO_SLOTS_PAYLOAD: &str = "Keys";

/// The kernels that are also built with `SHAPED` (the pass's shape and its chain of chunks from
/// specialization constants: one pipeline per shape), every build of them picked by the generated
/// `spirv_shaped()`.
const SHAPED_KERNELS: &[&str] = &["segment_merge"];

/// The chains of chunks that the SHAPED kernels are also built for, one module each with every
/// chunk's kind and size a literal (`SHAPE_CHAIN`, `SHAPE_CODE0` .. from
/// `SegmentChunk::chain_code` in src/plan.rs; the strides and the shape stay specialization
/// constants), so that spirv-opt takes them. Sorts take them by default wherever a segment pass's
/// chain has a module (`SorterDesc::shaped_segments`); `chain_modules_cover_the_segment_passes_of_tiles_of_2048`
/// in src/pipelines.rs checks the lists.
///
/// The chains of the segment passes in tiles of 2048 (3 to 132 tiles on the H100: 13 to 19
/// levels) on local chunks of 3, which sorts of up to 2^15 elements take (13 to 15 levels), keys
/// and pairs.
const CHAINS_ON_CHUNKS_OF_3: ChainList = &[
    &[13, 9],
    &[13, 13],
    &[13, 13, 9],
    &[13, 13, 13],
    &[13, 13, 13, 10],
    &[13, 13, 14, 9],
    &[13, 39, 13, 9],
    &[14, 13, 9],
];
/// The chains on chunks of 3 of 16 to 19 levels that shorter sorts do not share, which 4-byte keys
/// alone meet in tiles of 2048 above 2^15 elements (`sorter::segment_chunk_for`). Pairs never
/// take chunks of 3 there: they lost on the H100 even with these modules built for them.
const CHAINS_ON_CHUNKS_OF_3_BEYOND_2_15: ChainList =
    &[&[13, 11, 13, 9], &[13, 13, 5], &[13, 13, 11, 9], &[13, 13, 13, 5], &[13, 13, 13, 5, 6], &[13, 13, 39, 9]];
/// The same on chunks of 4, which sorts above 2^15 take where their tile of 2048 is not a segment
/// tile (`--max-tile 2048` beyond 132 tiles on the H100, a device that reports no multiprocessors,
/// such as lavapipe) or where chunks of 4 are asked for, and a recorder binding whose capacity
/// takes them in its shorter sorts too (13 to 19 levels).
const CHAINS_ON_CHUNKS_OF_4: ChainList = &[
    &[17, 5],
    &[17, 9],
    &[17, 13],
    &[17, 15, 13],
    &[17, 17],
    &[17, 17, 5],
    &[17, 17, 5, 10],
    &[17, 17, 9],
    &[17, 17, 9, 6],
    &[17, 17, 14],
    &[17, 18, 13],
    &[17, 43, 13],
    &[17, 71, 13],
    &[18, 17],
];
/// The builds (payload, key width) that have chain modules, each in every variant (Lean,
/// Batched, BatchedCount), and their chains: 4-byte keys alone on both chunks, 4-byte keys with
/// u32 values on chunks of 3 up to 15 levels. The chains of pairs on chunks of 4 (measured from
/// 2^16 pairs up) and those of tiles of 4096 and 8192, of keys or pairs, were built and measured
/// too, and lost on the H100 (docs/PERFORMANCE.md, lever table, "Segment passes on a module per
/// chain").
const SHAPED_CHAIN_BUILDS: &[(&str, &str, &[ChainList])] = &[
    ("Keys", "Bits32", &[CHAINS_ON_CHUNKS_OF_3, CHAINS_ON_CHUNKS_OF_3_BEYOND_2_15, CHAINS_ON_CHUNKS_OF_4]),
    ("Pairs", "Bits32", &[CHAINS_ON_CHUNKS_OF_3]),
];
/// A list of chains, each the chunk codes of one module.
type ChainList = &'static [&'static [u32]];
/// The macros of a chain's chunk codes, one per chunk slot of the SHAPED build.
const SHAPE_CODE_MACROS: [&str; 8] = [
    "SHAPE_CODE0",
    "SHAPE_CODE1",
    "SHAPE_CODE2",
    "SHAPE_CODE3",
    "SHAPE_CODE4",
    "SHAPE_CODE5",
    "SHAPE_CODE6",
    "SHAPE_CODE7",
];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let glsl_dir = manifest.join("glsl");
    println!("cargo:rerun-if-changed=glsl");
    println!("cargo:rerun-if-changed=build.rs");

    write(&out.join("push_constants.glsl"), &push_constants_glsl());
    write(&out.join("push_constants.rs"), &push_constants_rs());

    let mut sources: Vec<PathBuf> = fs::read_dir(&glsl_dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", glsl_dir.display()))
        .map(|entry| entry.expect("readable glsl/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "comp"))
        .collect();
    sources.sort();
    for entry in fs::read_dir(&glsl_dir).expect("glsl/ was just read") {
        println!("cargo:rerun-if-changed={}", entry.expect("readable glsl/ entry").path().display());
    }

    // Every module to compile: the sorting kernels (those on the key and value buffers, which
    // include common.glsl directly or through local.glsl) once per key width, payload and variant,
    // the PERSISTENT kernels once more per build, and the others (probes) once. They compile on
    // parallel threads (the build's critical path is mostly here); the generated file lists them
    // in this order whatever order they finish in.
    let texts: Vec<String> = sources
        .iter()
        .map(|source| fs::read_to_string(source).unwrap_or_else(|e| panic!("cannot read {}: {e}", source.display())))
        .collect();
    let mut modules: Vec<Module> = Vec::new();
    for (source, text) in sources.iter().zip(&texts) {
        let stem = source.file_stem().and_then(|s| s.to_str()).expect("UTF-8 shader name");
        if !(text.contains("#include \"common.glsl\"") || text.contains("#include \"local.glsl\"")) {
            modules.push(Module { source, text, stem, macros: Vec::new(), values: Vec::new(), kernel: None });
            continue;
        }
        let kind: String = stem.split('_').map(|w| w[..1].to_uppercase() + &w[1..]).collect();
        for (width_suffix, width, width_macros) in WIDTHS {
            for (payload_name, payload, payload_macros) in PAYLOADS {
                if *payload == ORIGINS_PAYLOAD && *width != SMALL_WIDTH {
                    continue;
                }
                for (variant_suffix, variant, variant_macros) in VARIANTS {
                    let macros: Vec<&str> =
                        [*width_macros, *payload_macros, *variant_macros].into_iter().flatten().copied().collect();
                    let build = Build {
                        name: format!("{payload_name}{width_suffix}{variant_suffix}"),
                        kind: kind.clone(),
                        payload,
                        width,
                        variant,
                        extra: None,
                        chain: None,
                    };
                    let extra = |kernels: &[&str], extra: &'static str| {
                        kernels.contains(&stem).then(|| Module {
                            source,
                            text,
                            stem,
                            macros: macros.iter().copied().chain([extra]).collect(),
                            values: Vec::new(),
                            kernel: Some(Build { extra: Some(extra), ..build.clone() }),
                        })
                    };
                    let chains: &[ChainList] = SHAPED_CHAIN_BUILDS
                        .iter()
                        .find(|(p, w, _)| SHAPED_KERNELS.contains(&stem) && p == payload && w == width)
                        .map_or(&[], |(_, _, chains)| *chains);
                    let chain_modules: Vec<Module> = chains
                        .iter()
                        .flat_map(|list| list.iter())
                        .map(|chain| Module {
                            source,
                            text,
                            stem,
                            macros: macros.iter().copied().chain(["SHAPED", "SHAPE_CHAIN"]).collect(),
                            values: SHAPE_CODE_MACROS
                                .iter()
                                .enumerate()
                                .map(|(i, name)| (*name, chain.get(i).copied().unwrap_or(0)))
                                .collect(),
                            kernel: Some(Build { extra: Some("SHAPED"), chain: Some(chain), ..build.clone() }),
                        })
                        .collect();
                    let looping = extra(PERSISTENT_KERNELS, "PERSISTENT");
                    let small = if *width == SMALL_WIDTH && *payload != ORIGINS_PAYLOAD {
                        extra(SMALL_KERNELS, "SMALL")
                    } else {
                        None
                    };
                    let small_two = if *width == SMALL_WIDTH && *payload == SMALL_TWO_SLOTS_PAYLOAD {
                        extra(SMALL_KERNELS, "SMALL_TWO_SLOTS")
                    } else {
                        None
                    };
                    let shaped = extra(SHAPED_KERNELS, "SHAPED");
                    modules.push(Module {
                        source,
                        text,
                        stem,
                        macros: macros.clone(),
                        values: Vec::new(),
                        kernel: Some(build),
                    });
                    modules.extend(looping);
                    modules.extend(small);
                    modules.extend(small_two);
                    modules.extend(shaped);
                    modules.extend(chain_modules);
                }
            }
        }
    }
    let compiler = shaderc::Compiler::new().expect("shaderc compiler");
    let words = compile_all(&compiler, &modules, &glsl_dir, &out);

    let mut generated = String::from("// Generated by build.rs from glsl/*.comp: do not edit.\n");
    // The match of `spirv()`: one arm per sorting kernel and build; of `spirv_persistent()`,
    // `spirv_small()` and `spirv_shaped()`: one per persistent, small or shaped kernel and build.
    let mut arms = String::new();
    let mut persistent_arms = String::new();
    let mut small_arms = String::new();
    let mut small_two_arms = String::new();
    let mut shaped_arms = String::new();
    let mut chain_arms = String::new();
    for (module, words) in modules.iter().zip(words) {
        let (stem, macros) = (module.stem, &module.macros);
        let Some(build) = &module.kernel else {
            let ident = stem.to_uppercase();
            writeln!(generated, "/// SPIR-V of `glsl/{stem}.comp`.\npub static {ident}: &[u32] = &{words:?};")
                .expect("write to String");
            continue;
        };
        let Build { name, kind, payload, width, variant, extra, chain } = build;
        let ident = match (extra, chain) {
            (Some(extra), Some(chain)) => {
                let codes: Vec<String> = chain.iter().map(u32::to_string).collect();
                format!("{stem}_{extra}_{name}_chain_{}", codes.join("_"))
            }
            (Some(extra), None) => format!("{stem}_{extra}_{name}"),
            (None, _) => format!("{stem}_{name}"),
        }
        .to_uppercase();
        writeln!(
            generated,
            "/// SPIR-V of `glsl/{stem}.comp`, build `{name}` ({macros:?}).\nstatic {ident}: &[u32] = &{words:?};"
        )
        .expect("write to String");
        if let Some(chain) = chain {
            writeln!(
                chain_arms,
                "        (PassKind::{kind}, Payload::{payload}, KeyWidth::{width}, Variant::{variant}, {chain:?}) => Some({ident}),"
            )
            .expect("write to String");
        } else if let Some(extra) = extra {
            let arms = match *extra {
                "SMALL" => &mut small_arms,
                "SMALL_TWO_SLOTS" => &mut small_two_arms,
                "SHAPED" => &mut shaped_arms,
                _ => &mut persistent_arms,
            };
            writeln!(
                arms,
                "        (PassKind::{kind}, Payload::{payload}, KeyWidth::{width}, Variant::{variant}) => Some({ident}),"
            )
            .expect("write to String");
        } else {
            writeln!(
                arms,
                "        (PassKind::{kind}, Payload::{payload}, KeyWidth::{width}, Variant::{variant}) => {ident},"
            )
            .expect("write to String");
        }
    }
    writeln!(
        generated,
        "/// The SPIR-V of a sorting kernel for a payload, key width and variant.\n\
         /// 8-byte keys have no {ORIGINS_PAYLOAD} build: they take their pairs' build.\n\
         pub fn spirv(kind: PassKind, payload: Payload, width: KeyWidth, variant: Variant) -> &'static [u32] {{\n    \
         match (kind, payload, width, variant) {{\n{arms}        \
         (kind, Payload::{ORIGINS_PAYLOAD}, KeyWidth::Bits64, variant) => spirv(kind, Payload::Pairs, KeyWidth::Bits64, variant),\n    \
         }}\n}}"
    )
    .expect("write to String");
    writeln!(
        generated,
        "/// The SPIR-V of a kernel's build whose workgroups loop over tiles or cosets, for a payload, key width and variant;\n\
         /// None for a kernel without one (only {PERSISTENT_KERNELS:?} have one).\n\
         pub fn spirv_persistent(kind: PassKind, payload: Payload, width: KeyWidth, variant: Variant) -> Option<&'static [u32]> {{\n    \
         match (kind, payload, width, variant) {{\n{persistent_arms}        _ => None,\n    }}\n}}"
    )
    .expect("write to String");
    writeln!(
        generated,
        "/// The SPIR-V of a kernel's build that holds a tile in registers and shuffles it between the invocations of a\n\
         /// subgroup, for a payload, key width and variant; None for a kernel without one (only the {SMALL_WIDTH} builds of\n\
         /// {SMALL_KERNELS:?} have one).\n\
         pub fn spirv_small(kind: PassKind, payload: Payload, width: KeyWidth, variant: Variant) -> Option<&'static [u32]> {{\n    \
         match (kind, payload, width, variant) {{\n{small_arms}        _ => None,\n    }}\n}}"
    )
    .expect("write to String");
    writeln!(
        generated,
        "/// The SPIR-V of a SMALL build (see `spirv_small`) on two elements per invocation, for a payload, key width and\n\
         /// variant; None for a kernel without one (only the {SMALL_WIDTH} {SMALL_TWO_SLOTS_PAYLOAD} builds of\n\
         /// {SMALL_KERNELS:?} have one).\n\
         pub fn spirv_small_two_slots(kind: PassKind, payload: Payload, width: KeyWidth, variant: Variant) -> Option<&'static [u32]> {{\n    \
         match (kind, payload, width, variant) {{\n{small_two_arms}        _ => None,\n    }}\n}}"
    )
    .expect("write to String");
    writeln!(
        generated,
        "/// The SPIR-V of a kernel's build that takes its pass's shape and chunks from specialization constants 4 to 13,\n\
         /// for a payload, key width and variant; None for a kernel without one (only {SHAPED_KERNELS:?} have one).\n\
         pub fn spirv_shaped(kind: PassKind, payload: Payload, width: KeyWidth, variant: Variant) -> Option<&'static [u32]> {{\n    \
         match (kind, payload, width, variant) {{\n{shaped_arms}        _ => None,\n    }}\n}}"
    )
    .expect("write to String");
    writeln!(
        generated,
        "/// The SPIR-V of a SHAPED kernel's build for one chain of chunks (their `SegmentChunk::chain_code`s), every chunk's\n\
         /// kind and size a literal, for a payload, key width and variant; None where that chain has no module of its own.\n\
         pub fn spirv_shaped_chain(kind: PassKind, payload: Payload, width: KeyWidth, variant: Variant, chain: &[u32]) -> Option<&'static [u32]> {{\n    \
         match (kind, payload, width, variant, chain) {{\n{chain_arms}        _ => None,\n    }}\n}}"
    )
    .expect("write to String");
    write(&out.join("shaders.rs"), &generated);

    compile_particle_shaders(&compiler, &glsl_dir.join("particles"), &out.join("particles"));
}

/// Compiles `glsl/particles/{depth.comp,sprite.vert,sprite.frag}` (which may include files of that
/// directory) to `<out>/<file name>.spv`, for `examples/particles` and `tests/particles.rs`.
fn compile_particle_shaders(compiler: &shaderc::Compiler, dir: &Path, out: &Path) {
    fs::create_dir_all(out).unwrap_or_else(|e| panic!("cannot create {}: {e}", out.display()));
    let stages = [
        ("depth.comp", shaderc::ShaderKind::Compute),
        ("sprite.vert", shaderc::ShaderKind::Vertex),
        ("sprite.frag", shaderc::ShaderKind::Fragment),
    ];
    for (file, kind) in stages {
        let source = dir.join(file);
        let text = fs::read_to_string(&source).unwrap_or_else(|e| panic!("cannot read {}: {e}", source.display()));
        let mut options = shaderc::CompileOptions::new().expect("shaderc options");
        options.set_target_env(shaderc::TargetEnv::Vulkan, shaderc::EnvVersion::Vulkan1_1 as u32);
        options.set_optimization_level(shaderc::OptimizationLevel::Performance);
        options.set_warnings_as_errors();
        let include_dir = dir.to_path_buf();
        options.set_include_callback(move |requested, _kind, _from, _depth| {
            let path = include_dir.join(requested);
            let content = fs::read_to_string(&path).map_err(|e| format!("#include \"{requested}\": {e}"))?;
            Ok(shaderc::ResolvedInclude { resolved_name: path.display().to_string(), content })
        });
        let name = source.display().to_string();
        let artifact = compiler
            .compile_into_spirv(&text, kind, &name, "main", Some(&options))
            // The message names file:line; failing the build script prints it.
            .unwrap_or_else(|e| panic!("GLSL compilation failed:\n{e}"));
        let spv = out.join(format!("{file}.spv"));
        fs::write(&spv, artifact.as_binary_u8()).unwrap_or_else(|e| panic!("cannot write {}: {e}", spv.display()));
    }
}

/// One SPIR-V module to build: a shader and the macros it is compiled with.
struct Module<'a> {
    source: &'a Path,
    text: &'a str,
    stem: &'a str,
    macros: Vec<&'a str>,
    /// Macros defined to a value (a chain's chunk codes).
    values: Vec<(&'static str, u32)>,
    /// The sorting-kernel build it is, or `None` for a probe (compiled once, without macros).
    kernel: Option<Build>,
}

/// Where a sorting-kernel module goes in the generated `spirv()` / `spirv_persistent()` /
/// `spirv_small()`.
#[derive(Clone)]
struct Build {
    name: String,
    kind: String,
    payload: &'static str,
    width: &'static str,
    variant: &'static str,
    /// The extra macro of a second build (`PERSISTENT`, `SMALL`, `SMALL_TWO_SLOTS` or `SHAPED`), or `None` for the
    /// plain one.
    extra: Option<&'static str>,
    /// A SHAPED build's chain of chunk codes where it is built for one (`SHAPED_CHAIN_BUILDS`).
    chain: Option<&'static [u32]>,
}

/// Compiles every module, on as many threads as cargo gives the build (`NUM_JOBS`), and returns
/// their SPIR-V in the order of `modules`. A shaderc compiler may compile on several threads at
/// once. A failure panics (on its thread, which the scope re-raises) with the file, line and macros.
fn compile_all(compiler: &shaderc::Compiler, modules: &[Module], glsl_dir: &Path, out: &Path) -> Vec<Vec<u32>> {
    let threads =
        env::var("NUM_JOBS").ok().and_then(|j| j.parse::<usize>().ok()).unwrap_or(1).clamp(1, modules.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Vec<u32>>> = modules.iter().map(|_| Mutex::new(Vec::new())).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(m) = modules.get(i) else { break };
                // The SHAPED build of every chain goes to the driver unoptimised: spirv-opt
                // inlines each of its eight chunk calls with every chunk size and kind it might
                // take (the constants that pick one are known only to the driver), which ran for
                // more than five minutes and took gigabytes per module. The driver inlines and
                // folds them once the constants are known. The chain builds carry one chunk per
                // slot, and spirv-opt takes them in under a second each.
                let optimize = m.kernel.as_ref().is_none_or(|k| k.extra != Some("SHAPED") || k.chain.is_some());
                let words = compile(compiler, m.source, m.text, &m.macros, &m.values, optimize, glsl_dir, out);
                *results[i].lock().expect("no thread panicked holding a result") = words;
            });
        }
    });
    results.into_iter().map(|r| r.into_inner().expect("no thread panicked holding a result")).collect()
}

fn compile(
    compiler: &shaderc::Compiler,
    source: &Path,
    text: &str,
    macros: &[&str],
    values: &[(&str, u32)],
    optimize: bool,
    glsl_dir: &Path,
    out: &Path,
) -> Vec<u32> {
    let mut options = shaderc::CompileOptions::new().expect("shaderc options");
    options.set_target_env(shaderc::TargetEnv::Vulkan, shaderc::EnvVersion::Vulkan1_1 as u32);
    options.set_optimization_level(if optimize {
        shaderc::OptimizationLevel::Performance
    } else {
        shaderc::OptimizationLevel::Zero
    });
    options.set_warnings_as_errors();
    for m in macros {
        options.add_macro_definition(m, Some("1"));
    }
    for (name, value) in values {
        options.add_macro_definition(name, Some(&value.to_string()));
    }
    let search = [glsl_dir.to_path_buf(), out.to_path_buf()];
    options.set_include_callback(move |requested, _kind, _from, _depth| {
        let path = search
            .iter()
            .map(|dir| dir.join(requested))
            .find(|p| p.is_file())
            .ok_or_else(|| format!("#include \"{requested}\": not in glsl/ nor generated"))?;
        let content = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(shaderc::ResolvedInclude { resolved_name: path.display().to_string(), content })
    });
    let name = source.display().to_string();
    match compiler.compile_into_spirv(text, shaderc::ShaderKind::Compute, &name, "main", Some(&options)) {
        Ok(artifact) => artifact.as_binary().to_vec(),
        // The message names file:line; failing the build script prints it.
        Err(e) => panic!("GLSL compilation failed (macros {macros:?} {values:?}):\n{e}"),
    }
}

fn push_constants_glsl() -> String {
    let mut s = String::from("// Generated by build.rs: the push-constant block and shared constants.\n");
    for (name, value, doc) in SHARED_CONSTANTS {
        writeln!(s, "const uint {name} = {value}u; // {doc}").expect("write to String");
    }
    s.push_str("layout(push_constant) uniform PushConstants {\n");
    for (name, doc) in PUSH_FIELDS {
        writeln!(s, "    uint {name}; // {doc}").expect("write to String");
    }
    s.push_str("} pc;\n");
    s
}

fn push_constants_rs() -> String {
    let mut s = String::from("// Generated by build.rs: the push-constant block and shared constants.\n");
    for (name, value, doc) in SHARED_CONSTANTS {
        writeln!(s, "/// {doc}\npub const {name}: u32 = {value};").expect("write to String");
    }
    s.push_str(
        "/// The push-constant block of every kernel, laid out as the GLSL block generated from the same table.\n\
         #[repr(C)]\n#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]\n\
         pub struct PushConstants {\n",
    );
    for (name, doc) in PUSH_FIELDS {
        writeln!(s, "    /// {doc}\n    pub {name}: u32,").expect("write to String");
    }
    s.push_str("}\n");
    writeln!(s, "const _: () = assert!(std::mem::size_of::<PushConstants>() == {} * 4);", PUSH_FIELDS.len())
        .expect("write to String");
    s
}

fn write(path: &Path, contents: &str) {
    fs::write(path, contents).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}
