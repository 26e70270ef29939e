//! The checked-in TypeScript bindings match the commands and types of the Rust side.

#[test]
fn checked_in_bindings_are_current() {
    let expected = weft_app::bindings_typescript().expect("export bindings");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(weft_app::BINDINGS_PATH);
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == expected,
        "{} is stale: run `cargo run -p weft-app --features bindings --bin export-bindings` and commit the result",
        path.display()
    );
}
