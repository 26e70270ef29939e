//! Link settings of the `weft` binary (build-support/link.rs, build-support/static-unwinder.rs):
//! a short `weft run` is most of what people and scripts do with it.

include!("../../build-support/link.rs");
include!("../../build-support/static-unwinder.rs");

fn main() {
    link_for_a_short_start("weft");
    link_the_unwinder_in("weft");
}
