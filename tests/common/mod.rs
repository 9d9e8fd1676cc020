//! What the test files share: descriptions built from the defaults, the validation-on context,
//! the size knobs of runs on a real GPU, and the one reference a sort's output is checked against.
#![allow(dead_code)]

use std::cmp::Ordering;
use std::sync::OnceLock;

use bitonic_vk::{Context, ContextDesc, DeviceType, KernelFamily, Order, RecorderDesc, SorterDesc};

/// A sorter description: the defaults, then `set`.
pub fn sorter_desc(set: impl FnOnce(&mut SorterDesc)) -> SorterDesc {
    let mut desc = SorterDesc::default();
    set(&mut desc);
    desc
}

/// A recorder description: the defaults, then `set`.
pub fn recorder_desc(set: impl FnOnce(&mut RecorderDesc)) -> RecorderDesc {
    let mut desc = RecorderDesc::default();
    set(&mut desc);
    desc
}

/// A context of its own on the default device (`BITONIC_VK_DEVICE`), with the validation layer
/// and synchronization validation on or off.
pub fn new_context(validation: bool) -> Context {
    Context::new(&ContextDesc { validation: Some(validation), ..ContextDesc::default() })
        .unwrap_or_else(|e| panic!("creating the Vulkan context: {e}"))
}

/// The context a test binary's tests share, validation on; says which device it tests.
pub fn context() -> &'static Context {
    static CTX: OnceLock<Context> = OnceLock::new();
    CTX.get_or_init(|| {
        let ctx = new_context(true);
        eprintln!("testing on {} ({})", ctx.device_info().name, ctx.device_info().device_type);
        ctx
    })
}

/// Whether the shared context's device is a CPU implementation (lavapipe).
pub fn on_cpu() -> bool {
    context().device_info().device_type == DeviceType::Cpu
}

/// The environment variable that picks the kernels of the sorters `tests/gpu.rs` makes where a
/// test sets none: `compact` or `unrolled`; unset, the device's default. CI runs the core sorts
/// of both builds on lavapipe, whose default is the compact one.
pub const KERNELS_ENV: &str = "BITONIC_VK_TEST_KERNELS";

/// The kernels [`KERNELS_ENV`] asks for.
pub fn kernels_from_env() -> Option<KernelFamily> {
    let value = std::env::var(KERNELS_ENV).ok()?;
    let value = value.trim();
    (!value.is_empty()).then(|| value.parse().unwrap_or_else(|e| panic!("{KERNELS_ENV}={e}")))
}

/// The environment variable that scales the GPU tests up: `full` (or `1`) runs the sizes and cases
/// meant for a real GPU on any device; `small` (or `0`) the small ones, which still reach every
/// code path, on any device. Unset: full on a GPU, small on a CPU device.
pub const SCALE_ENV: &str = "BITONIC_VK_TEST_SCALE";

/// Whether the tests run at full scale ([`SCALE_ENV`]).
pub fn full_scale() -> bool {
    match std::env::var(SCALE_ENV).ok().as_deref().map(str::trim) {
        Some("full" | "1") => true,
        Some("small" | "0") => false,
        Some(other) if !other.is_empty() => panic!("{SCALE_ENV}={other:?}: expected full or small"),
        _ => !on_cpu(),
    }
}

/// `full` at full scale ([`SCALE_ENV`]), else `small`.
pub fn scaled<T>(small: T, full: T) -> T {
    if full_scale() {
        full
    } else {
        small
    }
}

/// The bits of a key, for messages: its bytes as one little-endian number, in hex.
fn hex<K: bytemuck::Pod>(key: &K) -> String {
    let digits: String = bytemuck::bytes_of(key).iter().rev().map(|b| format!("{b:02x}")).collect();
    format!("0x{digits}")
}

/// The reference a sort's output is checked against: the standard library's stable sort of the
/// input by `cmp` (reversed for a descending sort), keys compared bit for bit.
pub struct Reference<'a, K> {
    input: &'a [K],
    /// The input's indices in the order the stable sort puts them.
    sorted: Vec<u32>,
}

impl<'a, K: bytemuck::Pod> Reference<'a, K> {
    /// Sorts the indices of `input` by their keys.
    pub fn new(input: &'a [K], order: Order, cmp: impl Fn(&K, &K) -> Ordering) -> Reference<'a, K> {
        let n = u32::try_from(input.len()).expect("at most u32::MAX elements");
        let mut sorted: Vec<u32> = (0..n).collect();
        sorted.sort_by(|&a, &b| {
            let by_key = cmp(&input[a as usize], &input[b as usize]);
            if order == Order::Descending {
                by_key.reverse()
            } else {
                by_key
            }
        });
        Reference { input, sorted }
    }

    /// Checks a sort's output: `keys` are the reference's bit for bit; with `values` (the sort
    /// was given each key's index in the input as its value), they are a permutation of
    /// 0..n and each key is the input key its value names, bit for bit.
    pub fn check(&self, keys: &[K], values: Option<&[u32]>) -> Result<(), String> {
        let n = self.input.len();
        if keys.len() != n {
            return Err(format!("{} keys, the reference has {n}", keys.len()));
        }
        let expect = |i: usize| &self.input[self.sorted[i] as usize];
        let same = |a: &K, b: &K| bytemuck::bytes_of(a) == bytemuck::bytes_of(b);
        if let Some(i) = (0..n).find(|&i| !same(&keys[i], expect(i))) {
            let wrong = (0..n).filter(|&i| !same(&keys[i], expect(i))).count();
            return Err(format!(
                "key {i} is {}, the reference has {} ({wrong} of {n} keys differ)",
                hex(&keys[i]),
                hex(expect(i))
            ));
        }
        if let Some(values) = values {
            if values.len() != n {
                return Err(format!("{} values for {n} keys", values.len()));
            }
            let mut seen = vec![false; n];
            for (i, &v) in values.iter().enumerate() {
                if v as usize >= n || std::mem::replace(&mut seen[v as usize], true) {
                    return Err(format!("value {i} is {v}: out of range or seen before"));
                }
                if !same(&keys[i], &self.input[v as usize]) {
                    return Err(format!(
                        "pair {i} split: key {} with value {v}, whose key is {}",
                        hex(&keys[i]),
                        hex(&self.input[v as usize])
                    ));
                }
            }
        }
        Ok(())
    }

    /// [`Reference::check`] of a stable sort: besides, the values are the reference's, so equal
    /// keys keep their input order.
    pub fn check_stable(&self, keys: &[K], values: &[u32]) -> Result<(), String> {
        self.check(keys, Some(values))?;
        match (0..values.len()).find(|&i| values[i] != self.sorted[i]) {
            Some(i) => Err(format!(
                "element {i} has value {}, the stable reference {}: equal keys ({}) out of input order",
                values[i],
                self.sorted[i],
                hex(&keys[i])
            )),
            None => Ok(()),
        }
    }
}

/// [`Reference::check`] of one sort's output, panicking with `what` on any difference.
pub fn assert_sorted<K: bytemuck::Pod>(
    what: &str,
    input: &[K],
    order: Order,
    cmp: impl Fn(&K, &K) -> Ordering,
    keys: &[K],
    values: Option<&[u32]>,
) {
    if let Err(e) = Reference::new(input, order, cmp).check(keys, values) {
        panic!("{what} ({order:?}, n = {}): {e}", input.len());
    }
}
