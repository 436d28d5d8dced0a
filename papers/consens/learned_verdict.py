"""The learned verdict of issue 36: features of each labelled row, two models, leave-one-family-out
figures, the shipped weights, and the pre-registered rule (docs/results.md, "A learned verdict
(issue 36)", committed in ac1ffb3 before any feature was computed).

No language model runs here. It reads the committed per-item ConSens outputs of the bundled reader
(``--results``: WikiEval, HaluEval-dev, PubMedQA full vs partial, FaithBench-dev) and the rows the
issue-36 pass scored (``--table``: ``ragsense experiment consens-verdict-table``), rebuilds each row's
texts from the data files, computes :func:`ragsense.consens.learned_features` and the trivial
baselines (MiniLM similarity is embedded here for the new sets), and writes:

* ``--features``: every row's features, label, half and baselines (gzipped JSON lines);
* ``--model-out``: the chosen model fitted on every development half (the package's JSON);
* ``--out``: the figures (the last output line too); ``--tables`` prints them as Markdown.

    python -m papers.consens.learned_verdict --results docs/results/consens/smollm2-135m \\
        --table docs/results/consens/verdict \\
        --features docs/results/consens/verdict/features-smollm2-135m.jsonl.gz \\
        --model-out src/ragsense/consens/learned_verdict.json --out docs/results/consens/learned_verdict.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from papers.consens.grounding_default import (
    _auroc_ci,
    _delong,
    band_figures,
    choose_bands_balanced,
    penalised_logistic,
)
from ragsense.consens import (
    LEARNED_FEATURES,
    Aggregation,
    LearnedVerdict,
    WordDetail,
    consens_from_word_nll,
    learned_features,
)
from ragsense.data import load_faithbench, load_halueval, load_pubmedqa, load_wikieval
from ragsense.embeddings import load_embedder
from ragsense.experiments import partial_context, verdict_table
from ragsense.similarity import MODES, answer_context_similarity
from ragsense.stats import roc_auc
from ragsense.text import ContextVocabulary

PREREGISTERED = "ac1ffb3"
MARGIN = 0.02
TIE = 0.005
FAMILY = {
    "wikieval": "wikieval",
    "halueval": "halueval_qa",
    "halueval_matched": "halueval_qa",
    "qa": "halueval_qa",
    "qa_matched": "halueval_qa",
    "dialogue": "halueval_dialogue",
    "summarization": "halueval_summarization",
    "summedits": "summedits",
    "pubmedqa": "pubmedqa",
    "faithbench": "faithbench",
}
SUBSETS = {"halueval_matched", "qa_matched"}  # subsets of another set: reported, never trained on
NOT_ANSWER_LEVEL = {"pubmedqa"}  # its two texts share one answer: no bands from it (rule 5')
FEATURE_SECONDS: list[float] = []  # per row, the time learned_features took (the speed rule)
BASELINES = ("answer_length", "lexical_support", "similarity_whole", "similarity_max_chunk")


@dataclass
class Item:
    """One labelled text with its features and baselines."""

    id: str
    set: str
    group: str
    dev: bool
    label: int
    features: list[float]
    baselines: dict[str, float]
    support: float
    domain: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _records(path: Path) -> list[dict[str, Any]]:
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _words(result: dict[str, Any], contexts: Sequence[str]) -> list[WordDetail]:
    vocab = ContextVocabulary(contexts)
    return [
        WordDetail(
            w["word"],
            w["start"],
            w["end"],
            None,
            None,
            w["nll_context"],
            w["nll_empty"],
            vocab.states(w["word"]),
        )
        for w in result["words"]
    ]


def _item(
    name: str,
    ident: str,
    group: str,
    dev: bool,
    label: int,
    result: dict[str, Any],
    answer: str,
    contexts: Sequence[str],
    similarity: dict[str, float],
    domain: str = "",
) -> Item:
    words = _words(result, contexts)
    stated = [w.stated for w in words]
    started = time.perf_counter()
    features = learned_features(words, answer, contexts)
    FEATURE_SECONDS.append(time.perf_counter() - started)
    return Item(
        id=ident,
        set=name,
        group=group,
        dev=dev,
        label=label,
        features=features,
        baselines={
            "answer_length": -float(len(answer.split())),
            "lexical_support": -sum(not s for s in stated) / len(stated),
            **{f"similarity_{m}": v for m, v in similarity.items()},
            "context_length": float(len(" ".join(contexts).split())),
        },
        # Recomputed: the older outputs predate the `support` score.
        support=consens_from_word_nll(
            [w.nll_empty for w in words], [w.nll_context for w in words], Aggregation.SUPPORT, stated
        )[0],
        domain=domain,
    )


def _sim(rec: dict[str, Any], key: str) -> dict[str, float]:
    return {m: rec[f"similarity_{m}_{key}"] for m in MODES}


def reused_sets(results: Path) -> list[Item]:
    """WikiEval, HaluEval-dev (+ matched pairs), PubMedQA and FaithBench from the committed outputs,
    with rule 2's halves."""
    items: list[Item] = []
    wiki = {it.id: it for it in load_wikieval()}
    for i, rec in enumerate(_records(results / "consens-wikieval.jsonl.gz")):
        it = wiki[rec["id"]]
        for key, label, answer in (
            ("grounded", 1, it.grounded_answer),
            ("ungrounded", 0, it.ungrounded_answer),
        ):
            items.append(
                _item(
                    "wikieval",
                    f"w{i}-{label}",
                    f"w{i}",
                    i < 25,
                    label,
                    rec[key],
                    answer,
                    it.context_v1,
                    _sim(rec, key),
                )
            )
    halu = {it.id: it for it in load_halueval()}
    for i, rec in enumerate(_records(results / "consens-halueval.jsonl.gz")):
        it = halu[rec["id"]]
        pair = [
            _item(
                "halueval",
                f"h{i}-{label}",
                f"h{i}",
                i < 100,
                label,
                rec[key],
                answer,
                [it.knowledge],
                _sim(rec, key),
            )
            for key, label, answer in (
                ("right", 1, it.right_answer),
                ("hallucinated", 0, it.hallucinated_answer),
            )
        ]
        items.extend(pair)
        if abs(len(it.right_answer.split()) - len(it.hallucinated_answer.split())) <= 2:
            items.extend(Item(**{**p.__dict__, "set": "halueval_matched"}) for p in pair)
    pub = {it.pmid: it for it in load_pubmedqa()}
    recs = _records(results / "consens-pubmedqa-partial.jsonl.gz")
    for i, rec in enumerate(recs):
        it = pub[rec["pmid"]]
        partial = partial_context(it)
        assert partial is not None
        for key, label, ctx in (("full", 1, it.contexts), ("partial", 0, partial)):
            items.append(
                _item(
                    "pubmedqa",
                    f"p{i}-{label}",
                    f"p{i}",
                    i < len(recs) // 2,
                    label,
                    rec[key],
                    it.long_answer,
                    ctx,
                    _sim(rec, key),
                )
            )
    fb = {it.id: it for it in load_faithbench()}
    for rec in _records(results / "consens-faithbench.jsonl.gz"):
        it = fb[rec["id"]]
        sim = {m: rec[f"similarity_{m}"] for m in MODES}
        item = _item(
            "faithbench",
            it.id,
            f"f{it.passage}",
            it.passage % 2 == 0,
            it.label,
            rec["result"],
            it.summary,
            [it.source],
            sim,
        )
        item.extra["hhem-2.1"] = it.detectors.get("hhem-2.1")
        items.append(item)
    return items


