//! A window with a static page and nothing else: the floor Weft's app is measured against.

fn main() {
    if let Err(error) = tauri::Builder::default().run(tauri::generate_context!()) {
        eprintln!("hello-tauri: {error}");
        std::process::exit(1);
    }
}
