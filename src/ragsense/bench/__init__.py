"""Benchmarks of RAG systems. :mod:`ragsense.bench.kinship`: the multi-document kinship benchmark."""
