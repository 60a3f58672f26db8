#!/usr/bin/env bash
# Tests a carried treeverify wheel on a GPU machine: installs it into this machine's Python with
# --no-deps (nothing is built or downloaded: the machine may be offline), runs the package's
# tests (python/tests, the GPU ones included) and the example from a folder outside the source
# tree, so `import treeverify` is the wheel's, and prints a summary.
#
#   scripts/device_wheel_test.sh [--expect-archs none|release|LIST] [--wheelhouse DIR] WHEEL
#   scripts/device_wheel_test.sh --fetch-test-deps DIR     # on a machine with PyPI access
#
#   --expect-archs   the CUDA architectures the wheel was built with, checked by
#                    tests/test_package.py (scripts/build_wheel.sh's default: release)
#   --wheelhouse DIR where to install pytest and ml_dtypes from (pip --no-index) when this
#                    Python lacks them; --fetch-test-deps DIR fills one (their wheels for
#                    CPython 3.12 on x86_64 Linux, 2.3 MB; TEST_DEPS_PYTHON=3.13 for
#                    another version; numpy is expected to be there)
#
# PYTHON (default python3) is the Python installed into: it needs numpy, and torch with CUDA for
# the GPU tests (they skip without it, as the SGLang plugin's do without sglang). A treeverify
# already installed there is replaced. A Python marked externally managed (PEP 668) is installed
# into with --break-system-packages, said so. Logs and the junit report go to $OUT (default: a
# temporary folder, printed). Exit status 1 when a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
PYTHON=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
expect="" wheelhouse="" wheel="" fetch=""
while [ $# -gt 0 ]; do
  case $1 in
    --expect-archs) expect=${2:?--expect-archs none|release|LIST}; shift ;;
    --wheelhouse) wheelhouse=${2:?--wheelhouse DIR}; shift ;;
    --fetch-test-deps) fetch=${2:?--fetch-test-deps DIR}; shift ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "device_wheel_test: unknown option $1 (--help)" >&2; exit 2 ;;
    *) wheel=$1 ;;
  esac
  shift
done

if [ -n "$fetch" ]; then
  # The tests' own needs, for an offline machine (ml_dtypes' wheels are per Python version).
  common=(--only-binary=:all: --python-version "${TEST_DEPS_PYTHON:-3.12}" --implementation cp
          --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -d "$fetch")
  "$PYTHON" -m pip download --quiet "${common[@]}" pytest
  "$PYTHON" -m pip download --quiet "${common[@]}" --no-deps ml_dtypes
  echo "device_wheel_test: test dependencies in $fetch:"
  ls "$fetch"
  exit 0
fi
[ -f "$wheel" ] || { echo "device_wheel_test: give the wheel file (--help)" >&2; exit 2; }
wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/treeverify-device-wheel.XXXXXX")}
mkdir -p "$out"
out=$(cd "$out" && pwd)
start=$SECONDS

"$PYTHON" - "$wheel" <<'EOF'
import sys
name = sys.argv[1].rsplit("/", 1)[-1]
py_tag, abi = name.split("-")[2:4]
here = sys.version_info
want = (int(py_tag[2]), int(py_tag[3:]))
ok = here[:2] >= want if abi == "abi3" else here[:2] == want
if not ok:
    sys.exit(f"device_wheel_test: {name} is for {py_tag}-{abi}, this is Python "
             f"{here[0]}.{here[1]}: set PYTHON")
EOF

pip_flags=()
managed='import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(not os.path.exists(marker) or sys.prefix != sys.base_prefix)'
if "$PYTHON" -c "$managed"; then
  echo "device_wheel_test: $PYTHON is externally managed: installing with --break-system-packages"
  pip_flags+=(--break-system-packages)
fi

# What the tests need that the wheel does not bring.
missing=()
for mod in numpy pytest ml_dtypes torch; do
  "$PYTHON" -c "import $mod" 2>/dev/null || missing+=("$mod")
done
for mod in "${missing[@]}"; do
  case $mod in
    numpy) echo "device_wheel_test: numpy missing: the package needs it" >&2; exit 2 ;;
    torch) echo "device_wheel_test: torch missing: the GPU tests will skip" ;;
    pytest | ml_dtypes)
      if [ -n "$wheelhouse" ]; then
        "$PYTHON" -m pip install --quiet "${pip_flags[@]}" --no-index --find-links "$wheelhouse" "$mod" ||
          { [ "$mod" = ml_dtypes ] || exit 2; echo "device_wheel_test: ml_dtypes not in $wheelhouse: its tests skip"; }
      elif [ "$mod" = pytest ]; then
        echo "device_wheel_test: pytest missing: give --wheelhouse DIR (made with --fetch-test-deps DIR where PyPI is reachable)" >&2
        exit 2
      else
        echo "device_wheel_test: ml_dtypes missing (no --wheelhouse): the tests of ml_dtypes arrays skip"
      fi ;;
  esac
