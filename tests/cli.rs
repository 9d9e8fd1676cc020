//! The `bitonic-vk` command through its binary: files sorted against the standard library's sort,
//! and every bad input answered with a message, exit code 2 and no output file.

mod common;
use common::*;
use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use bitonic_vk::Order;
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

/// The rows of `bench`'s table whose result was checked: those ending in "ok".
fn checked_rows(stdout: &str) -> usize {
    stdout.lines().filter(|l| l.trim_end().ends_with("ok")).count()
}

/// The rows `bench --json` wrote.
fn json_rows(path: &Path) -> Vec<serde_json::Value> {
    serde_json::from_slice(&fs::read(path).expect("json written")).expect("valid JSON")
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
    assert_sorted("u32 keys", &input, Order::Ascending, u32::cmp, &words(&dir.path("out.bin")), None);
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
    let (keys, out_values) = (words(&dir.path("keys.out")), words(&dir.path("values.out")));
    let by_f32 = |a: &u32, b: &u32| f32::from_bits(*a).total_cmp(&f32::from_bits(*b));
    assert_sorted("f32 pairs", &input, Order::Descending, by_f32, &keys, Some(&out_values));
}

#[test]
fn sorts_i32_keys() {
    let dir = Dir::new();
    let input: Vec<i32> = vec![5, -3, i32::MIN, i32::MAX, 0, -1, 7, -3];
    write_words(&dir.path("in"), &input.iter().map(|&x| x as u32).collect::<Vec<_>>());
    bitonic().args(["sort", "--type", "i32"]).arg(dir.path("in")).arg(dir.path("out")).assert().success();
    let got: Vec<i32> = words(&dir.path("out")).iter().map(|&x| x as i32).collect();
    assert_sorted("i32 keys", &input, Order::Ascending, i32::cmp, &got, None);
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
fn a_values_output_that_is_the_keys_output_is_refused_and_writes_nothing() {
    let dir = Dir::new();
    write_words(&dir.path("keys"), &[3, 1, 2]);
    write_words(&dir.path("values"), &[0, 1, 2]);
    write_words(&dir.path("out"), &[9]);
    let refused = |values_output: PathBuf, keys_output: PathBuf| {
        bitonic()
            .args(["sort", "--values"])
            .arg(dir.path("values"))
            .arg("--values-output")
            .arg(&values_output)
            .arg(dir.path("keys"))
            .arg(&keys_output)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--values-output").and(predicate::str::contains("OUTPUT")));
    };
    // The same path, spelt alike or through a directory; a file that does not exist yet.
    fs::create_dir(dir.path("sub")).expect("a directory");
    refused(dir.path("out"), dir.path("out"));
    refused(dir.path("sub/../out"), dir.path("out"));
    refused(dir.path("new"), dir.path("./new"));
    // One file through a symbolic link and through a hard link.
    std::os::unix::fs::symlink(dir.path("out"), dir.path("soft")).expect("symlink");
    fs::hard_link(dir.path("out"), dir.path("hard")).expect("hard link");
    refused(dir.path("soft"), dir.path("out"));
    refused(dir.path("out"), dir.path("hard"));
    assert_eq!(dir.listing(), ["hard", "keys", "out", "soft", "sub", "values"]);
    assert_eq!(words(&dir.path("out")), [9], "the existing output was not touched");
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
        .args(["sort", "--type", "u16"])
        .arg(dir.path("in"))
        .arg(dir.path("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid value 'u16'"));
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
    bitonic().arg("devices").assert().success().stdout(
        predicate::str::contains("* 0:")
            .and(predicate::str::contains("maxComputeSharedMemorySize"))
            .and(predicate::str::contains("minStorageBufferOffsetAlignment")),
    );
}

#[test]
fn bench_checks_and_times_each_case() {
    let out = bitonic()
        .args(["bench", "--sizes", "1000,2^12", "--reps", "2", "--warmup", "1"])
        .assert()
        .success()
        .stderr(no_validation_errors());
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    // Two sizes, keys and pairs by default.
    assert_eq!(checked_rows(&stdout), 4, "{stdout}");
    // A CPU device such as lavapipe (CI's) is named as one, and no GPU is.
    assert_eq!(stdout.contains("(CPU,"), stdout.contains("CPU implementation"), "{stdout}");
}

#[test]
fn bench_times_sorts_submitted_one_by_one() {
    let dir = Dir::new();
    let json = dir.path("r.json");
    let out = bitonic()
        .args(["bench", "--sizes", "1000,5000", "--payload", "pairs", "--reps", "2", "--warmup", "1"])
        .args(["--submit", "each", "--json"])
        .arg(&json)
        .assert()
        .success()
        .stderr(no_validation_errors());
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert_eq!(checked_rows(&stdout), 2, "{stdout}");
    assert!(stdout.contains("each submitted and waited for on its own"), "{stdout}");
    let rows = json_rows(&json);
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r["submit"] == "each" && r["verified"] == true), "{rows:?}");
    bitonic().args(["bench", "--sizes", "2^10", "--submit", "never"]).assert().code(2);
}

