//! The one source of what the host and the shaders share, read by the crate and by `build.rs`
//! (through `#[path]`): the push-constant block and its flag bits, the specialization constants,
//! and the table of SPIR-V modules (kernel, key width, payload, form). `build.rs` writes the GLSL
//! header and the module list from it; nothing here may use anything outside `std`.

/// The push-constant block of every kernel, in order: name and meaning. Each field is a `uint`.
pub const PUSH_FIELDS: &[(&str, &str)] = &[
    ("n", "elements per array, 0..=2^31; indices >= n are virtual +infinity keys, never read or written"),
    (
        "inc",
        "the comparator stride: global_merge: its largest, a power of two >= TILE; windowed local_merge: its \
         largest (TILE << (WINDOW - 1)); unused by the other kernels",
    ),
    (
        "dir",
        "the direction of the pass's first substage in the flip form: 1 where it is a stage's flip (i against its \
         mirror in its block), 0 where it compares i with i + inc; every comparator puts the smaller image first",
    ),
    (
        "shape",
        "tile_sort: log2 of the largest block it sorts, 0..=log2(TILE); segment_merge: its shape, low-run bits | \
         high-run bits << SEGMENT_HIGH_SHIFT | SEGMENT_TAIL | q << SEGMENT_HIGH_BIT_SHIFT (q the element bit of its \
         high run's smallest stride); unused by the other kernels",
    ),
    (
        "loop_stride",
        "a looping tile_sort, local_merge or segment_merge (Form::Looping, or a local_merge without windows): the \
         pass's workgroups, each taking every loop_stride-th tile or coset; 0: one tile or coset per workgroup",
    ),
    ("group_offset", "index of this dispatch's first workgroup within its pass (a pass may be split over dispatches)"),
    ("flags", "key kind (KEY_KIND_MASK) and the FLAG_* bits"),
];

/// Constants shared by the host and the shaders: name, value, meaning.
pub const SHARED_CONSTANTS: &[(&str, u32, &str)] = &[
    ("KEY_KIND_MASK", 0x3, "bits of `flags` holding the key kind"),
    ("KEY_U32", 0, "keys are u32 (u64 in the 8-byte builds)"),
    ("KEY_I32", 1, "keys are i32 (i64 in the 8-byte builds), two's complement"),
    ("KEY_F32", 2, "keys are f32 bits (f64 in the 8-byte builds), in IEEE total order"),
    ("FLAG_DESCENDING", 0x4, "the order image is complemented: an ascending network sorts in descending key order"),
    ("FLAG_TO_IMAGE_ON_LOAD", 0x8, "the kernel maps keys to their order image as it loads them (a sort's first pass)"),
    ("FLAG_FROM_IMAGE_ON_STORE", 0x10, "the kernel maps order images back to keys as it stores them (the last pass)"),
    ("SEGMENT_HIGH_SHIFT", 8, "segment_merge: where its high-run length sits in `shape`"),
    ("SEGMENT_TAIL", 0x10000, "segment_merge: bit of `shape` set when it first runs its low run's half-cleaners"),
    ("SEGMENT_HIGH_BIT_SHIFT", 24, "segment_merge: where the element bit of its high run's smallest stride sits"),
    (
        "NEXT_STAGE_SHIFT",
        8,
        "where `flags` holds the first stage of the next pass (0 on the last pass): with COUNTED, a pass stores keys, \
         not images, when the count needs no later stage",
    ),
    ("NEXT_STAGE_MASK", 0xFF, "the bits of the next pass's first stage, after the shift"),
    ("ARGS_PER_DISPATCH", 3, "dispatch_args: the dispatch rules one workgroup of it takes in its push constants"),
];

