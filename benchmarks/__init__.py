"""Speed runs: run from the repository root with ``python -m benchmarks.NAME`` (see docs/speed.md)."""
