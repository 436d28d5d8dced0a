"""Wall time of each framework evaluator on 20 rows against ``ragsense.evaluate`` on the same rows.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.bench_integrations --model smollm2-135m \\
        --rows 20 --repeats 3 --json docs/results/speed/bench_integrations.json

The rows are WikiEval's first ``--rows`` questions (``$RAGSENSE_DATA_DIR/wikieval/wikieval.jsonl``), each
with its one passage and, alternately, its grounded and its ungrounded answer. For every framework that
is installed the script times how its users call the evaluator: LlamaIndex ``evaluate`` per row,
LangChain's RunEvaluator on each row's traced run and the callback handler inside a retrieval chain
(the chain's own time, measured alone, subtracted), Haystack's component on all rows in one ``run``,
DeepEval's metric ``measure`` per row, and RAGAS ``evaluate`` on the dataset. Each repeat times
``evaluate`` (the baseline) and every evaluator in turn on the same warm model, so machine load falls on
all alike; the ratio is the median evaluator time over the median baseline time (target <= 1.1). It
also checks that every evaluator's scores equal ``evaluate``'s to 1e-9. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragsense import evaluate
from ragsense.integrations import FRAMEWORKS, TELEMETRY_OFF

os.environ.update(TELEMETRY_OFF)  # before any framework is imported


def load_rows(n: int) -> list[dict[str, Any]]:
    path = Path(os.environ.get("RAGSENSE_DATA_DIR", "../shared/data")) / "wikieval" / "wikieval.jsonl"
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()[:n]):
        d = json.loads(line)
        answer = d["answer"] if i % 2 == 0 else d["ungrounded_answer"]
        rows.append({"question": d["question"], "contexts": d["context_v1"], "answer": answer})
    return rows


def llamaindex(model: str, rows: list[dict[str, Any]]) -> Callable[[], list[float | None]]:
    from ragsense.integrations.llamaindex import ConSensEvaluator

    evaluator = ConSensEvaluator(model=model)
    return lambda: [
        evaluator.evaluate(query=r["question"], contexts=r["contexts"], response=r["answer"]).score
        for r in rows
    ]


def _langchain_runs(rows: list[dict[str, Any]]) -> tuple[Callable[[list[Any]], None], list[Any]]:
    """A retrieval chain per row (a fixed retriever over the row's passage, FakeListChatModel)."""
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda
    from langchain_core.tracers.run_collector import RunCollectorCallbackHandler

    class Fixed(BaseRetriever):
        texts: list[str]

        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            return [Document(page_content=t) for t in self.texts]

    chains = [
        (
            Fixed(texts=r["contexts"])
            | RunnableLambda(lambda docs: str(docs))
            | FakeListChatModel(responses=[r["answer"]]),
            r,
        )
        for r in rows
    ]

    def run(callbacks: list[Any]) -> None:
        for chain, r in chains:
            chain.invoke(r["question"], config={"callbacks": callbacks})

    collector = RunCollectorCallbackHandler()
    run([collector])
    return run, collector.traced_runs


def langchain(model: str, rows: list[dict[str, Any]]) -> dict[str, Callable[[], Any]]:
    from ragsense.integrations.langchain import ConSensCallbackHandler, ConSensRunEvaluator

    run, traced = _langchain_runs(rows)
    evaluator = ConSensRunEvaluator(model=model)

    def callback() -> list[float | None]:
        handler = ConSensCallbackHandler(model=model)
        run([handler])
        return [r.score for r in handler.results]

    return {
        "langchain_run_evaluator": lambda: [evaluator.evaluate_run(t).score for t in traced],
        "langchain_callback": callback,
        "langchain_chain_alone": lambda: run([]),
    }


def haystack(model: str, rows: list[dict[str, Any]]) -> Callable[[], list[float | None]]:
    from ragsense.integrations.haystack import ConSensEvaluator

    component = ConSensEvaluator(model=model)
    q, c, a = ([r[k] for r in rows] for k in ("question", "contexts", "answer"))
    return lambda: list(component.run(questions=q, contexts=c, predicted_answers=a)["individual_scores"])


def deepeval(model: str, rows: list[dict[str, Any]]) -> Callable[[], list[float | None]]:
    from deepeval.test_case import LLMTestCase

    from ragsense.integrations.deepeval import ConSensMetric

    metric = ConSensMetric(model=model)
    cases = [
        LLMTestCase(input=r["question"], actual_output=r["answer"], retrieval_context=r["contexts"])
        for r in rows
    ]
    return lambda: [metric.measure(c) for c in cases]


def ragas(model: str, rows: list[dict[str, Any]]) -> Callable[[], list[float | None]]:
    from ragas import EvaluationDataset
    from ragas import evaluate as ragas_evaluate

    from ragsense.integrations.ragas import ConSensRagas

    data = EvaluationDataset.from_list(
        [
            {"user_input": r["question"], "retrieved_contexts": r["contexts"], "response": r["answer"]}
            for r in rows
        ]
    )

    def run() -> list[float | None]:
        result = ragas_evaluate(data, metrics=[ConSensRagas(model=model)], show_progress=False)
        return [s["consens"] for s in result.scores]

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    rows = load_rows(args.rows)

    def baseline() -> list[float | None]:
        return [r["consens"] for r in evaluate(rows, ["consens"], model=args.model, progress=False).rows]

    runs: dict[str, Callable[[], Any]] = {"evaluate": baseline}
    installed = {
        name for name, module in FRAMEWORKS.items() if importlib.util.find_spec(module.split(".")[0])
    }
    for name, build in (
        ("llamaindex", llamaindex),
        ("haystack", haystack),
        ("deepeval", deepeval),
        ("ragas", ragas),
    ):
        if name in installed:
            runs[name] = build(args.model, rows)
    if "langchain" in installed:
        runs.update(langchain(args.model, rows))
    want = baseline()  # also loads the model once, before anything is timed
    checked = {}
    for name, run in runs.items():
        got = run()
        if got is not None and name != "langchain_chain_alone":
            checked[name] = all(abs(g - w) <= 1e-9 for g, w in zip(got, want, strict=True))
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    median = {name: statistics.median(t) for name, t in times.items()}
    if "langchain_callback" in median:
        median["langchain_callback"] -= median.pop("langchain_chain_alone")
        times.pop("langchain_chain_alone")
    base = median["evaluate"]
    result = {
        "command": "python -m benchmarks.bench_integrations "
        f"--model {args.model} --rows {args.rows} --repeats {args.repeats}",
        "data": f"wikieval.jsonl first {args.rows} rows, context_v1, grounded/ungrounded answers alternating",
        "model": args.model,
        "torch_threads": torch.get_num_threads(),
        "evaluate_s": round(base, 4),
        "evaluate_times_s": [round(t, 4) for t in times["evaluate"]],
        "evaluators": {
            name: {
                "median_s": round(median[name], 4),
                "ratio": round(median[name] / base, 3),
                "times_s": [round(t, 4) for t in times[name]],
                "equal_to_evaluate": checked.get(name),
            }
            for name in median
            if name != "evaluate"
        },
    }
    for name, r in result["evaluators"].items():
        print(
            f"{name:26s} {r['median_s']:8.3f} s  {r['ratio']:6.3f}x evaluate  equal: {r['equal_to_evaluate']}"
        )
    print(f"{'evaluate':26s} {base:8.3f} s")
    line = json.dumps(result)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(line)


if __name__ == "__main__":
    main()
