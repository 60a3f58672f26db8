"""The installed package: its version is the C++ library's (CMakeLists.txt), its metadata names
the SGLang entry point, `python -m treeverify doctor` runs, and the CUDA architectures it
reports agree with each other and with the build (TREEVERIFY_EXPECT_CUDA_ARCHS, which
scripts/wheel_test.sh and scripts/python_test.sh set from what they built: 'none', 'release' or
a list such as '90a,120')."""
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import treeverify as tv

SOURCE_ROOT = Path(__file__).resolve().parents[2]
RELEASE_ARCHS = [80, 86, 89, 90, 100, 120]  # CMakeLists.txt's TV_RELEASE_ARCHS, 90a as 90


def cmake_version():
    cmake = SOURCE_ROOT / "CMakeLists.txt"
    if not cmake.exists():
        pytest.skip(f"no source tree at {SOURCE_ROOT} (the tests were copied out of it)")
    m = re.search(r"project\(treeverify\s+VERSION\s+([0-9.]+)", cmake.read_text())
    assert m, "CMakeLists.txt has no project(treeverify VERSION x.y.z)"
    return m.group(1)


def distribution():
    try:
        return importlib.metadata.distribution("treeverify")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("treeverify is not installed as a distribution (no metadata)")


def doctor(*args):
    r = subprocess.run([sys.executable, "-m", "treeverify", "doctor", *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_version_is_the_library_and_cmake():
    assert tv.__version__ == tv.build_info()["version"]
    assert tv.__version__ == cmake_version()


def test_metadata_version_and_entry_point():
    dist = distribution()
    assert dist.version == tv.__version__
    eps = [e for e in dist.entry_points if e.group == "sglang.srt.plugins"]
    assert [(e.name, e.value) for e in eps] == [("treeverify", "treeverify.sglang:register")]
    assert any("sglang" in r and "extra" in r for r in dist.requires or [])


def test_imported_from_the_install_not_the_source():
    here = Path(tv.__file__).resolve()
    assert not here.is_relative_to(SOURCE_ROOT / "python" / "treeverify"), here


def test_stable_abi_module_only_on_312():
    name = Path(tv._ext.__file__).name
    if ".abi3." in name:
        assert sys.version_info >= (3, 12), name


def test_archs_agree():
    info = tv.build_info()
    archs = info["cuda_archs"]
    assert info["cuda_compiled"] == bool(archs)
    assert [k["arch"] for k in tv._ext.cuda_kernels_by_arch()] == archs
    assert set(archs) <= set(RELEASE_ARCHS), archs
    assert archs == sorted(archs)
    if info["cuda_sm90a"]:
        assert 90 in archs
    for k in tv._ext.cuda_kernels_by_arch():
        assert all(k[f] for f in ("up_to_16_rows", "up_to_32_rows", "more_rows")), k
    for d in tv.devices():
        if d["has_kernel_code"]:
            assert d["kernel_arch"] in archs, d


def test_archs_are_the_build():
    expect = os.environ.get("TREEVERIFY_EXPECT_CUDA_ARCHS")
    if not expect:
        pytest.skip("TREEVERIFY_EXPECT_CUDA_ARCHS not set (scripts/wheel_test.sh sets it)")
    info = tv.build_info()
    if expect == "none":
        assert not info["cuda_compiled"] and info["cuda_archs"] == []
        return
    names = ["80", "86", "89", "90a", "100", "120"] if expect == "release" else [
        a.strip() for a in re.split(r"[,; ]+", expect) if a.strip()]
    assert info["cuda_archs"] == sorted(int(re.match(r"\d+", a).group()) for a in names)
    assert info["cuda_sm90a"] == ("90a" in names)


def test_doctor_text():
    out = doctor()
    assert out.startswith(f"treeverify {tv.__version__} ")
    assert "What plan() chooses here" in out


def test_doctor_json():
    r = json.loads(doctor("--json"))
    info = tv.build_info()
    assert r["version"] == tv.__version__
    assert r["build"]["cuda_archs"] == info["cuda_archs"]
    assert len(r["cuda_archs"]) == len(info["cuda_archs"])
    assert [k["arch"] for k in r["kernels_by_arch"]] == info["cuda_archs"]
    assert r["plans"], r
    for d in r["devices"]:
        assert d["has_kernel_code"] == all(p["ok"] for p in r["plans"]
                                           if p["device"] == f"cuda:{d['ordinal']}"), r["plans"]
    if not r["devices"]:
        assert {p["device"] for p in r["plans"]} == {"cpu"}
        assert all(p["ok"] and p["backend"] == "cpu" and p["reason"] for p in r["plans"])


def test_doctor_cpu_e4m3_fast():
    r = json.loads(doctor("--json", "--device", "cpu", "--kv-dtype", "e4m3",
                          "--precision", "fast"))
    assert r["plans_kv_dtype"] == "e4m3" and r["plans_precision_asked"] == "fast"
    for p in r["plans"]:
        assert p["ok"] and p["precision"] == "exact", p  # the CPU runs fast requests exact
        assert "fast" in p["reason"], p


def test_doctor_in_python():
    r = tv.doctor(devices=["cpu"])
    assert r["version"] == tv.__version__ and all(p["ok"] for p in r["plans"])
