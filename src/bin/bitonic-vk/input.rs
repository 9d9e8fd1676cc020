//! The `sort` command's input files: raw little-endian keys of 4 or 8 bytes, and optionally a file
//! of as many u32 values, either of them standard input as `-`. Kept apart from the file system so
//! that the parsing can be fuzzed.

use std::io;
use std::path::Path;

use anyhow::{anyhow, Result};

/// The keys (and values) of one sort, as u32 words (two per 8-byte key, low word first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inputs {
    pub keys: Vec<u32>,
    pub values: Option<Vec<u32>>,
}

/// An input path as messages show it: `-` is named as standard input.
pub fn shown(path: &Path) -> String {
    if path.as_os_str() == crate::sink::STDIO {
        "- (standard input)".to_owned()
    } else {
        path.display().to_string()
    }
}

/// The words of a file of 4-byte little-endian words; `what` ("keys" or "values") and `path` name
/// the file in errors.
pub fn parse_words(bytes: &[u8], path: &Path, what: &str) -> Result<Vec<u32>> {
    if bytes.len() % 4 != 0 {
        return Err(anyhow!(
            "{what} file {} is {} bytes, not a multiple of 4: it must hold raw little-endian 4-byte {what}",
            shown(path),
            bytes.len()
        ));
    }
    Ok(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// Reads the keys file (keys of `key_bytes`, 4 or 8) and, if given, the values file through
/// `read`, in that order, and checks that there is one value per key.
pub fn load(
    keys_path: &Path,
    values_path: Option<&Path>,
    key_bytes: usize,
    mut read: impl FnMut(&Path) -> io::Result<Vec<u8>>,
) -> Result<Inputs> {
    let mut read_words = |path: &Path, what: &str| {
        let bytes = read(path).map_err(|e| anyhow!("cannot read {what} file {}: {e}", shown(path)))?;
        parse_words(&bytes, path, what)
    };
    let keys = read_words(keys_path, "keys")?;
    let words_per_key = key_bytes / 4;
    if keys.len() % words_per_key != 0 {
        return Err(anyhow!(
            "keys file {} is {} bytes, not a multiple of {key_bytes}: it must hold raw little-endian {key_bytes}-byte keys",
            shown(keys_path),
            keys.len() * 4
        ));
    }
    let n = keys.len() / words_per_key;
    let values = match values_path {
        Some(path) => {
            let v = read_words(path, "values")?;
            if v.len() != n {
                return Err(anyhow!(
                    "values file {} holds {} values but keys file {} holds {n} keys: they must match one to one",
                    shown(path),
                    v.len(),
                    shown(keys_path),
                ));
            }
            Some(v)
        }
        None => None,
    };
    Ok(Inputs { keys, values })
}
