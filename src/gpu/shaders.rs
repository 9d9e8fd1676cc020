//! The embedded SPIR-V: every module of the variant table (`src/abi/table.rs`), deflated in
//! `spirv/` (or compiled by `build.rs` with the `glsl` feature) and found here by its key.

use std::sync::OnceLock;

use crate::abi::{module_payload, Form, KernelFamily, KeyWidth, ModuleKey, PassKind, Payload};
use crate::error::{Error, Result};

/// One embedded module: its SPIR-V deflated (the unrolled kernels shrink to about a third), and
/// the words once decoded (once per process).
pub(crate) struct Embedded {
    name: &'static str,
    deflated: &'static [u8],
    words: OnceLock<Box<[u32]>>,
}

impl Embedded {
    const fn new(name: &'static str, deflated: &'static [u8]) -> Embedded {
        Embedded { name, deflated, words: OnceLock::new() }
    }

    /// The SPIR-V words, decoded on first use.
    pub fn words(&'static self) -> Result<&'static [u32]> {
        if let Some(words) = self.words.get() {
            return Ok(words);
        }
        let damaged = |why: String| Error::Build { what: format!("a damaged kernel module, {} ({why})", self.name) };
        let bytes = miniz_oxide::inflate::decompress_to_vec(self.deflated).map_err(|e| damaged(e.to_string()))?;
        if bytes.len() % 4 != 0 {
            return Err(damaged(format!("{} bytes, not whole words", bytes.len())));
        }
        let words: Box<[u32]> = bytes.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
        Ok(self.words.get_or_init(|| words))
    }
}

include!(concat!(env!("OUT_DIR"), "/modules.rs"));

/// The module of a kernel of a family for a payload, key width and form (not a chain:
/// [`chain_module`]), or None where the table has none.
pub(crate) fn module(
    family: KernelFamily,
    kind: PassKind,
    payload: Payload,
    width: KeyWidth,
    form: Form,
) -> Option<&'static Embedded> {
    let key = ModuleKey { family, kind, width, payload: module_payload(kind, payload), form };
    MODULES.iter().find(|(k, _)| *k == key).map(|(_, m)| m)
}

/// The chain module of segment_merge for a chain of chunk codes, or None where it has none.
pub(crate) fn chain_module(payload: Payload, width: KeyWidth, chain: &[u32]) -> Option<&'static Embedded> {
    MODULES
        .iter()
        .find(|(k, _)| {
            k.kind == PassKind::SegmentMerge
                && k.payload == payload
                && k.width == width
                && matches!(k.form, Form::Chain(codes) if codes == chain)
        })
        .map(|(_, m)| m)
}

/// The bandwidth probe (a vec4 copy).
#[cfg_attr(not(feature = "study"), allow(dead_code))]
pub(crate) fn copy_probe() -> &'static Embedded {
    &COPY
}

/// The `dispatch_args` kernel.
pub(crate) fn dispatch_args_module() -> &'static Embedded {
    &DISPATCH_ARGS
}

/// The empty dispatch probe.
#[cfg_attr(not(feature = "study"), allow(dead_code))]
pub(crate) fn empty_probe() -> &'static Embedded {
    &EMPTY
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{builds, extra_forms};

    #[test]
    fn every_module_of_the_table_is_embedded_as_spirv() {
        const MAGIC: u32 = 0x0723_0203;
        for (key, module) in MODULES.iter() {
            assert_eq!(module.words().expect("decodes").first(), Some(&MAGIC), "{key:?}");
        }
        for family in [KernelFamily::Unrolled, KernelFamily::Compact] {
            for kind in PassKind::ALL {
                for (payload, width) in builds(family) {
                    let plain = module(family, kind, payload, width, Form::Plain);
                    assert!(plain.is_some(), "{family:?} {kind:?} {payload:?} {width:?}");
                    for form in extra_forms(family, kind, module_payload(kind, payload), width) {
                        let m = module(family, kind, payload, width, form);
                        assert!(m.is_some(), "{family:?} {kind:?} {payload:?} {width:?} {form:?}");
                    }
                }
            }
        }
        assert_eq!(copy_probe().words().expect("decodes").first(), Some(&MAGIC));
        assert_eq!(empty_probe().words().expect("decodes").first(), Some(&MAGIC));
        assert_eq!(dispatch_args_module().words().expect("decodes").first(), Some(&MAGIC));
    }

    #[test]
    fn keys_take_two_slots_in_small_tiles_of_their_own_module() {
        let small = |payload, width, form| module(KernelFamily::Unrolled, PassKind::TileSort, payload, width, form);
        let four = small(Payload::Keys, KeyWidth::Bits32, Form::Small);
        let two = small(Payload::Keys, KeyWidth::Bits32, Form::SmallTwoSlots);
        let words = |m: Option<&'static Embedded>| m.map(|m| m.words().expect("decodes"));
        assert!(four.is_some() && two.is_some() && words(four) != words(two));
        assert!(small(Payload::Pairs, KeyWidth::Bits32, Form::SmallTwoSlots).is_none());
        assert!(small(Payload::Keys, KeyWidth::Bits64, Form::Small).is_none());
    }

    #[test]
    fn chain_modules_cover_the_segment_passes_of_tiles_of_2048() {
        use crate::network::Plan;
        use crate::tuning::{default_fused, local_chunk, Geometry, Tuning};
        // The sorts that take segment tiles of 2048 (13 to 19 levels), on the chunks their
        // bindings take: the sizing rule's, and a binding of a larger capacity's shorter sorts.
        // Every chain of 4-byte keys alone has a module on chunks of 3 and 4; pairs' chains on
        // chunks of 3 have one up to 15 levels; pairs on chunks of 4 run the plain build.
        let mut checked = 0;
        for levels in 13..=19u32 {
            let n = (1u32 << (levels - 1)) + 1;
            for (payload, asked) in [
                (Payload::Keys, None),
                (Payload::Keys, Some(3)),
                (Payload::Keys, Some(4)),
                (Payload::Pairs, None),
                (Payload::Pairs, Some(4)),
            ] {
                let geometry =
                    Geometry { tile_log2: 11, global_wg: 256, fused: default_fused(payload, KeyWidth::Bits32) };
                let tuning = Tuning { local_chunk_substages: asked, ..Tuning::default() };
                let chunk = local_chunk(payload, KeyWidth::Bits32, &geometry, n, Some(2048), &tuning);
                let plan = Plan::segmented(n, geometry, 0).expect("a plan");
                let passes: Vec<_> = plan.passes.iter().filter(|p| p.kind == PassKind::SegmentMerge).collect();
                assert!(passes.len() >= 2, "levels {levels}: {} segment passes", passes.len());
                for pass in passes {
                    let chain = crate::gpu::pipelines::shape_chain(chunk, pass.push.dir, pass.push.shape);
                    let wanted = payload == Payload::Keys || (chunk == 3 && levels <= 15);
                    assert_eq!(
                        chain_module(payload, KeyWidth::Bits32, &chain).is_some(),
                        wanted,
                        "{payload:?}, {levels} levels, chunk {chunk}: chain {chain:?} (CHAIN_BUILDS)"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 130, "{checked} segment passes checked");
    }
}
