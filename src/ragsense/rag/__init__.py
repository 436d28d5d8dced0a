"""Retrieval for RAG pipelines (vector search)."""

from ragsense.rag._index import Hit, InMemoryVectorIndex

__all__ = ["Hit", "InMemoryVectorIndex"]
