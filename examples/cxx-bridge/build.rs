//! Compiles the C++ half of the bridge (cxx-build) against rmm-rs's headers and CCCL (>= 3.1: the
//! `cuda::mr` concepts), found in RMM_CCCL_INCLUDE_DIRS (`;`-separated), else in the workspace's
//! build/cccl (fetched there with bindings-cpp/cmake/fetch-cccl.sh when missing). Without CCCL the
//! bridge is left out (cfg rmm_no_cccl) and the tests say so.

use std::path::{Path, PathBuf};
use std::process::Command;

fn cccl_dirs(root: &Path) -> Option<Vec<PathBuf>> {
    if let Ok(dirs) = std::env::var("RMM_CCCL_INCLUDE_DIRS") {
        let dirs: Vec<PathBuf> = dirs
            .split(';')
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect();
        if !dirs.is_empty() {
            return Some(dirs);
        }
    }
    let dest = root.join("build/cccl");
    let inc = dest.join("nvidia/cu13/include");
    let ready = |inc: &Path| {
        inc.join("cccl/cuda/memory_resource").is_file() && inc.join("cuda_runtime_api.h").is_file()
    };
    if !ready(&inc) && std::env::var_os("RMM_NO_FETCH").is_none() {
        let script = root.join("bindings-cpp/cmake/fetch-cccl.sh");
        let _ = Command::new("bash").arg(&script).arg(&dest).status();
    }
    ready(&inc).then(|| vec![inc.join("cccl"), inc])
}

fn main() {
    println!("cargo:rustc-check-cfg=cfg(rmm_no_cccl)");
    println!("cargo:rerun-if-env-changed=RMM_CCCL_INCLUDE_DIRS");
    println!("cargo:rerun-if-changed=src/scale.cpp");
    println!("cargo:rerun-if-changed=include/scale.hpp");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.join("../..");
    for header in ["cxx.hpp", "cxx_device_buffer.hpp", "device_buffer.hpp"] {
        println!(
            "cargo:rerun-if-changed={}",
            root.join("bindings-cpp/include/rmm").join(header).display()
        );
    }
    let Some(cccl) = cccl_dirs(&root) else {
        println!("cargo:warning=rmm-example-cxx: no CCCL headers; the bridge is left out (RMM_CCCL_INCLUDE_DIRS)");
        println!("cargo:rustc-cfg=rmm_no_cccl");
        return;
    };
    let mut build = cxx_build::bridge("src/lib.rs");
    build
        .file("src/scale.cpp")
        .std("c++17")
        .include(root.join("bindings-cpp/include"));
    for dir in &cccl {
        build
            .flag("-isystem")
            .flag(dir.to_str().expect("a UTF-8 path"));
    }
    build
        .flag_if_supported("-Wno-unused-parameter")
        .compile("rmm_example_cxx");
}
