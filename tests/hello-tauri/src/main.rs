//! A window with a static page and nothing else: the floor Weft's app is measured against.
//! Its arguments, NAME=VALUE each, are set in its environment first: the app benchmark gives it
//! the WebKit set-up Weft's app chose for the machine, to measure the floor with it too.

fn main() {
    for argument in std::env::args().skip(1) {
        let Some((name, value)) = argument.split_once('=') else {
            eprintln!("hello-tauri: {argument:?} is not NAME=VALUE");
            std::process::exit(2);
        };
        // SAFETY: no other thread exists yet to read the environment while it changes.
        unsafe { std::env::set_var(name, value) };
    }
    if let Err(error) = tauri::Builder::default().run(tauri::generate_context!()) {
        eprintln!("hello-tauri: {error}");
        std::process::exit(1);
    }
}
