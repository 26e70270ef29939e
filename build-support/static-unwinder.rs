// The unwinder linked into `weft` (included by crates/cli/build.rs, after link.rs).

/// Links Rust's unwinder (panics, backtraces) into `binary` from GCC's static libgcc_eh.a
/// instead of loading libgcc_s.so.1 at every start. Rust asks the linker for `-lgcc_s`; a
/// linker script of that name, found first, hands it libgcc_eh.a instead. One shared library
/// fewer to map and relocate, and libgcc_s's constructor, which asks the processor for its
/// features, no longer runs: on a virtual machine each of those questions traps to the
/// hypervisor (docs/benchmarks.md has what it cost). For `weft` only: the app's WebKit loads
/// libgcc_s all the same.
fn link_the_unwinder_in(binary: &str) {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    if env("CARGO_CFG_TARGET_OS") != "linux" || env("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    let dir = std::path::Path::new(&env("OUT_DIR")).join("static-unwinder");
    std::fs::create_dir_all(&dir).expect("OUT_DIR is writable");
    std::fs::write(dir.join("libgcc_s.so"), "INPUT(-lgcc_eh)\n").expect("OUT_DIR is writable");
    println!("cargo:rustc-link-arg-bin={binary}=-L{}", dir.display());
}