/// The fields of one dispatch's rule (a `DispatchRule`): what `dispatch_groups` below needs to
/// trim one dispatch of a plan recorded for n to a GPU-side count. Each is a `uint`.
pub const DISPATCH_RULE_FIELDS: &[(&str, &str)] = &[
    (
        "a",
        "log2 of the elements that share a unit's low bits: a tile, a window, a segment's low run; 0 for a global pass",
    ),
    ("p", "where the unit index skips `k` element bits: a global pass's smallest stride, a segment's gap"),
    ("k", "element bits a unit spans above `p`: a global pass's substages, a segment's high run and flip"),
    ("d", "units per workgroup: a global pass's invocations, a segment's cosets per workgroup, else 1"),
    ("cap", "the most workgroups: the pass's loop stride where it loops, else all it has for n"),
    ("offset", "the dispatch's first workgroup within its pass"),
    ("size", "the dispatch's workgroups for n"),
    (
        "first_stage",
        "the stage of the pass's first substage: the count needs it when that is at most log2 of the count",
    ),
];

/// One rule: its function's name, its parameters, and its steps as (value, expression).
pub type Rule = (&'static str, &'static [&'static str], &'static [(&'static str, &'static str)]);

/// Rules the host and the shaders both run, as (function, parameters, steps): each step names a
/// value and gives the expression for it, in the arithmetic GLSL and Rust share (u32 values and
/// literals, `+ - * / & >> <<`, `min`, `le(x, y)`: 1 if x <= y else 0, `ceil_log2`); the last
/// step is the result. `build.rs` writes them as GLSL functions (`rules.glsl`) and as Rust
/// functions (`rules.rs`, in this module), so the two cannot drift apart.
pub const RULES: &[Rule] = &[
    (
        // The workgroups of one dispatch of a pass recorded for n, trimmed to the count: those
        // whose first element is below min(count, n), none where the count needs no substage of
        // the pass. A unit's first element grows with its index, so they are the first ones.
        "dispatch_groups",
        &["count", "n", "a", "p", "k", "d", "cap", "offset", "size", "first_stage"],
        &[
            ("c", "min(count, n)"),
            // Units of 2^a elements whose first element is below c.
            ("low", "(c >> a) + min(c & ((1 << a) - 1), 1)"),
            // Of those, the ones whose index leaves bits p .. p + k clear: a unit per group.
            ("units", "((low >> (p + k)) << p) + min(low & ((1 << (p + k)) - 1), 1 << p)"),
            ("groups", "min(cap, (units + d - 1) / d) * le(first_stage, ceil_log2(c))"),
            ("x", "min(groups - min(groups, offset), size)"),
        ],
    ),
    (
        // Whether a pass stores keys rather than order images: the sort's last pass, or with a
        // GPU-side count (`counted` 1) the last pass the count needs.
        "stores_keys",
        &["flags", "counted", "count"],
        &[
            ("last", "min(flags & FLAG_FROM_IMAGE_ON_STORE, 1)"),
            ("next", "(flags >> NEXT_STAGE_SHIFT) & NEXT_STAGE_MASK"),
            ("cut", "counted * min(next, 1) * (1 - le(next, ceil_log2(count)))"),
            ("stores", "min(last + cut, 1)"),
        ],
    ),
];

/// The specialization constants, by id (their index here): name, GLSL type, default, meaning.
/// Each pipeline is made with one value for each; a kernel ignores those it does not read.
pub const SPEC_CONSTANTS: &[(&str, &str, u32, &str)] = &[
    ("WG_SIZE", "uint", 256, "invocations per workgroup (local_size_x)"),
    ("TILE", "uint", 2048, "elements per tile of the local kernels, a power of two"),
    ("FUSED", "uint", 4, "substages per register group: exactly per global pass, at most per local chunk (1..6)"),
    ("WINDOW", "uint", 0, "local_merge: tiles per window, log2 (0, 1 or 2)"),
    ("SHAPE_LOG_BLOCK", "uint", 0, "shaped segment_merge: its pass's `shape`"),
    ("SHAPE_DIR", "uint", 0, "shaped segment_merge: its pass's `dir`"),
    ("SHAPE_CHUNK0", "uint", 0, "shaped segment_merge: chunk descriptors (SegmentChunk::encode), 0 for none"),
    ("SHAPE_CHUNK1", "uint", 0, ""),
    ("SHAPE_CHUNK2", "uint", 0, ""),
    ("SHAPE_CHUNK3", "uint", 0, ""),
    ("SHAPE_CHUNK4", "uint", 0, ""),
    ("SHAPE_CHUNK5", "uint", 0, ""),
    ("SHAPE_CHUNK6", "uint", 0, ""),
    ("SHAPE_CHUNK7", "uint", 0, ""),
    ("BATCHED", "bool", 0, "workgroup row y sorts array y, of n elements from element y * n"),
    ("COUNTED", "bool", 0, "each array sorts min(count, n) elements, count read from binding 2"),
    (
        "BATCH",
        "uint",
        4,
        "compact local kernels: elements per invocation moved between the buffers and the tile at a time (1..16, \
         at most TILE / WG_SIZE)",
    ),
];

/// Ids of the specialization constants the host sets by name.
pub mod spec {
    /// `WG_SIZE`.
    pub const WG_SIZE: usize = 0;
    /// `TILE`.
    pub const TILE: usize = 1;
    /// `FUSED`.
    pub const FUSED: usize = 2;
    /// `WINDOW`.
    pub const WINDOW: usize = 3;
    /// `SHAPE_LOG_BLOCK`.
    pub const SHAPE_LOG_BLOCK: usize = 4;
    /// `SHAPE_DIR`.
    pub const SHAPE_DIR: usize = 5;
    /// `SHAPE_CHUNK0`; the other chunks follow it.
    pub const SHAPE_CHUNK0: usize = 6;
    /// How many chunk descriptors a shaped segment pass takes.
    pub const SHAPE_CHUNKS: usize = 8;
    /// `BATCHED`.
    pub const BATCHED: usize = 14;
    /// `COUNTED`.
    pub const COUNTED: usize = 15;
    /// `BATCH`.
    pub const BATCH: usize = 16;
    /// How many there are.
    pub const COUNT: usize = 17;
}

/// The four kernels, one per kind of pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PassKind {
    /// Sorts each tile in shared memory (stages 1..=log2 tile); the first pass of every sort.
    TileSort,
    /// Up to six substages with strides of a tile or more, straight on the buffers.
    GlobalMerge,
    /// The substages with strides below a tile, in shared memory; the last pass of a stage.
    LocalMerge,
    /// A run of substages that may cross one stage boundary, on cosets of a tile's size in
    /// shared memory; every pass after the tile sort of a segmented plan.
    SegmentMerge,
}

