"""SGLang's buffers as treeverify's graph plan reads them: plain functions over torch tensors
(any device), so CPU tests check them without a GPU or a model.

- req_to_token [rows, max_context_len] int32 holds token slots: it is the graph plan's
  'slot_rows' table at every page size, with req_pool_indices as the lanes' rows.
- The KV pool's per-layer buffer [size + page_size, 1, 576] is [num_pages, page_size, 576].
- A TARGET_VERIFY tree comes as SGLang's QLEN_ONLY mask [bs, T, T] (when the draft wrote our
  buffer) or FULL_MASK (per request T x (seq_len + T), concatenated; the tree in each row's
  last T columns): qlen_mask_from_full() turns the latter into the former on the device.
"""
import torch

QK_DIM = 576      # 512 latent (kv_lora_rank) + 64 rope: treeverify's MLA row
LATENT_DIM = 512


def kv_cache_pages(buffer, page_size):
    """A layer's KV buffer [size + page_size, 1, 576] as pages [num_pages, page_size, 576]
    (a view; fp8 pools stored as uint8 stay uint8, which the plan reads as e4m3)."""
    if buffer.dim() != 3 or buffer.shape[1] != 1 or buffer.shape[2] != QK_DIM:
        raise ValueError(
            f"treeverify: the MLA KV buffer has shape {tuple(buffer.shape)}; treeverify needs "
            f"[tokens, 1, {QK_DIM}] (kv_lora_rank 512 + qk_rope_head_dim 64)")
    if buffer.shape[0] % page_size != 0:
        raise ValueError(f"treeverify: {buffer.shape[0]} KV slots are not whole pages of "
                         f"{page_size}")
    return buffer.view(buffer.shape[0] // page_size, page_size, QK_DIM)


def kv_dtype_of(kv_cache_dtype):
    """The graph plan's kv_dtype for SGLang's kv_cache_dtype (None: the q dtype)."""
    if kv_cache_dtype in (torch.bfloat16, torch.float16):
        return None
    if kv_cache_dtype in (torch.float8_e4m3fn, torch.uint8):
        return "e4m3"
    raise ValueError(f"treeverify: KV cache dtype {kv_cache_dtype} is not supported (bf16, fp16 "
                     "or fp8 e4m3)")


def qlen_mask_from_full(full_mask, seq_lens, tree_size, out):
    """Writes the tree columns of a FULL_MASK into out[:bs*T*T] as QLEN_ONLY [bs, T, T], on the
    mask's device, without a host sync. seq_lens [bs]: the committed prefix lengths (verify's
    seq_lens). Lanes whose rows lie past the mask (padded lanes) get an all-zero block, which
    the graph plan reads as padding."""
    bs, T = seq_lens.numel(), tree_size
    lens = seq_lens.to(torch.int64)
    row = lens + T                                      # a lane's row length
    start = torch.cumsum(row * T, 0) - row * T          # its first cell
    i = torch.arange(T, device=lens.device, dtype=torch.int64)
    idx = (start.view(bs, 1, 1) + i.view(1, T, 1) * row.view(bs, 1, 1) + lens.view(bs, 1, 1) +
           i.view(1, 1, T))
    flat = full_mask.reshape(-1)
    inside = idx < flat.numel()
    picked = flat[idx.clamp(max=max(flat.numel() - 1, 0))] if flat.numel() else \
        torch.zeros(idx.shape, dtype=torch.bool, device=flat.device)
    out[:bs * T * T].view(bs, T, T).copy_(picked.to(torch.bool) & inside)
    return out[:bs * T * T]


def graph_plan_kwargs(*, batch_size, tree_size, num_heads, page_size, num_pages, req_to_token,
                      dtype, kv_cache_dtype, tree, verify, precision, device):
    """The GraphPlan arguments for one captured batch size: lanes of SGLang's batch, the pool,
    req_to_token as the table ('slot_rows'), the tree input ('chain' or 'mask'), seq_lens as
    kv_len (verify: the prefix, the plan adds T; decode: the new token included)."""
    rows, stride = req_to_token.shape
    return dict(batch_size=batch_size, tree_size=tree_size, num_heads=num_heads,
                page_size=page_size, num_pages=num_pages, max_kv_len=stride, dtype=dtype,
                kv_dtype=kv_dtype_of(kv_cache_dtype), page_table="slot_rows",
                page_capacity=rows, table_stride=stride, tree=tree,
                kv_len_excludes_tree=verify, precision=precision, device=device)
