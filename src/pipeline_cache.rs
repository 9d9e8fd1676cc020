//! The pipeline cache on disk (the standalone context's and the wgpu front's): one file per
//! device and driver, loaded when a context is made and written back when it is dropped, so that
//! a second run finds its pipelines compiled.

use std::fmt;
use std::path::{Path, PathBuf};

use ash::vk;

use crate::error::{Error, Result};

/// Environment variable naming the folder of the pipeline cache (overrides the default).
pub const PIPELINE_CACHE_ENV: &str = "BITONIC_VK_PIPELINE_CACHE";

/// Where a [`crate::Context`] keeps its pipeline cache between runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PipelineCacheDir {
    /// [`PIPELINE_CACHE_ENV`] if set, else `$XDG_CACHE_HOME/bitonic-vk/`, else
    /// `$HOME/.cache/bitonic-vk/`; none where neither variable is set.
    #[default]
    Default,
    /// No file: the cache lives as long as the context.
    Off,
    /// This folder.
    At(PathBuf),
}

impl PipelineCacheDir {
    /// The folder this resolves to, if any.
    pub fn folder(&self) -> Option<PathBuf> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        match self {
            PipelineCacheDir::Off => None,
            PipelineCacheDir::At(dir) => Some(dir.clone()),
            PipelineCacheDir::Default => var(PIPELINE_CACHE_ENV)
                .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("bitonic-vk")))
                .or_else(|| var("HOME").map(|d| d.join(".cache").join("bitonic-vk"))),
        }
    }
}

/// What a driver's pipeline cache data must start with to be this device's
/// (`VkPipelineCacheHeaderVersionOne`). The device and driver alone: the entries within are the
/// driver's, each keyed by its pipeline's whole creation info (its stage's flags, such as full
/// subgroups, included), so one file serves pipelines made with and without them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheId {
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver_version: u32,
    pub uuid: [u8; 16],
}

/// Bytes of `VkPipelineCacheHeaderVersionOne`.
const HEADER_BYTES: usize = 32;

impl CacheId {
    /// The file for this device and driver in `folder`: a driver update or another device
    /// reads another file.
    pub fn file_in(&self, folder: &Path) -> PathBuf {
        let uuid: String = self.uuid.iter().map(|b| format!("{b:02x}")).collect();
        folder.join(format!(
            "{:04x}-{:04x}-{:08x}-{uuid}.vkpipelinecache",
            self.vendor_id, self.device_id, self.driver_version
        ))
    }

    /// Why `data` is not a pipeline cache of this device, if it is not one.
    pub fn mismatch(&self, data: &[u8]) -> Option<Mismatch> {
        if data.len() < HEADER_BYTES {
            return Some(Mismatch::Truncated(data.len()));
        }
        let word = |i: usize| u32::from_le_bytes([data[4 * i], data[4 * i + 1], data[4 * i + 2], data[4 * i + 3]]);
        let (header_bytes, version) = (word(0), word(1));
        if header_bytes < HEADER_BYTES as u32 || header_bytes as usize > data.len() || version != 1 {
            return Some(Mismatch::Header);
        }
        if word(2) != self.vendor_id || word(3) != self.device_id || data[16..32] != self.uuid {
            return Some(Mismatch::Foreign);
        }
        None
    }
}

/// Why a cache file was not loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// Shorter than a header: this many bytes.
    Truncated(usize),
    /// Not a pipeline cache header.
    Header,
    /// Another device's or driver's.
    Foreign,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Truncated(n) => write!(f, "truncated ({n} bytes)"),
            Mismatch::Header => f.write_str("not a Vulkan pipeline cache"),
            Mismatch::Foreign => f.write_str("made by another device or driver"),
        }
    }
}

/// Reads the cache file at `path`: its data where it is this device's, else nothing and a note
/// saying why it is ignored (it is rewritten when the context drops). A missing file is no note.
pub(crate) fn load(path: &Path, id: &CacheId) -> (Vec<u8>, Option<String>) {
    match std::fs::read(path) {
        Ok(data) => match id.mismatch(&data) {
            None => (data, None),
            Some(why) => (Vec::new(), Some(format!("ignoring pipeline cache {}: {why}", path.display()))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), None),
        Err(e) => (Vec::new(), Some(format!("ignoring pipeline cache {}: {e}", path.display()))),
    }
}

