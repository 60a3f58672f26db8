#!/usr/bin/env bash
# Tests a built wheel as a user gets it: a fresh venv, the wheel installed from its file (its
# dependency numpy and the tests' pytest and ml_dtypes as binary wheels from PyPI, nothing built
# from source), no compiler, CMake or nvcc reachable (stand-ins that fail loudly come first on
# PATH, and any call to one fails the test), then the package's tests (python/tests) and the
# example run from a folder outside the source tree, so `import treeverify` is the wheel's.
#
#   scripts/wheel_test.sh [--sglang] [--expect-archs none|release|LIST] [--keep] WHEEL
#
#   --sglang         also install scripts/sglang_cpu_requirements.txt (torch, sglang: ~1 GB, a
#                    minute) for the SGLang plugin's tests; also TREEVERIFY_TEST_SGLANG=1
#   --expect-archs   the CUDA architectures the wheel was built with, checked by
#                    tests/test_package.py ('none' for a --cpu-only wheel)
#   --keep           keep the venv (its path is printed)
#
# PYTHON (default python3) makes the venv: a cp312-abi3 wheel needs 3.12+, a cp311 one 3.11.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
sglang=${TREEVERIFY_TEST_SGLANG:-0} expect="" keep=0 wheel=""
while [ $# -gt 0 ]; do
  case $1 in
    --sglang) sglang=1 ;;
    --expect-archs) expect=${2:?--expect-archs none|release|LIST}; shift ;;
    --keep) keep=1 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "wheel_test: unknown option $1 (--help)" >&2; exit 2 ;;
    *) wheel=$1 ;;
  esac
  shift
done
[ -f "$wheel" ] || { echo "wheel_test: give the wheel file (--help)" >&2; exit 2; }
wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")
PYTHON=${PYTHON:-python3}
start=$SECONDS
tmp=$(mktemp -d "${TMPDIR:-/tmp}/treeverify-wheel-test.XXXXXX")
((keep)) || trap 'rm -rf "$tmp"' EXIT
venv=$tmp/venv
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

echo "wheel_test: $(basename "$wheel") into a fresh venv ($("$PYTHON" --version), $venv)"
"$PYTHON" -m venv "$venv"
py=$venv/bin/python
pip_install() { "$py" -m pip install --quiet --only-binary=:all: "$@"; }
if [[ $sglang == 1 ]]; then
  echo "wheel_test: torch and sglang for the plugin's tests (scripts/sglang_cpu_requirements.txt)"
  pip_install --no-deps -r scripts/sglang_cpu_requirements.txt
fi
pip_install "$wheel" pytest ml_dtypes

# Anything that tries to compile from here on meets these.
standins=$tmp/no-compilers calls=$tmp/compiler-calls.log
mkdir -p "$standins"
: >"$calls"
for tool in cc c++ gcc g++ clang clang++ nvcc cmake ninja make; do
  cat >"$standins/$tool" <<STANDIN
#!/bin/sh
echo "wheel_test: '$tool \$*' was run, but nothing may be compiled for an installed wheel" >&2
echo "$tool \$*" >>"$calls"
exit 127
STANDIN
  chmod +x "$standins/$tool"
done
export PATH=$standins:$venv/bin:$PATH
unset CUDA_HOME CUDA_PATH CC CXX CUDACXX

run=$tmp/run  # outside the source tree: the package must come from the venv
mkdir -p "$run"
cd "$run"
where=$("$py" -c 'import treeverify; print(treeverify.__file__)')
echo "wheel_test: treeverify imported from $where"
case $where in
  "$venv"/*) ;;
  *) echo "wheel_test: treeverify came from $where, not the venv" >&2; exit 1 ;;
esac
"$py" -m treeverify doctor

log=$tmp/pytest.log
rc=0
TREEVERIFY_EXPECT_CUDA_ARCHS=$expect "$py" -m pytest -q -p no:cacheprovider -rs \
  "$root/python/tests" 2>&1 | tee "$log" || rc=$?
"$py" "$root/python/examples/sglang_style_step.py" --device cpu --layers 2 || rc=1
if command -v nvidia-smi >/dev/null 2>&1 &&
  "$py" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  "$py" "$root/python/examples/sglang_style_step.py" --device cuda --layers 2 || rc=1
fi
if [ -s "$calls" ]; then
  echo "wheel_test: FAILED: compiler or build tool called:" >&2
  sed 's/^/  /' "$calls" >&2
  rc=1
fi
echo
echo "wheel_test: $(basename "$wheel"): $(grep -E '[0-9]+ (passed|failed)' "$log" | tail -1 | tr -d '=')"
echo "wheel_test: imported from $where; $((SECONDS - start)) s; $([ $rc -eq 0 ] && echo ok || echo FAILED)"
((keep)) && echo "wheel_test: venv kept: $venv"
exit $rc
