//! Link settings of the `weft` binary (build-support/link.rs): a short `weft run` is most of
//! what people and scripts do with it.

include!("../../build-support/link.rs");

fn main() {
    link_for_a_short_start("weft");
}
