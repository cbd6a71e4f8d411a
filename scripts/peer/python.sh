#!/usr/bin/env bash
# RMM's own Python test suite (../shared/peer-tests/rmm-python, unmodified) against our `rmm`.
# Called by scripts/peer-tests.sh; runs alone too: bash scripts/peer/python.sh
#
# The suite is copied to a temporary directory at run time (never into the repository) and run there
# with RMM's options `-p no:cacheprovider -o addopts=""`, plus -ra (the reason of every skip and
# failure) and --continue-on-collection-errors (without a GPU, CuPy or Numba some files cannot even
# be imported; the others still run, and each such file counts as one error). The last line is `N passed, N failed, N skipped` (failed counts pytest's errors too);
# the exit status is non-zero when anything failed or nothing ran.
#
# Environment:
#   RMM_PEER_PYTHON_DIR  the suite (default: stage/peer/rmm-python if staged, else
#                        ../shared/peer-tests/rmm-python)
#   RMM_PYTHONPATH       where our `rmm` package is (default: bindings-python/python, with rmm._rmm
#                        built there first when it is missing; the GPU runner passes its install)
#   RMM_PEER_PYTEST_ARGS extra pytest arguments (e.g. "-x" or "-k pool")
#   RMM_PEER_INSTALL=0   never pip-install (numpy is installed when missing otherwise)
# In host mode (no GPU) most files cannot run: their helpers need a GPU, CuPy, Numba or PyTorch;
# docs/testing.md lists what happens to each.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../ci/lib.sh"
cd "$RMM_ROOT" || exit 1

suite=${RMM_PEER_PYTHON_DIR:-}
if [ -z "$suite" ]; then
    for d in "$RMM_ROOT/stage/peer/rmm-python" "$RMM_ROOT/../shared/peer-tests/rmm-python"; do
        [ -f "$d/conftest.py" ] && { suite=$d; break; }
    done
fi
if [ -z "$suite" ] || [ ! -f "$suite/conftest.py" ]; then
    echo "peer python: RMM's suite not found (set RMM_PEER_PYTHON_DIR)"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi

need_python || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
pip_install_if_missing pytest pytest >/dev/null || { echo "peer python: no pytest"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
# numpy is the one dependency the host-mode files need; the GPU machine brings its own packages and
# has no network (the GPU runner sets RMM_PEER_INSTALL=0).
if [ "${RMM_PEER_INSTALL:-1}" != 0 ]; then
    pip_install_if_missing numpy numpy >/dev/null || true
fi

pkg=${RMM_PYTHONPATH:-}
if [ -z "$pkg" ]; then
    pkg=$RMM_ROOT/bindings-python/python
    if ! ls "$pkg"/rmm/_rmm*.so >/dev/null 2>&1; then
        echo "peer python: building rmm._rmm (cargo build --release -p rmm-python)"
        build_python_ext >/dev/null 2>&1 || { echo "peer python: build failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
    fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rmm-peer-python.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$suite"/. "$work/"
find "$work" -name __pycache__ -prune -exec rm -rf {} +

echo "peer python: RMM's suite from $suite, our rmm from $pkg"
(
    cd "$work" || exit 1
    export PYTHONPATH=$pkg${PYTHONPATH:+:$PYTHONPATH}
    export PYTHONDONTWRITEBYTECODE=1
    python3 -c 'import rmm; print("rmm", rmm.__version__, "from", rmm.__file__, "host mode:", rmm.is_host_mode())'
    # shellcheck disable=SC2086
    python3 -m pytest -p no:cacheprovider -o addopts="" -ra --continue-on-collection-errors ${RMM_PEER_PYTEST_ARGS:-} .
) >"$work/pytest.out" 2>&1
rc=$?
cat "$work/pytest.out"

result=$(grep -E '(passed|failed|skipped|error|no tests ran).* in [0-9.]+s' "$work/pytest.out" | tail -1)
num() { grep -oE "[0-9]+ $1" <<<"$2" | head -1 | grep -oE '^[0-9]+' || echo 0; }
if [ -z "$result" ]; then
    echo "peer python: no pytest summary (exit $rc)"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
passed=$(num passed "$result") skipped=$(num skipped "$result")
failed=$(($(num failed "$result") + $(num 'errors?' "$result")))
echo
echo "peer python: pytest exit $rc; $(num xfailed "$result") xfailed, $(num xpassed "$result") xpassed"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ $((passed + skipped)) -gt 0 ]