impl PassKind {
    /// Every kind.
    pub const ALL: [PassKind; 4] =
        [PassKind::TileSort, PassKind::GlobalMerge, PassKind::LocalMerge, PassKind::SegmentMerge];

    /// The kernel's name, as its file in `glsl/`.
    pub fn name(self) -> &'static str {
        match self {
            PassKind::TileSort => "tile_sort",
            PassKind::GlobalMerge => "global_merge",
            PassKind::LocalMerge => "local_merge",
            PassKind::SegmentMerge => "segment_merge",
        }
    }
}

/// How wide a key is: the kernels come in a build per width.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyWidth {
    /// 4-byte keys: `u32`, `i32`, `f32`.
    #[default]
    Bits32,
    /// 8-byte keys: `u64`, `i64`, `f64`.
    Bits64,
}

impl KeyWidth {
    /// Bytes per key.
    pub fn bytes(self) -> u32 {
        match self {
            KeyWidth::Bits32 => 4,
            KeyWidth::Bits64 => 8,
        }
    }
}

/// What travels with the keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Payload {
    /// Keys alone.
    Keys,
    /// Keys, and u32 values moved with them.
    Pairs,
    /// 4-byte keys and u32 values whose tiles hold each key's 16-bit origin in shared memory in
    /// place of its value (6 bytes an element instead of 8, so tiles twice as large); needs the
    /// device's `shaderInt16`.
    PairsOrigins,
}

