"""TreeverifyBackend: SGLang's attention-backend contract (sglang >= 0.5.17) over treeverify's
graph-safe plan, for MLA decode and TARGET_VERIFY.

Per step (init_forward_metadata_out_graph: host work, eager; _in_graph: recorded in CUDA
graphs) the backend stages what the step needs at fixed addresses: seq_lens and
req_pool_indices as int32, the verify tree as a QLEN_ONLY mask in its own buffer (the one
verify_mask hands the draft stage, which writes it in place), and the graph plan's
prepare() reads those and SGLang's req_to_token on the device. Per layer, forward_* writes the
step's KV rows into SGLang's pool (as SGLang's triton MLA backend does) and runs the plan. No
host sync, no allocation per step beyond the output tensor each layer returns.
"""
import os
from dataclasses import dataclass

import torch
from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
from sglang.srt.layers.attention.verify_mask import VerifyMask
from sglang.srt.runtime_context import get_parallel, get_spec
from sglang.srt.speculative.eagle_utils import TreeMaskMode

from .._graph import GraphPlan
from . import metadata

# Eager steps of batch sizes no graph captured get plans of their own; the least recently
# used beyond this many are dropped (each holds a workspace).
_EAGER_PLANS = 8


@dataclass
class _Step:
    plan: GraphPlan
    tree_size: int
    bs: int
    tree: str


