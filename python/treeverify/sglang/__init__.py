"""treeverify inside SGLang: an attention backend for MLA decode and target verify.

Installed with the treeverify package; SGLang loads it through the entry point
`sglang.srt.plugins` -> `treeverify.sglang:register` (no patching). Launch with

    --attention-backend triton --decode-attention-backend treeverify
    --speculative-attention-mode decode --speculative-draft-attention-backend triton

so that prefill stays with SGLang's triton backend, decode and TARGET_VERIFY run here, and the
draft model keeps its own backend. Environment: TREEVERIFY_PRECISION=exact|fast (e4m3 KV
caches: fast rounds Q and P to e4m3 for native FP8 products where the GPU has them).
See python/README.md, "Use in SGLang".
"""
import logging

BACKEND_NAME = "treeverify"
# The backend contract this plugin follows: init_forward_metadata_out_graph/in_graph and the
# verify_mask property appeared in sglang 0.5.17.
MIN_SGLANG = (0, 5, 17)

_log = logging.getLogger(__name__)


def _version_tuple(text):
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts + [0] * (3 - len(parts)))


def check_sglang_version(version):
    """Raises RuntimeError naming the versions when `version` (a string) is too old."""
    if _version_tuple(version) < MIN_SGLANG:
        raise RuntimeError(
            f"treeverify's SGLang backend needs sglang >= {'.'.join(map(str, MIN_SGLANG))} "
            f"(its attention-backend contract: init_forward_metadata_out_graph/in_graph, "
            f"verify_mask); this is sglang {version}")


def register():
    """The entry point: registers the backend name with SGLang's attention registry and its
    command-line choices. SGLang logs (does not raise) a plugin's exceptions, so a failure is
    logged here with what to do."""
    try:
        import sglang
        check_sglang_version(getattr(sglang, "__version__", "0"))
        from sglang.srt.layers.attention.attention_registry import (
            ATTENTION_BACKENDS, register_attention_backend)
        from sglang.srt.server_args import (ATTENTION_BACKEND_CHOICES,
                                            add_attention_backend_choices)
    except Exception as e:  # noqa: BLE001 - SGLang would swallow it: say it loudly once
        _log.error("treeverify: the SGLang backend is not registered: %s", e)
        raise
    if BACKEND_NAME not in ATTENTION_BACKENDS:
        @register_attention_backend(BACKEND_NAME)
        def _create(runner):
            from .backend import TreeverifyBackend
            return TreeverifyBackend(runner)
    if BACKEND_NAME not in ATTENTION_BACKEND_CHOICES:  # once per process
        add_attention_backend_choices([BACKEND_NAME])
