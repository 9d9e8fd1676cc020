//! The command line, compiled from the command's own modules: size lists (`parse_size`,
//! `parse_sizes`) never panic and what they accept follows the documented syntax; clap's parse of
//! any argv never panics; the `sort` command's input files (raw little-endian 4-byte keys, and
//! optionally as many u32 values) are read exactly, and wrong lengths are errors.

#![no_main]
#![allow(dead_code, unused_imports)]

#[path = "../../src/bin/bitonic-vk/args.rs"]
mod args;
#[path = "../../src/bin/bitonic-vk/bench.rs"]
mod bench;
#[path = "../../src/bin/bitonic-vk/cli.rs"]
mod cli;
#[path = "../../src/bin/bitonic-vk/data.rs"]
mod data;
#[path = "../../src/bin/bitonic-vk/failure.rs"]
mod failure;
#[path = "../../src/bin/bitonic-vk/input.rs"]
mod input;
#[path = "../../src/bin/bitonic-vk/output.rs"]
mod output;
#[path = "../../src/bin/bitonic-vk/passes.rs"]
mod passes;
#[path = "../../src/bin/bitonic-vk/sink.rs"]
mod sink;
#[path = "../../src/bin/bitonic-vk/sizes.rs"]
mod sizes;
#[path = "../../src/bin/bitonic-vk/startup.rs"]
mod startup;

use std::collections::HashSet;
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStringExt as _;
use std::path::Path;

use arbitrary::Arbitrary;
use clap::Parser as _;
use libfuzzer_sys::fuzz_target;

/// Words the command line knows, so that the fuzzer reaches past the first unknown argument.
#[rustfmt::skip]
const WORDS: &[&str] = &[
    "sort", "devices", "bench", "passes", "help", "--help", "-h", "--version", "-V", "--", "--device", "0", "llvmpipe",
    "--validation", "--type", "u32", "i32", "f32", "--descending", "--values", "--values-output", "in.bin",
    "out.bin", "v.bin", "--sizes", "2^10..2^24", "1000,2^4", "--payload", "keys", "pairs", "keys,pairs", "--order",
    "asc", "desc", "ascending", "descending", "--dist", "uniform", "sorted", "reversed", "nearly-sorted",
    "few-unique", "--reps", "--warmup", "--seed", "--no-verify", "--json", "--csv", "--plot", "--max-tile",
    "--max-fused", "--local-wg", "--n", "--pairs", "--sync", "barrier", "submit", "--barrier", "memory", "buffer",
    "barrier2", "--compare", "--chain", "1", "200", "201", "-1", "2^63", "=", "u64", "i64", "f64", "--stable",
    "-", "--rounds", "startup", "--runs", "--no-pipeline-cache",
];

