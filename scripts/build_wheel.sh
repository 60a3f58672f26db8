#!/usr/bin/env bash
# Builds one redistributable treeverify wheel: the CUDA kernels for the release architectures,
# fmt, OpenBLAS and the CUDA runtime linked in (TREEVERIFY_STATIC_DEPS), the stable ABI on
# CPython 3.12+ (one cp312-abi3 wheel for 3.12 and newer; a cp3XX wheel on older Pythons), and
# a manylinux tag from auditwheel. Where it runs, a user needs the NVIDIA driver and nothing else.
#
#   scripts/build_wheel.sh [--cpu-only] [--archs LIST] [--out DIR] [--build-dir DIR]
#                          [--no-repair] [--no-stable-abi]
#
#   --cpu-only       no CUDA backend (TREEVERIFY_CUDA=OFF): the CPU backends only, a minute
#   --archs LIST     CUDA architectures, as TREEVERIFY_CUDA_ARCHS takes them ("90a;120" or
#                    "90a,120"); default: release (sm_80, 86, 89, 90a, 100, 120)
#   --out DIR        where the wheel goes (default: dist/, or dist/cpu-only/ with --cpu-only:
#                    both wheels have the same name)
#   --build-dir DIR  the CMake build folder, kept between runs so a rebuild compiles only what
#                    changed (default: build-wheel/<cpu|cuda-ARCHS>-<wheel tag>)
#   --no-repair      skip auditwheel: the wheel keeps the linux_x86_64 tag
#   --no-stable-abi  a wheel for this Python version only, also on 3.12+
#
# PYTHON picks the interpreter (default python3): the wheel is for its version (3.12+: abi3).
# JOBS (default: the cores) bounds the parallel compiles. The build tools (nanobind,
# scikit-build-core, CMake, auditwheel: scripts/wheel_build_requirements.txt) go into a venv of
# their own, build-wheel/venv-<python>/, made once from PyPI. Needs what scripts/setup.sh
# installs (a compiler, libfmt-dev, libopenblas-dev with its static archive) and, without
# --cpu-only, the CUDA toolkit (nvcc on PATH or in /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cpu_only=0 archs=release out="" build_dir="" repair=1 stable_abi=1
while [ $# -gt 0 ]; do
  case $1 in
    --cpu-only) cpu_only=1 ;;
    --archs) archs=${2:?--archs LIST}; shift ;;
    --out) out=${2:?--out DIR}; shift ;;
    --build-dir) build_dir=${2:?--build-dir DIR}; shift ;;
    --no-repair) repair=0 ;;
    --no-stable-abi) stable_abi=0 ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "build_wheel: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
  shift
done
archs=${archs//,/;}
start=$SECONDS
PYTHON=${PYTHON:-python3}
py_tag=$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')

# The build tools' venv, remade when the pins change.
venv=$root/build-wheel/venv-$py_tag
stamp=$(sha256sum scripts/wheel_build_requirements.txt | cut -c1-16)
if [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$stamp" ]; then
  echo "build_wheel: build tools into $venv (scripts/wheel_build_requirements.txt)"
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r scripts/wheel_build_requirements.txt
  echo "$stamp" >"$venv/.requirements"
fi
export PATH=$venv/bin:$PATH  # its cmake first
vpy=$venv/bin/python

defines=(-Ccmake.define.TREEVERIFY_STATIC_DEPS=ON)
if ((cpu_only)); then
  defines+=(-Ccmake.define.TREEVERIFY_CUDA=OFF)
  variant=cpu
else
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=$PATH:/usr/local/cuda/bin
  fi
  command -v nvcc >/dev/null 2>&1 ||
    { echo "build_wheel: nvcc not found (PATH, /usr/local/cuda): install the CUDA toolkit or use --cpu-only" >&2; exit 2; }
  defines+=(-Ccmake.define.TREEVERIFY_CUDA=ON "-Ccmake.define.TREEVERIFY_CUDA_ARCHS=$archs")
  variant=cuda-${archs//;/-}
fi
abi_tag=$py_tag
if ((stable_abi)) && "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
  abi_tag=cp312-abi3
elif ((!stable_abi)); then
  defines+=("-Cwheel.py-api=")
fi
if [ -z "$out" ]; then
  out=dist
  ((cpu_only)) && out=dist/cpu-only
fi
build_dir=${build_dir:-build-wheel/$variant-$abi_tag}
mkdir -p "$out" "$build_dir"
out=$(cd "$out" && pwd) build_dir=$(cd "$build_dir" && pwd)
raw=$build_dir/raw-wheel
rm -rf "$raw"

echo "build_wheel: $variant, $abi_tag, build folder $build_dir"
CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)} "$vpy" -m pip wheel --no-deps --no-build-isolation \
  --disable-pip-version-check -w "$raw" "${defines[@]}" "-Cbuild-dir=$build_dir" ./python
whl=$(ls "$raw"/treeverify-*.whl)

if ((repair)); then
  rm -rf "$build_dir/repaired"
  # auto: the oldest manylinux tag whose symbol versions the module stays within.
  auditwheel repair --plat auto -w "$build_dir/repaired" "$whl"
  whl=$(ls "$build_dir"/repaired/treeverify-*.whl)
  # The libraries are linked in: a library auditwheel had to copy in means a dependency was not.
  grafted=$("$vpy" -c 'import sys, zipfile; print(" ".join(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if ".libs/" in n))' "$whl")
  if [ -n "$grafted" ]; then
    echo "build_wheel: auditwheel copied shared libraries into the wheel: $grafted" >&2
    echo "build_wheel: TREEVERIFY_STATIC_DEPS should have linked them statically" >&2
    exit 1
  fi
fi
final=$out/$(basename "$whl")
cp -f "$whl" "$final"

echo
echo "== auditwheel show $(basename "$final")"
auditwheel show "$final" || { ((!repair)) || exit 1; }
secs=$((SECONDS - start))
size=$(stat -c %s "$final")
name=$(basename "$final" .whl)
desc="CUDA sm_${archs//;/ sm_}"
[ "$archs" = release ] && desc="CUDA release: sm_$(sed -n 's/^set(TV_RELEASE_ARCHS "\(.*\)")$/\1/p' CMakeLists.txt | sed 's/;/ sm_/g')"
((cpu_only)) && desc="CPU only"
IFS=- read -r _ version python abi platform <<<"$name"
echo
echo "build_wheel: $final"
printf 'build_wheel: version %s, tags %s-%s-%s, %s, %.1f MiB, built in %dm%02ds (%s jobs)\n' \
  "$version" "$python" "$abi" "$platform" \
  "$desc" \
  "$(awk -v s="$size" 'BEGIN { print s / 1048576 }')" $((secs / 60)) $((secs % 60)) "${JOBS:-$(nproc)}"
