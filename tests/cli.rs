//! The `bitonic-vk` command through its binary: files sorted against the standard library's sort,
//! and every bad input answered with a message, exit code 2 and no output file.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use rand::{Rng, SeedableRng};

fn bitonic() -> Command {
    let mut cmd = Command::cargo_bin("bitonic-vk").expect("the binary is built with the tests");
    cmd.env("BITONIC_VK_VALIDATION", "1").env_remove("BITONIC_VK_DEVICE");
    cmd
}

fn words(path: &Path) -> Vec<u32> {
    let bytes = fs::read(path).expect("output exists");
    assert_eq!(bytes.len() % 4, 0);
    bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn write_words(path: &Path, words: &[u32]) {
    fs::write(path, words.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>()).expect("writable temp dir");
}

/// Files in a fresh temporary directory.
struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().expect("temp dir"))
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
    /// Everything in the directory, to prove that a failed run left nothing behind.
    fn listing(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.0.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn no_validation_errors() -> impl Predicate<str> {
    predicate::str::contains("[validation ERROR").not()
}

#[test]
fn sorts_a_file_of_u32_keys() {
    let dir = Dir::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let input: Vec<u32> = (0..10_007).map(|_| rng.random()).collect();
    write_words(&dir.path("in.bin"), &input);
    bitonic()
        .args(["sort", "--type", "u32"])
        .arg(dir.path("in.bin"))
        .arg(dir.path("out.bin"))
        .assert()
        .success()
        .stderr(no_validation_errors());
    let mut expect = input.clone();
    expect.sort_unstable();
    assert_eq!(words(&dir.path("out.bin")), expect);
}

#[test]
fn sorts_f32_pairs_descending_in_total_order() {
    let dir = Dir::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let mut input: Vec<u32> = (0..5000).map(|_| rng.random()).collect();
    input.extend([f32::NAN.to_bits(), (-0.0f32).to_bits(), 0.0f32.to_bits(), f32::INFINITY.to_bits()]);
    let values: Vec<u32> = (0..input.len() as u32).collect();
    write_words(&dir.path("keys"), &input);
    write_words(&dir.path("values"), &values);
    bitonic()
        .args(["sort", "--type", "f32", "--descending", "--values"])
        .arg(dir.path("values"))
        .arg("--values-output")
        .arg(dir.path("values.out"))
        .arg(dir.path("keys"))
        .arg(dir.path("keys.out"))
        .assert()
        .success()
        .stderr(no_validation_errors());
    let mut expect = input.clone();
    expect.sort_by(|a, b| f32::from_bits(*b).total_cmp(&f32::from_bits(*a)));
    let (keys, out_values) = (words(&dir.path("keys.out")), words(&dir.path("values.out")));
    assert_eq!(keys, expect);
    let mut seen = vec![false; input.len()];
    for (i, &v) in out_values.iter().enumerate() {
        assert!(!std::mem::replace(&mut seen[v as usize], true), "value {v} twice");
        assert_eq!(keys[i], input[v as usize], "pair {i} split");
    }
}

#[test]
fn sorts_i32_keys() {
    let dir = Dir::new();
    let input: Vec<i32> = vec![5, -3, i32::MIN, i32::MAX, 0, -1, 7, -3];
    write_words(&dir.path("in"), &input.iter().map(|&x| x as u32).collect::<Vec<_>>());
    bitonic().args(["sort", "--type", "i32"]).arg(dir.path("in")).arg(dir.path("out")).assert().success();
    let mut expect = input.clone();
    expect.sort_unstable();
    assert_eq!(words(&dir.path("out")).iter().map(|&x| x as i32).collect::<Vec<_>>(), expect);
}

#[test]
fn an_empty_input_sorts_to_an_empty_output() {
    let dir = Dir::new();
    fs::write(dir.path("empty"), b"").expect("write");
    bitonic().arg("sort").arg(dir.path("empty")).arg(dir.path("out")).assert().success();
    assert_eq!(fs::read(dir.path("out")).expect("output"), b"");
}

#[test]
fn a_size_not_a_multiple_of_4_is_refused_and_writes_nothing() {
    let dir = Dir::new();
    fs::write(dir.path("in"), [1u8, 2, 3, 4, 5]).expect("write");
    bitonic()
        .arg("sort")
        .arg(dir.path("in"))
        .arg(dir.path("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("5 bytes, not a multiple of 4"));
    assert_eq!(dir.listing(), ["in"]);
}

#[test]
fn values_of_another_length_are_refused_and_write_nothing() {
    let dir = Dir::new();
    write_words(&dir.path("keys"), &[3, 1, 2]);
    write_words(&dir.path("values"), &[0, 1]);
    bitonic()
        .args(["sort", "--values"])
        .arg(dir.path("values"))
        .arg("--values-output")
        .arg(dir.path("values.out"))
        .arg(dir.path("keys"))
        .arg(dir.path("keys.out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("holds 2 values but keys file").and(predicate::str::contains("holds 3 keys")));
    assert_eq!(dir.listing(), ["keys", "values"]);
}

#[test]
fn a_missing_input_is_refused() {
    let dir = Dir::new();
    bitonic()
        .arg("sort")
        .arg(dir.path("nope"))
        .arg(dir.path("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read keys file").and(predicate::str::contains("nope")));
    assert!(dir.listing().is_empty());
}

#[test]
fn an_unknown_type_is_refused() {
    let dir = Dir::new();
    write_words(&dir.path("in"), &[1, 2]);
    bitonic()
        .args(["sort", "--type", "u64"])
        .arg(dir.path("in"))
        .arg(dir.path("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid value 'u64'"));
    assert_eq!(dir.listing(), ["in"]);
}

#[test]
fn an_unwritable_output_is_refused_before_any_work() {
    let dir = Dir::new();
    write_words(&dir.path("in"), &[2, 1]);
    bitonic()
        .arg("sort")
        .arg(dir.path("in"))
        .arg(dir.path("no-such-dir/out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot write output"));
    fs::create_dir(dir.path("a-dir")).expect("mkdir");
    bitonic()
        .arg("sort")
        .arg(dir.path("in"))
        .arg(dir.path("a-dir"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is a directory"));
    assert_eq!(dir.listing(), ["a-dir", "in"]);
}

#[test]
fn values_without_a_values_output_is_a_usage_error() {
    let dir = Dir::new();
    write_words(&dir.path("in"), &[2, 1]);
    bitonic().args(["sort", "--values"]).arg(dir.path("in")).arg(dir.path("in")).arg(dir.path("out")).assert().code(2);
    assert_eq!(dir.listing(), ["in"]);
}

#[test]
fn an_unknown_device_is_refused_with_the_list_of_devices() {
    let dir = Dir::new();
    write_words(&dir.path("in"), &[2, 1]);
    bitonic()
        .args(["--device", "no such gpu", "sort"])
        .arg(dir.path("in"))
        .arg(dir.path("out"))
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("no Vulkan device matches `no such gpu`").and(predicate::str::contains("0: ")),
        );
    assert_eq!(dir.listing(), ["in"]);
}

#[test]
fn devices_lists_the_chosen_device_and_its_limits() {
    bitonic()
        .arg("devices")
        .assert()
        .success()
        .stdout(predicate::str::contains("* 0:").and(predicate::str::contains("maxComputeSharedMemorySize")));
}

#[test]
fn bench_checks_and_times_each_size() {
    let out = bitonic().args(["bench", "--sizes", "1000,2^12", "--reps", "2", "--warmup", "1"]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert_eq!(stdout.lines().filter(|l| l.trim_end().ends_with("ok")).count(), 4, "{stdout}");
    // A CPU device such as lavapipe (CI's) is named as one, and no GPU is.
    assert_eq!(stdout.contains("(CPU,"), stdout.contains("CPU implementation"), "{stdout}");
}

#[test]
fn bench_refuses_a_bad_size() {
    for bad in ["2^x", "3^4", "ten", "2^70"] {
        bitonic().args(["bench", "--sizes", bad]).assert().code(2).stderr(predicate::str::contains(bad));
    }
}

#[test]
fn bench_refuses_a_size_over_the_device_limit() {
    bitonic()
        .args(["bench", "--sizes", "2^40"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("over this device's limit"));
}

#[test]
fn no_vulkan_driver_is_an_error_that_says_what_to_install() {
    let dir = Dir::new();
    write_words(&dir.path("in"), &[2, 1]);
    bitonic()
        .env_remove("BITONIC_VK_VALIDATION")
        .env("VK_DRIVER_FILES", dir.path("no-driver.json"))
        .env("VK_ICD_FILENAMES", dir.path("no-driver.json"))
        .arg("sort")
        .arg(dir.path("in"))
        .arg(dir.path("out"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("install a driver").and(predicate::str::contains("mesa-vulkan-drivers")));
    assert_eq!(dir.listing(), ["in"]);
}
