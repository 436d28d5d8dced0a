"""Loading a causal LM through transformers: bundled names, local directories, the local hub cache.

Never downloads (``local_files_only``) and never runs repository code unless asked to. The fingerprint
(a hash of ``config.json`` and the weight files' names and sizes, and the dtype unless it is float32)
goes into every cache key.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsense.errors import ModelNotFoundError, ParameterError
from ragsense.models._kernel import import_torch

DTYPES = ("float32", "bfloat16", "float16")
"""The weight and compute types the transformers backend loads a model in."""


@dataclass(frozen=True)
class LoadedModel:
    """What :func:`load_hf_model` hands to the backend class."""

    model: Any
    tokenizer: Any
    label: str
    fingerprint: str
    device: str


def fingerprint(path: Path, label: str) -> str:
    """``label@<16 hex digits>`` of ``config.json`` and the safetensors files' names and sizes."""
    config = (path / "config.json").read_bytes() if (path / "config.json").exists() else b""
    weights = sorted(path.glob("*.safetensors"))
    sizes = ",".join(f"{p.name}:{p.stat().st_size}" for p in weights)
    digest = hashlib.sha256(config + sizes.encode()).hexdigest()[:16]
    return f"{label}@{digest}"


def load_hf_model(
    model_id: str,
    *,
    device: str = "auto",
    dtype: str = "float32",
    threads: int | None = None,
    trust_remote_code: bool = False,
) -> LoadedModel:
    """Load ``model_id`` (a bundled name, a local directory, or a hub id already in the local cache)
    in eval mode on ``device`` (``auto``: CUDA when available)."""
    torch = import_torch()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragsense.models._bundled import BUNDLED_MODELS, converted_path

    if threads is not None:
        torch.set_num_threads(threads)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype not in DTYPES:
        raise ParameterError(f"dtype is one of {', '.join(DTYPES)}, got {dtype!r}", parameter="dtype")
    torch_dtype = getattr(torch, dtype)
    if model_id in BUNDLED_MODELS:
        path = converted_path(model_id)
    else:
        path = Path(model_id)
        if not path.exists():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            str(path), local_files_only=True, trust_remote_code=trust_remote_code
        )
        model = AutoModelForCausalLM.from_pretrained(
            str(path), dtype=torch_dtype, local_files_only=True, trust_remote_code=trust_remote_code
        )
    except OSError as exc:
        raise ModelNotFoundError(
            f"cannot load {model_id!r} with transformers: not a local model directory and not in the "
            f"local Hugging Face cache (ragsense never downloads at run time): {exc}"
        ) from exc
    # transformers wraps PreTrainedModel.to with functools.wraps, which mypy reads as an unbound
    # function (self = the first argument), and leaves eval() unannotated.
    model.to(device)  # type: ignore[arg-type]
    model.eval()  # type: ignore[no-untyped-call]
    digest = fingerprint(path, model_id) if path.exists() else model_id
    if dtype != "float32":
        # Scores in another dtype differ (bfloat16: in the third decimal), so stored runs and caches
        # must not take them for float32's; float32 keeps the fingerprint it always had.
        digest = f"{digest}:{dtype}"
    return LoadedModel(model, tokenizer, model_id, digest, device)
