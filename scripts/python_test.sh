#!/usr/bin/env bash
# Builds and installs the Python package from this checkout, then runs its pytest suite.
#
#   scripts/python_test.sh            # CPU tests here; GPU tests too where a GPU is visible
#
# Build deps come from PyPI once; the package is then built with --no-build-isolation, so a
# machine without network access (the GPU box) reuses what is installed and pip downloads
# nothing per build. The CMake build folder persists in python/build/, so a rerun only
# recompiles what changed.
#
# CUDA: with no GPU visible the extension is built CPU-only (TREEVERIFY_CUDA=OFF): nothing
# could run its CUDA code here, and the C++ build already compiles the kernels for every
# release architecture. With a GPU it is built for that GPU's architecture only (the six
# release architectures would take many minutes inside pip). Override with
# TREEVERIFY_CUDA=ON|OFF and TREEVERIFY_CUDA_ARCHS="80;90a" in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore  # CI and the GPU box run as root, without a venv

need=()
for mod in nanobind scikit_build_core pytest numpy; do
  "$PYTHON" -c "import $mod" 2>/dev/null || need+=("${mod//_/-}")
done
if ((${#need[@]})); then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check "${need[@]}"
fi

# The SGLang plugin's tests (python/tests/test_sglang_plugin.py) need torch and sglang; they
# skip, saying so, without them. TREEVERIFY_TEST_SGLANG=1 (CI sets it) installs the CPU set first:
# sglang 0.5.17 and its import closure with --no-deps (scripts/sglang_cpu_requirements.txt: about
# 1 GB of wheels, a minute).
if [[ "${TREEVERIFY_TEST_SGLANG:-0}" == 1 ]]; then
  echo "python_test: installing torch and sglang for the plugin's tests"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps \
    -r scripts/sglang_cpu_requirements.txt
fi

gpu_arch=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ' || true)
fi
cuda=${TREEVERIFY_CUDA:-$([[ -n "$gpu_arch" ]] && echo AUTO || echo OFF)}
[[ "$gpu_arch" == 90 ]] && gpu_arch=90a  # Hopper's code is sm_90a: it holds the wgmma kernel
archs=${TREEVERIFY_CUDA_ARCHS:-${gpu_arch:-release}}
echo "python_test: building treeverify (TREEVERIFY_CUDA=$cuda, archs $archs)"

jobs=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
CMAKE_BUILD_PARALLEL_LEVEL=$jobs "$PYTHON" -m pip install --quiet --disable-pip-version-check \
  --no-build-isolation --force-reinstall --no-deps \
  -Ccmake.define.TREEVERIFY_CUDA="$cuda" -Ccmake.define.TREEVERIFY_CUDA_ARCHS="$archs" \
  ./python

# Run from outside the source tree so that the installed package is the one imported.
cd python/tests
"$PYTHON" -m pytest -q -p no:cacheprovider .
cd ../examples
"$PYTHON" sglang_style_step.py --device cpu --layers 2
if [[ -n "$gpu_arch" ]] && "$PYTHON" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  "$PYTHON" sglang_style_step.py --device cuda --layers 2
fi
