//! Link settings of the `weft` binary.

fn main() {
    // Relative relocations packed (RELR, glibc 2.36+ and binutils 2.38+): the dynamic loader
    // reads a bitmap of a few kilobytes instead of a 1.3 MB relocation table at every start,
    // which is a tenth of the resident memory of a short `weft run`.
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
