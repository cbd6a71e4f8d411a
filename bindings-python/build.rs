//! Links the extension module against librmm_rs.so when packaging (the wheel carries librmm_rs.so once, in
//! `rmm/lib/`, and the module finds it through RUNPATH `$ORIGIN/lib`), so Python and C++ share
//! librmm's registry from the first import on, whatever is loaded first.
//!
//! `RMM_PYTHON_LINK_LIBRMM=<dir with librmm_rs.so>` turns it on (bindings-python/build-wheel.sh sets
//! it); without it the module is built standalone (development and the CPU test suite), and routes
//! to a librmm_rs.so only when one is already loaded (rmm_core::registry).

fn main() {
    println!("cargo:rerun-if-env-changed=RMM_PYTHON_LINK_LIBRMM");
    let Ok(dir) = std::env::var("RMM_PYTHON_LINK_LIBRMM") else { return };
    if dir.is_empty() {
        return;
    }
    let lib = std::path::Path::new(&dir).join("librmm_rs.so");
    assert!(lib.is_file(), "RMM_PYTHON_LINK_LIBRMM={dir}: no librmm_rs.so there (cargo build --release -p rmm-cpp)");
    println!("cargo:rerun-if-changed={}", lib.display());
    // --no-as-needed: the module calls librmm through the registry's dlsym lookups, not by symbol,
    // so an as-needed link would drop the dependency that makes the loader bring librmm_rs.so in first.
    println!("cargo:rustc-cdylib-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-cdylib-link-arg={}", lib.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,--as-needed");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,$ORIGIN/lib");
}
