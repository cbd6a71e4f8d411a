//! Links the extension module against the native library, librmm_rs (crate `rmm-cpp`), which makes the
//! resources, holds the registry and creates the streams that Python uses (`src/native.rs`): the
//! module records librmm_rs's SONAME as a needed library and looks for it through RUNPATH
//! `$ORIGIN/lib`, so the loader brings librmm_rs in, or binds to the one already loaded, before the
//! module runs. The wheel carries librmm_rs once, in `rmm/lib/`; a development build copies it there
//! (ci/python.sh, the README's recipe).
//!
//! What is linked:
//! - `RMM_PYTHON_LINK_LIBRMM=<dir>`: `<dir>/librmm_rs.so` itself (bindings-python/build-wheel.sh);
//! - otherwise a stub with librmm_rs's SONAME and no symbols, made here: the entry points stay
//!   undefined in the module (as Python's own symbols do) and are bound at load time to the real
//!   librmm_rs, so the module links whether or not librmm_rs is built yet;
//! - with the `bundled-native` feature (the source distribution, which has no librmm_rs), nothing:
//!   the module carries the entry points itself (`rmm-c-abi`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The file name and SONAME of the native library (one place to change it).
const NATIVE_LIBRARY: &str = "librmm_rs.so";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RMM_PYTHON_LINK_LIBRMM");
    if std::env::var_os("CARGO_FEATURE_BUNDLED_NATIVE").is_some() {
        return;
    }
    let library = match std::env::var("RMM_PYTHON_LINK_LIBRMM")
        .ok()
        .filter(|d| !d.is_empty())
    {
        Some(dir) => {
            let lib = Path::new(&dir).join(NATIVE_LIBRARY);
            assert!(lib.is_file(), "RMM_PYTHON_LINK_LIBRMM={dir}: no {NATIVE_LIBRARY} there (cargo build --release -p rmm-cpp)");
            println!("cargo:rerun-if-changed={}", lib.display());
            lib
        }
        None => stub(),
    };
    // --no-as-needed: the module's calls into librmm_rs are bound at load time, so an as-needed link
    // (which sees no symbol taken from the stub) would drop the dependency.
    println!("cargo:rustc-cdylib-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-cdylib-link-arg={}", library.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,--as-needed");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,$ORIGIN/lib");
}

/// An empty shared object whose SONAME is the native library's, in OUT_DIR.
fn stub() -> PathBuf {
    let dir =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("native-stub");
    std::fs::create_dir_all(&dir).expect("OUT_DIR is writable");
    let source = dir.join("empty.c");
    std::fs::write(
        &source,
        "/* the SONAME of the native library, and nothing else */\n",
    )
    .expect("OUT_DIR is writable");
    let out = dir.join(NATIVE_LIBRARY);
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&compiler)
        .args([
            "-shared",
            "-nostdlib",
            &format!("-Wl,-soname,{NATIVE_LIBRARY}"),
            "-o",
        ])
        .arg(&out)
        .arg(&source)
        .status();
    match status {
        Ok(s) if s.success() => out,
        other => panic!(
            "cannot make the {NATIVE_LIBRARY} stub with `{compiler}` ({other:?}); set CC to a C compiler, or \
             RMM_PYTHON_LINK_LIBRMM to the directory of a built {NATIVE_LIBRARY}"
        ),
    }
}
