"""The answer-context similarity baseline of the ConSens paper: the cosine of the answer's and the
context's embeddings (:func:`answer_context_similarity`), and the same as a metric (:class:`Similarity`,
``--metrics similarity``).

>>> from ragsense.similarity import MODES, Similarity
>>> MODES
('whole', 'max_chunk')
>>> Similarity(mode="max_chunk").settings()["mode"]
'max_chunk'
"""

from ragsense.similarity._math import MODES, SimilarityMode, answer_context_similarity
from ragsense.similarity._metric import SIMILARITY_FIELDS, Similarity

__all__ = ["MODES", "SIMILARITY_FIELDS", "Similarity", "SimilarityMode", "answer_context_similarity"]
