"""Paper replications, one subpackage per paper (see papers/README.md).

Run each script from the repository root: ``python -m papers.PAPER.SCRIPT``.
"""