#[test]
fn bench_writes_json_csv_and_a_plot() {
    let dir = Dir::new();
    let (json, csv, svg) = (dir.path("r.json"), dir.path("r.csv"), dir.path("r.svg"));
    bitonic()
        .args(["bench", "--sizes", "2^8..2^10", "--type", "i32,f32", "--payload", "pairs", "--order", "desc"])
        .args(["--dist", "few-unique,reversed", "--reps", "2", "--warmup", "0", "--json"])
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .arg("--plot")
        .arg(&svg)
        .assert()
        .success()
        .stderr(no_validation_errors());
    let rows = json_rows(&json);
    // 3 sizes x 2 types x 2 distributions, pairs, descending.
    assert_eq!(rows.len(), 12);
    for row in &rows {
        for field in [
            "n",
            "key_type",
            "pairs",
            "order",
            "distribution",
            "gpu_ms_median",
            "wall_ms_median",
            "mkeys_per_s",
            "passes",
            "cpu_ms_median",
            "par_cpu_ms_median",
        ] {
            assert!(row.get(field).is_some(), "{field} missing from {row}");
        }
        assert_eq!(row["pairs"], true);
        assert_eq!(row["order"], "descending");
        assert_eq!(row["verified"], true);
        assert!(row["wall_ms_median"].as_f64().is_some_and(|t| t > 0.0), "{row}");
    }
    let sizes: Vec<u64> = rows.iter().filter_map(|r| r["n"].as_u64()).collect();
    assert_eq!(sizes.iter().filter(|&&n| n == 256).count(), 4);
    assert_eq!(sizes.iter().filter(|&&n| n == 1024).count(), 4);
    let csv = fs::read_to_string(&csv).expect("csv written");
    assert!(csv.starts_with("n,key_type,pairs,order,distribution,passes,gpu_ms_median"), "{csv}");
    assert_eq!(csv.lines().count(), 13);
    let svg = fs::read_to_string(&svg).expect("plot written");
    assert!(svg.starts_with("<svg") && svg.contains("Mkeys/s") && svg.contains("i32 pairs few-unique desc"), "{svg}");
    // The sizes label the x axis as the powers of two they are.
    let labels: Vec<&str> = svg.split("</text>").filter_map(|t| Some(t.rsplit_once('>')?.1.trim())).collect();
    for size in ["2^8", "2^9", "2^10"] {
        assert_eq!(labels.iter().filter(|l| **l == size).count(), 2, "{size} under each panel: {labels:?}");
    }
    assert_eq!(dir.listing(), ["r.csv", "r.json", "r.svg"]);
}

