"""Framework evaluators: ragsense's ConSens score inside LlamaIndex, LangChain, Haystack, DeepEval and RAGAS.

Each ``ragsense.integrations.<framework>`` module is thin over ``ragsense.evaluate`` (through
:class:`Scorer`, one ConSens metric): the score it reports is the ``consens`` field ``evaluate`` writes
for the same row, with the verdict and the weakest words as the framework's feedback, returned in the
framework's own result type. Each needs its framework, installed by an extra named after it
(``pip install 'ragsense[llamaindex]'``, ``[langchain]``, ``[haystack]``, ``[deepeval]``, ``[ragas]``);
importing one without it raises :class:`~ragsense.errors.BackendUnavailableError` naming the extra.
This package itself imports no framework. docs/integrations.md has an example per framework.

>>> from ragsense.integrations import Scorer
>>> [j] = Scorer(model="fake").score([{"question": "Where is it?", "contexts": ["It is in Paris."],
...                                     "answer": "It is in Rome."}])
>>> j.verdict, j.passing
('ungrounded', False)
"""

from ragsense.integrations._core import TELEMETRY_OFF, Judgement, Scorer, feedback_of

FRAMEWORKS = {
    "llamaindex": "llama_index.core",
    "langchain": "langchain_core",
    "haystack": "haystack",
    "deepeval": "deepeval",
    "ragas": "ragas",
}
"""Each integration module (and extra) and the package it imports."""

__all__ = ["FRAMEWORKS", "TELEMETRY_OFF", "Judgement", "Scorer", "feedback_of"]
