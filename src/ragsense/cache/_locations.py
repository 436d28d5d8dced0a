"""Where ragsense keeps its caches on disk."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The base of every ragsense cache: ``RAGSENSE_CACHE_DIR`` or the user cache dir.

    Converted models, embeddings, judge and feature caches live in subfolders of it.

    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"RAGSENSE_CACHE_DIR": "/tmp/ragsense-demo"}):
    ...     cache_dir().as_posix()
    '/tmp/ragsense-demo'
    """
    env = os.environ.get("RAGSENSE_CACHE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("ragsense"))