#[test]
fn bench_times_sorts_through_a_gpu_side_count() {
    // Counts below a tile, a share, and one past the size (clamped): each row checked (the first
    // min(count, n) sorted, the rest unchanged) and its count in the JSON.
    let dir = Dir::new();
    let json = dir.path("r.json");
    let out = bitonic()
        .args(["bench", "--sizes", "5000", "--count", "0,77,25%,9999", "--type", "u32,i64", "--order", "desc"])
        .args(["--reps", "2", "--warmup", "1", "--json"])
        .arg(&json)
        .assert()
        .success()
        .stderr(no_validation_errors());
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert_eq!(checked_rows(&stdout), 16, "{stdout}");
    let rows = json_rows(&json);
    let counts: Vec<u64> = rows.iter().map(|r| r["count"].as_u64().expect("a count")).collect();
    assert_eq!(counts.iter().filter(|&&c| c == 1250).count(), 4, "{counts:?}");
    assert!(rows.iter().all(|r| r["verified"] == true && r["n"] == 5000), "{rows:?}");
    for bad in ["101%", "x", "2^40"] {
        bitonic()
            .args(["bench", "--sizes", "2^10", "--count", bad])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(bad));
    }
}

#[test]
fn bench_refuses_a_bad_size() {
    for bad in ["2^x", "3^4", "ten", "2^70", "2^10..", "2^12..2^10", "0..8"] {
        bitonic().args(["bench", "--sizes", bad]).assert().code(2).stderr(predicate::str::contains(bad));
    }
    bitonic().args(["bench", "--sizes", "1"]).assert().code(2).stderr(predicate::str::contains("nothing to sort"));
}

#[test]
fn bench_refuses_a_size_over_the_device_limit() {
    bitonic()
        .args(["bench", "--sizes", "2^10,2^40"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("over this device's limit"));
}

#[test]
fn bench_and_passes_refuse_an_unknown_type() {
    for cmd in ["bench", "passes"] {
        bitonic()
            .args([cmd, "--type", "u16"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("u16").and(predicate::str::contains("u32")));
    }
}

#[test]
fn bench_refuses_an_unwritable_output_before_any_work() {
    let dir = Dir::new();
    bitonic()
        .args(["bench", "--sizes", "2^10", "--json"])
        .arg(dir.path("missing/r.json"))
        .assert()
        .code(2)
        .stdout(predicate::str::contains("device:").not())
        .stderr(predicate::str::contains("r.json"));
    assert!(dir.listing().is_empty());
}

#[test]
fn passes_times_each_pass_and_compares_strategies() {
    let dir = Dir::new();
    let (json, svg) = (dir.path("p.json"), dir.path("p.svg"));
    let out = bitonic()
        .args(["passes", "--n", "5000", "--pairs", "--max-tile", "256", "--compare", "--reps", "2", "--rounds", "3"])
        .args(["--chain", "20"])
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&svg)
        .assert()
        .success()
        .stderr(no_validation_errors());
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for strategy in ["barrier/memory", "barrier/buffer", "submit-per-sort", "submit-per-pass", "barrier/memory/unfused"]
    {
        assert!(stdout.lines().any(|l| l.starts_with(strategy)), "{strategy} missing:\n{stdout}");
    }
    assert!(stdout.contains("with a buffer barrier each") && stdout.contains("no barrier"), "{stdout}");
    assert!(stdout.contains("checked against the CPU's sort: ok"), "{stdout}");
    let rows = json_rows(&json);
    for row in &rows {
        for field in ["pass", "kind", "inc", "dir", "gpu_us", "strategy"] {
            assert!(row.get(field).is_some(), "{field} missing from {row}");
        }
    }
    // 5000 elements in tiles of 256: a tile sort, then stages 9..=13 with global and local merges.
    let fused: Vec<&serde_json::Value> = rows.iter().filter(|r| r["strategy"] == "barrier/memory").collect();
    let unfused = rows.iter().filter(|r| r["strategy"] == "barrier/memory/unfused").count();
    assert_eq!(fused[0]["kind"], "tile_sort");
    assert!(fused.iter().any(|r| r["kind"] == "global_merge") && fused.iter().any(|r| r["kind"] == "local_merge"));
    assert!(unfused > fused.len(), "unfused {unfused} passes, fused {}", fused.len());
    let svg = fs::read_to_string(&svg).expect("plot written");
    assert!(svg.starts_with("<svg") && svg.contains("tile_sort") && svg.contains("local_merge"), "{svg}");
    // Every strategy's rows, measured over the rounds.
    for strategy in ["barrier/memory", "barrier/buffer", "submit-per-sort", "submit-per-pass", "barrier/memory/unfused"]
    {
        let of: Vec<_> = rows.iter().filter(|r| r["strategy"] == strategy).collect();
        assert!(!of.is_empty() && of.iter().all(|r| r["rounds"] == 3), "{strategy}: {of:?}");
    }
    // Each round runs every strategy and chain once, starting one later than the round before.
    let orders: Vec<Vec<&str>> = stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("round ")?.split_once(": ").map(|(_, o)| o.split(", ").collect()))
        .collect();
    assert_eq!(orders.len(), 3, "{stdout}");
    assert!(orders[0].contains(&"submit-per-pass") && orders[0].contains(&"chain/buffer"), "{stdout}");
    for pair in orders.windows(2) {
        let mut rotated = pair[0].clone();
        rotated.rotate_left(1);
        assert_eq!(pair[1], rotated, "{stdout}");
    }
}

