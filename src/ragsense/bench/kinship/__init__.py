"""The multi-document kinship benchmark: a generated family tree as a RAG knowledge source whose
experimental questions need several documents, accuracy by string match against k retrieved.

>>> from ragsense.bench.kinship import generate_kinship_source
>>> source = generate_kinship_source(names=4, generations=2, seed=0)
>>> source.control().queries[0].hops
1
"""

from ragsense.bench.kinship._evidence import EvidenceChain, retrieval_recall
from ragsense.bench.kinship._names import FEMALE_NAMES, MALE_NAMES
from ragsense.bench.kinship._report import (
    KinshipReport,
    plot_accuracy_vs_k,
    read_results,
    write_kinship_report,
)
from ragsense.bench.kinship._run import KinshipRun, aggregate, arun_kinship, is_correct, parse_ks, run_kinship
from ragsense.bench.kinship._source import (
    RELATION_KINDS,
    RELATION_WORDS,
    ConditionQuery,
    KinshipCondition,
    KinshipDocument,
    KinshipQuery,
    KinshipSource,
    Person,
    generate_kinship_source,
)
from ragsense.bench.kinship._systems import (
    CallableSystem,
    HttpSystem,
    KinshipSystem,
    PipelineSystem,
    RetrievalOnlySystem,
    SystemAnswer,
    Timings,
)

__all__ = [
    "FEMALE_NAMES",
    "MALE_NAMES",
    "RELATION_KINDS",
    "RELATION_WORDS",
    "CallableSystem",
    "ConditionQuery",
    "EvidenceChain",
    "HttpSystem",
    "KinshipCondition",
    "KinshipDocument",
    "KinshipQuery",
    "KinshipReport",
    "KinshipRun",
    "KinshipSource",
    "KinshipSystem",
    "Person",
    "PipelineSystem",
    "RetrievalOnlySystem",
    "SystemAnswer",
    "Timings",
    "aggregate",
    "arun_kinship",
    "generate_kinship_source",
    "is_correct",
    "parse_ks",
    "plot_accuracy_vs_k",
    "read_results",
    "retrieval_recall",
    "run_kinship",
    "write_kinship_report",
]
