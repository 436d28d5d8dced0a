"""The correctness paper's tables, figures and studies: see papers/README.md."""
