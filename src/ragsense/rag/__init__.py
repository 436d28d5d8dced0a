"""Retrieval-augmented generation: vector stores and the naive RAG pipeline.

>>> from ragsense.rag import NaiveRagPipeline, RagPrompt, open_vector_store
>>> RagPrompt().document_order
'auto'
"""

from ragsense.rag._faiss import FaissVectorStore
from ragsense.rag._hybrid import BM25, HybridStore
from ragsense.rag._index import Hit, InMemoryVectorIndex
from ragsense.rag._pipeline import (
    ANSWER_STOPS,
    DEFAULT_GENERATION,
    NaiveRagPipeline,
    RagAnswer,
    RetrievedDocument,
    answer_function,
    first_line,
    generate_answers,
    resolve_prompt_format,
    retrieve_documents,
)
from ragsense.rag._prompt import (
    DEFAULT_INSTRUCTION,
    GENERIC_EXAMPLES,
    FewShotExample,
    PromptFormat,
    RagPrompt,
)
from ragsense.rag._store import VECTOR_STORE_KINDS, VectorStore, VectorStoreKind, open_vector_store

__all__ = [
    "ANSWER_STOPS",
    "BM25",
    "DEFAULT_GENERATION",
    "DEFAULT_INSTRUCTION",
    "GENERIC_EXAMPLES",
    "VECTOR_STORE_KINDS",
    "FaissVectorStore",
    "FewShotExample",
    "Hit",
    "HybridStore",
    "InMemoryVectorIndex",
    "NaiveRagPipeline",
    "PromptFormat",
    "RagAnswer",
    "RagPrompt",
    "RetrievedDocument",
    "VectorStore",
    "VectorStoreKind",
    "answer_function",
    "first_line",
    "generate_answers",
    "open_vector_store",
    "resolve_prompt_format",
    "retrieve_documents",
]
