"""treeverify.doctor() and `python -m treeverify doctor`: what the installed package holds
(version, the CUDA architectures compiled in, what a GPU of each runs), the GPUs here, and the
kernel plan() chooses on them for a few representative steps, with the library's reason.

Nothing here decides anything: the kernels come from the library's selection function, the
same one plan() and `treeverify doctor` (the C++ CLI) ask."""
import os
import sys

from . import _ext

# Steps planned on each device: (name, heads, tree nodes a request, prefix tokens, page size,
# requests); the suite cases of bench/suite.json they follow. Chains: the tree's shape does not
# change the choice. Planning reads metadata only (and uploads the index arrays on a GPU).
CASES = (
    ("verify", 8, 16, 185000, 1, 1, "suite V1: Kimi at TP8, SGLang's page size"),
    ("verify", 16, 256, 65536, 64, 1, "suite V3: a DDTree budget, DeepSeek at TP8"),
    ("decode", 16, 1, 8192, 64, 64, "suite D1: decode, batch 64"),
    ("decode", 128, 1, 185000, 64, 1, "suite D2: one long DeepSeek decode"),
)
_SOFTMAX_SCALE = 0.1447  # bench/suite.json's; the choice does not depend on it


def _arch_name(sm, sm90a):
    return f"sm_{sm}{'a' if sm == 90 and sm90a else ''}"


def _case_arrays(heads, tree, prefix, page, batch):
    kv_len = prefix + tree
    pages = -(-kv_len // page)
    indptr = [i * pages for i in range(batch + 1)]
    return dict(kv_page_indptr=indptr, kv_page_indices=list(range(batch * pages)),
                kv_len=[kv_len] * batch, qo_indptr=[i * tree for i in range(batch + 1)],
                parents=[-1 if i == 0 else i - 1 for i in range(tree)] * batch,
                num_heads=heads, page_size=page, num_pages=batch * pages)


def _plan_case(case, device, kv_dtype, precision):
    from . import plan  # the package's plan(), as a user calls it
    kind, heads, tree, prefix, page, batch, about = case
    row = dict(case=f"{kind} H={heads} T={tree} L={prefix} page={page} batch={batch}",
               about=about, device=device)
    try:
        p = plan(**_case_arrays(heads, tree, prefix, page, batch), dtype="bf16",
                 softmax_scale=_SOFTMAX_SCALE, device=device, kv_dtype=kv_dtype,
                 precision=precision)
    except (_ext.Error, ValueError, TypeError) as e:
        row.update(ok=False, error=str(e))
        return row
    row.update(ok=True, backend=p.backend, kernel=p.kernel, precision=p.precision,
               reason=p.reason, workspace_bytes=p.workspace_bytes)
    return row


def doctor(devices=None, kv_dtype=None, precision="exact"):
    """What `python -m treeverify doctor --json` prints, as a dict. devices: where to plan
    (e.g. ['cpu', 'cuda:1']); by default every GPU here, or 'cpu' without one. kv_dtype,
    precision: as plan() takes them (an e4m3 cache, fast products)."""
    info = _ext.build_info()
    found, note = _ext.devices()
    if devices is None:
        devices = [f"cuda:{d['ordinal']}" for d in found] or ["cpu"]
    ext_file = _ext.__file__
    return dict(
        version=info["version"],
        git_commit=info["git_commit"],
        package_dir=os.path.dirname(os.path.abspath(__file__)),
        extension=os.path.basename(ext_file),
        stable_abi=".abi3." in os.path.basename(ext_file),
        python=sys.version.split()[0],
        build=info,
        cuda_archs=[_arch_name(a, info["cuda_sm90a"]) for a in info["cuda_archs"]],
        kernels_by_arch=_ext.cuda_kernels_by_arch(),
        devices=[dict(d, compute_capability="{}.{}".format(*d["compute_capability"]))
                 for d in found],
        device_note=note,
        plans_kv_dtype=kv_dtype or "bf16",
        plans_precision_asked=precision,
        plans=[_plan_case(c, dev, kv_dtype, precision) for dev in devices for c in CASES],
    )


def format_report(r):
    """The text `python -m treeverify doctor` prints for doctor()'s dict."""
    b = r["build"]
    lines = [f"treeverify {r['version']} (commit {r['git_commit']})",
             f"  installed: {r['package_dir']}",
             f"  extension: {r['extension']} (Python {r['python']}"
             f"{'; stable ABI, CPython 3.12+' if r['stable_abi'] else ''})"]
    if b["cuda_compiled"]:
        lines.append(f"  CUDA: compiled with {b['cuda_compiler_version']}, architectures "
                     f"{' '.join(r['cuda_archs'])}")
        lines.append("  kernels a GPU of each architecture runs, by the most query rows "
                     "(heads x tree nodes) of a request:")
        lines.append(f"    {'arch':<7} {'<= 16 rows':<14} {'<= 32 rows':<14} {'more':<14} "
                     "<= 16 rows, e4m3 cache")
        for k in r["kernels_by_arch"]:
            lines.append(f"    {_arch_name(k['arch'], b['cuda_sm90a']):<7} "
                         f"{k['up_to_16_rows']:<14} {k['up_to_32_rows']:<14} "
                         f"{k['more_rows']:<14} {k['up_to_16_rows_e4m3']}")
    else:
        lines.append("  CUDA: not compiled into this build (CPU backends only)")
    lines.append(f"  BLAS: {b['blas'] or 'unknown'}")
    if not r["devices"]:
        lines.append(f"GPU: none usable here{': ' + r['device_note'] if r['device_note'] else ''}")
    else:
        lines.append("GPUs:")
        for d in r["devices"]:
            runs = (f"runs the code for sm_{d['kernel_arch']}" if d["has_kernel_code"] else
                    "NO compiled code runs on it (compiled: " + " ".join(r["cuda_archs"]) + ")")
            lines.append(f"  [{d['ordinal']}] {d['name']}: sm_{d['compute_capability']}, "
                         f"{d['sm_count']} SMs, {d['global_mem_bytes'] / 2**30:.1f} GiB; {runs}")
        if r["device_note"]:
            lines.append(f"  note: {r['device_note']}")
    cache = r["plans_kv_dtype"] + (f", precision {r['plans_precision_asked']} asked"
                                   if r["plans_kv_dtype"] == "e4m3" else "")
    lines.append(f"What plan() chooses here (bf16 q, {cache} KV cache):")
    for p in r["plans"]:
        lines.append(f"  {p['device']:<7} {p['case']}  ({p['about']})")
        if p["ok"]:
            lines.append(f"          {p['backend']}: {p['kernel']}"
                         f"{'' if p['precision'] == 'exact' else ', ' + p['precision']}")
            lines.append(f"          why: {p['reason']}")
        else:
            lines.append(f"          refused: {p['error']}")
    return "\n".join(lines)
