"""Loaders for the public datasets the experiments use: WikiEval, PubMedQA (PQA-L), HaluEval QA, FaithBench,
SQuAD 2.0.

Each loader reads a local file (ragsense never downloads) and returns plain frozen dataclasses in file
order. Without a path, files are looked up under :func:`default_data_dir`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsense.errors import InputError

DATA_DIR_ENV = "RAGSENSE_DATA_DIR"
_LAST_RESORT = Path("/work/shared/data")


def default_data_dir() -> Path:
    """Where the datasets live when no path is given.

    In order: the ``RAGSENSE_DATA_DIR`` environment variable (used as given, even if missing, so a typo
    shows up); ``../shared/data`` relative to the current working directory, if it exists;
    ``/work/shared/data`` as the last resort.

    >>> isinstance(default_data_dir(), Path)
    True
    """
    configured = os.environ.get(DATA_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    relative = Path.cwd().parent / "shared" / "data"
    if relative.is_dir():
        return relative.resolve()
    return _LAST_RESORT


def _locate(path: str | os.PathLike[str] | None, subdir: str, filename: str) -> Path:
    """The dataset file: ``path`` itself, ``path/filename`` for a directory, or the default location."""
    file = Path(default_data_dir() / subdir if path is None else path)
    if file.is_dir():
        file = file / filename
    if not file.is_file():
        raise FileNotFoundError(
            f"dataset file not found: {str(file)!r}; pass its path or set {DATA_DIR_ENV} to the folder "
            f"holding {subdir}/{filename}"
        )
    return file


def _unique(texts: list[str]) -> list[str]:
    return list(dict.fromkeys(texts))


# ------------------------------------------------------------------------------------------------ WikiEval


@dataclass(frozen=True)
class WikiEvalItem:
    """One WikiEval question with its three answers and two context versions.

    ``id`` is the 0-based row number as a string; ``source`` the Wikipedia page title.
    ``context_v1`` is one passage; ``context_v2`` one to three passages.
    """

    id: str
    question: str
    grounded_answer: str
    ungrounded_answer: str
    poor_answer: str
    context_v1: list[str]
    context_v2: list[str]
    source: str


def _strip_prefix(text: str, prefix: str) -> str:
    # The published data puts "Question: " / "Answer: " in front of the texts (one ungrounded answer too).
    text = text.strip()
    return text[len(prefix) :].lstrip() if text.startswith(prefix) else text


def _str_list(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError(f"{what} must be a list of strings")
    return list(value)


def load_wikieval(path: str | os.PathLike[str] | None = None) -> list[WikiEvalItem]:
    """Load WikiEval (Es et al. 2023; 50 rows) from ``wikieval.jsonl``, with the text prefixes removed.

    ``path``: the file or its folder (default: ``default_data_dir()/wikieval``).

    >>> items = load_wikieval()  # doctest: +SKIP
    >>> len(items), items[0].question[:9]  # doctest: +SKIP
    (50, 'When is t')
    """
    file = _locate(path, "wikieval", "wikieval.jsonl")
    items: list[WikiEvalItem] = []
    with file.open(encoding="utf-8") as handle:
        for number, line in enumerate(line for line in handle if line.strip()):
            raw = json.loads(line)
            items.append(
                WikiEvalItem(
                    id=str(number),
                    question=_strip_prefix(raw["question"], "Question: "),
                    grounded_answer=_strip_prefix(raw["answer"], "Answer: "),
                    ungrounded_answer=_strip_prefix(raw["ungrounded_answer"], "Answer: "),
                    poor_answer=_strip_prefix(raw["poor_answer"], "Answer: "),
                    context_v1=_str_list(raw["context_v1"], f"{file} row {number} context_v1"),
                    context_v2=_str_list(raw["context_v2"], f"{file} row {number} context_v2"),
                    source=str(raw.get("source", "")),
                )
            )
    return items


# ------------------------------------------------------------------------------------------------ PubMedQA


@dataclass(frozen=True)
class PubMedQAItem:
    """One PubMedQA PQA-L question: its abstract's sections (``contexts``, with section ``labels`` such as
    ``"BACKGROUND"``), the abstract's conclusion (``long_answer``) and the yes/no/maybe ``final_decision``.
    """

    pmid: str
    question: str
    contexts: list[str]
    labels: list[str]
    long_answer: str
    final_decision: str


def load_pubmedqa(path: str | os.PathLike[str] | None = None) -> list[PubMedQAItem]:
    """Load PubMedQA PQA-L (Jin et al. 2019; 1,000 questions) from ``ori_pqal.json``, in file order.

    ``path``: the file or its folder (default: ``default_data_dir()/pubmedqa``).

    >>> items = load_pubmedqa()  # doctest: +SKIP
    >>> len(items), items[0].final_decision  # doctest: +SKIP
    (1000, 'yes')
    """
    file = _locate(path, "pubmedqa", "ori_pqal.json")
    with file.open(encoding="utf-8") as handle:
        data: dict[str, dict[str, Any]] = json.load(handle)
    items: list[PubMedQAItem] = []
    for pmid, raw in data.items():
        contexts = _str_list(raw["CONTEXTS"], f"{file} PMID {pmid} CONTEXTS")
        labels = _str_list(raw["LABELS"], f"{file} PMID {pmid} LABELS")
        if len(labels) != len(contexts):
            raise InputError(f"{file} PMID {pmid}: {len(contexts)} CONTEXTS but {len(labels)} LABELS")
        items.append(
            PubMedQAItem(
                pmid=pmid,
                question=raw["QUESTION"],
                contexts=contexts,
                labels=labels,
                long_answer=raw["LONG_ANSWER"],
                final_decision=raw["final_decision"],
            )
        )
    return items


# ------------------------------------------------------------------------------------------------ HaluEval


@dataclass(frozen=True)
class HaluEvalItem:
    """One HaluEval QA row (Li et al. 2023): a ``knowledge`` passage, a question, the right answer and
    a hallucinated answer (written by ChatGPT to look plausible but contradict or go beyond the
    knowledge). ``id`` is the 0-based line number in the file, as a string."""

    id: str
    knowledge: str
    question: str
    right_answer: str
    hallucinated_answer: str


def load_halueval(path: str | os.PathLike[str] | None = None) -> list[HaluEvalItem]:
    """Load HaluEval QA rows from JSON Lines (``halueval_qa_dev.jsonl``: 200 rows of the release).

    ``path``: the file or its folder (default: ``default_data_dir()/halueval_dev``).

    >>> items = load_halueval()  # doctest: +SKIP
    >>> len(items)  # doctest: +SKIP
    200
    """
    file = _locate(path, "halueval_dev", "halueval_qa_dev.jsonl")
    items: list[HaluEvalItem] = []
    fields = ("knowledge", "question", "right_answer", "hallucinated_answer")
    with file.open(encoding="utf-8") as handle:
        for number, line in enumerate(line for line in handle if line.strip()):
            raw = json.loads(line)
            missing = [f for f in fields if not isinstance(raw.get(f), str)]
            if missing:
                raise InputError(f"{file} row {number}: field {missing[0]!r} is missing or not a string")
            items.append(HaluEvalItem(str(number), *(raw[f].strip() for f in fields)))
    return items


# ------------------------------------------------------------------------------------------------ FaithBench

# FaithBench's annotation labels that make a summary hallucinated under the authors' "worst over
# annotators, Questionable + Unwanted" binarisation (binarize.py beside the data); "Benign" does not.
_FAITHBENCH_HALLUCINATED = frozenset({"Questionable", "Unwanted", "Unwanted.Intrinsic", "Unwanted.Extrinsic"})


@dataclass(frozen=True)
class FaithBenchItem:
    """One FaithBench summary (Bao et al., NAACL 2025): an LLM's summary of ``source`` with its human
    label and the predictions other detectors made on the same summary.

    ``label`` is 1 for consistent and 0 for hallucinated: hallucinated when any annotator marked a
    span Questionable or Unwanted (the authors' "worst" aggregation); a summary with no annotation, or
    only Benign ones, is consistent. (The authors' binarize.py returns 0 for a summary with no
    annotation while its comment says "consistent"; we follow the comment and the dataset's
    documentation.) ``passage`` numbers the distinct sources in file order, so splits can keep a
    source's five summaries together. ``detectors`` maps each detector in the metadata to its score
    or binary prediction (1 = consistent).
    """

    id: str
    passage: int
    source: str
    summary: str
    label: int
    summarizer: str
    detectors: dict[str, float]


def load_faithbench(path: str | os.PathLike[str] | None = None) -> list[FaithBenchItem]:
    """Load FaithBench summaries from the folder holding ``batch_*.json`` (default:
    ``default_data_dir()/faithbench_dev``), batches in numeric order, samples in file order.

    >>> items = load_faithbench()  # doctest: +SKIP
    >>> len(items), sum(it.label for it in items)  # doctest: +SKIP
    (250, 91)
    """
    folder = Path(default_data_dir() / "faithbench_dev" if path is None else path)
    files = sorted(folder.glob("batch_*.json"), key=lambda f: int(f.stem.split("_")[1]))
    if not files:
        raise FileNotFoundError(
            f"no FaithBench batch_*.json in {str(folder)!r}; pass the folder or set {DATA_DIR_ENV}"
        )
    items: list[FaithBenchItem] = []
    passages: dict[str, int] = {}
    for file in files:
        for sample in json.loads(file.read_text(encoding="utf-8"))["samples"]:
            source, summary = sample["source"].strip(), sample["summary"].strip()
            labels = {label for a in sample.get("annotations") or [] for label in a.get("label") or []}
            meta = sample.get("metadata") or {}
            detectors = {
                k: float(v)
                for k, v in meta.items()
                if isinstance(v, int | float) and not isinstance(v, bool) and k != "raw_sample_id"
            }
            items.append(
                FaithBenchItem(
                    id=f"{file.stem}-{sample['sample_id']}",
                    passage=passages.setdefault(source, len(passages)),
                    source=source,
                    summary=summary,
                    label=0 if labels & _FAITHBENCH_HALLUCINATED else 1,
                    summarizer=str(meta.get("summarizer", "")),
                    detectors=detectors,
                )
            )
    return items


# ------------------------------------------------------------------------------------------------ SQuAD 2.0


@dataclass(frozen=True)
class SquadItem:
    """One SQuAD 2.0 question with its paragraph.

    ``answers``: the distinct gold answer texts in their original order (empty when ``is_impossible``);
    ``plausible_answers``: for unanswerable questions, the distinct plausible-but-wrong spans.
    """

    id: str
    title: str
    question: str
    context: str
    answers: list[str]
    is_impossible: bool
    plausible_answers: list[str]


def load_squad_v2(path: str | os.PathLike[str] | None = None) -> list[SquadItem]:
    """Load a SQuAD 2.0 JSON file (default: ``default_data_dir()/squad_v2/dev-v2.0.json``), in file order.

    >>> items = load_squad_v2()  # doctest: +SKIP
    >>> len(items), sum(item.is_impossible for item in items)  # doctest: +SKIP
    (6078, 3168)
    """
    file = _locate(path, "squad_v2", "dev-v2.0.json")
    with file.open(encoding="utf-8") as handle:
        data = json.load(handle)
    items: list[SquadItem] = []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                items.append(
                    SquadItem(
                        id=qa["id"],
                        title=article["title"],
                        question=qa["question"],
                        context=paragraph["context"],
                        answers=_unique([answer["text"] for answer in qa["answers"]]),
                        is_impossible=bool(qa.get("is_impossible", False)),
                        plausible_answers=_unique([a["text"] for a in qa.get("plausible_answers", [])]),
                    )
                )
    return items