def new_sets(table: Path) -> list[Item]:
    """The rows the issue-36 pass scored (a prefix of each set's fixed order), MiniLM embedded here."""
    rows = {r.id: r for rows in verdict_table().values() for r in rows}
    scored = []
    for name in ("dialogue", "summedits", "qa", "summarization"):
        for path in (table / f"verdict-{name}.jsonl.gz", table / f"verdict-{name}.jsonl"):
            if path.exists():
                scored.extend((name, rec) for rec in _records(path))
                break
    if not scored:
        return []
    embedder = load_embedder("minilm", cache=True)
    texts = [rows[rec["id"]] for _, rec in scored]
    sims = {
        m: answer_context_similarity(
            [r.answer for r in texts], ["\n\n".join(r.contexts) for r in texts], embedder, mode=m
        )  # type: ignore[arg-type]
        for m in MODES
    }
    items = []
    for k, ((name, rec), row) in enumerate(zip(scored, texts, strict=True)):
        kept = rec["result"].get("kept_documents") or list(range(len(row.contexts)))
        contexts = [row.contexts[i] for i in kept]
        domain = row.set.split("/", 1)[1] if "/" in row.set else ""
        items.append(
            _item(
                name,
                row.id,
                row.group,
                row.dev,
                row.label,
                rec["result"],
                row.answer,
                contexts,
                {m: sims[m][k] for m in MODES},
                domain,
            )
        )
    # Length-matched pairs of the QA rows (answers within two words), as for HaluEval-dev.
    by_group: dict[str, list[Item]] = {}
    for it in items:
        if it.set == "qa":
            by_group.setdefault(it.group, []).append(it)
    for pair in by_group.values():
        if (
            len(pair) == 2
            and abs(pair[0].baselines["answer_length"] - pair[1].baselines["answer_length"]) <= 2
        ):
            items.extend(Item(**{**p.__dict__, "set": "qa_matched"}) for p in pair)
    return items