#[test]
fn passes_warns_when_its_probe_moved_over_5_percent() {
    let dir = Dir::new();
    let json = dir.path("p.json");
    // The hook stands for a device whose speed moved: the probe at the end reads 20 % slower.
    let out = bitonic()
        .args(["passes", "--n", "2^12", "--reps", "2", "--rounds", "2", "--test-probe-moved", "1.2", "--json"])
        .arg(&json)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains("warning: the run did not settle: barrier/memory") && stdout.contains("+20.0 %"),
        "{stdout}"
    );
    let rows = json_rows(&json);
    assert!(!rows.is_empty() && rows.iter().all(|r| r["settled"] == false), "{rows:?}");
    assert!(rows.iter().all(|r| r["probe_moved_pct"].as_f64().is_some_and(|p| (p - 20.0).abs() < 0.1)), "{rows:?}");
    // Within 5 %: settled, and said so.
    let out = bitonic()
        .args(["passes", "--n", "2^12", "--reps", "2", "--rounds", "2", "--test-probe-moved", "0.97", "--json"])
        .arg(&json)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("settled: barrier/memory") && !stdout.contains("warning"), "{stdout}");
    assert!(json_rows(&json).iter().all(|r| r["settled"] == true));
}

#[test]
fn passes_runs_each_strategy_alone() {
    for args in [&["--sync", "submit"][..], &["--sync", "sort"], &["--barrier", "buffer"], &["--max-fused", "1"]] {
        bitonic()
            .args(["passes", "--n", "3000", "--max-tile", "256", "--reps", "2", "--rounds", "2"])
            .args(args)
            .assert()
            .success()
            .stdout(predicate::str::contains("checked against the CPU's sort: ok"))
            .stderr(no_validation_errors());
    }
}