/// Writes `data` to `path` whole or not at all: a temporary file beside it, renamed over it.
pub(crate) fn save(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let folder = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // Two caches of one device may be saved at once in one process (two contexts, or a context
    // and a wgpu sorter): each writes its own temporary file.
    static SAVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let save = SAVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = folder.join(format!(".{name}.{}.{save}.tmp", std::process::id()));
    let written = std::fs::write(&temporary, data).and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// A pipeline cache of one device, loaded from its file in a folder (if any) and written back
/// where it grew: what [`crate::Context`] and the wgpu front keep. The owner destroys it with
/// [`DiskCache::destroy`].
#[derive(Debug)]
pub(crate) struct DiskCache {
    /// Created without VK_PIPELINE_CACHE_CREATE_EXTERNALLY_SYNCHRONIZED_BIT, so the
    /// implementation synchronises its use from several threads.
    pub cache: vk::PipelineCache,
    /// The file the cache was loaded from and is written back to, if any.
    pub file: Option<PathBuf>,
    /// Bytes of cache data loaded: the file is rewritten only when the data grew.
    loaded: usize,
    /// Why the cache file was not loaded, if it was not.
    pub note: Option<String>,
}

impl DiskCache {
    /// Loads the file of device `id` in `folder` (none: an empty cache, never written) into a new
    /// pipeline cache of `device`. A file that is not this device's, or that the driver refuses,
    /// is ignored with a note and rewritten later.
    pub fn open(device: &ash::Device, folder: Option<PathBuf>, id: &CacheId) -> Result<DiskCache> {
        let file = folder.map(|folder| id.file_in(&folder));
        let (data, mut note) = match &file {
            Some(path) => load(path, id),
            None => (Vec::new(), None),
        };
        let cache = match create(device, &data) {
            Ok(cache) => cache,
            Err(e) if data.is_empty() => return Err(e),
            Err(_) => {
                let path = file.as_deref().unwrap_or(Path::new(""));
                note = Some(format!("ignoring pipeline cache {}: the driver refused it", path.display()));
                create(device, &[])?
            }
        };
        let loaded = if note.is_some() { 0 } else { data.len() };
        Ok(DiskCache { cache, file, loaded, note })
    }

    /// Writes the cache to its file where the data grew since it was loaded.
    pub fn save(&self, device: &ash::Device) -> Result<()> {
        let Some(path) = &self.file else { return Ok(()) };
        // SAFETY: the cache belongs to `device` and is internally synchronised.
        let data =
            unsafe { device.get_pipeline_cache_data(self.cache) }.map_err(Error::vk("vkGetPipelineCacheData"))?;
        if data.len() <= self.loaded {
            return Ok(());
        }
        save(path, &data).map_err(|e| Error::CacheFile { path: path.clone(), reason: e.to_string() })
    }

    /// Destroys the cache.
    ///
    /// # Safety
    /// `device` is the device the cache was opened on, and no pipeline creation using it is
    /// running or will run.
    pub unsafe fn destroy(&self, device: &ash::Device) {
        // SAFETY: the caller's promise.
        unsafe { device.destroy_pipeline_cache(self.cache, None) };
    }
}

/// A pipeline cache of `device` holding `data` (none where empty), internally synchronised.
fn create(device: &ash::Device, data: &[u8]) -> Result<vk::PipelineCache> {
    let info = vk::PipelineCacheCreateInfo::default().initial_data(data);
    // SAFETY: `device` is live; `data` is empty or was checked to carry this device's header (a
    // driver checks the rest and ignores data it cannot use).
    unsafe { device.create_pipeline_cache(&info, None) }.map_err(Error::vk("vkCreatePipelineCache"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: CacheId = CacheId { vendor_id: 0x10de, device_id: 0x2335, driver_version: 7, uuid: [9; 16] };

    fn header(id: &CacheId, extra: usize) -> Vec<u8> {
        let mut data = Vec::new();
        for word in [32u32, 1, id.vendor_id, id.device_id] {
            data.extend_from_slice(&word.to_le_bytes());
        }
        data.extend_from_slice(&id.uuid);
        data.resize(32 + extra, 0xab);
        data
    }

    #[test]
    fn headers_of_this_device_load_and_others_are_refused() {
        assert_eq!(ID.mismatch(&header(&ID, 100)), None);
        assert_eq!(ID.mismatch(&header(&ID, 100)[..31]), Some(Mismatch::Truncated(31)));
        let other = CacheId { uuid: [1; 16], ..ID };
        assert_eq!(ID.mismatch(&header(&other, 0)), Some(Mismatch::Foreign));
        let other = CacheId { vendor_id: 0x1002, ..ID };
        assert_eq!(ID.mismatch(&header(&other, 0)), Some(Mismatch::Foreign));
        let mut bad_version = header(&ID, 0);
        bad_version[4] = 2;
        assert_eq!(ID.mismatch(&bad_version), Some(Mismatch::Header));
        let mut long_header = header(&ID, 0);
        long_header[0] = 200;
        assert_eq!(ID.mismatch(&long_header), Some(Mismatch::Header));
    }

    #[test]
    fn a_file_round_trips_and_a_bad_one_is_ignored_with_a_note() {
        let dir = std::env::temp_dir().join(format!("bitonic-vk-cache-test-{}", std::process::id()));
        let path = ID.file_in(&dir.join("nested"));
        assert_eq!(load(&path, &ID), (Vec::new(), None), "a missing file is no note");
        let data = header(&ID, 1000);
        save(&path, &data).expect("writes the cache");
        assert_eq!(load(&path, &ID), (data.clone(), None));
        save(&path, &data[..10]).expect("writes a truncated cache");
        let (loaded, note) = load(&path, &ID);
        assert!(loaded.is_empty());
        assert!(note.is_some_and(|n| n.contains("truncated (10 bytes)") && n.contains(&path.display().to_string())));
        let names: Vec<_> = std::fs::read_dir(path.parent().expect("a folder"))
            .expect("lists the folder")
            .map(|e| e.expect("an entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temporary file is left: {names:?}");
        std::fs::remove_dir_all(&dir).expect("cleans up");
    }

    #[test]
    fn the_default_folder_follows_the_environment_and_off_has_none() {
        assert_eq!(PipelineCacheDir::Off.folder(), None);
        let dir = PathBuf::from("/somewhere");
        assert_eq!(PipelineCacheDir::At(dir.clone()).folder(), Some(dir));
        assert!(ID
            .file_in(Path::new("/c"))
            .to_string_lossy()
            .ends_with("10de-2335-00000007-09090909090909090909090909090909.vkpipelinecache"));
    }
}
