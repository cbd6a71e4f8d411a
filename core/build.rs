//! Builds the NVTX3 memory-API shim (`src/mr/detail/nvtx_shim.c`) against the vendored NVTX3
//! headers (`third_party/nvtx3`, header-only; every call is a no-op unless a tool injects itself).

fn main() {
    println!("cargo:rerun-if-changed=src/mr/detail/nvtx_shim.c");
    println!("cargo:rerun-if-changed=third_party/nvtx3");
    cc::Build::new()
        .file("src/mr/detail/nvtx_shim.c")
        .include("third_party")
        .warnings(true)
        .compile("rmm_nvtx_shim");
    // NVTX3 looks for an injected tool with dlopen (in libc itself since glibc 2.34).
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        println!("cargo:rustc-link-lib=dl");
    }
}
