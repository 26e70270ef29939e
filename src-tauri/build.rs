//! Link settings of the app binary, as `weft`'s (build-support/link.rs: the start a person
//! waits for, with the functions it runs listed in this crate's symbol-order.txt), then Tauri's
//! build step (the embedded canvas, the capabilities, the generated context).

include!("../build-support/link.rs");

fn main() {
    link_for_a_short_start("weft-app");
    tauri_build::build();
}
