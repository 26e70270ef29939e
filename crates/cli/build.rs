//! Link settings of the `weft` binary.

fn main() {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    // Relative relocations packed (RELR, glibc 2.36+ and binutils 2.38+): the dynamic loader
    // reads a bitmap of a few kilobytes instead of a 1.3 MB relocation table at every start,
    // which is a tenth of the resident memory of a short `weft run`.
    let linux_gnu = env("CARGO_CFG_TARGET_OS") == "linux" && env("CARGO_CFG_TARGET_ENV") == "gnu";
    if linux_gnu {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        // Linked at a fixed address (not position-independent): the pointers in
        // `.data.rel.ro` (vtables, tables of strings) are then right as they are in the file,
        // where a position-independent binary has the loader rewrite every one at each start
        // (docs/benchmarks.md says what that cost a short run). The libraries, stack, heap and
        // mappings are still placed at random; only the
        // program's own image is not (the price: an attacker who has found a memory error
        // knows where its code is).
        println!("cargo:rustc-link-arg-bin=weft=-no-pie");
    }

    // The functions short commands run, placed together at the start of the code
    // (symbol-order.txt, written by scripts/symbol-order.sh): a short run then faults in a few
    // MiB of the binary instead of pages scattered over all of it. Only where the linker is LLD,
    // Rust's default on
    // x86-64 Linux (GNU ld has no such option), and only in optimized builds, whose function
    // names the file lists; names it lists that a build lacks are skipped without a warning.
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
            "cargo:rustc-link-arg-bin=weft=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=weft=-Wl,--no-warn-symbol-ordering");
    }
}
