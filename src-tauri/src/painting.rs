//! How WebKit paints the window on a machine without a GPU.
//!
//! WebKitGTK paints the page's tiles with Skia through OpenGL. Without a GPU (a virtual
//! machine, a remote desktop, a CI runner) Mesa runs that OpenGL on the CPU (llvmpipe): each
//! of the canvas's shaders is compiled by LLVM and each tile's texture lives in the web
//! process's heap, to do on the CPU with extra steps what Skia's own CPU painter does directly.
//! There WebKit is told to paint with the CPU, as its developers advise for weak GPUs; the
//! compositing stays as it is. docs/benchmarks.md has what that saves.

use std::ffi::OsString;
use std::path::Path;

/// WebKit's switch: any value but "0" has the web process paint with Skia on the CPU.
const CPU_PAINTING: &str = "WEBKIT_SKIA_ENABLE_CPU_RENDERING";
/// Mesa's switch to its software renderer: with it set, any GPU present goes unused.
const SOFTWARE_GL: &str = "LIBGL_ALWAYS_SOFTWARE";

/// Whether to tell WebKit to paint with the CPU, from the environment (`var`) and whether the
/// machine has a GPU this user can render with. A choice the person made either way
/// (`WEBKIT_SKIA_ENABLE_CPU_RENDERING` set, to "0" or "1") is theirs and is kept.
fn paint_with_cpu(var: impl Fn(&str) -> Option<OsString>, has_gpu: bool) -> bool {
    if var(CPU_PAINTING).is_some() {
        return false;
    }
    // Read as Mesa reads its booleans: these words are true, any other value false.
    let software_gl = var(SOFTWARE_GL).is_some_and(|value| {
        let value = value.to_string_lossy().to_ascii_lowercase();
        matches!(value.as_str(), "1" | "true" | "y" | "yes")
    });
    software_gl || !has_gpu
}

/// Whether `dri` (the system's /dev/dri) holds a render node this user can open: what Mesa
/// renders with on a GPU. Without one, it falls back to llvmpipe.
fn has_render_node(dri: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dri) else {
        return false;
    };
    entries.flatten().any(|entry| {
        entry.file_name().to_string_lossy().starts_with("renderD")
            && std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(entry.path())
                .is_ok()
    })
}

/// Sets WebKit's CPU painting on a machine without a GPU. Call it before any thread starts: it
/// changes this process's environment, which the web process WebKit starts inherits.
pub(crate) fn choose() {
    if cfg!(target_os = "linux")
        && paint_with_cpu(
            |name| std::env::var_os(name),
            has_render_node(Path::new("/dev/dri")),
        )
    {
        set_environment(CPU_PAINTING, "1");
    }
}

#[cfg(target_os = "linux")]
fn set_environment(name: &str, value: &str) {
    // glib's setenv: std's is unsafe to call, and this crate has no unsafe code. Nothing else
    // runs yet to read the environment while it changes.
    if let Err(error) = glib::setenv(name, value, true) {
        eprintln!("weft-app: could not set {name}: {error}");
    }
}

#[cfg(not(target_os = "linux"))]
fn set_environment(_name: &str, _value: &str) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| OsString::from(value))
        }
    }

    #[test]
    fn paints_with_the_cpu_only_where_there_is_no_gpu_to_paint_with() {
        assert!(paint_with_cpu(env(&[]), false), "no GPU");
        assert!(!paint_with_cpu(env(&[]), true), "a GPU");
        for told in ["1", "true", "YES"] {
            assert!(
                paint_with_cpu(env(&[(SOFTWARE_GL, told)]), true),
                "a GPU Mesa is told not to use ({told})"
            );
        }
        for not_told in ["0", "false", ""] {
            assert!(
                !paint_with_cpu(env(&[(SOFTWARE_GL, not_told)]), true),
                "{not_told:?}"
            );
        }
    }

    #[test]
    fn a_choice_the_person_made_is_kept() {
        assert!(!paint_with_cpu(env(&[(CPU_PAINTING, "0")]), false));
        assert!(!paint_with_cpu(env(&[(CPU_PAINTING, "1")]), true));
    }

    #[test]
    fn only_a_render_node_counts_as_a_gpu() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(!has_render_node(&dir.path().join("missing")), "no /dev/dri");
        std::fs::write(dir.path().join("card0"), b"").expect("card");
        assert!(
            !has_render_node(dir.path()),
            "a display without a render node"
        );
        std::fs::write(dir.path().join("renderD128"), b"").expect("render node");
        assert!(has_render_node(dir.path()));
    }
}