impl Payload {
    /// Whether values move with the keys.
    pub fn has_values(self) -> bool {
        self != Payload::Keys
    }
}

/// How a kernel is built beside its plain form. Each form is a module of its own only where it
/// cannot be a specialization constant: a different declaration, capability or optimiser input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Form {
    /// One tile or coset per workgroup.
    Plain,
    /// Each workgroup loops over tiles or cosets, loading the next ahead; its element buffers are
    /// `volatile`, which a specialization constant cannot change (`LOOPING`).
    Looping,
    /// The tile sort's tile in registers and subgroup shuffles (`SMALL`), four elements per
    /// invocation for keys, two for pairs; needs the subgroup shuffle capability.
    Small,
    /// `Small` on two elements per invocation for keys (`SMALL_TWO_SLOTS`).
    SmallTwoSlots,
    /// segment_merge with its shape and chunks from specialization constants (`SHAPED`),
    /// unoptimised: the optimiser would inline every chunk kind into every slot.
    Shaped,
    /// `Shaped` with each chunk's kind and size compiled in (`SHAPE_CHAIN`, one module per chain
    /// of [`SegmentChunk::chain_code`](crate::segment::SegmentChunk::chain_code)s), so
    /// the optimiser takes it.
    Chain(&'static [u32]),
}

/// The two builds of the local and global kernels: each kernel's module of the unrolled family
/// holds every chunk size and variant inlined as literals; the compact family runs one network per
/// chunk in rolled loops, its sizes from the specialization constants (glsl/, beside the unrolled
/// family's glsl/unrolled/).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelFamily {
    /// glsl/unrolled/.
    #[default]
    Unrolled,
    /// glsl/.
    Compact,
}

impl std::str::FromStr for KernelFamily {
    type Err = String;

    /// `compact` or `unrolled`, as the command line and the test environment spell them.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "compact" => Ok(KernelFamily::Compact),
            "unrolled" => Ok(KernelFamily::Unrolled),
            other => Err(format!("`{other}`: expected compact or unrolled")),
        }
    }
}

/// One SPIR-V module: which kernel, for which keys and payload, in which form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModuleKey {
    /// The family.
    pub family: KernelFamily,
    /// The kernel.
    pub kind: PassKind,
    /// The key width.
    pub width: KeyWidth,
    /// The payload.
    pub payload: Payload,
    /// The form.
    pub form: Form,
}

/// Every (payload, key width) the kernels are built for: 8-byte keys have no origins build (an
/// origin beside an 8-byte key would not double the tile).
pub const BUILDS: [(Payload, KeyWidth); 5] = [
    (Payload::Keys, KeyWidth::Bits32),
    (Payload::Pairs, KeyWidth::Bits32),
    (Payload::PairsOrigins, KeyWidth::Bits32),
    (Payload::Keys, KeyWidth::Bits64),
    (Payload::Pairs, KeyWidth::Bits64),
];

/// The payload whose build a kernel runs for `payload`: global_merge never holds a tile, so
/// origins take the pairs' build.
pub fn module_payload(kind: PassKind, payload: Payload) -> Payload {
    match (kind, payload) {
        (PassKind::GlobalMerge, Payload::PairsOrigins) => Payload::Pairs,
        _ => payload,
    }
}

/// The payloads and widths a family is built for: the compact family has no tiles of origins.
pub fn builds(family: KernelFamily) -> Vec<(Payload, KeyWidth)> {
    BUILDS
        .into_iter()
        .filter(|(payload, _)| family == KernelFamily::Unrolled || *payload != Payload::PairsOrigins)
        .collect()
}

