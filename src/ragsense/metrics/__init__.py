"""VERA's metric and enhance step, until they move into :mod:`ragsense.vera`. The other built-in metrics
live with their methods: :class:`ragsense.consens.ConSens`, :class:`ragsense.correctness.Correctness`,
:class:`ragsense.similarity.Similarity`.

>>> from ragsense.metrics import Vera
>>> Vera(judge="fake").name
'vera'
"""

from ragsense.metrics._vera import ENHANCE_FIELDS, VERA_FIELDS, Vera, VeraEnhance

__all__ = ["ENHANCE_FIELDS", "VERA_FIELDS", "Vera", "VeraEnhance"]
