//! Generates what the host and the shaders share from the variant table (`src/abi/table.rs`,
//! shared through `#[path]`; the chain modules are the chains the planner's own `src/segment.rs`
//! finds): `interface.glsl` and `push_constants.rs` from the same tables, and `modules.rs`, the
//! module list with each module's SPIR-V embedded deflated by `include_bytes!`. That SPIR-V is
//! the package's own, committed in `spirv/`, so an embedder's build needs no shader compiler.
//! With the `glsl` feature the kernels in `glsl/` are compiled here instead, one `.spv` file in
//! `OUT_DIR` per module, checked against `spirv/` and written there when
//! `BITONIC_VK_UPDATE_SPIRV=1` asks; a GLSL error or warning fails the build with the file and line.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

#[allow(dead_code)]
#[path = "src/abi/table.rs"]
mod abi;
#[allow(dead_code)]
#[path = "src/segment.rs"]
mod segment;

use abi::{Form, KernelFamily, ModuleKey, PassKind};

/// What refreshes the committed SPIR-V, for the messages that ask for it.
const REFRESH: &str = "BITONIC_VK_UPDATE_SPIRV=1 cargo build --release";

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for path in ["glsl", "glsl/unrolled", "spirv", "build.rs", "src/abi/table.rs", "src/segment.rs"] {
        println!("cargo:rerun-if-changed={path}");
    }

    write(&out.join("rules.glsl"), &rules_glsl());
    write(&out.join("interface.glsl"), &interface_glsl());
    write(&out.join("push_constants.rs"), &push_constants_rs());
    write(&out.join("rules.rs"), &rules_rs());

    let glsl = manifest.join("glsl");
    let committed = manifest.join("spirv");
    let jobs = jobs(&glsl);
    #[cfg(feature = "glsl")]
    let embedded = compile::build(&jobs, &glsl, &out, &committed);
    #[cfg(not(feature = "glsl"))]
    let embedded = committed;
    write(&out.join("modules.rs"), &modules_rs(&jobs, &embedded));
}

/// A job for every module of the variant table and for each probe.
fn jobs(glsl: &Path) -> Vec<Job> {
    let mut jobs: Vec<Job> = modules()
        .into_iter()
        .map(|key| Job {
            source: family_dir(glsl, key.family).join(source_file(&key)),
            macros: abi::macros(&key),
            // The shaped build goes to the driver unoptimised: spirv-opt would inline every chunk
            // kind and size into each of its eight slots, not knowing the constants.
            optimize: key.form != Form::Shaped,
            file: module_file(&key),
            key: Some(key),
        })
        .collect();
    for probe in ["copy", "empty", "dispatch_args"] {
        jobs.push(Job {
            source: glsl.join(format!("{probe}.comp")),
            macros: Vec::new(),
            optimize: true,
            file: format!("{probe}.spv"),
            key: None,
        });
    }
    jobs
}

/// Where a family's kernels are: glsl/ or glsl/unrolled/.
fn family_dir(glsl: &Path, family: KernelFamily) -> PathBuf {
    match family {
        KernelFamily::Compact => glsl.to_path_buf(),
        KernelFamily::Unrolled => glsl.join("unrolled"),
    }
}

/// The file of a module's kernel: its kind's, but for the compact family's subgroup tile sort.
fn source_file(key: &ModuleKey) -> String {
    match (key.family, key.form) {
        (KernelFamily::Compact, Form::Small | Form::SmallTwoSlots) => "small_sort.comp".into(),
        _ => format!("{}.comp", key.kind.name()),
    }
}

/// Every module: each kernel of each family in its plain form for every payload and width it
/// runs, its other forms, and a chain module for each chain [`abi::CHAIN_BUILDS`] asks for.
fn modules() -> Vec<ModuleKey> {
    let mut keys = Vec::new();
    for (family, kind) in
        [KernelFamily::Unrolled, KernelFamily::Compact].into_iter().flat_map(|f| PassKind::ALL.map(|k| (f, k)))
    {
        for (payload, width) in abi::builds(family) {
            if abi::module_payload(kind, payload) != payload {
                continue;
            }
            let forms = std::iter::once(Form::Plain).chain(abi::extra_forms(family, kind, payload, width));
            keys.extend(forms.map(|form| ModuleKey { family, kind, width, payload, form }));
            if kind != PassKind::SegmentMerge || family == KernelFamily::Compact {
                continue;
            }
            let mut chains: Vec<Vec<u32>> = Vec::new();
            for build in abi::CHAIN_BUILDS.iter().filter(|b| b.payload == payload && b.width == width) {
                for &chunk in build.chunks {
                    for chain in segment::chains(build.tile_log2, build.levels.clone(), chunk, abi::spec::SHAPE_CHUNKS)
                    {
                        if !chains.contains(&chain) {
                            chains.push(chain);
                        }
                    }
                }
            }
            chains.sort();
            for chain in chains {
                let chain: &'static [u32] = Box::leak(chain.into_boxed_slice());
                keys.push(ModuleKey { family, kind, width, payload, form: Form::Chain(chain) });
            }
        }
    }
    keys
}

