"""VERA (Birur et al.): evaluate and enhance the retrieved context and the generated answer.

The four steps of the paper, each judged item by item and batched across the rows of a call:

1. retrieval requirement: does the question need external documents?
2. context relevance: every sentence of every document is judged relevant or not; C' keeps the
   relevant sentences exactly as written; R_retrieval = |C'| / |C| in characters of sentence text.
3. response relevance: the answer is split into atomic statements, each judged relevant or not;
   R_response = share of relevant statements.
4. response adherence: each statement is classified against the context as stated, inferable or
   unsupported; A_response = share of the first two. Optionally the statement's ConSens score is used
   instead of, or together with, the judge.

:meth:`VeraEvaluator.evaluate` scores a row as given (``_evaluate``); :meth:`VeraEvaluator.enhance`
chains the steps as the paper does (``_enhance``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ragsense._async import run_sync
from ragsense.data import RagRow
from ragsense.errors import ParameterError
from ragsense.models import DEFAULT_MODEL, LanguageModel, ModelPool, shared_pool
from ragsense.vera._enhance import AnswerFn, enhance
from ragsense.vera._evaluate import evaluate
from ragsense.vera._judging import StepJudge
from ragsense.vera._offline import OfflineSignals
from ragsense.vera._prompts import RETRIEVAL_NEED, QuestionInput
from ragsense.vera._results import RetrievalCheck, VeraEnhancement, VeraEvaluation
from ragsense.vera._settings import VeraSettings
from ragsense.vera._signals import AdherenceSignals
from ragsense.vera._steps import JudgeFailure
from ragsense.vera.judges import ChatJudge, Judge, LabelJudge, make_judge


class VeraEvaluator:
    """The evaluator-cum-enhancer: VERA's four steps with one judge, configured by :class:`VeraSettings`.

    ``judge``: a model name, a model, or a :class:`~ragsense.vera.Judge`. Models named here come from
    ``pool`` (default: the shared pool). For a run on the evaluation spine use the metric,
    :class:`~ragsense.vera.Vera`, which makes one of these in its ``setup``.

    >>> vera = VeraEvaluator("fake", VeraSettings(cache=False))
    >>> row = RagRow(id="1", question="Who designed the Orvel bridge?",
    ...              contexts=["The Orvel bridge was designed by Mara Quint. Slate is grey."],
    ...              answer="Mara Quint designed it.")
    >>> [ev] = vera.evaluate_sync([row])
    >>> [0.0 <= s <= 1.0 for s in (ev.context_relevance, ev.response_relevance, ev.response_adherence)]
    [True, True, True]
    >>> len(ev.context.decisions), len(ev.relevance.decisions)
    (2, 1)
    """

    def __init__(
        self,
        judge: str | LanguageModel | Judge = DEFAULT_MODEL,
        settings: VeraSettings | None = None,
        *,
        pool: ModelPool | None = None,
    ) -> None:
        self.settings = settings if settings is not None else VeraSettings()
        # Models named here come from the pool, so a judge that is also another metric's model is
        # loaded once, and the ConSens signal shares that model's no-context cache.
        self.pool = pool if pool is not None else shared_pool()
        self.judge_model: LanguageModel | None
        if isinstance(judge, str):
            judge = self.pool.get(judge)
        self._owns_judge = False
        if isinstance(judge, LabelJudge | ChatJudge) or not isinstance(judge, LanguageModel):
            self.judge: Judge = judge
            self.judge_model = getattr(judge, "model", None)
        else:
            self._owns_judge = True
            self.judge_model = judge
            s = self.settings
            self.judge = make_judge(
                judge,
                s.judge_mode,
                cache_dir=s.judge_cache_dir,
                calibrate=s.calibrate,
                reasons=s.reasons,
                label_scoring=s.label_scoring,
                prompt_format=s.prompt_format,
            )
        if self.settings.splitter == "judge" and not self.judge.can_split:
            raise ParameterError(
                f"the {self.judge.description} judge cannot split answers (a structured-output chat judge "
                "can); use the rules splitter",
                parameter="splitter",
            )
        signals = AdherenceSignals(self.judge, self.judge_model, self.pool, self.settings)
        offline = OfflineSignals(self.pool, signals.consens_spec)
        self._steps = StepJudge(self.judge, self.settings, signals, offline)

    async def evaluate(self, rows: Sequence[RagRow]) -> list[VeraEvaluation | Exception]:
        """Evaluate rows as given; one result per row, in order: an evaluation or the row's error."""
        return await evaluate(self._steps, rows)

    async def enhance(
        self, rows: Sequence[RagRow], generate: AnswerFn | None = None
    ) -> list[VeraEnhancement | Exception]:
        """Enhance rows as the paper chains the steps; ``generate`` re-answers from the edited context.

        Without ``generate`` the row's own answer is edited. With it, the answer is regenerated from C'
        (and, when the retrieval check says no documents are needed, from no documents at all).
        """
        return await enhance(self._steps, rows, generate)

    async def aclose(self) -> None:
        """Close the judge's disk cache when this object made the judge (a judge passed in is the
        caller's to close)."""
        close = getattr(self.judge, "close", None)
        if self._owns_judge and callable(close):
            close()

    def evaluate_sync(self, rows: Sequence[RagRow]) -> list[VeraEvaluation | Exception]:
        return run_sync(self.evaluate(rows))

    def enhance_sync(
        self, rows: Sequence[RagRow], generate: AnswerFn | None = None
    ) -> list[VeraEnhancement | Exception]:
        return run_sync(self.enhance(rows, generate))

    def check_retrieval_need_sync(self, questions: Sequence[str]) -> list[RetrievalCheck | Exception]:
        return run_sync(self.check_retrieval_need(questions))

    async def check_retrieval_need(self, questions: Sequence[str]) -> list[RetrievalCheck | Exception]:
        """Step 1 alone, for pipelines that decide whether to retrieve."""
        if self._steps.use_offline:
            verdicts = self._steps.offline.retrieval_verdicts(questions)
        else:
            verdicts = await self.judge.judge(RETRIEVAL_NEED, [QuestionInput(question=q) for q in questions])
        out: list[RetrievalCheck | Exception] = []
        for v in verdicts:
            if not v.ok:
                out.append(JudgeFailure(f"retrieval check: {v.error}"))
            else:
                out.append(RetrievalCheck(v.label in RETRIEVAL_NEED.positive_labels, v.confidence, v.reason))
        return out