#[test]
fn passes_refuses_bad_arguments() {
    for (args, message) in [
        (&["--n", "2^40"][..], "over this device's limit"),
        (&["--n", "ten"], "ten"),
        (&["--n", "1"], "nothing to sort"),
        (&["--sync", "never"], "never"),
        (&["--barrier", "none"], "none"),
        (&["--reps", "0"], "reps"),
        (&["--rounds", "0"], "rounds"),
        (&["--compare", "--max-fused", "1"], "--max-fused"),
        (&["--segment-run", "12"], "segment_run"),
        (&["--segment-run", "1"], "segment_run"),
        (&["--segment-run-long", "6"], "segment_run_long"),
        (&["--segment-run", "32", "--segment-run-long", "16"], "segment_run_long"),
    ] {
        bitonic().arg("passes").args(args).assert().code(2).stderr(predicate::str::contains(message));
    }
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

#[test]
fn sorts_a_file_of_i64_keys_and_f64_pairs() {
    let dir = Dir::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    let input: Vec<i64> = (0..3001).map(|_| rng.random()).collect();
    let as_words = |keys: &[u64]| -> Vec<u32> { keys.iter().flat_map(|k| [*k as u32, (k >> 32) as u32]).collect() };
    let from_words =
        |w: &[u32]| -> Vec<u64> { w.chunks_exact(2).map(|c| u64::from(c[0]) | u64::from(c[1]) << 32).collect() };
    write_words(&dir.path("i64"), &as_words(&input.iter().map(|k| *k as u64).collect::<Vec<_>>()));
    bitonic()
        .args(["sort", "--type", "i64"])
        .arg(dir.path("i64"))
        .arg(dir.path("i64.out"))
        .assert()
        .success()
        .stderr(no_validation_errors());
    let got: Vec<i64> = from_words(&words(&dir.path("i64.out"))).into_iter().map(|k| k as i64).collect();
    assert_sorted("i64 keys", &input, Order::Ascending, i64::cmp, &got, None);

    let floats: Vec<f64> = (0..2000).map(|_| rng.random_range(-5.0..5.0f64).round()).collect();
    let bits: Vec<u64> = floats.iter().map(|f| f.to_bits()).collect();
    write_words(&dir.path("f64"), &as_words(&bits));
    write_words(&dir.path("values"), &(0..2000u32).collect::<Vec<_>>());
    bitonic()
        .args(["sort", "--type", "f64", "--descending", "--values"])
        .arg(dir.path("values"))
        .arg("--values-output")
        .arg(dir.path("values.out"))
        .arg(dir.path("f64"))
        .arg(dir.path("f64.out"))
        .assert()
        .success()
        .stderr(no_validation_errors());
    let got = from_words(&words(&dir.path("f64.out")));
    let got_values = words(&dir.path("values.out"));
    let by_f64 = |a: &u64, b: &u64| f64::from_bits(*a).total_cmp(&f64::from_bits(*b));
    assert_sorted("f64 pairs", &bits, Order::Descending, by_f64, &got, Some(&got_values));
}

#[test]
fn stable_sort_keeps_equal_keys_in_input_order() {
    let dir = Dir::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(22);
    let input: Vec<u32> = (0..4099).map(|_| rng.random_range(0..10)).collect();
    write_words(&dir.path("keys"), &input);
    write_words(&dir.path("values"), &(0..input.len() as u32).collect::<Vec<_>>());
    bitonic()
        .args(["sort", "--stable", "--descending", "--values"])
        .arg(dir.path("values"))
        .arg("--values-output")
        .arg(dir.path("values.out"))
        .arg(dir.path("keys"))
        .arg(dir.path("keys.out"))
        .assert()
        .success()
        .stderr(no_validation_errors());
    let (keys, values) = (words(&dir.path("keys.out")), words(&dir.path("values.out")));
    if let Err(e) = Reference::new(&input, Order::Descending, u32::cmp).check_stable(&keys, &values) {
        panic!("stable u32 pairs: {e}");
    }
}

#[test]
fn eight_byte_keys_refuse_bad_files_and_stable_mode() {
    let dir = Dir::new();
    write_words(&dir.path("odd"), &[1, 2, 3]);
    bitonic()
        .args(["sort", "--type", "u64"])
        .arg(dir.path("odd"))
        .arg(dir.path("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not a multiple of 8"));
    write_words(&dir.path("even"), &[1, 2, 3, 4]);
    write_words(&dir.path("values"), &[0, 1]);
    bitonic()
        .args(["sort", "--type", "u64", "--stable", "--values"])
        .arg(dir.path("values"))
        .arg("--values-output")
        .arg(dir.path("values.out"))
        .arg(dir.path("even"))
        .arg(dir.path("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--stable sorts 4-byte keys"));
    bitonic()
        .args(["sort", "--stable"])
        .arg(dir.path("even"))
        .arg(dir.path("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--values"));
    assert_eq!(dir.listing(), ["even", "odd", "values"], "nothing written");
}

#[cfg(unix)]
#[test]
fn outputs_get_the_mode_of_an_ordinary_new_file() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = Dir::new();
    write_words(&dir.path("in.bin"), &[3, 1, 2]);
    bitonic().arg("sort").arg(dir.path("in.bin")).arg(dir.path("out.bin")).assert().success();
    // What File::create makes here under this process's umask.
    fs::File::create(dir.path("plain")).expect("create");
    let mode = |name: &str| fs::metadata(dir.path(name)).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode("out.bin"), mode("plain"), "not the 0600 of a temporary file");
}