class TreeverifyBackend(AttentionBackend):
    """Decode and TARGET_VERIFY for MLA models (DeepSeek-V3/R1, Kimi K2.x) on treeverify's
    kernels; other forward modes (prefill, draft extend) belong to another backend."""

    needs_cpu_seq_lens = False

    def __init__(self, model_runner, skip_prefill=False):
        super().__init__()
        self.device = torch.device(model_runner.device)
        self.page_size = getattr(model_runner, "page_size", 1) or 1
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.max_context_len = model_runner.model_config.context_len
        parallel = get_parallel()
        if getattr(parallel, "attn_dcp_size", 1) > 1:
            raise ValueError("treeverify: decode context parallelism (attn_dcp_size > 1) is not "
                             "supported")
        self.num_heads = (model_runner.model_config.get_max_num_attention_heads() //
                          parallel.attn_tp_size)
        allocator = getattr(model_runner, "token_to_kv_pool_allocator", None)
        if getattr(allocator, "translate_kv_loc", None) is not None:
            raise ValueError("treeverify: SGLang's unified KV pool (virtual slot ids) is not "
                             "supported")
        self.kv_cache_dtype = model_runner.kv_cache_dtype
        metadata.kv_dtype_of(self.kv_cache_dtype)  # refuses what treeverify cannot read
        self.q_dtype = model_runner.dtype
        self.precision = os.environ.get("TREEVERIFY_PRECISION", "exact")
        if self.precision not in ("exact", "fast"):
            raise ValueError(f"treeverify: TREEVERIFY_PRECISION={self.precision!r} (expected "
                             "'exact' or 'fast')")
        pages = self.token_to_kv_pool.get_key_buffer(getattr(self.token_to_kv_pool,
                                                             "start_layer", 0))
        self.num_pages = metadata.kv_cache_pages(pages, self.page_size).shape[0]
        self.max_bs = model_runner.req_to_token_pool.size
        spec = get_spec()
        self.num_draft_tokens = getattr(spec, "speculative_num_draft_tokens", None) or 0
        # Static buffers: the step's int32 lengths and table rows, the QLEN_ONLY tree mask.
        self._kv_len = torch.zeros(self.max_bs, dtype=torch.int32, device=self.device)
        self._rows = torch.zeros(self.max_bs, dtype=torch.int32, device=self.device)
        self._unit_scale = torch.ones(1, dtype=torch.float32, device=self.device)
        T = self.num_draft_tokens
        self._verify_mask = None
        if T and not getattr(model_runner, "is_draft_worker", False):
            self._verify_mask = VerifyMask(
                buffer=torch.zeros(self.max_bs * T * T, dtype=torch.bool, device=self.device),
                mode=TreeMaskMode.QLEN_ONLY, max_bs=self.max_bs, is_read=True)
        self._plans = {}      # (bs, T, tree, verify) -> GraphPlan
        self._graph_keys = set()  # plans a CUDA graph captured: never dropped
        self.forward_metadata = None

    # --- plans ------------------------------------------------------------------------
    def _plan(self, bs, tree_size, tree, verify, for_graph):
        key = (bs, tree_size, tree, verify)
        plan = self._plans.pop(key, None)
        if plan is None:
            plan = GraphPlan(**metadata.graph_plan_kwargs(
                batch_size=bs, tree_size=tree_size, num_heads=self.num_heads,
                page_size=self.page_size, num_pages=self.num_pages,
                req_to_token=self.req_to_token, dtype=self.q_dtype,
                kv_cache_dtype=self.kv_cache_dtype, tree=tree, verify=verify,
                precision=self.precision, device=self.device))
        self._plans[key] = plan  # most recently used last
        if for_graph:
            self._graph_keys.add(key)
        eager = [k for k in self._plans if k not in self._graph_keys]
        for k in eager[:-_EAGER_PLANS]:
            del self._plans[k]
        return plan

    # --- the contract ---------------------------------------------------------------------
    def init_forward_metadata(self, forward_batch):
        self.init_forward_metadata_out_graph(forward_batch)
        self.init_forward_metadata_in_graph(forward_batch)

    def init_cuda_graph_state(self, max_bs, max_num_tokens):
        if max_bs > self.max_bs:
            raise ValueError(f"treeverify: CUDA graphs of {max_bs} requests, but the request "
                             f"pool holds {self.max_bs}")

    def get_cuda_graph_seq_len_fill_value(self):
        return 1

    @property
    def verify_mask(self):
        return self._verify_mask

    def update_verify_buffers_to_fill_after_draft(self, spec_info, cuda_graph_bs):
        pass  # the mask is read where the draft wrote it

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        mode, bs = forward_batch.forward_mode, forward_batch.batch_size
        if mode.is_idle() or bs == 0:
            self.forward_metadata = None
            return
        verify = mode.is_target_verify()
        if mode.is_decode():
            T, tree = 1, "chain"
        elif verify:
            spec = forward_batch.spec_info
            T = spec.draft_token_num
            mask = getattr(spec, "custom_mask", None)
            tree = "chain" if mask is None or T == 1 else "mask"
            if tree == "mask":
                self._stage_mask(mask, forward_batch.seq_lens, bs, T)
        else:
            raise NotImplementedError(
                f"treeverify serves decode and TARGET_VERIFY, not {mode}: launch with "
                "--attention-backend triton --decode-attention-backend treeverify "
                "--speculative-attention-mode decode")
        self.forward_metadata = _Step(self._plan(bs, T, tree, verify, in_capture), T, bs, tree)

    def init_forward_metadata_in_graph(self, forward_batch):
        step = self.forward_metadata
        if step is None or forward_batch.forward_mode.is_idle():
            return
        bs = step.bs
        self._kv_len[:bs].copy_(forward_batch.seq_lens[:bs])
        self._rows[:bs].copy_(forward_batch.req_pool_indices[:bs])
        mask = None
        if step.plan.tree_size > 1 and step.tree == "mask":
            mask = self._verify_mask.buffer[:bs * step.tree_size * step.tree_size]
        step.plan.prepare(self._kv_len[:bs], self.req_to_token, table_rows=self._rows[:bs],
                          tree_mask=mask)

    def _stage_mask(self, custom_mask, seq_lens, bs, T):
        """The step's tree as QLEN_ONLY in our buffer, unless the draft wrote it there."""
        if self._verify_mask is None:
            raise ValueError("treeverify: a verify tree arrived, but the backend was made "
                             "without speculative_num_draft_tokens")
        buf = self._verify_mask.buffer
        if custom_mask.data_ptr() == buf.data_ptr():
            return
        if custom_mask.numel() == bs * T * T:  # QLEN_ONLY elsewhere
            buf[:bs * T * T].copy_(custom_mask.reshape(-1))
        else:  # FULL_MASK
            metadata.qlen_mask_from_full(custom_mask, seq_lens[:bs], T, buf)

    # --- layers -----------------------------------------------------------------------
    def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        return self._forward(q, k, v, layer, forward_batch, save_kv_cache)

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        if not forward_batch.forward_mode.is_target_verify():
            raise NotImplementedError(
                "treeverify serves decode and TARGET_VERIFY; prefill stays with SGLang's own "
                "backend (--attention-backend triton --decode-attention-backend treeverify)")
        return self._forward(q, k, v, layer, forward_batch, save_kv_cache)

    def _forward(self, q, k, v, layer, forward_batch, save_kv_cache):
        step = self.forward_metadata
        H = layer.tp_q_head_num
        if H != self.num_heads:
            raise ValueError(f"treeverify: the layer has {H} query heads, the backend planned "
                             f"for {self.num_heads}")
        fp8 = metadata.kv_dtype_of(self.kv_cache_dtype) == "e4m3"
        if save_kv_cache and k is not None:
            if fp8 and layer.k_scale is not None:
                k = k / layer.k_scale  # the pool stores k / k_scale, read back x k_scale
            self.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)
        q3 = q.reshape(-1, H, metadata.QK_DIM)
        out = q3.new_empty((q3.shape[0], H, metadata.LATENT_DIM))
        pages = metadata.kv_cache_pages(self.token_to_kv_pool.get_key_buffer(layer.layer_id),
                                        self.page_size)
        scale = None
        if fp8:
            scale = (self._unit_scale if layer.k_scale is None else
                     layer.k_scale.reshape(1).to(torch.float32))
        step.plan.run(q3, pages, layer.scaling, out=out, kv_scale=scale)
        return out.view(-1, H * metadata.LATENT_DIM)
