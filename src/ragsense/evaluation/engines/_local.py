"""The local engine: every metric over every row in this process, on one event loop."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ragsense._async import run_sync
from ragsense.errors import ResumeError
from ragsense.evaluation._evaluation import Evaluation, MetricInfo
from ragsense.evaluation._inputs import rows_from
from ragsense.evaluation._outputs import OutputFile, claim_output
from ragsense.evaluation._runner import resumes_whole, run_rows
from ragsense.evaluation.engines._base import EvaluateRequest
from ragsense.models import shared_pool


@dataclass(frozen=True)
class LocalEngine:
    """``evaluate(..., engine="local")``, the default: the rows are scored in this process by the one
    runner (:func:`~ragsense.evaluation.run_rows`), the models taken from ``pool`` (default: the
    process-wide pool), the output written as the chunks finish.

    >>> from ragsense.evaluation import EvaluateRequest, create_metric
    >>> rows = [{"question": "Q?", "contexts": ["C."], "answer": "A."}]
    >>> request = EvaluateRequest(rows, (create_metric("consens", model="fake"),), progress=False)
    >>> LocalEngine().run(request).rows[0]["errors"]
    []
    """

    def run(self, request: EvaluateRequest) -> Evaluation:
        return run_sync(self.arun(request))

    async def arun(self, request: EvaluateRequest) -> Evaluation:
        output = None if request.output is None else OutputFile.of(request.output)
        if output is not None and output.path is None and request.resume:
            raise ResumeError("cannot resume a run written to standard output; give an output file")
        with claim_output(output, resume=request.resume, overwrite=request.overwrite):
            return await _run(request, output)


def _resumes_whole(request: EvaluateRequest, output: OutputFile | None) -> bool:
    """A resume whose every row is finished in the output (:func:`resumes_whole`): the run re-derives
    what it keeps (verdicts under the current bands) and needs no model, so none is set up and the
    stored run names no model fingerprint. Only an input that can be read twice is looked at (a file,
    a list): standard input or a generator is read once, by the run."""
    if not request.resume or output is None or output.path is None:
        return False
    data = request.data
    a_file = isinstance(data, str | os.PathLike) and str(data) != "-"
    if not (a_file or isinstance(data, list | tuple)):
        return False
    return resumes_whole(rows_from(data), request.metrics, output.working, request.chunk_size)


async def _run(request: EvaluateRequest, output: OutputFile | None) -> Evaluation:
    """Set the metrics up, enter the run in the store, run the rows, write the output (claimed)."""
    rows = rows_from(request.data)
    metrics = request.metrics
    pool = request.pool if request.pool is not None else shared_pool()
    recording = request.recording()
    try:
        with recording.abandoned_on_failure():
            if not _resumes_whole(request, output):
                for metric in metrics:
                    await metric.setup(pool)
            infos = [MetricInfo.of(m) for m in metrics]
            recording.start(infos)
            records, stats = await run_rows(
                rows,
                metrics,
                output=None if output is None else output.working,
                on_chunk=recording.sink(),
                chunk_size=request.chunk_size,
                resume=request.resume,
                overwrite=request.overwrite,
                progress=request.progress,
                desc=request.desc,
                shape=request.shape,
            )
    finally:
        for metric in metrics:
            await metric.aclose()
    evaluation = recording.finish(records, infos, stats)
    if output is not None:
        output.finish(records)
    return evaluation