/// `n` random u32 keys in `path`, and the bytes they sort to.
fn random_keys(path: &Path, n: usize, seed: u64) -> (Vec<u32>, Vec<u8>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let keys: Vec<u32> = (0..n).map(|_| rng.random()).collect();
    write_words(path, &keys);
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    (keys, sorted.iter().flat_map(|w| w.to_le_bytes()).collect())
}

#[cfg(unix)]
#[test]
fn an_output_through_a_symbolic_link_replaces_the_file_it_ends_at_and_keeps_the_link() {
    let dir = Dir::new();
    let (_, sorted) = random_keys(&dir.path("in"), 3000, 31);
    fs::write(dir.path("old"), b"stale").expect("write");
    fs::create_dir(dir.path("sub")).expect("mkdir");
    // A chain of two links to a file, and a link to a file not there yet, from another directory.
    std::os::unix::fs::symlink("old", dir.path("hop")).expect("symlink");
    std::os::unix::fs::symlink("hop", dir.path("link")).expect("symlink");
    std::os::unix::fs::symlink("../new", dir.path("sub/dangling")).expect("symlink");
    for out in ["link", "sub/dangling"] {
        bitonic().arg("sort").arg(dir.path("in")).arg(dir.path(out)).assert().success();
        assert!(fs::symlink_metadata(dir.path(out)).expect("link").file_type().is_symlink(), "{out} is a link still");
    }
    assert_eq!(fs::read(dir.path("old")).expect("target"), sorted);
    assert_eq!(fs::read(dir.path("new")).expect("target"), sorted);
    assert!(fs::symlink_metadata(dir.path("hop")).expect("link").file_type().is_symlink());
    assert_eq!(dir.listing(), ["hop", "in", "link", "new", "old", "sub"], "no temporary file left");
}

/// A FIFO in `dir` with a thread reading it to its end; the thread's bytes come through the
/// receiver.
#[cfg(unix)]
fn fifo_with_reader(dir: &Dir, name: &str) -> std::sync::mpsc::Receiver<Vec<u8>> {
    let fifo = dir.path(name);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", fifo.display());
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(fs::read(&fifo).expect("the FIFO is readable"));
    });
    receive
}

#[cfg(unix)]
#[test]
fn an_output_that_is_a_fifo_is_written_in_place() {
    use std::os::unix::fs::FileTypeExt as _;
    let dir = Dir::new();
    let (_, sorted) = random_keys(&dir.path("in"), 5000, 32);
    let read = fifo_with_reader(&dir, "fifo");
    bitonic().arg("sort").arg(dir.path("in")).arg(dir.path("fifo")).assert().success();
    let got = read.recv_timeout(std::time::Duration::from_secs(60)).expect("the reader reached the end");
    assert!(got == sorted, "the reader got {} bytes, not the {} sorted ones", got.len(), sorted.len());
    assert!(fs::symlink_metadata(dir.path("fifo")).expect("fifo").file_type().is_fifo(), "a FIFO still");
    assert_eq!(dir.listing(), ["fifo", "in"], "no temporary file left");
}

