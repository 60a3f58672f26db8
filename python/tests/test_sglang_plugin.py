"""treeverify's SGLang backend (treeverify.sglang) against SGLang's own classes and test kits.

Runs where sglang (>= 0.5.17) and torch import; skips, saying why, elsewhere. On a machine
without a GPU the kits run on the CPU (device "cpu": the graph plan's CPU backend) with three
stand-ins for SGLang's GPU-only parts, as SGLang's own CPU runs would need them: sgl_kernel
stubbed (its ops library loads only with a GPU driver; nothing on this path calls it) and the
MLA pool's Triton KV write replaced by the same row written in torch. On a GPU nothing is
replaced and the kits run on CUDA, against SGLang's triton backend too. Everywhere the
graph-verify kit's fixture is built with contiguous pages (a quirk of the kit, below).
"""
import functools
import importlib
import os
import sys
import types
import unittest

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch (SGLang's kits are torch code)")
sglang = pytest.importorskip("sglang", reason="needs sglang >= 0.5.17 (pip install --no-deps "
                             "sglang==0.5.17 and scripts/sglang_cpu_requirements.txt)")

import treeverify as tv  # noqa: E402
from treeverify import sglang as tvs  # noqa: E402
from treeverify.sglang import metadata  # noqa: E402

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


def _cpu_stand_ins():
    """What SGLang's kits need replaced to run without a GPU (see the module's docstring).
    Called after SGLang's own modules imported (they guard sgl_kernel themselves), before the
    kits' runner modes (which import it unguarded)."""
    import importlib.abc
    import importlib.machinery

    class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if name == "sgl_kernel" or name.startswith("sgl_kernel."):
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            m = types.ModuleType(spec.name)
            m.__path__ = []
            m.__getattr__ = lambda attr: None
            return m

        def exec_module(self, module):
            pass

    if not any(type(f).__name__ == "_StubFinder" for f in sys.meta_path):
        sys.meta_path.insert(0, _StubFinder())
    from sglang.srt.mem_cache.memory_pool import MLATokenToKVPool
    MLATokenToKVPool.set_mla_kv_buffer = lambda self, layer, loc, nope, rope: self.set_kv_buffer(
        layer, loc, torch.cat([nope, rope], dim=-1), None)


def _transformers_compat():
    """transformers 5.17 defines the 'qwen3_asr' config that sglang 0.5.17 registers again."""
    import transformers
    register = transformers.AutoConfig.register
    if getattr(register, "_treeverify_compat", False):
        return
    compat = lambda t, c, exist_ok=False: register(t, c, exist_ok=True)  # noqa: E731
    compat._treeverify_compat = True
    transformers.AutoConfig.register = compat


_transformers_compat()
mla_attention = pytest.importorskip(
    "sglang.test.kits.attention_unittest.attention_methods.mla_attention",
    reason="sglang's attention test kits are not in this sglang")
if not CUDA:
    _cpu_stand_ins()

kits = pytest.importorskip(
    "sglang.test.kits.attention_unittest.runner_modes.speculative_target_verify_runner",
    reason="sglang's attention test kits are not in this sglang")
from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS  # noqa: E402
from sglang.srt.model_executor.forward_batch_info import ForwardMode  # noqa: E402
from sglang.srt.server_args import ATTENTION_BACKEND_CHOICES  # noqa: E402
MLAAttentionCase = mla_attention.MLAAttentionCase
run_mla_attention_case = mla_attention.run_mla_attention_case
from sglang.test.kits.attention_unittest.runner_modes.cuda_graph_decode_runner import (  # noqa: E402
    run_mla_cuda_graph_decode_case)

# The graph-verify kit's eager leg rewrites prefix KV at contiguous slots over a fixture built
# with shuffled pages, so with more than one page a request (always at page 1) it fails for
# any backend, triton included: build its fixture contiguous (SGLang's own tests use one page).
kits.build_mla_attention_fixture = functools.partial(kits.build_mla_attention_fixture,
                                                     loc_layout="contiguous")

# DeepSeek's MLA row: 512 latent + 64 rope; the kits' own defaults are smaller.
SHAPE = dict(kv_lora_rank=512, qk_rope_head_dim=64, hidden_size=1024, max_context_len=256,
             device=DEVICE)


def test_entry_point_registers_the_backend():
    """SGLang's plugin loader finds treeverify through its entry point, and the name becomes a
    backend and a command-line choice."""
    from importlib.metadata import entry_points
    eps = [ep for ep in entry_points(group="sglang.srt.plugins") if ep.name == "treeverify"]
    assert eps, "the installed treeverify has no sglang.srt.plugins entry point"
    from sglang.srt.plugins import load_plugins
    load_plugins()
    assert "treeverify" in ATTENTION_BACKENDS
    assert ATTENTION_BACKEND_CHOICES.count("treeverify") == 1
    tvs.register()  # twice is harmless
    assert ATTENTION_BACKEND_CHOICES.count("treeverify") == 1


def test_version_guard():
    tvs.check_sglang_version("0.5.17")
    with pytest.raises(RuntimeError, match=r"sglang >= 0\.5\.17"):
        tvs.check_sglang_version("0.5.16")


def test_qlen_mask_from_full():
    """FULL_MASK (per request T x (seq_len + T), concatenated) to QLEN_ONLY, on the device,
    against the tree columns cut by hand; lanes past the mask come out empty."""
    T, seq = 3, torch.tensor([4, 70, 1])
    tree = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 0, 1]], dtype=torch.bool)
    full = []
    for L in seq.tolist():
        rows = torch.ones(T, L + T, dtype=torch.bool)
        rows[:, L:] = tree
        full.append(rows.reshape(-1))
    full = torch.cat(full)
    out = torch.zeros(4 * T * T, dtype=torch.bool)
    got = metadata.qlen_mask_from_full(full, seq, T, out)
    assert torch.equal(got.view(3, T, T), tree.expand(3, T, T))
    # A padded fourth lane past the mask: an unwritten (all-zero) block.
    seq4 = torch.tensor([4, 70, 1, 1])
    got = metadata.qlen_mask_from_full(full, seq4, T, out)
    assert not got.view(4, T, T)[3].any()


