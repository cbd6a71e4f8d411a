//! Link settings of librmm_rs.so (the cdylib only): its SONAME, so every binary binds to the one copy
//! already loaded in the process, and -Bsymbolic, so its own calls never bind to another library's
//! same-named symbols (an earlier RTLD_GLOBAL librmm could otherwise interpose and split the registry).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librmm_rs.so");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    }
}
