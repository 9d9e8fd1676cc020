//! The committed include/bitonic_vk.h is what cbindgen makes of capi/src now: an API change not
//! carried to the header fails here, with the command that refreshes it.

use std::path::Path;

const UPDATE_ENV: &str = "BITONIC_VK_UPDATE_HEADER";

#[test]
fn the_committed_header_is_what_cbindgen_makes_of_the_source() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("capi/cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen: {e}"));
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let header = crate_dir.join("../include/bitonic_vk.h");
    if std::env::var_os(UPDATE_ENV).is_some_and(|v| v == "1") {
        std::fs::write(&header, &fresh).unwrap_or_else(|e| panic!("writing {}: {e}", header.display()));
        return;
    }
    let committed = std::fs::read(&header).unwrap_or_default();
    assert!(
        committed == fresh,
        "include/bitonic_vk.h is not what capi/src declares: run `{UPDATE_ENV}=1 cargo test --release -p \
         bitonic-vk-capi --test header` and commit it"
    );
}
