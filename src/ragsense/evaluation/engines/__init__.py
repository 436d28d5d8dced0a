"""Where ``evaluate`` runs: one :class:`Engine` protocol, a local and a Ray implementation.

``evaluate`` and ``aevaluate`` resolve their arguments into one :class:`EvaluateRequest` and hand it
to the engine: :class:`LocalEngine` (``engine="local"``, the default) scores the rows in this process,
:class:`RayEngine` (``engine="ray"`` or ``RayEngine(...)``) on a Ray cluster with the same results.
Both claim their output the same way (``evaluation._outputs.claim_output``), keep the run in the run
store the same way (``evaluation._recording``), and score with the one runner.

>>> from ragsense.evaluation.engines import Engine, LocalEngine, RayEngine
>>> isinstance(LocalEngine(), Engine), isinstance(RayEngine(workers=2), Engine)
(True, True)
"""

from ragsense.evaluation.engines._base import (
    DEFAULT_CHUNK_SIZE,
    Engine,
    EngineSpec,
    EvaluateRequest,
    dataset_name,
)
from ragsense.evaluation.engines._local import LocalEngine
from ragsense.evaluation.engines._ray import RayEngine, require_ray
from ragsense.evaluation.engines._shards import read_shards

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "Engine",
    "EngineSpec",
    "EvaluateRequest",
    "LocalEngine",
    "RayEngine",
    "dataset_name",
    "read_shards",
    "require_ray",
]