/// The `.spv` file of a module: kernel, family, payload, width and form, e.g.
/// `segment_merge.keys32.chain-13-13-9.spv`, `tile_sort-compact.pairs64.looping.spv`.
fn module_file(key: &ModuleKey) -> String {
    let payload = match key.payload {
        abi::Payload::Keys => "keys",
        abi::Payload::Pairs => "pairs",
        abi::Payload::PairsOrigins => "origins",
    };
    let width = key.width.bytes() * 8;
    let form = match key.form {
        Form::Plain => String::new(),
        Form::Looping => ".looping".into(),
        Form::Small => ".small".into(),
        Form::SmallTwoSlots => ".small2".into(),
        Form::Shaped => ".shaped".into(),
        Form::Chain(codes) => format!(".chain-{}", codes.iter().map(u32::to_string).collect::<Vec<_>>().join("-")),
    };
    let family = match key.family {
        KernelFamily::Unrolled => "",
        KernelFamily::Compact => "-compact",
    };
    format!("{}{family}.{payload}{width}{form}.spv", key.kind.name())
}

/// One module to compile: its source, macros, and the `.spv` file it goes to.
#[cfg_attr(not(feature = "glsl"), allow(dead_code))]
struct Job {
    source: PathBuf,
    macros: Vec<(&'static str, String)>,
    optimize: bool,
    file: String,
    /// The sorting-kernel module it is, or `None` for a probe.
    key: Option<ModuleKey>,
}

/// The shared constants and [`abi::RULES`] as GLSL: what `dispatch_args.comp` and (through
/// `interface.glsl`) every sorting kernel include.
fn rules_glsl() -> String {
    let mut s = String::from("// Generated by build.rs from src/abi/table.rs: do not edit.\n");
    for (name, value, doc) in abi::SHARED_CONSTANTS {
        writeln!(s, "const uint {name} = {value}u; // {doc}").expect("write to String");
    }
    writeln!(s, "const uint DISPATCH_RULE_WORDS = {}u; // uints per DispatchRule", abi::DISPATCH_RULE_FIELDS.len())
        .expect("write to String");
    s.push_str("uint le(uint x, uint y) { return uint(x <= y); }\n");
    s.push_str("uint ceil_log2(uint x) { return x <= 1u ? 0u : uint(findMSB(x - 1u)) + 1u; }\n");
    for (name, params, steps) in abi::RULES {
        let params: Vec<String> = params.iter().map(|p| format!("uint {p}")).collect();
        writeln!(s, "uint {name}({}) {{", params.join(", ")).expect("write to String");
        for (value, expr) in steps.iter() {
            writeln!(s, "    uint {value} = {expr};").expect("write to String");
        }
        let result = steps.last().expect("a rule has steps").0;
        writeln!(s, "    return {result};\n}}").expect("write to String");
    }
    s
}

/// [`abi::RULES`] as Rust, with the `DispatchRule` block of [`abi::DISPATCH_RULE_FIELDS`].
fn rules_rs() -> String {
    let mut s = String::from("// Generated by build.rs from src/abi/table.rs: do not edit.\n");
    s.push_str(
        "fn le(x: u32, y: u32) -> u32 {\n    u32::from(x <= y)\n}\n\
         fn ceil_log2(x: u32) -> u32 {\n    if x <= 1 { 0 } else { u32::BITS - (x - 1).leading_zeros() }\n}\n\
         fn min(x: u32, y: u32) -> u32 {\n    x.min(y)\n}\n",
    );
    for (name, params, steps) in abi::RULES {
        let params: Vec<String> = params.iter().map(|p| format!("{p}: u32")).collect();
        writeln!(s, "/// `{name}` of the rules in src/abi/table.rs.\n#[allow(clippy::too_many_arguments, clippy::precedence, clippy::manual_div_ceil)]\npub fn {name}({}) -> u32 {{", params.join(", "))
            .expect("write to String");
        for (value, expr) in steps.iter() {
            writeln!(s, "    let {value}: u32 = {expr};").expect("write to String");
        }
        let result = steps.last().expect("a rule has steps").0;
        writeln!(s, "    {result}\n}}").expect("write to String");
    }
    s.push_str(
        "/// One dispatch's rule for `dispatch_groups`, laid out as `dispatch_args.comp` reads it.\n\
         #[repr(C)]\n#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]\n\
         pub struct DispatchRule {\n",
    );
    for (name, doc) in abi::DISPATCH_RULE_FIELDS {
        writeln!(s, "    /// {doc}\n    pub {name}: u32,").expect("write to String");
    }
    s.push_str("}\n\nimpl DispatchRule {\n    /// The workgroups this dispatch runs for a GPU-side count, in a sort of n.\n    pub fn groups(&self, count: u32, n: u32) -> u32 {\n");
    let fields: Vec<String> = abi::DISPATCH_RULE_FIELDS.iter().map(|(f, _)| format!("self.{f}")).collect();
    writeln!(s, "        dispatch_groups(count, n, {})\n    }}\n}}", fields.join(", ")).expect("write to String");
    s
}

/// The GLSL side of the tables: the constants and rules (`rules.glsl`), specialization
/// constants (and the workgroup size from the first), and the push-constant block.
fn interface_glsl() -> String {
    let mut s = String::from("// Generated by build.rs from src/abi/table.rs: do not edit.\n");
    s.push_str("#include \"rules.glsl\"\n");
    for (id, (name, ty, default, doc)) in abi::SPEC_CONSTANTS.iter().enumerate() {
        let default = match *ty {
            "bool" => (if *default != 0 { "true" } else { "false" }).to_string(),
            _ => format!("{default}u"),
        };
        writeln!(s, "layout(constant_id = {id}) const {ty} {name} = {default}; // {doc}").expect("write to String");
    }
    writeln!(s, "layout(local_size_x_id = {}) in;", abi::spec::WG_SIZE).expect("write to String");
    s.push_str("layout(push_constant) uniform PushConstants {\n");
    for (name, doc) in abi::PUSH_FIELDS {
        writeln!(s, "    uint {name}; // {doc}").expect("write to String");
    }
    s.push_str("} pc;\n");
    s
}

/// The Rust side of the push-constant table: the constants and the `#[repr(C)]` block.
fn push_constants_rs() -> String {
    let mut s = String::from("// Generated by build.rs from src/abi/table.rs: do not edit.\n");
    for (name, value, doc) in abi::SHARED_CONSTANTS {
        writeln!(s, "/// {doc}\npub const {name}: u32 = {value};").expect("write to String");
    }
    s.push_str(
        "/// The push-constant block of every kernel, laid out as the GLSL block generated from the same table.\n\
         #[repr(C)]\n#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]\n\
         pub struct PushConstants {\n",
    );
    for (name, doc) in abi::PUSH_FIELDS {
        writeln!(s, "    /// {doc}\n    pub {name}: u32,").expect("write to String");
    }
    s.push_str("}\n");
    s
}

/// The module list: each module's key and its SPIR-V, deflated, from `spirv` (the committed
/// `spirv/`, or what the `glsl` feature compiled).
fn modules_rs(jobs: &[Job], spirv: &Path) -> String {
    let mut s = String::from("// Generated by build.rs from src/abi/table.rs: do not edit.\n");
    let embed = |file: &str| {
        let path = spirv.join(format!("{file}.deflate"));
        if !path.is_file() {
            panic!(
                "{} is missing: spirv/ does not hold every module of src/abi/table.rs; refresh it with `{REFRESH}` \
                 (the `glsl` feature, on by default, compiles glsl/) and commit spirv/",
                path.display()
            );
        }
        let path = path.to_str().unwrap_or_else(|| panic!("{}: the path is not UTF-8", path.display()));
        format!("Embedded::new({file:?}, include_bytes!({path:?}))")
    };
    let kernels: Vec<&Job> = jobs.iter().filter(|j| j.key.is_some()).collect();
    writeln!(
        s,
        "/// Every sorting kernel's module, in the order of the variant table.\n\
         pub(crate) static MODULES: [(ModuleKey, Embedded); {}] = [",
        kernels.len()
    )
    .expect("write to String");
    for job in kernels {
        let key = job.key.as_ref().expect("a kernel");
        let form = match key.form {
            Form::Chain(codes) => format!("Form::Chain(&{codes:?})"),
            form => format!("Form::{form:?}"),
        };
        writeln!(
            s,
            "    (ModuleKey {{ family: KernelFamily::{:?}, kind: PassKind::{:?}, width: KeyWidth::{:?}, payload: Payload::{:?}, form: {form} }}, {}),",
            key.family,
            key.kind,
            key.width,
            key.payload,
            embed(&job.file)
        )
        .expect("write to String");
    }
    s.push_str("];\n");
    for job in jobs.iter().filter(|j| j.key.is_none()) {
        let name = job.file.trim_end_matches(".spv").to_uppercase();
        writeln!(s, "/// The `{}` kernel.\npub(crate) static {name}: Embedded = {};", job.file, embed(&job.file))
            .expect("write to String");
    }
    s
}

fn write(path: &Path, contents: &str) {
    write_bytes(path, contents.as_bytes());
}

fn write_bytes(path: &Path, contents: &[u8]) {
    fs::write(path, contents).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// The `glsl` feature: shaderc compiles the kernels, and `spirv/` is checked against them.
#[cfg(feature = "glsl")]
mod compile {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    use miniz_oxide::deflate::compress_to_vec;

    use super::*;

    /// Compiles every module into `OUT_DIR/spirv` and the particle example's shaders, checks the
    /// result against the committed `spirv/` (refreshing it on request), and returns the folder of
    /// the deflated modules to embed: those just compiled, so an edit to `glsl/` runs at once.
    pub fn build(jobs: &[Job], glsl: &Path, out: &Path, committed: &Path) -> PathBuf {
        println!("cargo:rerun-if-env-changed=SHADERC_LIB_DIR");
        println!("cargo:rerun-if-env-changed=BITONIC_VK_UPDATE_SPIRV");
        println!("cargo:rerun-if-env-changed=CI");
        println!("cargo:rerun-if-env-changed=BITONIC_VK_STRICT_SPIRV");
        report_shaderc();
        let compiler = shaderc::Compiler::new().expect("shaderc compiler");
        let spirv = out.join("spirv");
        fs::create_dir_all(&spirv).unwrap_or_else(|e| panic!("cannot create {}: {e}", spirv.display()));
        let sources = sources_digest(glsl, out);
        let includes = [glsl.to_path_buf(), family_dir(glsl, KernelFamily::Unrolled), out.to_path_buf()];
        compile_all(&compiler, jobs, &includes, &spirv, sources);
        check_committed(jobs, &spirv, committed);
        compile_particle_shaders(&compiler, &glsl.join("particles"), &out.join("particles"));
        spirv
    }

    /// Compares each module just compiled with its committed copy in `spirv/`, and with
    /// `BITONIC_VK_UPDATE_SPIRV=1` writes the ones that differ there and removes those no module
    /// has. Stale `spirv/` fails the repository's CI builds (`CI` set, and
    /// `BITONIC_VK_STRICT_SPIRV` from `.cargo/config.toml`) and warns elsewhere: a developer editing
    /// `glsl/` runs the new kernels at once, and a crate built on this one with its own shaderc
    /// is never failed for bytes that shaderc compiles differently.
    fn check_committed(jobs: &[Job], built: &Path, committed: &Path) {
        let update = env::var("BITONIC_VK_UPDATE_SPIRV").is_ok_and(|v| !v.is_empty() && v != "0");
        if update {
            fs::create_dir_all(committed).unwrap_or_else(|e| panic!("cannot create {}: {e}", committed.display()));
        }
        let mut stale = Vec::new();
        for job in jobs {
            let name = format!("{}.deflate", job.file);
            let ours = fs::read(built.join(&job.file)).unwrap_or_else(|e| panic!("cannot read {}: {e}", job.file));
            // Compared decoded, so that another miniz_oxide's encoding is no change.
            let theirs =
                fs::read(committed.join(&name)).ok().and_then(|d| miniz_oxide::inflate::decompress_to_vec(&d).ok());
            if theirs.as_deref() != Some(&ours[..]) {
                if update {
                    let deflated = fs::read(built.join(&name)).unwrap_or_else(|e| panic!("cannot read {name}: {e}"));
                    write_bytes(&committed.join(&name), &deflated);
                }
                stale.push(name);
            }
        }
        let wanted: Vec<String> = jobs.iter().map(|j| format!("{}.deflate", j.file)).collect();
        for entry in fs::read_dir(committed).into_iter().flatten().filter_map(|e| e.ok()) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".spv.deflate") && !wanted.contains(&name) {
                if update {
                    fs::remove_file(entry.path())
                        .unwrap_or_else(|e| panic!("cannot remove {}: {e}", entry.path().display()));
                }
                stale.push(format!("{name} (no module)"));
            }
        }
        if stale.is_empty() {
            return;
        }
        stale.sort();
        // A few names say enough: a change to a shared header changes every module.
        let mut names = stale.iter().take(4).cloned().collect::<Vec<_>>().join(", ");
        if stale.len() > 4 {
            names += &format!(" and {} more", stale.len() - 4);
        }
        if update {
            println!(
                "cargo:warning=spirv/: wrote or removed {} files to match glsl/ ({names}); commit spirv/",
                stale.len()
            );
            return;
        }
        let message = format!(
            "spirv/ is not what glsl/ compiles to: {} of its modules differ ({names}). Refresh it with `{REFRESH}` \
             and commit spirv/. The committed modules are compiled by Debian 12's shaderc as `.ci/setup.sh` links \
             it; another shaderc may compile other bytes",
            stale.len()
        );
        let set = |name: &str| env::var(name).is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        if set("CI") && set("BITONIC_VK_STRICT_SPIRV") {
            panic!("{message}");
        }
        println!("cargo:warning={message}; this build embeds what glsl/ compiled to");
    }