# ------------------------------------------------------------------------------------------- models

ORIENTATION = [1.0] * len(LEARNED_FEATURES)  # every feature is defined so that larger = more grounded


def fit(items: Sequence[Item], *, monotone: bool, reader: str = "smollm2-135m") -> LearnedVerdict:
    """L2 logistic (C = 1) on standardised features, each training set weighing the same, classes
    balanced; ``monotone``: coefficients >= 0 (L-BFGS-B on the same penalised loss)."""
    sets = sorted({it.set for it in items})
    x = np.array([it.features for it in items], dtype=np.float64) * np.array(ORIENTATION)
    y = np.array([it.label for it in items], dtype=np.float64)
    w = np.zeros(len(items))
    for name in sets:
        idx = np.array([it.set == name for it in items])
        for label in (0, 1):
            cell = idx & (y == label)
            w[cell] = 0.5 / max(1, int(cell.sum())) / len(sets)
    w *= len(items) / w.sum()
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    theta = penalised_logistic((x - mean) / scale, y, w, monotone=monotone)
    return LearnedVerdict(
        orientation=list(ORIENTATION),
        mean=mean.tolist(),
        scale=scale.tolist(),
        coef=theta[:-1].tolist(),
        intercept=float(theta[-1]),
        reader=reader,
    )


def _train(items: Sequence[Item], leave_out: str | None = None) -> list[Item]:
    return [it for it in items if it.dev and it.set not in SUBSETS and FAMILY[it.set] != leave_out]


def _auc(rows: Sequence[Item], values: Sequence[float]) -> float:
    return roc_auc(
        [v for v, r in zip(values, rows, strict=True) if r.label == 1],
        [v for v, r in zip(values, rows, strict=True) if r.label == 0],
    )


def _best_baseline(rows: Sequence[Item]) -> tuple[str, float]:
    scores = {b: _auc(rows, [r.baselines[b] for r in rows]) for b in BASELINES}
    best = max(scores, key=lambda b: scores[b])
    return best, scores[best]


def _sets(items: Sequence[Item], dev: bool) -> dict[str, list[Item]]:
    out: dict[str, list[Item]] = {}
    for it in items:
        if it.dev == dev:
            out.setdefault(it.set, []).append(it)
    return {k: out[k] for k in FAMILY if k in out}


