//! Link settings of the app binary, then Tauri's build step (the embedded canvas, the
//! capabilities, the generated context).

fn main() {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    // As for `weft` (crates/cli/build.rs says why): relative relocations packed, and the
    // program's own image linked at a fixed address, so that at each start the loader neither
    // reads a relocation table of megabytes nor rewrites every pointer of `.data.rel.ro`, and
    // those pages stay shared with the file instead of each start's own copy.
    if env("CARGO_CFG_TARGET_OS") == "linux" && env("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo:rustc-link-arg-bin=weft-app=-Wl,-z,pack-relative-relocs");
        println!("cargo:rustc-link-arg-bin=weft-app=-no-pie");
    }

    // The functions the app's start runs (symbol-order.txt, traced by scripts/symbol-order.sh
    // --app), placed together at the start of the code: a start then faults in a few MiB of the
    // binary instead of pages scattered over its 42 MB of code. Under the same conditions as
    // `weft`'s order (crates/cli/build.rs): LLD, an optimized build; names a build lacks are
    // skipped.
    println!("cargo:rerun-if-changed=symbol-order.txt");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let rustflags = env("CARGO_ENCODED_RUSTFLAGS");
    let own_linker = ["linker", "fuse-ld"]
        .iter()
        .any(|flag| rustflags.contains(flag))
        || !env("RUSTC_LINKER").is_empty();
    if env("TARGET") == "x86_64-unknown-linux-gnu" && env("OPT_LEVEL") != "0" && !own_linker {
        let order = std::path::Path::new(&env("CARGO_MANIFEST_DIR")).join("symbol-order.txt");
        println!(
            "cargo:rustc-link-arg-bin=weft-app=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=weft-app=-Wl,--no-warn-symbol-ordering");
    }
    tauri_build::build();
}
