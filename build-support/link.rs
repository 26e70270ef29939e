// Link settings for a program that starts often and briefly (`weft`) or whose start a person
// waits for (`weft-app`): included by both build scripts (crates/cli/build.rs,
// src-tauri/build.rs), which pass their binary's name.

/// Links `binary` for a short start: packed relative relocations and a fixed address, and its
/// crate's `symbol-order.txt` (the functions a start runs, written by scripts/symbol-order.sh)
/// handed to the linker.
fn link_for_a_short_start(binary: &str) {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    // Relative relocations packed (RELR, glibc 2.36+ and binutils 2.38+): the dynamic loader
    // reads a bitmap of a few kilobytes instead of a relocation table of megabytes at every
    // start, which is a tenth of the resident memory of a short `weft run`.
    let linux_gnu = env("CARGO_CFG_TARGET_OS") == "linux" && env("CARGO_CFG_TARGET_ENV") == "gnu";
    if linux_gnu {
        println!("cargo:rustc-link-arg-bin={binary}=-Wl,-z,pack-relative-relocs");
        // Linked at a fixed address (not position-independent): the pointers in
        // `.data.rel.ro` (vtables, tables of strings) are then right as they are in the file,
        // where a position-independent binary has the loader rewrite every one at each start
        // (docs/benchmarks.md says what that cost). The libraries, stack, heap and mappings are
        // still placed at random; only the program's own image is not (the price: an attacker
        // who has found a memory error knows where its code is).
        println!("cargo:rustc-link-arg-bin={binary}=-no-pie");
    }

    // The functions a start runs, placed together at the start of the code: a start then
    // faults in a few MiB of the binary instead of pages scattered over all of it. Only where
    // the linker is LLD, Rust's default on x86-64 Linux (GNU ld has no such option), and only
    // in optimized builds, whose function names the file lists; names it lists that a build
    // lacks are skipped without a warning (scripts/symbol-order-check.sh counts them).
    println!("cargo:rerun-if-changed=symbol-order.txt");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let rustflags = env("CARGO_ENCODED_RUSTFLAGS");
    // A linker of the builder's choosing (`-C linker`, `-fuse-ld`, `target.*.linker`) may not
    // be LLD.
    let own_linker = ["linker", "fuse-ld"]
        .iter()
        .any(|flag| rustflags.contains(flag))
        || !env("RUSTC_LINKER").is_empty();
    if env("TARGET") == "x86_64-unknown-linux-gnu" && env("OPT_LEVEL") != "0" && !own_linker {
        let order = std::path::Path::new(&env("CARGO_MANIFEST_DIR")).join("symbol-order.txt");
        println!(
            "cargo:rustc-link-arg-bin={binary}=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin={binary}=-Wl,--no-warn-symbol-ordering");
    }
}