def lodo_scores(items: Sequence[Item], monotone: bool) -> dict[str, float]:
    """Each item's score by the model that never saw its family (trained on the other development halves)."""
    out: dict[str, float] = {}
    for family in sorted(set(FAMILY.values())):
        model = fit(_train(items, family), monotone=monotone)
        for it in items:
            if FAMILY[it.set] == family:
                out[it.id] = model.score(it.features)
    return out


def choose_bands(rows: dict[str, list[Item]], score: Callable[[Item], float]) -> tuple[float, float]:
    """Rule 5' (grounding_default's): balanced precision over the answer-level sets' development halves."""
    answer_level = [k for k in rows if k not in NOT_ANSWER_LEVEL | SUBSETS]
    return choose_bands_balanced(rows, score, answer_level)  # type: ignore[arg-type]


def _cell(rows: Sequence[Item], values: Sequence[float]) -> dict[str, Any]:
    return {"auroc": round(_auc(rows, values), 4), "ci95": _auroc_ci(rows, values)}


def report(items: Sequence[Item], lodo: dict[str, float], shipped: LearnedVerdict) -> dict[str, Any]:
    """Every set's report half: the learned verdict (leave-one-family-out and shipped), ``support``, the
    baselines, and the rule's margin."""
    out: dict[str, Any] = {}
    for name, rows in _sets(items, dev=False).items():
        lo = [lodo[r.id] for r in rows]
        sh = [shipped.score(r.features) for r in rows]
        best, best_auc = _best_baseline(rows)
        baselines = {b: _cell(rows, [r.baselines[b] for r in rows]) for b in BASELINES}
        if name == "pubmedqa":
            baselines["context_length"] = _cell(rows, [r.baselines["context_length"] for r in rows])
        lodo_auc, shipped_auc = _auc(rows, lo), _auc(rows, sh)
        lodo_of: Callable[[Item], float] = lambda r, lodo=lodo: lodo[r.id]  # noqa: E731
        best_of: Callable[[Item], float] = lambda r, best=best: r.baselines[best]  # noqa: E731

        out[name] = {
            "n": len(rows),
            "groups": len({r.group for r in rows}),
            "learned_lodo": _cell(rows, lo),
            "learned_shipped": _cell(rows, sh),
            "support": _cell(rows, [r.support for r in rows]),
            "baselines": baselines,
            "best_baseline": best,
            "margin_lodo": round(lodo_auc - best_auc, 4),
            "margin_shipped": round(shipped_auc - best_auc, 4),
            "delong_lodo_vs_best": _delong(rows, lodo_of, best_of),
            "delong_lodo_vs_support": _delong(rows, lodo_of, lambda r: r.support),
            "passes": lodo_auc - best_auc >= MARGIN and shipped_auc - best_auc >= MARGIN,
        }
        if name == "summedits":
            out[name]["by_domain"] = {
                d: {
                    "n": sum(r.domain == d for r in rows),
                    "learned_lodo": round(
                        _auc([r for r in rows if r.domain == d], [lodo[r.id] for r in rows if r.domain == d]),
                        4,
                    )
                    if len({r.label for r in rows if r.domain == d}) == 2
                    else None,
                    "lexical_support": round(
                        _auc(
                            [r for r in rows if r.domain == d],
                            [r.baselines["lexical_support"] for r in rows if r.domain == d],
                        ),
                        4,
                    )
                    if len({r.label for r in rows if r.domain == d}) == 2
                    else None,
                }
                for d in sorted({r.domain for r in rows})
            }
        if name == "faithbench":
            hhem = [r.extra.get("hhem-2.1") or 0.0 for r in rows]
            out[name]["hhem-2.1"] = _cell(rows, hhem)
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=Path("docs/results/consens/smollm2-135m"))
    p.add_argument("--table", type=Path, default=Path("docs/results/consens/verdict"))
    p.add_argument("--features", type=Path, help="write every row's features here (.jsonl.gz)")
    p.add_argument("--from-features", type=Path, help="read the rows' features from this file instead")
    p.add_argument(
        "--reader", default="smollm2-135m", help="the model whose outputs --results and --table hold"
    )
    p.add_argument("--model-out", type=Path)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    if args.from_features:
        fields = set(Item.__dataclass_fields__)
        items = [
            Item(**{k: v for k, v in rec.items() if k in fields}) for rec in _records(args.from_features)
        ]
    else:
        items = reused_sets(args.results) + new_sets(args.table)
    dev = _sets(items, dev=True)
    candidates: dict[str, Any] = {}
    lodo_by: dict[str, dict[str, float]] = {}
    for name, monotone in (("logistic", False), ("monotone", True)):
        lodo = lodo_by[name] = lodo_scores(items, monotone)
        margins = {}
        for set_name, rows in dev.items():
            margins[set_name] = round(_auc(rows, [lodo[r.id] for r in rows]) - _best_baseline(rows)[1], 4)
        candidates[name] = {
            "dev_margins": margins,
            "smallest_margin": min(margins.values()),
            "mean_dev_auroc": round(
                float(np.mean([_auc(rows, [lodo[r.id] for r in rows]) for rows in dev.values()])), 4
            ),
        }
    a, b = candidates["logistic"]["smallest_margin"], candidates["monotone"]["smallest_margin"]
    chosen = "monotone" if b > a + TIE else "logistic"
    shipped = fit(_train(items), monotone=chosen == "monotone", reader=args.reader)
    bands = choose_bands(dev, lambda r: shipped.score(r.features))
    rep = report(items, lodo_by[chosen], shipped)
    band_fig = {
        f"{name} ({half})": band_figures(rows, lambda r: shipped.score(r.features), bands)
        for half, is_dev in (("dev", True), ("report", False))
        for name, rows in _sets(items, dev=is_dev).items()
        if name not in SUBSETS
    }
    if args.features:
        with gzip.open(args.features, "wt", encoding="utf-8") as fh:
            for it in items:
                scores = {
                    "learned_lodo": lodo_by[chosen][it.id],
                    "learned_shipped": shipped.score(it.features),
                }
                fh.write(json.dumps({**it.__dict__, **scores}, allow_nan=False) + "\n")
    counts = {
        name: {
            "dev": sum(1 for r in items if r.set == name and r.dev),
            "report": sum(1 for r in items if r.set == name and not r.dev),
        }
        for name in FAMILY
    }
    figures = {
        "preregistered": PREREGISTERED,
        "reader": args.reader,
        "features": list(LEARNED_FEATURES),
        "rows": counts,
        "candidates": candidates,
        "chosen": chosen,
        "bands": {"grounded_at": bands[0], "ungrounded_below": bands[1]},
        "report": rep,
        "verdicts": band_fig,
        "rule_met": all(v["passes"] for v in rep.values()),
        "feature_ms_per_row": round(1000 * float(np.mean(FEATURE_SECONDS)), 2) if FEATURE_SECONDS else None,
        "coefficients": dict(zip(LEARNED_FEATURES, [round(c, 4) for c in shipped.coef], strict=True)),
    }
    if args.model_out:
        model = LearnedVerdict(
            shipped.orientation,
            shipped.mean,
            shipped.scale,
            shipped.coef,
            shipped.intercept,
            shipped.reader,
            fit={
                "model": chosen,
                "preregistered": PREREGISTERED,
                "trained_on": {k: v["dev"] for k, v in counts.items() if k not in SUBSETS},
                "bands": figures["bands"],
                "by": "python -m papers.consens.learned_verdict (docs/results.md, 'A learned verdict')",
            },
        )
        args.model_out.write_text(
            json.dumps(model.to_dict(), indent=1, allow_nan=False) + "\n", encoding="utf-8"
        )
    line = json.dumps(figures, allow_nan=False)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    print(line)
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
