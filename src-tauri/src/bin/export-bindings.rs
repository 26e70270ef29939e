//! Writes `ui/src/bindings.ts` from the commands and types of the app (run after changing
//! either; a test fails while the checked-in file is stale).

fn main() -> std::process::ExitCode {
    match weft_app::bindings_typescript() {
        Ok(text) => {
            let path =
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(weft_app::BINDINGS_PATH);
            if let Err(e) = std::fs::write(&path, text) {
                eprintln!("export-bindings: cannot write {}: {e}", path.display());
                return std::process::ExitCode::FAILURE;
            }
            println!("wrote {}", path.display());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("export-bindings: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