/// The forms other than [`Form::Plain`] and [`Form::Chain`] that a kernel of a family is built in
/// for a payload and key width.
pub fn extra_forms(family: KernelFamily, kind: PassKind, payload: Payload, width: KeyWidth) -> Vec<Form> {
    let narrow = width == KeyWidth::Bits32;
    match kind {
        PassKind::SegmentMerge if family == KernelFamily::Compact => vec![Form::Looping],
        PassKind::TileSort => {
            let mut forms = vec![Form::Looping];
            // Origins' tiles of at most 2048 pairs fit shared memory with their values.
            if narrow && payload != Payload::PairsOrigins {
                forms.push(Form::Small);
            }
            if narrow && payload == Payload::Keys {
                forms.push(Form::SmallTwoSlots);
            }
            forms
        }
        PassKind::SegmentMerge => vec![Form::Looping, Form::Shaped],
        PassKind::GlobalMerge | PassKind::LocalMerge => Vec::new(),
    }
}

/// Which segment passes get a module per chain of chunks ([`Form::Chain`]): those of the segment
/// plans of `levels` in tiles of 2^`tile_log2`, run on local chunks of each size in `chunks`.
/// Pairs on chunks of 4 and the tiles of 4096 and 8192 lost with chain modules (docs/LEVERS.md).
pub struct ChainBuild {
    /// The payload.
    pub payload: Payload,
    /// The key width.
    pub width: KeyWidth,
    /// log2 of the tile.
    pub tile_log2: u32,
    /// The local chunk sizes.
    pub chunks: &'static [u32],
    /// The lengths, as log2 of the network's size.
    pub levels: std::ops::RangeInclusive<u32>,
}

/// The chain modules built: 4-byte keys alone on chunks of 3 and 4 in every sort of 3 to 2^19 /
/// 2^11 tiles of 2048, 4-byte pairs on chunks of 3 in sorts of up to 2^15.
pub const CHAIN_BUILDS: &[ChainBuild] = &[
    ChainBuild { payload: Payload::Keys, width: KeyWidth::Bits32, tile_log2: 11, chunks: &[3, 4], levels: 13..=19 },
    ChainBuild { payload: Payload::Pairs, width: KeyWidth::Bits32, tile_log2: 11, chunks: &[3], levels: 13..=15 },
];

/// The macros a module is compiled with: name and value.
pub fn macros(key: &ModuleKey) -> Vec<(&'static str, String)> {
    let mut m: Vec<(&'static str, String)> = Vec::new();
    let on = |name: &'static str| (name, "1".to_string());
    if key.width == KeyWidth::Bits64 {
        m.push(on("KEY64"));
    }
    match key.payload {
        Payload::Keys => {}
        Payload::Pairs => m.push(on("PAIRS")),
        Payload::PairsOrigins => m.extend([on("PAIRS"), on("ORIGINS")]),
    }
    match key.form {
        Form::Plain => {}
        Form::Looping => m.push(on("LOOPING")),
        Form::Small => m.push(on("SMALL")),
        Form::SmallTwoSlots => m.push(on("SMALL_TWO_SLOTS")),
        Form::Shaped => m.push(on("SHAPED")),
        Form::Chain(codes) => {
            m.extend([on("SHAPED"), on("SHAPE_CHAIN")]);
            for (slot, name) in SHAPE_CODE_MACROS.iter().enumerate() {
                m.push((*name, codes.get(slot).copied().unwrap_or(0).to_string()));
            }
        }
    }
    m
}

/// The macros of a chain's chunk codes, one per chunk slot.
const SHAPE_CODE_MACROS: [&str; spec::SHAPE_CHUNKS] = [
    "SHAPE_CODE0",
    "SHAPE_CODE1",
    "SHAPE_CODE2",
    "SHAPE_CODE3",
    "SHAPE_CODE4",
    "SHAPE_CODE5",
    "SHAPE_CODE6",
    "SHAPE_CODE7",
];