def test_kv_cache_pages_and_kwargs():
    buf = torch.zeros(130, 1, 576, dtype=torch.bfloat16)
    assert metadata.kv_cache_pages(buf, 2).shape == (65, 2, 576)
    with pytest.raises(ValueError, match="576"):
        metadata.kv_cache_pages(torch.zeros(130, 1, 544), 1)
    with pytest.raises(ValueError, match="not supported"):
        metadata.kv_dtype_of(torch.float32)
    kw = metadata.graph_plan_kwargs(
        batch_size=4, tree_size=3, num_heads=16, page_size=64, num_pages=9,
        req_to_token=torch.zeros(5, 512, dtype=torch.int32), dtype=torch.bfloat16,
        kv_cache_dtype=torch.float8_e4m3fn, tree="mask", verify=True, precision="exact",
        device="cpu")
    assert kw["page_table"] == "slot_rows" and kw["kv_dtype"] == "e4m3"
    assert kw["table_stride"] == 512 and kw["page_capacity"] == 5 and kw["max_kv_len"] == 512
    assert kw["kv_len_excludes_tree"]


class _Kits(unittest.TestCase):
    """SGLang's kits, as SGLang's own backend tests call them, with backend 'treeverify' (and
    'triton' beside it on a GPU, the same cases)."""

    def _backends(self):
        tvs.register()
        return ("treeverify", "triton") if CUDA else ("treeverify",)

    def verify(self, page, topk, graph, dtype):
        for backend in self._backends():
            case = MLAAttentionCase(f"verify-p{page}-k{topk}", backend, ForwardMode.TARGET_VERIFY,
                                    4, page, (4, 70), (3, 3))
            run = (kits.run_mla_eagle_verify_cuda_graph_case if graph else
                   kits.run_mla_eagle_verify_case)
            run(self, case, topk=topk, dtype=dtype, **SHAPE)

    def decode(self, page, graph, dtype):
        for backend in self._backends():
            case = MLAAttentionCase(f"decode-p{page}", backend, ForwardMode.DECODE, 4, page,
                                    (14, 15, 16))
            run = run_mla_cuda_graph_decode_case if graph else run_mla_attention_case
            run(self, case, dtype=dtype, **SHAPE)


@pytest.mark.parametrize("page", [1, 64])
@pytest.mark.parametrize("topk", [1, 2, 4])
@pytest.mark.parametrize("graph", [False, True])
def test_kit_eagle_verify(page, topk, graph):
    _Kits().verify(page, topk, graph, torch.float16)


@pytest.mark.parametrize("page", [1, 64])
@pytest.mark.parametrize("graph", [False, True])
def test_kit_decode(page, graph):
    _Kits().decode(page, graph, torch.float16)


def test_kit_bf16_verify_and_decode():
    _Kits().verify(64, 2, True, torch.bfloat16)
    _Kits().decode(1, True, torch.bfloat16)
