//! Link settings of librmm_rs.so (the cdylib only): its SONAME, so every binary binds to the one copy
//! already loaded in the process, and -Bsymbolic, so its own calls never bind to another library's
//! same-named symbols (an earlier RTLD_GLOBAL librmm could otherwise interpose and split the registry);
//! and the `rmm_librmm` cfg, which the rmm-c-abi rlib of the same sources does not get.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The library itself (not the rmm-c-abi rlib of the same sources) installs the debug log when
    // it is loaded (src/debug_log.rs).
    println!("cargo::rustc-check-cfg=cfg(rmm_librmm)");
    println!("cargo:rustc-cfg=rmm_librmm");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librmm_rs.so");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    }
}
