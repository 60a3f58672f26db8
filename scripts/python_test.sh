#!/usr/bin/env bash
# The Python package's tests (README's test command and CI run this).
#
#   scripts/python_test.sh            # CPU tests here; GPU tests too where a GPU is visible
#
# No GPU (CI): builds the CPU-only wheel (scripts/build_wheel.sh --cpu-only: static deps, the
# stable ABI on 3.12+, auditwheel's manylinux tag) and tests it as a user installs it
# (scripts/wheel_test.sh: a fresh venv, no compiler on PATH, tests run from outside the source
# tree). Nothing is installed into $PYTHON. The wheel's CMake folder persists in build-wheel/.
#
# With a GPU: builds and installs the package from this checkout into $PYTHON for that GPU's
# architecture only (the six release architectures would take many minutes inside pip), then
# runs the tests. Build deps come from PyPI once; the package is then built with
# --no-build-isolation, so a machine without network access (the GPU box) reuses what is
# installed and pip downloads nothing per build. The CMake build folder persists in
# python/build/. Override with TREEVERIFY_CUDA=ON|OFF and TREEVERIFY_CUDA_ARCHS="80;90a".
# (scripts/device_wheel_test.sh tests a carried wheel on a GPU machine instead.)
#
# The SGLang plugin's tests (python/tests/test_sglang_plugin.py) need torch and sglang; they
# skip, saying so, without them. TREEVERIFY_TEST_SGLANG=1 (CI sets it) installs the CPU set first:
# sglang 0.5.17 and its import closure with --no-deps (scripts/sglang_cpu_requirements.txt: about
# 1 GB of wheels, a minute), into the wheel's venv or, with a GPU, into $PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore  # CI and the GPU box run as root, without a venv

gpu_arch=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ' || true)
fi
cuda=${TREEVERIFY_CUDA:-$([[ -n "$gpu_arch" ]] && echo AUTO || echo OFF)}
[[ "$gpu_arch" == 90 ]] && gpu_arch=90a  # Hopper's code is sm_90a: it holds the wgmma kernel
archs=${TREEVERIFY_CUDA_ARCHS:-${gpu_arch:-release}}

if [[ $cuda == OFF ]]; then
  py_tag=$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
  out=build-wheel/python-test-$py_tag
  rm -rf "$out"
  echo "python_test: no GPU: the CPU-only wheel, tested installed (scripts/build_wheel.sh, wheel_test.sh)"
  PYTHON=$PYTHON scripts/build_wheel.sh --cpu-only --out "$out"
  sglang_flag=()
  [[ "${TREEVERIFY_TEST_SGLANG:-0}" == 1 ]] && sglang_flag=(--sglang)
  PYTHON=$PYTHON exec scripts/wheel_test.sh --expect-archs none "${sglang_flag[@]}" "$out"/treeverify-*.whl
fi

need=()
for mod in nanobind scikit_build_core pytest numpy; do
  "$PYTHON" -c "import $mod" 2>/dev/null || need+=("${mod//_/-}")
done
if ((${#need[@]})); then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check "${need[@]}"
fi
if [[ "${TREEVERIFY_TEST_SGLANG:-0}" == 1 ]]; then
  echo "python_test: installing torch and sglang for the plugin's tests"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps \
    -r scripts/sglang_cpu_requirements.txt
fi

echo "python_test: building treeverify (TREEVERIFY_CUDA=$cuda, archs $archs)"

jobs=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
CMAKE_BUILD_PARALLEL_LEVEL=$jobs "$PYTHON" -m pip install --quiet --disable-pip-version-check \
  --no-build-isolation --force-reinstall --no-deps \
  -Ccmake.define.TREEVERIFY_CUDA="$cuda" -Ccmake.define.TREEVERIFY_CUDA_ARCHS="$archs" \
  -Cwheel.py-api= ./python  # for this Python only: a stable-ABI module needs CMake 3.26+

# Run from outside the source tree so that the installed package is the one imported.
cd python/tests
# tests/test_package.py checks the architectures built where CMake found nvcc (as it does: on
# PATH or in /usr/local/cuda).
expect=""
if [[ $cuda == ON ]] || command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  expect=$archs
fi
TREEVERIFY_EXPECT_CUDA_ARCHS=$expect "$PYTHON" -m pytest -q -p no:cacheprovider .
cd ../examples
"$PYTHON" sglang_style_step.py --device cpu --layers 2
if [[ -n "$gpu_arch" ]] && "$PYTHON" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  "$PYTHON" sglang_style_step.py --device cuda --layers 2
fi
