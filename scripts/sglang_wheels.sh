#!/usr/bin/env bash
# Downloads, into DEST (default .whl/, git-ignored), the wheels that SGLang 0.5.17's attention
# modules and its attention test kits (sglang.test.kits.attention_unittest) need on the GPU
# machine, beyond what that machine already has (Python 3.12, torch 2.11.0+cu130, triton 3.6,
# numpy, transformers 5.17, huggingface-hub, requests, aiohttp, pillow, psutil, ... : the list
# in .library/device/KINDS.md). The machine has no internet: the wheels travel with the device
# tool's `carry` (64 MiB per call, this repository included), so three wheels are cut down
# here (same file names; RECORD rewritten):
#
#   sglang 0.5.17            22.3 MB -> 9.7 MB   drop the compiled server/grpc/multimodal
#                                                front ends and multimodal_gen (not imported)
#   sglang-kernel 0.4.5      383 MB -> 15.0 MB   keep the Python files and sm90/common_ops only
#                                                (H100/H200; flash_ops 1.1 GB, sm100, flashmla,
#                                                infllm, spatial dropped). Imported unguarded
#                                                on CUDA by triton_backend.py (sgl_kernel.utils),
#                                                memory_pool_host.py, gguf.py, and the kits'
#                                                runner modes (dual_chunk_flashattention_backend)
#   flashinfer-python 0.6.15.post1  15 MB -> 2.2 MB  drop flashinfer/data (JIT sources);
#                                                sampler.py imports flashinfer.sampling under
#                                                is_cuda(), reached through ModelRunner
#
# and the rest are small pure-Python or self-contained binary wheels that sglang's import
# closure reaches and the device lacks (pydantic + pydantic-core, orjson, msgspec, pyzmq,
# pybase64, xgrammar + apache-tvm-ffi, openai, starlette, IPython + traitlets, dill, gguf,
# loguru, compressed-tensors, partial-json-parser, ...): 24 wheels, 37 MB in all (largest after
# the three above: apache-tvm-ffi 2.7, pydantic-core 2.3, xgrammar 1.3, openai 1.0 MB). With this
# repository (~8 MB) that leaves ~20 MB of the 64 MiB carry: keep the call's other payload small.
# Sizes are printed at the end. The set was checked on a CPU machine, in a venv holding only the
# device's packages: every sglang attention module and the kits' attention_methods import; the
# kits' runner_modes need sgl_kernel's ops library, which loads only where a GPU driver is.
# SGLang 0.5.17 is the newest release that pins torch==2.11.0 (0.5.18-0.5.21 pin 2.13.0,
# 0.5.22-0.5.23 pin 2.14.1). Wheel versions are pinned below.
#
# On the device (carry [".whl"]), first thing in the command:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#     --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit
# transformers 5.17 (the device's) defines a 'qwen3_asr' config that sglang 0.5.17 registers
# again without exist_ok (srt/configs/qwen3_asr.py:167): import sglang only after
#   import transformers; _r = transformers.AutoConfig.register
#   transformers.AutoConfig.register = lambda t, c, exist_ok=False: _r(t, c, exist_ok=True)
# (docs/sglang-contract.md, "Installing"), or carry transformers==5.12.1 (sglang's pin) too.
#
# Usage: scripts/sglang_wheels.sh [DEST]     (PYTHON=python3 by default; needs PyPI)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.whl}
PYTHON=${PYTHON:-python3}
mkdir -p "$DEST"
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  --platform manylinux1_x86_64)

# name==version   why (who imports it)
WHEELS=(
  sglang==0.5.17                  # the package
  sglang-kernel==0.4.5            # sgl_kernel (see above); sglang pins 0.4.5
  flashinfer-python==0.6.15.post1 # flashinfer.sampling (sampler.py, under is_cuda); sglang's pin
  apache-tvm-ffi==0.1.11          # tvm_ffi: sglang.kernels.jit, xgrammar, flashinfer; sglang's pin
  xgrammar==0.2.9                 # function_call/inkling_detector.py (via server_args); 0.2.1 is 45 MB
  pydantic==2.14.4                # server_args, protocol, msgspec structs
  pydantic-core==2.50.5           # pydantic's exact pin
  annotated-types==0.8.0          # pydantic
  typing-inspection==0.4.5        # pydantic
  orjson==3.13.0                  # sglang/srt/utils/common.py
  msgspec==0.23.0                 # attention_backend_setup.py, verify_mask.py
  pybase64==1.5.1                 # sglang/srt/utils/common.py
  pyzmq==27.3.0                   # zmq: managers
  openai==2.6.1                   # entrypoints.openai protocol (sglang's pin)
  distro==1.9.0                   # openai
  sniffio==1.3.1                  # openai
  starlette==1.10.0               # utils (HTTP types)
  ipython==9.19.1                 # IPython: sglang/utils.py
  traitlets==5.16.1               # IPython
  dill==0.4.1                     # srt/utils
  gguf==0.19.0                    # srt/layers/quantization/gguf.py
  loguru==0.7.3                   # compressed-tensors
  compressed-tensors==0.20.1      # srt/layers/quantization
  partial-json-parser==0.2.1.1.post7  # function_call
)
specs=()
for w in "${WHEELS[@]}"; do specs+=("${w%%#*}"); done
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps "${PLAT[@]}" -d "$DEST" "${specs[@]}"

# Cut a wheel down in place: drop members matching any of the patterns, rewrite RECORD.
"$PYTHON" - "$DEST" <<'EOF'
import fnmatch, glob, os, sys, zipfile
dest = sys.argv[1]
CUTS = {
    "sglang-0.5.17-": ["sglang/srt/server/_core*.so", "sglang/srt/grpc/_core*.so",
                       "sglang/srt/multimodal/_core*.so", "sglang/multimodal_gen/*"],
    "sglang_kernel-0.4.5-": ["sgl_kernel/flash_ops*.so", "sgl_kernel/flashmla_ops*.so",
                             "sgl_kernel/infllm_ops*.so", "sgl_kernel/spatial_ops*.so",
                             "sgl_kernel/sm100/*"],
    "flashinfer_python-0.6.15.post1-": ["flashinfer/data/*"],
}
for prefix, pats in CUTS.items():
    for path in glob.glob(os.path.join(dest, prefix + "*.whl")):
        with zipfile.ZipFile(path) as zin:
            names = zin.namelist()
            drop = {n for n in names if any(fnmatch.fnmatch(n, p) for p in pats)}
            if not drop:
                continue  # already cut
            tmp = path + ".tmp"
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
                for info in zin.infolist():
                    if info.filename in drop:
                        continue
                    data = zin.read(info.filename)
                    if info.filename.endswith(".dist-info/RECORD"):
                        keep = [l for l in data.decode().splitlines() if l.split(",")[0] not in drop]
                        data = ("\n".join(keep) + "\n").encode()
                    zout.writestr(info, data)
        os.replace(tmp, path)
        print(f"cut {os.path.basename(path)}: dropped {len(drop)} files")
EOF
if [ "$DEST" = .whl ] && ! git check-ignore -q .whl/x.whl 2>/dev/null; then
  echo '/.whl/' >>"$(git rev-parse --git-path info/exclude)"
fi
ls -l "$DEST"/*.whl | awk '{printf "%8.1f MB  %s\n", $5/1e6, $NF}'
du -ch "$DEST"/*.whl | tail -1