#[derive(Arbitrary, Debug)]
enum Arg {
    Word(u8),
    Text(String),
    Bytes(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
enum Input {
    Sizes(String),
    Argv(Vec<Arg>),
    Files { keys: Vec<u8>, values: Option<Vec<u8>>, unreadable: Option<bool>, wide: bool },
}

/// `parse_size`'s documented syntax: a number, or 2^E with E below 63, around optional spaces.
fn check_size(s: &str) -> Result<u64, String> {
    let got = sizes::parse_size(s);
    let t = s.trim();
    let power = t.strip_prefix("2^").and_then(|e| e.parse::<u32>().ok()).filter(|&e| e < 63).map(|e| 1u64 << e);
    let expect = t.parse::<u64>().ok().or(power);
    match (&got, expect) {
        (Ok(v), Some(e)) => assert_eq!(*v, e, "{s:?}"),
        (Err(_), None) => {}
        _ => panic!("parse_size({s:?}) = {got:?}, expected {expect:?}"),
    }
    got
}

/// `parse_sizes`' documented syntax: comma-separated sizes and ranges A..B (1 <= A <= B) that
/// double from A while at most B, in order, duplicates dropped.
fn check_sizes(s: &str) {
    let got = sizes::parse_sizes(s);
    let mut expect = Vec::new();
    let mut ok = true;
    for item in s.split(',') {
        match item.split_once("..") {
            Some((a, b)) => match (check_size(a), check_size(b)) {
                (Ok(a), Ok(b)) if a >= 1 && a <= b => {
                    expect.extend((0..64).map_while(|k| a.checked_mul(1 << k)).take_while(|&v| v <= b))
                }
                _ => ok = false,
            },
            None => match check_size(item) {
                Ok(v) => expect.push(v),
                Err(_) => ok = false,
            },
        }
    }
    let mut seen = HashSet::new();
    expect.retain(|v| seen.insert(*v));
    match got {
        Ok(list) => {
            assert!(ok, "parse_sizes({s:?}) accepted {list:?}");
            assert_eq!(list.0, expect, "parse_sizes({s:?})");
        }
        Err(e) => assert!(!ok, "parse_sizes({s:?}) refused ({e}) what the syntax allows: {expect:?}"),
    }
}

fn check_argv(args: &[Arg]) {
    let mut argv = vec![OsString::from("bitonic-vk")];
    argv.extend(args.iter().map(|a| match a {
        Arg::Word(i) => OsString::from(WORDS[usize::from(*i) % WORDS.len()]),
        Arg::Text(s) => OsString::from(s),
        Arg::Bytes(b) => OsString::from_vec(b.clone()),
    }));
    if let Ok(cli) = cli::Cli::try_parse_from(&argv) {
        if let cli::Command::Sort(sort) = &cli.command {
            // Each of --values and --values-output requires the other; --stable requires --values.
            assert_eq!(sort.values.is_some(), sort.values_output.is_some(), "{argv:?}");
            assert!(!sort.stable || sort.values.is_some(), "{argv:?}");
        }
    }
}

fn check_files(keys: &[u8], values: Option<&[u8]>, unreadable: Option<bool>, wide: bool) {
    let key_bytes = if wide { 8 } else { 4 };
    let (keys_path, values_path) = (Path::new("keys.bin"), Path::new("values.bin"));
    // Some(true): the keys file cannot be read; Some(false): the values file cannot.
    let read = |path: &Path| -> io::Result<Vec<u8>> {
        let is_keys = path == keys_path;
        if unreadable == Some(is_keys) {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "denied"));
        }
        Ok(if is_keys { keys.to_vec() } else { values.unwrap_or_default().to_vec() })
    };
    let got = input::load(keys_path, values.map(|_| values_path), key_bytes, read);
    let count = |b: &[u8], size: usize| (b.len() % size == 0).then_some(b.len() / size);
    let keys_ok = unreadable != Some(true) && count(keys, key_bytes).is_some();
    let values_ok = match values {
        None => true,
        Some(v) => unreadable != Some(false) && count(v, 4).is_some() && count(v, 4) == count(keys, key_bytes),
    };
    match got {
        Ok(inputs) => {
            assert!(
                keys_ok && values_ok,
                "accepted keys of {} bytes, values {:?}",
                keys.len(),
                values.map(<[u8]>::len)
            );
            let bytes = |w: &[u32]| w.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
            assert_eq!(bytes(&inputs.keys), keys);
            assert_eq!(inputs.values.as_deref().map(bytes).as_deref(), values);
        }
        Err(e) => {
            assert!(!(keys_ok && values_ok), "refused good inputs: {e:#}");
            let message = format!("{e:#}");
            // Every error names the file it is about.
            assert!(message.contains("keys.bin") || message.contains("values.bin"), "{message}");
        }
    }
}

fuzz_target!(|input: Input| match input {
    Input::Sizes(s) => check_sizes(&s),
    Input::Argv(args) => check_argv(&args),
    Input::Files { keys, values, unreadable, wide } => check_files(&keys, values.as_deref(), unreadable, wide),
});