/// Character devices made in `dir` with mknod (`name`, major, minor), or None (with a note) where
/// this process may not make or open them (not root, or a file system mounted nodev).
#[cfg(unix)]
fn private_devices(dir: &Dir, nodes: &[(&str, u32, u32)]) -> Option<()> {
    for &(name, major, minor) in nodes {
        let path = dir.path(name);
        let made = std::process::Command::new("mknod")
            .arg(&path)
            .args(["c", &major.to_string(), &minor.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
        if !made.is_ok_and(|s| s.success()) || fs::OpenOptions::new().write(true).open(&path).is_err() {
            println!("note: cannot make and open a device node in {} (not root?): skipped", dir.0.path().display());
            return None;
        }
    }
    Some(())
}

#[cfg(unix)]
#[test]
fn an_output_that_is_a_device_is_written_in_place_and_its_errors_exit_1() {
    use std::os::unix::fs::FileTypeExt as _;
    let dir = Dir::new();
    random_keys(&dir.path("in"), 1000, 33);
    // The kernel's null (1, 3) and full (1, 7) devices, as private nodes: never the machine's own.
    if private_devices(&dir, &[("null", 1, 3), ("full", 1, 7)]).is_none() {
        return;
    }
    bitonic().arg("sort").arg(dir.path("in")).arg(dir.path("null")).assert().success();
    bitonic()
        .arg("sort")
        .arg(dir.path("in"))
        .arg(dir.path("full"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("No space left on device").and(predicate::str::contains("full")));
    // bench's outputs alike.
    bitonic()
        .args(["bench", "--sizes", "2^8", "--payload", "keys", "--reps", "1", "--warmup", "0", "--json"])
        .arg(dir.path("null"))
        .arg("--csv")
        .arg(dir.path("full"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("No space left on device"));
    for node in ["null", "full"] {
        let kind = fs::symlink_metadata(dir.path(node)).expect("node").file_type();
        assert!(kind.is_char_device(), "{node} is a character device still");
    }
    assert_eq!(dir.listing(), ["full", "in", "null"], "no temporary file left");
}

#[test]
fn a_dash_reads_standard_input_and_writes_standard_output() {
    let dir = Dir::new();
    let (keys, sorted) = random_keys(&dir.path("in"), 4000, 34);
    let bytes = fs::read(dir.path("in")).expect("input");
    let out = bitonic().args(["sort", "-", "-"]).write_stdin(bytes.clone()).assert().success();
    assert!(out.get_output().stdout == sorted, "standard output holds the sorted keys");
    // Keys from standard input, their values (the indices) to standard output.
    write_words(&dir.path("values"), &(0..keys.len() as u32).collect::<Vec<_>>());
    let out = bitonic()
        .args(["sort", "--values"])
        .arg(dir.path("values"))
        .args(["--values-output", "-", "-"])
        .arg(dir.path("keys.out"))
        .write_stdin(bytes.clone())
        .assert()
        .success();
    let values: Vec<u32> =
        out.get_output().stdout.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    assert_sorted("u32 pairs", &keys, Order::Ascending, u32::cmp, &words(&dir.path("keys.out")), Some(&values));
    // A length of no whole number of keys is refused as from a file.
    bitonic()
        .args(["sort", "--type", "u64", "-", "-"])
        .write_stdin(&bytes[..12])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("standard input").and(predicate::str::contains("not a multiple of 8")));
}

#[test]
fn two_parts_of_a_sort_through_one_dash_or_one_stream_are_refused() {
    let dir = Dir::new();
    random_keys(&dir.path("in"), 10, 35);
    for (args, message) in [
        (&["--values", "-", "--values-output", "v", "-", "k"][..], "--values - and the keys' INPUT -"),
        (&["--values", "in", "--values-output", "-", "in", "-"], "--values-output - and the keys' OUTPUT -"),
        // Standard output here is a pipe to the test: /dev/stdout is the same pipe.
        (&["--values", "in", "--values-output", "/dev/stdout", "in", "-"], "are the same file"),
    ] {
        bitonic()
            .current_dir(dir.0.path())
            .arg("sort")
            .args(args)
            .write_stdin(fs::read(dir.path("in")).expect("input"))
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(message));
    }
    assert_eq!(dir.listing(), ["in"]);
}

#[cfg(unix)]
#[test]
fn bench_outputs_through_a_link_keep_the_link_and_refuse_a_dash() {
    let dir = Dir::new();
    fs::write(dir.path("r.json"), b"old").expect("write");
    std::os::unix::fs::symlink("r.json", dir.path("link.json")).expect("symlink");
    bitonic()
        .args(["bench", "--sizes", "2^8", "--payload", "keys", "--reps", "1", "--warmup", "0", "--json"])
        .arg(dir.path("link.json"))
        .assert()
        .success();
    assert!(fs::symlink_metadata(dir.path("link.json")).expect("link").file_type().is_symlink());
    assert_eq!(json_rows(&dir.path("r.json")).len(), 1);
    for flag in ["--json", "--csv", "--plot"] {
        bitonic()
            .args(["bench", "--sizes", "2^8", flag, "-"])
            .assert()
            .code(2)
            .stdout(predicate::str::contains("device:").not())
            .stderr(predicate::str::contains(format!("{flag} -")));
    }
    assert_eq!(dir.listing(), ["link.json", "r.json"]);
}

#[test]
fn startup_times_a_first_sort_cold_and_warm_each_in_a_process() {
    let dir = Dir::new();
    let out = bitonic()
        .args(["startup", "--sizes", "2^10,5000", "--type", "u32", "--payload", "keys,pairs", "--json"])
        .arg(dir.path("startup.json"))
        .assert()
        .success()
        .stderr(no_validation_errors());
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("2^10") && stdout.contains("pairs"), "{stdout}");
    let rows = json_rows(&dir.path("startup.json"));
    assert_eq!(rows.len(), 4, "two capacities, keys and pairs");
    for row in &rows {
        for state in ["cold", "warm"] {
            let run = &row[state];
            let parts = ["recorder_us", "bind_us", "first_sort_us"].map(|k| run[k].as_f64().expect("a time"));
            assert!(parts.iter().all(|&t| t >= 0.0) && parts[1] > 0.0 && parts[2] > 0.0, "{row}");
            let total = run["total_us"].as_f64().expect("a total");
            assert!((total - parts.iter().sum::<f64>()).abs() < 1.0, "the total is its parts: {row}");
        }
        // A binding of 1 024 makes its tile sort alone; one of 5 000 its merges too.
        let pipelines = row["pipelines"].as_u64().expect("a count");
        if row["capacity"] == 1024 {
            assert_eq!(pipelines, 1, "{row}");
        } else {
            assert!(pipelines > 1, "{row}");
        }
    }
}

#[test]
fn the_pipeline_cache_file_is_written_and_a_damaged_one_ignored_with_a_note() {
    let dir = Dir::new();
    let cache = dir.path("cache");
    write_words(&dir.path("in.bin"), &[5, 3, 9, 1]);
    let sort = || {
        let mut cmd = bitonic();
        cmd.env("BITONIC_VK_PIPELINE_CACHE", &cache).args(["sort", "--type", "u32"]);
        cmd.arg(dir.path("in.bin")).arg(dir.path("out.bin"));
        cmd
    };
    sort().assert().success().stderr(predicate::str::contains("pipeline cache").not());
    let files: Vec<PathBuf> =
        fs::read_dir(&cache).expect("the cache folder").map(|e| e.expect("entry").path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let file = &files[0];
    assert!(file.to_string_lossy().ends_with(".vkpipelinecache"), "{file:?}");
    let written = fs::read(file).expect("the cache file");
    assert!(written.len() >= 32, "a pipeline cache header at least");
    fs::write(file, &written[..7]).expect("truncates the cache");
    sort()
        .assert()
        .success()
        .stderr(predicate::str::contains("ignoring pipeline cache").and(predicate::str::contains("truncated")));
    let rewritten = fs::read(file).expect("rewritten");
    assert_eq!(rewritten.get(..32), written.get(..32), "the damaged file is rewritten, this device's header first");
    assert_eq!(words(&dir.path("out.bin")), [1, 3, 5, 9]);
    // Off: nothing is read or written.
    fs::remove_dir_all(&cache).expect("removes the cache");
    sort().arg("--no-pipeline-cache").assert().success();
    assert!(!cache.exists(), "--no-pipeline-cache wrote {cache:?}");
}
