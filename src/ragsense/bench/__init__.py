"""Benchmarks of RAG systems. :mod:`ragsense.bench.kinship`: the multi-document kinship benchmark."""

__all__: list[str] = []  # the benchmarks are its subpackages, each with its own names
