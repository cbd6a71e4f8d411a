# shellcheck shell=bash
# Shared helpers for the CI suite scripts (ci/rust.sh, ci/python.sh, ci/cpp.sh) and scripts/*.sh.
# Source it; it never exits by itself.
#
# Steps:    step NAME CMD...   runs CMD, records PASS/FAIL for the summary.
#           advisory NAME CMD... the same, but a failure is only a WARN (never fails the suite).
# Summary:  finish SUITE       prints the step results, returns 1 if any step failed.
# GPU:      has_gpu            true when `nvidia-smi -L` succeeds (override: RMM_CI_GPU=0|1).
# Installs: apt_install PKG... installs the Debian packages that are missing (apt-get update once).
#           pip_install_if_missing MODULE PKG   pip-installs PKG when `import MODULE` fails.

RMM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export RMM_ROOT
RMM_STEPS=()
RMM_FAILED=0

log() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step() {
    local name=$1
    shift
    log "$name: $*"
    if "$@"; then
        RMM_STEPS+=("PASS  $name")
    else
        RMM_STEPS+=("FAIL  $name (exit $?)")
        RMM_FAILED=1
    fi
}

advisory() {
    local name=$1
    shift
    log "$name (advisory): $*"
    if "$@"; then
        RMM_STEPS+=("PASS  $name")
    else
        RMM_STEPS+=("WARN  $name (exit $?; advisory, does not fail the suite)")
    fi
}

note() { RMM_STEPS+=("SKIP  $*"); }

fail() {
    echo "ERROR: $*" >&2
    RMM_STEPS+=("FAIL  $*")
    RMM_FAILED=1
}

finish() {
    local suite=$1
    echo
    echo "---- $suite suite summary ----"
    local s
    for s in "${RMM_STEPS[@]}"; do echo "  $s"; done
    if [ "$RMM_FAILED" -eq 0 ]; then
        echo "$suite suite: OK"
    else
        echo "$suite suite: FAILED"
    fi
    return "$RMM_FAILED"
}

has_gpu() {
    case "${RMM_CI_GPU:-auto}" in
        1 | yes | true) return 0 ;;
        0 | no | false) return 1 ;;
    esac
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "ERROR: missing packages ${missing[*]} and no apt-get to install them" >&2
        return 1
    fi
    echo "installing with apt-get: ${missing[*]}"
    if [ -z "${RMM_APT_UPDATED:-}" ]; then
        as_root apt-get update -qq || return 1
        export RMM_APT_UPDATED=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
}

pip_install_if_missing() {
    local module=$1 package=$2
    python3 -c "import $module" >/dev/null 2>&1 && return 0
    echo "installing $package with pip"
    if ! python3 -m pip --version >/dev/null 2>&1; then
        apt_install python3-pip || return 1
    fi
    python3 -m pip install -q "$package" </dev/null ||
        python3 -m pip install -q --break-system-packages "$package" </dev/null
}

need_python() {
    command -v python3 >/dev/null 2>&1 || apt_install python3
}

# The cargo target directory (honours CARGO_TARGET_DIR and .cargo/config).
target_dir() {
    cargo metadata --format-version 1 --no-deps --manifest-path "$RMM_ROOT/Cargo.toml" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}

# The file name of the native library (librmm: the C ABI and the process's one engine), which the
# extension module links (bindings-python/build.rs) and finds in rmm/lib/ through RUNPATH $ORIGIN/lib.
RMM_NATIVE_LIBRARY=librmm_rs.so

# Builds rmm._rmm and the native library it links (crate rmm-cpp) in release mode and puts both in
# the pure-Python package, as the wheel lays them out (rmm/_rmm.abi3.so, rmm/lib/librmm_rs.so), so that
# PYTHONPATH=bindings-python/python imports it without installing anything.
build_python_ext() {
    (cd "$RMM_ROOT" && cargo build --release --locked -p rmm-cpp -p rmm-python) || return 1
    local target so lib pkg=$RMM_ROOT/bindings-python/python/rmm
    target="$(target_dir)/release"
    so=$target/librmm_python.so lib=$target/$RMM_NATIVE_LIBRARY
    for f in "$so" "$lib"; do
        [ -f "$f" ] || { echo "ERROR: $f was not built" >&2; return 1; }
    done
    mkdir -p "$pkg/lib"
    cp -f "$lib" "$pkg/lib/$RMM_NATIVE_LIBRARY"
    cp -f "$so" "$pkg/_rmm.abi3.so"
}
