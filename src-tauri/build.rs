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
    tauri_build::build();
}
