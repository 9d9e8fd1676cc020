//! The arguments more than one command takes: the device (every command), the tuning knobs, the
//! order and where the GPU time starts (`bench` and `passes`).

use bitonic_vk::{Context, ContextDesc, DeviceSelector, Error, KernelFamily, Order, PipelineCacheDir, Tuning};
use clap::{Args, ValueEnum};

#[derive(Args)]
pub struct GpuArgs {
    /// Device to use: an index from `bitonic-vk devices`, or part of a device's name
    /// (default: BITONIC_VK_DEVICE, else a discrete GPU, integrated, virtual, then CPU).
    #[arg(long, global = true, value_name = "INDEX|NAME")]
    pub device: Option<String>,
    /// Turn on the Khronos validation layer with synchronization validation (also
    /// BITONIC_VK_VALIDATION=1).
    #[arg(long, global = true)]
    pub validation: bool,
    /// Keep no pipeline cache on disk: every run compiles its pipelines (default: a cache in
    /// BITONIC_VK_PIPELINE_CACHE, else $XDG_CACHE_HOME/bitonic-vk, else ~/.cache/bitonic-vk).
    #[arg(long, global = true)]
    pub no_pipeline_cache: bool,
}

impl GpuArgs {
    /// The context these options ask for, with a note on stderr where its pipeline cache file
    /// was ignored.
    pub fn context(&self) -> Result<Context, Error> {
        let ctx = Context::new(&self.desc())?;
        if let Some(note) = ctx.pipeline_cache_note() {
            eprintln!("note: {note}");
        }
        Ok(ctx)
    }

    pub fn desc(&self) -> ContextDesc {
        ContextDesc {
            device: self.device.as_deref().map(|d| d.parse().unwrap_or(DeviceSelector::Name(d.to_owned()))),
            validation: self.validation.then_some(true),
            pipeline_cache: if self.no_pipeline_cache { PipelineCacheDir::Off } else { PipelineCacheDir::Default },
        }
    }
}

/// The knobs of `bench` and `passes` ([`Tuning`]): each left out takes the default, where it
/// measured fastest.
#[derive(Args)]
pub struct TuningArgs {
    /// Cap the elements per tile of the local kernels (a power of two); the default is the
    /// largest that fits the device's shared memory.
    #[arg(long, value_name = "ELEMENTS")]
    max_tile: Option<u32>,
    /// Cap the substages fused in registers per global pass and per local chunk (1 to 6; by
    /// default 6 for u32/i32/f32 keys alone, else 5); 1 is one substage per global pass, as
    /// NVIDIA's CUDA sample does.
    #[arg(long, value_name = "N")]
    pub max_fused: Option<u32>,
    /// Invocations per workgroup of the local kernels (a power of two; default: a quarter of the
    /// tile, at most 512 with 4-byte keys and 1024 with 8-byte keys).
    #[arg(long, value_name = "N")]
    local_wg: Option<u32>,
    /// Invocations per workgroup of the global merges (a power of two; default 256).
    #[arg(long, value_name = "N")]
    global_wg: Option<u32>,
    /// Substages per shared-memory chunk of the local kernels (1 to 5; default 3 in small sorts
    /// and for 4-byte keys alone in segment tiles of 2048, 5 for 4-byte keys alone in tiles of
    /// 8192 or more, else 4).
    #[arg(long, value_name = "N")]
    local_chunk: Option<u32>,
    /// The most workgroups of the tile sort, of a local merge and of a segment pass, each looping
    /// over tiles and loading the next ahead (0: one tile per workgroup; default: the device's
    /// multiprocessors where it reports them, else 0).
    #[arg(long, value_name = "N")]
    merge_groups: Option<u32>,
    /// Every pass after the tile sort as a segment pass (on), or none (off); default: where they
    /// paid, on devices that report their multiprocessors.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    segments: Option<bool>,
    /// Elements of the run a segment pass carries uncompared (a power of two from 2); with
    /// --segment-run-long, the short run. Default: 16 or 8 by the sort's size.
    #[arg(long, value_name = "N")]
    segment_run: Option<u32>,
    /// The long run (a power of two, at least --segment-run): each carrying pass takes it
    /// wherever that adds no pass.
    #[arg(long, value_name = "N")]
    segment_run_long: Option<u32>,
    /// Segment passes on a pipeline made for their shape: on = every shape, off = none; by
    /// default the shapes whose chain of chunks has a module of its own.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    shaped_segments: Option<bool>,
    /// Tiles of u32 pairs with 16-bit origins in place of their values (needs shaderInt16): on =
    /// always, off = never; by default where only that tile gives a sort one coset per workgroup.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    tile_origins: Option<bool>,
    /// The build of the local and global kernels: compact (one network per chunk size, loops
    /// rolled) or unrolled (every chunk size inlined); default compact on a CPU device, unrolled on
    /// a GPU.
    #[arg(long, value_name = "compact|unrolled")]
    kernels: Option<KernelsArg>,
}

/// A build of the kernels on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KernelsArg {
    Compact,
    Unrolled,
}

impl KernelsArg {
    pub fn family(self) -> KernelFamily {
        match self {
            KernelsArg::Compact => KernelFamily::Compact,
            KernelsArg::Unrolled => KernelFamily::Unrolled,
        }
    }
}

impl TuningArgs {
    pub fn tuning(&self) -> Tuning {
        let mut t = Tuning::default();
        t.max_tile = self.max_tile;
        t.max_fused_substages = self.max_fused;
        t.local_workgroup_size = self.local_wg;
        t.global_workgroup_size = self.global_wg;
        t.local_chunk_substages = self.local_chunk;
        t.merge_workgroups = self.merge_groups;
        t.segment_merges = self.segments;
        t.segment_run = self.segment_run;
        t.segment_run_long = self.segment_run_long;
        t.shaped_segments = self.shaped_segments;
        t.tile_origins = self.tile_origins;
        t.kernels = self.kernels.map(KernelsArg::family);
        t
    }
}

/// Where the GPU time of `bench` and `passes` starts (`SorterDesc::time_from_transfer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TimeFrom {
    /// At the end of an empty compute dispatch after the input's copy, standing for the pass that
    /// wrote the keys.
    Compute,
    /// At the end of the input's copy.
    Transfer,
}

/// A sort order on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
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
