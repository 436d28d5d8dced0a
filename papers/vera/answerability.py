"""Can the kept context C' answer the question? An answerability gate for VERA's refusals, chosen by a
protocol written down (and committed) before any candidate was scored (issue 28).

    python -m papers.vera.answerability features --part dev --out $R/answerability_dev.jsonl.gz
    python -m papers.vera.answerability features --part report --out $R/answerability_report.jsonl.gz
    python -m papers.vera.answerability report $R/answerability_dev.jsonl.gz $R/answerability_report.jsonl.gz

with ``R=docs/results/vera`` (200 questions per part by default). The committed run was cut to the first
120 questions of each part (``report --n 120``; 60 answerable, 60 unanswerable, a prefix of the draw)
because the shared machine ran it at about 24 s per question; the cut (first to 160, then to 120) was
decided from the run's speed alone, before any score was read.

Protocol (pre-registered)
-------------------------
Data. SQuAD 2.0 dev (``/work/shared/data/squad_v2/dev-v2.0.json``, 16 articles here). The 100 questions of
the vera-squad experiment (``squad_items(limit=100, seed=0)``) come from 15 of the 16 articles, so they
cannot be excluded by article: every paragraph holding one of them is left out (90 paragraphs). The
remaining paragraphs are split by article: titles sorted, even positions the development part, odd the
report part, so dev and report share no article and neither shares a paragraph with the 100. Within a
part the questions are shuffled (``random.Random(28)``) and the first ``n/2`` answerable and the first
``n/2`` unanswerable taken.

Per item (the vera-squad chain, unchanged): the raw answer of SmolLM2-135M from the whole paragraph
(``SQUAD_INSTRUCTION``, correct/refused "without VERA"), then ``VeraEvaluator.enhance`` with the
offline defaults (C' by the MiniLM margin rule, the answer regenerated from C', step 3 lift, step 4
ConSens), its refusal and reason, and the regenerated answer's correctness.

Candidates (each with its orientation fixed here: the score grows with "unanswerable"):
- ``qlen``: the question's length in words (trivial baseline; higher = unanswerable, as no direction
  is expected either way the sign is fixed here, not chosen);
- ``lex_par``, ``lex_ctx``, ``lex_best``: minus the share of the question's content words (not
  closed-class, ``ragsense.text``) found in the whole paragraph (the lead's probe, a trivial baseline),
  in C', and in C's best-covering sentence;
- ``minilm_max``: minus the best MiniLM cosine of the question with a paragraph sentence;
- ``ans_mean_lp``, ``ans_first_lp``: minus the generator's mean per-token log-probability of its answer
  from C' (same chat prompt as the generation), and of its first token;
- ``refuse_gap``: log P("unanswerable") minus log P(its answer) under that prompt (the generator was
  told to say "unanswerable" when the documents lack the answer);
- ``ans_consens``: minus the ConSens score of the whole answer given C' (q25, step 4's aggregation);
- ``q_lift``: minus the question's likelihood lift given C' (per token, as step 3 scores statements);
- ``yesno_smol``: log P(no) - log P(yes) (both casings summed) for "Can the question be answered
  from the document?" in SmolLM2's chat format;
- ``yesno_gemma``: the same question to Gemma-3-270M as a plain prompt (`` yes`` / `` no``);
- ``logreg``: a logistic regression over every candidate above except the trivial baselines
  (standardised, C=1, classes balanced), fitted on dev; judged on dev by its 5-fold cross-validated
  scores (stratified, seed 0).

Choice rule (dev only):
1. The gate is the candidate with the highest dev AUROC (unanswerable vs answerable).
2. Two ways to combine it with step 4 are compared on dev: ``or`` (refuse when the gate says
   unanswerable or when VERA refuses now, i.e. steps 3-4 leave no statement or the answer declines by
   its wording) and ``gate`` (refuse when the gate says unanswerable or the answer declines by its
   wording; when the gate says answerable and steps 3-4 remove every statement, the regenerated answer
   is kept as it is, with its step 3-4 decisions as evidence). For each, the threshold is the one that
   refuses the most dev unanswerable questions while the whole pipeline refuses at most 15% of dev
   answerable ones. The combination refusing more dev unanswerable questions wins (tie: ``or``, the
   smaller change).
3. Targets (issue 28), judged on the report part at the dev threshold: answerable refused <= 0.15,
   unanswerable refused >= 0.50, accuracy gain over no VERA above zero. Only if the point estimates of
   the report part meet all three is the gate wired into VERA; otherwise the verdict is written as it is.

Printed on both parts: every candidate's AUROC (95% stratified bootstrap, 2,000 draws, seed 0), and for
the chosen gate, the trivial baselines (under the same threshold rule) and VERA without a gate: refusal
rates (Wilson 95%) and accuracy with and without VERA (paired bootstrap interval of the gain).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragsense.data import RagRow, SquadItem, default_data_dir, load_squad_v2
from ragsense.experiments import (
    REFUSAL_WORD,
    SQUAD_INSTRUCTION,
    is_correct,
    is_squad_refusal,
    squad_items,
)
from ragsense.stats import bootstrap_ci, format_share, roc_auc, share_ci
from ragsense.text import is_closed_class, is_refusal, normalize_word, split_sentences, split_words

SEED = 28
ANSWERABLE_CAP = 0.15
UNANSWERABLE_TARGET = 0.50
TRIVIAL = ("qlen", "lex_par")
CANDIDATES = (
    "qlen",
    "lex_par",
    "lex_ctx",
    "lex_best",
    "minilm_max",
    "ans_mean_lp",
    "ans_first_lp",
    "refuse_gap",
    "ans_consens",
    "q_lift",
    "yesno_smol",
    "yesno_gemma",
)
YESNO_QUESTION = "Can the question be answered from the document? Answer yes or no."


def _path() -> Path:
    return default_data_dir() / "squad_v2" / "dev-v2.0.json"


def draw(part: str, n: int) -> list[SquadItem]:
    """The part's items: ``n/2`` answerable then ``n/2`` unanswerable, interleaved, by the protocol."""
    items = load_squad_v2(_path())
    held = {(it.title, it.context) for it in squad_items(str(_path()), 100, 0)}
    titles = sorted({it.title for it in items})
    part_of = {t: ("dev" if i % 2 == 0 else "report") for i, t in enumerate(titles)}
    pool = [it for it in items if part_of[it.title] == part and (it.title, it.context) not in held]
    random.Random(SEED).shuffle(pool)
    answerable = [it for it in pool if not it.is_impossible and it.answers][: n // 2]
    impossible = [it for it in pool if it.is_impossible][: n // 2]
    out: list[SquadItem] = []
    for a, b in zip(answerable, impossible, strict=True):
        out.extend((a, b))
    return out


def _content(text: str) -> set[str]:
    return {normalize_word(w.text) for w in split_words(text) if not is_closed_class(w.text)}


def coverage(question: str, text: str) -> float:
    """The share of the question's content words found in ``text`` (1.0 for a question without any)."""
    q = _content(question)
    return len(q & _content(text)) / len(q) if q else 1.0


def _lse(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


async def _features(
    items: list[SquadItem], models: dict[str, Any], vera: Any, answer: Any
) -> list[dict[str, Any]]:
    from ragsense.consens import GroundingScorer
    from ragsense.models import ChatMessage, ScoreRequest
    from ragsense.rag import RagPrompt
    from ragsense.vera import VeraEnhancement, sentence_lift_requests

    smol, gemma, embedder = models["smol"], models["gemma"], models["embedder"]
    prompt = RagPrompt(instruction=SQUAD_INSTRUCTION)
    raw = await answer([it.question for it in items], [[it.context] for it in items])
    rows = [
        RagRow(id=it.id, question=it.question, contexts=[it.context], answer=a or REFUSAL_WORD)
        for it, a in zip(items, raw, strict=True)
    ]
    enhanced = await vera.enhance(rows, answer)
    out: list[dict[str, Any]] = []
    scorer = GroundingScorer(smol, aggregation="q25")
    for it, raw_answer, e in zip(items, raw, enhanced, strict=True):
        rec: dict[str, Any] = {
            "id": it.id,
            "title": it.title,
            "is_impossible": it.is_impossible,
            "question": it.question,
            "raw_answer": raw_answer,
            "correct_without": is_correct(it, raw_answer, False),
            "refused_without": is_squad_refusal(raw_answer),
        }
        if not isinstance(e, VeraEnhancement):
            rec["error"] = str(e)
            out.append(rec)
            continue
        docs = [d for d in e.contexts if d.strip()]
        kept = [d.text for d in e.context.decisions if d.keep]
        generated = e.original_answer or ""
        rec.update(
            vera_answer=e.answer,
            regenerated_answer=generated,
            refused_with=e.refused or is_squad_refusal(e.answer),
            correct_with=is_correct(it, e.answer, e.refused),
            # The regenerated answer kept whole: what a gate that overrides step 4 would return.
            correct_unedited=is_correct(it, generated, False),
            # Declines by its wording: the pipeline's rule (ragsense.text) or the experiment's.
            declines=bool(generated.strip()) and (is_refusal(generated) or is_squad_refusal(generated)),
            refusal_reason=e.refusal_reason,
            n_sentences=len(e.context.decisions),
            n_kept=len(kept),
        )
        sentences = [s.text for s in split_sentences(it.context, max_chars=600)]
        cprime = "\n".join(docs)
        rec["qlen"] = float(len(it.question.split()))
        rec["lex_par"] = -coverage(it.question, it.context)
        rec["lex_ctx"] = -coverage(it.question, cprime)
        rec["lex_best"] = -max((coverage(it.question, s) for s in kept), default=0.0)
        vecs = embedder.embed([it.question, *sentences])
        rec["minilm_max"] = -max(float(vecs[0] @ v) for v in vecs[1:])
        chat = smol.render_chat(prompt.render_chat(it.question, docs))
        requests = [ScoreRequest(chat, generated or REFUSAL_WORD), ScoreRequest(chat, REFUSAL_WORD)]
        requests += sentence_lift_requests(it.question, [cprime])
        yes_chat = smol.render_chat(
            [ChatMessage("user", f"Document: {cprime}\nQuestion: {it.question}\n{YESNO_QUESTION}")]
        )
        requests += [ScoreRequest(yes_chat, w) for w in ("yes", "Yes", "no", "No")]
        s = await smol.score(requests)
        ans, unans, base, lifted = s[0], s[1], s[2], s[3]
        rec["ans_mean_lp"] = -ans.total / max(1, ans.n_tokens)
        rec["ans_first_lp"] = -ans.logprobs[0]
        rec["refuse_gap"] = unans.total - ans.total
        rec["q_lift"] = -(lifted.total - base.total) / max(1, base.n_tokens)
        yes, no = _lse([s[4].total, s[5].total]), _lse([s[6].total, s[7].total])
        rec["yesno_smol"] = no - yes
        [grounding] = await scorer.score([(it.question, docs, generated or REFUSAL_WORD)])
        rec["ans_consens"] = -float(getattr(grounding, "consens", 0.0))
        plain = f"Document: {cprime}\nQuestion: {it.question}\n{YESNO_QUESTION}\nAnswer:"
        g = await gemma.score([ScoreRequest(plain, " yes"), ScoreRequest(plain, " no")])
        rec["yesno_gemma"] = g[1].total - g[0].total
        out.append(rec)
    return out


def features(part: str, n: int, out: Path, batch: int) -> None:
    from ragsense.embeddings import load_embedder
    from ragsense.models import load_model
    from ragsense.rag import RagPrompt, answer_function
    from ragsense.vera import VeraEvaluator, VeraSettings

    items = draw(part, n)
    done: set[str] = set()
    if out.exists():
        with gzip.open(out, "rt", encoding="utf-8") as fh:
            done = {json.loads(line)["id"] for line in fh if line.strip()}
    smol = load_model("smollm2-135m")
    models = {"smol": smol, "gemma": load_model("gemma3-270m"), "embedder": load_embedder("minilm")}
    answer = answer_function(smol, prompt=RagPrompt(instruction=SQUAD_INSTRUCTION))
    vera = VeraEvaluator(smol, VeraSettings(check_retrieval=False, cache=False))
    todo = [it for it in items if it.id not in done]
    with gzip.open(out, "at", encoding="utf-8") as fh:
        for start in range(0, len(todo), batch):
            t0 = time.perf_counter()
            chunk = todo[start : start + batch]
            for rec in asyncio.run(_features(chunk, models, vera, answer)):
                rec["part"] = part
                fh.write(json.dumps(rec, sort_keys=True) + "\n")
            fh.flush()
            per_item = (time.perf_counter() - t0) / len(chunk)
            print(f"{part}: {start + len(chunk)}/{len(todo)} ({per_item:.1f} s/item)", flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m papers.vera.answerability")
    sub = parser.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("features")
    f.add_argument("--part", choices=("dev", "report"), required=True)
    f.add_argument("--n", type=int, default=200)
    f.add_argument("--batch", type=int, default=4)
    f.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("report")
    r.add_argument("dev", type=Path)
    r.add_argument("report", type=Path, nargs="?")
    r.add_argument("--n", type=int, help="only the first N questions of each part (draw order)")
    args = parser.parse_args(argv)
    if args.cmd == "features":
        features(args.part, args.n, args.out, args.batch)
    else:
        report(args.dev, args.report, args.n)


def _load(path: Path, n: int | None = None) -> list[dict[str, Any]]:
    """The part's records (the first ``n`` in draw order when given), without the failed ones."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [r for r in rows[:n] if "error" not in r]


def _auroc(scores: np.ndarray, y: np.ndarray) -> str:
    pos, neg = scores[y], scores[~y]
    low, high = bootstrap_ci(roc_auc, pos, neg)
    return f"{roc_auc(pos, neg):.3f} [{low:.3f}, {high:.3f}]"


LEARNED = tuple(c for c in CANDIDATES if c not in TRIVIAL)


def _matrix(rows: list[dict[str, Any]]) -> np.ndarray:
    return np.array([[float(r[c]) for c in LEARNED] for r in rows])


def _logreg(dev: list[dict[str, Any]], others: list[list[dict[str, Any]]]) -> tuple[np.ndarray, list[Any]]:
    """Dev scores cross-validated (5 folds); other parts scored by the fit on all of dev."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = _matrix(dev), np.array([r["is_impossible"] for r in dev])

    def model() -> Any:
        return make_pipeline(
            StandardScaler(), LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000)
        )

    held = cross_val_predict(
        model(), x, y, cv=StratifiedKFold(5, shuffle=True, random_state=0), method="decision_function"
    )
    fitted = model().fit(x, y)
    return np.asarray(held), [fitted.decision_function(_matrix(o)) for o in others]


def outcomes(rows: list[dict[str, Any]], gate: np.ndarray, combo: str) -> tuple[np.ndarray, np.ndarray]:
    """Per row, refused and correct under a gate (True = the gate says unanswerable) and a combination."""
    refused, correct = [], []
    for r, g in zip(rows, gate, strict=True):
        if combo == "none":
            ref, ok_answer = bool(r["refused_with"]), bool(r["correct_with"])
        elif combo == "or":
            ref = bool(g) or bool(r["refused_with"])
            ok_answer = bool(r["correct_with"])
        else:  # "gate": steps 3-4 no longer refuse; the gate and the answer's own wording do
            ref = bool(g) or bool(r["declines"]) or r["n_kept"] == 0
            ok_answer = bool(r["correct_unedited"] if r["refused_with"] else r["correct_with"])
        refused.append(ref)
        correct.append(ref if r["is_impossible"] else (not ref and ok_answer))
    return np.array(refused), np.array(correct)


def _threshold(rows: list[dict[str, Any]], scores: np.ndarray, combo: str) -> tuple[float, float] | None:
    """The dev threshold refusing the most unanswerable questions with answerable refused <= the cap
    (ties: fewer answerable refused, then the higher threshold); None when no threshold meets the cap."""
    y = np.array([r["is_impossible"] for r in rows])
    best: tuple[float, float, float] | None = None
    for t in [math.inf, *sorted(set(scores.tolist()))]:
        refused, _ = outcomes(rows, scores >= t, combo)
        ans, unans = float(refused[~y].mean()), float(refused[y].mean())
        if ans > ANSWERABLE_CAP:
            continue
        key = (unans, -ans, t)
        if best is None or key > best:
            best = key
    return None if best is None else (best[2], best[0])


def _row(rows: list[dict[str, Any]], refused: np.ndarray, correct: np.ndarray) -> str:
    y = np.array([r["is_impossible"] for r in rows])
    without = np.array([float(r["correct_without"]) for r in rows])
    low, high = bootstrap_ci(
        lambda a, b: float(b.mean() - a.mean()), without, correct.astype(float), paired=True
    )
    return (
        f"{format_share(share_ci(int(refused[~y].sum()), int((~y).sum())))} | "
        f"{format_share(share_ci(int(refused[y].sum()), int(y.sum())))} | "
        f"{correct.mean():.3f} | {correct.mean() - without.mean():+.3f} [{low:+.3f}, {high:+.3f}]"
    )


def report(dev_path: Path, rep_path: Path | None, n: int | None = None) -> None:
    parts = {"dev": _load(dev_path, n)}
    if rep_path is not None:
        parts["report"] = _load(rep_path, n)
    ys = {k: np.array([r["is_impossible"] for r in v]) for k, v in parts.items()}
    scores: dict[str, dict[str, np.ndarray]] = {
        k: {c: np.array([float(r[c]) for r in v]) for c in CANDIDATES} for k, v in parts.items()
    }
    held, fitted = _logreg(parts["dev"], [parts[k] for k in parts if k != "dev"])
    scores["dev"]["logreg"] = held
    for k, s in zip([k for k in parts if k != "dev"], fitted, strict=True):
        scores[k]["logreg"] = s
    names = (*CANDIDATES, "logreg")
    for k, v in parts.items():
        articles = len({r["title"] for r in v})
        print(f"{k}: {len(v)} questions ({int(ys[k].sum())} unanswerable), {articles} articles")
    print("\n| candidate (higher = unanswerable) | " + " | ".join(f"{k} AUROC" for k in parts) + " |")
    print("|---|" + "---|" * len(parts))
    aucs = {c: roc_auc(scores["dev"][c][ys["dev"]], scores["dev"][c][~ys["dev"]]) for c in names}
    for c in names:
        label = f"{c} (dev: 5-fold cross-validated)" if c == "logreg" else c
        print(f"| {label} | " + " | ".join(_auroc(scores[k][c], ys[k]) for k in parts) + " |")
    chosen = max(names, key=lambda c: aucs[c])
    print(f"\nchosen on dev (highest AUROC): {chosen}")
    rules = {}
    for combo in ("or", "gate"):
        found = _threshold(parts["dev"], scores["dev"][chosen], combo)
        rules[combo] = found
        note = (
            "no threshold keeps dev answerable refusals <= 0.15"
            if found is None
            else (f"threshold {found[0]:.4g}, dev unanswerable refused {found[1]:.3f}")
        )
        print(f"- combination {combo!r}: {note}")
    feasible = {c: f for c, f in rules.items() if f is not None}
    combo = max(feasible, key=lambda c: (feasible[c][1], c == "or")) if feasible else None
    print(f"chosen combination: {combo}")
    print("\n| part | rule | answerable refused | unanswerable refused | accuracy with | gain over no VERA |")
    print("|---|---|---|---|---|---|")
    for k, v in parts.items():
        without = np.array([float(r["correct_without"]) for r in v])
        print(f"| {k} | no VERA | - | - | {without.mean():.3f} | |")
        none = np.zeros(len(v), dtype=bool)
        print(f"| {k} | VERA now (no gate) | {_row(v, *outcomes(v, none, 'none'))} |")
        for c in (chosen, *TRIVIAL):
            for cb in ("or", "gate"):
                found = _threshold(parts["dev"], scores["dev"][c], cb)
                if found is None:
                    print(f"| {k} | {c}, {cb}: no dev threshold meets the cap | | | | |")
                    continue
                mark = " **chosen**" if c == chosen and cb == combo else ""
                label = f"{c} >= {found[0]:.4g}, {cb}{mark}"
                print(f"| {k} | {label} | {_row(v, *outcomes(v, scores[k][c] >= found[0], cb))} |")
    if combo is not None and "report" in parts:
        t = feasible[combo][0]
        refused, correct = outcomes(parts["report"], scores["report"][chosen] >= t, combo)
        y = ys["report"]
        without = np.array([float(r["correct_without"]) for r in parts["report"]])
        met = (
            refused[~y].mean() <= ANSWERABLE_CAP
            and refused[y].mean() >= UNANSWERABLE_TARGET
            and correct.mean() > without.mean()
        )
        print(f"\nreport part, targets met by the chosen rule: {'yes' if met else 'no'}")
    elif "report" in parts:
        print("\nreport part, targets met by the chosen rule: no (no rule met the dev cap)")


if __name__ == "__main__":
    main()
