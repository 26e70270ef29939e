# Sourced by scripts/test.sh and scripts/build-release.sh: clippy's driver becomes the
# workspace's compiler wrapper (as `cargo clippy` makes it), so that clippy lints each
# workspace crate as it is compiled. The wrapper is part of every workspace crate's hash, and so
# of its functions' names: a build made without it has other names than the test command's.
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver)"
export RUSTC_WORKSPACE_WRAPPER
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
