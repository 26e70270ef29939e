// Without a console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

// Counted (weft_alloc): a template render's memory is bounded only under this allocator.
#[global_allocator]
static ALLOCATOR: weft_alloc::Counting<std::alloc::System> =
    weft_alloc::Counting(std::alloc::System);

fn main() -> std::process::ExitCode {
    match weft_app::run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("weft-app: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