done

previous=$("$PYTHON" -c 'import importlib.metadata as m; d = m.distribution("treeverify")
print(d.version, d.locate_file(""))' 2>/dev/null || true)
[ -n "$previous" ] && echo "device_wheel_test: replacing the installed treeverify $previous"
"$PYTHON" -m pip install --quiet "${pip_flags[@]}" --no-deps --no-index --force-reinstall "$wheel"

run=$out/run  # outside the source tree: the package must come from the install
mkdir -p "$run"
cd "$run"
where=$("$PYTHON" -c 'import treeverify; print(treeverify.__file__)')
case $where in
  "$root"/*) echo "device_wheel_test: treeverify came from the source tree ($where)" >&2; exit 1 ;;
esac
echo "device_wheel_test: treeverify imported from $where"
"$PYTHON" -m treeverify doctor | tee "$out/doctor.txt"
"$PYTHON" -m treeverify doctor --json >"$out/doctor.json"

rc=0
TREEVERIFY_EXPECT_CUDA_ARCHS=$expect "$PYTHON" -m pytest -q -p no:cacheprovider -rs \
  --junitxml="$out/pytest.xml" "$root/python/tests" 2>&1 | tee "$out/pytest.log" || rc=$?
example=ok
"$PYTHON" "$root/python/examples/sglang_style_step.py" --device cpu --layers 2 >"$out/example.log" 2>&1 || example="FAILED (cpu)"
if "$PYTHON" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  "$PYTHON" "$root/python/examples/sglang_style_step.py" --device cuda --layers 2 >>"$out/example.log" 2>&1 || example="FAILED (cuda)"
fi
[ "$example" = ok ] || rc=1

echo
echo "== device_wheel_test summary"
"$PYTHON" - "$out" "$wheel" "$where" "$example" "$((SECONDS - start))" <<'EOF'
import collections, json, subprocess, sys
import xml.etree.ElementTree as ET
out, wheel, where, example, secs = sys.argv[1:]
doc = json.load(open(f"{out}/doctor.json"))
try:
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=60).stdout.strip() or "none"
except (OSError, subprocess.SubprocessError):
    gpu = "none (no nvidia-smi)"
print(f"wheel:    {wheel.rsplit('/', 1)[-1]}")
print(f"package:  treeverify {doc['version']} (commit {doc['git_commit']}), {where}")
print(f"python:   {doc['python']}; extension {doc['extension']}")
print(f"archs:    {' '.join(doc['cuda_archs']) or 'none (CPU only)'}")
print(f"gpu:      {gpu}")
for d in doc["devices"]:
    print(f"  [{d['ordinal']}] {d['name']} sm_{d['compute_capability']}: "
          f"{'code for sm_%d' % d['kernel_arch'] if d['has_kernel_code'] else 'NO compiled code'}")
for p in doc["plans"][:4]:
    print(f"  {p['device']} {p['case']}: {p.get('kernel') or 'refused: ' + p.get('error', '')}")
by_file = collections.defaultdict(collections.Counter)
for case in ET.parse(f"{out}/pytest.xml").getroot().iter("testcase"):
    # "tests.test_x[.Class]" names a test, "" with name "tests.test_x" a module skipped whole
    parts = (case.get("classname") or case.get("name", "")).split(".")
    name = next((p for p in parts if p.startswith("test_")), "?")
    kind = "passed"
    for child in case:
        if child.tag in ("failure", "error"):
            kind = "failed"
        elif child.tag == "skipped":
            kind = "skipped"
    by_file[name][kind] += 1
total = collections.Counter()
print("tests:")
for name in sorted(by_file):
    c = by_file[name]
    total.update(c)
    print(f"  {name + '.py':<26} " + ", ".join(f"{c[k]} {k}" for k in ("passed", "failed", "skipped") if c[k]))
print(f"  {'all':<26} " + ", ".join(f"{total[k]} {k}" for k in ("passed", "failed", "skipped")))
print(f"example:  sglang_style_step.py {example}")
print(f"logs:     {out} ({secs} s)")
EOF
exit $rc
