"""The module-scoped two-node cluster (helpers in ``_helpers.py``)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._helpers import LocalRayCluster, psutil, ray


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalRayCluster]:
    """A head and one worker node; the test process is connected to it as the driver."""
    if ray is None or psutil is None:
        pytest.skip("the Ray engine's tests need the extra ragsense[ray]")
    # A short path: Ray's Unix sockets live under it, and a socket path has at most 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="rs-ray-", dir="/tmp"))
    cluster = LocalRayCluster(root)
    try:
        cluster.start(workers=1)
        ray.init(address=cluster.address, log_to_driver=False)
        deadline = time.monotonic() + 60
        while ray.cluster_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