    /// Says which shaderc the build links, as shaderc-sys chooses it: the libraries in
    /// `SHADERC_LIB_DIR` (`.cargo/config.toml` points it at `target/shaderc`, where `.ci/setup.sh`
    /// makes a combined archive of the system's shaderc, glslang and SPIRV-Tools), else shaderc-sys
    /// searches the system and builds from source where it finds nothing usable.
    fn report_shaderc() {
        let dir = env::var_os("SHADERC_LIB_DIR").map(PathBuf::from);
        let lib = dir.as_ref().map(|d| d.join("libshaderc_combined.a")).filter(|p| p.is_file());
        match (lib, dir) {
            (Some(lib), _) => println!("cargo:warning=shaderc: the system's, linked from {}", lib.display()),
            (None, Some(dir)) => println!(
                "cargo:warning=shaderc: built from source (no libshaderc_combined.a in {}; `bash .ci/setup.sh` makes \
                 one from Debian's libshaderc-dev, glslang-dev and spirv-tools)",
                dir.display()
            ),
            (None, None) => {
                println!("cargo:warning=shaderc: SHADERC_LIB_DIR unset: shaderc-sys searches the system, else builds from source")
            }
        }
    }

    /// A digest of every input a module's SPIR-V depends on besides its macros: the code (not the
    /// comments) of the shaders in `glsl/` and `glsl/unrolled/` and of the generated header.
    fn sources_digest(glsl: &Path, out: &Path) -> u64 {
        let mut files: Vec<PathBuf> = [glsl.to_path_buf(), family_dir(glsl, KernelFamily::Unrolled)]
            .iter()
            .flat_map(|dir| fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display())))
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        files.push(out.join("rules.glsl"));
        files.push(out.join("interface.glsl"));
        let mut digest = Fnv::default();
        for file in files {
            digest.add(file.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default());
            let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
            // Comments change no module (the SPIR-V carries no source), so they change no key.
            for line in text.lines() {
                let code = line.split("//").next().unwrap_or_default().trim_end();
                if !code.is_empty() {
                    digest.add(code.as_bytes());
                }
            }
        }
        digest.0
    }

    /// FNV-1a, 64 bits: enough to tell whether a module's inputs changed since its last build.
    struct Fnv(u64);

    impl Default for Fnv {
        fn default() -> Fnv {
            Fnv(0xcbf2_9ce4_8422_2325)
        }
    }

    impl Fnv {
        fn add(&mut self, bytes: &[u8]) {
            for &b in bytes {
                self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
            }
            self.0 = (self.0 ^ 0xff).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Compiles every job on as many threads as cargo gives the build (`NUM_JOBS`) into `spirv/`,
    /// skipping a module whose `.spv` a build before made from the same inputs (its `.key` file). A
    /// failure panics with the file, line and macros (on its thread; the scope re-raises it).
    fn compile_all(compiler: &shaderc::Compiler, jobs: &[Job], includes: &[PathBuf], spirv: &Path, sources: u64) {
        let threads = env::var("NUM_JOBS").ok().and_then(|j| j.parse::<usize>().ok()).unwrap_or(1).clamp(1, jobs.len());
        let next = AtomicUsize::new(0);
        let failures = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    while let Some(job) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                        if let Err(e) = build_module(compiler, job, includes, spirv, sources) {
                            failures.lock().unwrap_or_else(|e| e.into_inner()).push(e);
                        }
                    }
                });
            }
        });
        let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
        if !failures.is_empty() {
            panic!("GLSL compilation failed:\n{}", failures.join("\n"));
        }
    }

    /// One module's `.spv` and its deflated copy, unless a build before made them from the same
    /// inputs (the key of `sources` and its macros in its `.key` file).
    fn build_module(
        compiler: &shaderc::Compiler,
        job: &Job,
        includes: &[PathBuf],
        spirv: &Path,
        sources: u64,
    ) -> Result<(), String> {
        let mut digest = Fnv(sources);
        digest.add(format!("{:?} {}", job.macros, job.optimize).as_bytes());
        let key = format!("{:016x}", digest.0);
        let (spv, key_file) = (spirv.join(&job.file), spirv.join(format!("{}.key", job.file)));
        let deflated = spirv.join(format!("{}.deflate", job.file));
        if fs::read_to_string(&key_file).is_ok_and(|k| k == key) {
            if let (Ok(bytes), false) = (fs::read(&spv), deflated.is_file()) {
                write_bytes(&deflated, &compress_to_vec(&bytes, 10));
            }
            if deflated.is_file() {
                return Ok(());
            }
        }
        let bytes = compile(compiler, job, includes)?;
        write_bytes(&spv, &bytes);
        write_bytes(&deflated, &compress_to_vec(&bytes, 10));
        write(&key_file, &key);
        Ok(())
    }

    fn compile(compiler: &shaderc::Compiler, job: &Job, includes: &[PathBuf]) -> Result<Vec<u8>, String> {
        let text = fs::read_to_string(&job.source).map_err(|e| format!("cannot read {}: {e}", job.source.display()))?;
        let mut options = shaderc::CompileOptions::new().map_err(|e| format!("shaderc options: {e}"))?;
        options.set_target_env(shaderc::TargetEnv::Vulkan, shaderc::EnvVersion::Vulkan1_1 as u32);
        options.set_optimization_level(if job.optimize {
            shaderc::OptimizationLevel::Performance
        } else {
            shaderc::OptimizationLevel::Zero
        });
        options.set_warnings_as_errors();
        for (name, value) in &job.macros {
            options.add_macro_definition(name, Some(value));
        }
        let search = includes.to_vec();
        options.set_include_callback(move |requested, _kind, _from, _depth| {
            let path = search
                .iter()
                .map(|dir| dir.join(requested))
                .find(|p| p.is_file())
                .ok_or_else(|| format!("#include \"{requested}\": not in glsl/ nor generated"))?;
            let content = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(shaderc::ResolvedInclude { resolved_name: path.display().to_string(), content })
        });
        let name = job.source.display().to_string();
        compiler
            .compile_into_spirv(&text, shaderc::ShaderKind::Compute, &name, "main", Some(&options))
            .map(|artifact| artifact.as_binary_u8().to_vec())
            // The message names file:line.
            .map_err(|e| format!("{} (macros {:?}):\n{e}", job.file, job.macros))
    }

    /// Compiles `glsl/particles/{depth.comp,sprite.vert,sprite.frag}` (which may include files of that
    /// directory) to `<out>/<file name>.spv`, for `examples/particles` and its tests.
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
                .unwrap_or_else(|e| panic!("GLSL compilation failed:\n{e}"));
            write_bytes(&out.join(format!("{file}.spv")), artifact.as_binary_u8());
        }
    }
}
