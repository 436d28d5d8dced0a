"""VERA's settings: one typed, frozen value, checked when made, shared by the metric and the evaluator."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ragsense.cache import cache_dir as ragsense_cache_dir
from ragsense.errors import ParameterError
from ragsense.models import LanguageModel
from ragsense.vera.judges import (
    DEFAULT_LABEL_SCORING,
    JUDGE_MODES,
    LABEL_SCORINGS,
    PROMPT_FORMATS,
    JudgeMode,
    LabelScoring,
    PromptFormat,
)

SplitterMode = Literal["auto", "rules", "judge"]
AdherenceSignal = Literal["judge", "consens", "combined"]
StepSignal = Literal["offline", "judge"]
STEP_SIGNALS = ("offline", "judge")
DEFAULT_STEP_SIGNAL: StepSignal = "offline"
"""How steps 1-3 decide by default: the offline signals (docs/vera.md, "Offline signals"). With the
bundled 135M judge the judge's step 1-3 labels are near chance (docs/results.md, "VERA"); a capable
judge behind a server: ``judge``."""
SPLITTERS = ("auto", "rules", "judge")
SCORED_STEPS = ("context", "relevance", "adherence")
"""The steps :meth:`VeraEvaluator.evaluate` can score (step 1, the retrieval check, is
``check_retrieval``)."""
ADHERENCE_SIGNALS = ("judge", "consens", "combined")
DEFAULT_ADHERENCE_SIGNAL: AdherenceSignal = "consens"
"""Chosen on WikiEval questions 0-23 (grounded vs ungrounded answer), reported on 24-49: with the bundled
judges the ConSens signal ranks the grounded answer first far more often than the judge's labels, which
are at chance (docs/results.md, "VERA"). A capable judge behind a server: ``judge`` or ``combined``."""


def default_cache_dir() -> Path:
    """Where judge verdicts are cached unless told otherwise: ``<ragsense cache>/vera``."""
    return ragsense_cache_dir() / "vera"


def _one_of(value: str, choices: Sequence[str], parameter: str) -> None:
    if value not in choices:
        raise ParameterError(f"must be one of {', '.join(choices)}, got {value!r}", parameter=parameter)


@dataclass(frozen=True)
class VeraSettings:
    """How VERA judges: which steps, which judge mode, splitter and adherence signal, and its cache.

    ``steps``: which of ``context``, ``relevance``, ``adherence`` :meth:`VeraEvaluator.evaluate` scores
    (the others' scores are null); ``check_retrieval`` adds step 1, the retrieval-need check.
    ``judge_mode``: ``labels`` (score the allowed labels with log-probabilities), ``structured`` (chat
    JSON under a schema), or ``auto`` (labels when the model gives log-probabilities). ``splitter``:
    ``rules`` (the deterministic splitter), ``judge`` (the judge splits, falling back to the rules when
    its reply does not validate), ``auto`` (judge when it can split, i.e. a structured-output judge,
    else rules). ``adherence_signal``: ``consens`` (the default: a statement is grounded when its
    ConSens score with ``consens_model`` exceeds ``consens_threshold``), ``judge`` (grounded when the
    judge's P(stated) + P(inferable) is at least 0.5) or ``combined`` (grounded when the mean of the
    judge's grounded probability and (1 + ConSens) / 2 is at least 0.5). ``signals``: how steps 1-3
    decide, ``offline`` (the default: the retrieval-need regression, BM25 and MiniLM sentence ranking,
    the question's likelihood lift per statement; no judging ability needed) or ``judge`` (the judge's
    labels, for a capable judge). ``calibrate``,
    ``reasons``, ``label_scoring`` and ``prompt_format`` go to the label-scoring judge
    (:class:`~ragsense.vera.LabelJudge`); ``cache`` and ``cache_dir`` say where verdicts are kept.

    Every value is checked here, so a bad one fails when the settings are made, naming its parameter:

    >>> VeraSettings(steps=["adherence"]).steps
    ('adherence',)
    >>> VeraSettings(splitter="llm")
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: splitter: must be one of auto, rules, judge, got 'llm'
    """

    steps: tuple[str, ...] = SCORED_STEPS
    check_retrieval: bool = True
    judge_mode: JudgeMode | str = "auto"
    splitter: SplitterMode | str = "auto"
    adherence_signal: AdherenceSignal | str = DEFAULT_ADHERENCE_SIGNAL
    signals: StepSignal | str = DEFAULT_STEP_SIGNAL
    consens_model: str | LanguageModel | None = None
    consens_threshold: float = 0.0
    cache: bool = True
    cache_dir: str | Path | None = None
    calibrate: bool = False
    reasons: bool = False
    label_scoring: LabelScoring | str = DEFAULT_LABEL_SCORING
    prompt_format: PromptFormat | str = "plain"

    def __post_init__(self) -> None:
        # A list given for steps is kept as a tuple, so the settings stay hashable and immutable.
        steps: Sequence[str] = self.steps
        object.__setattr__(self, "steps", tuple(steps))
        unknown = [s for s in self.steps if s not in SCORED_STEPS]
        if unknown or not self.steps:
            raise ParameterError(
                f"choose among {', '.join(SCORED_STEPS)}, got {list(self.steps)!r}", parameter="steps"
            )
        _one_of(self.splitter, SPLITTERS, "splitter")
        _one_of(self.adherence_signal, ADHERENCE_SIGNALS, "adherence_signal")
        _one_of(self.signals, STEP_SIGNALS, "signals")
        if not -1.0 < self.consens_threshold < 1.0:
            raise ParameterError("must be between -1 and 1 (ConSens range)", parameter="consens_threshold")
        _one_of(self.judge_mode, JUDGE_MODES, "judge_mode")
        _one_of(self.label_scoring, LABEL_SCORINGS, "label_scoring")
        _one_of(self.prompt_format, PROMPT_FORMATS, "prompt_format")

    @property
    def scored_steps(self) -> tuple[str, ...]:
        """``steps`` in the order VERA runs them."""
        return tuple(s for s in SCORED_STEPS if s in self.steps)

    @property
    def judge_cache_dir(self) -> Path | None:
        """The directory of the judge's verdict cache; None when ``cache`` is off."""
        if not self.cache:
            return None
        return Path(self.cache_dir) if self.cache_dir is not None else default_cache_dir()
