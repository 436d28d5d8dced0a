"""The systems the kinship benchmark can test: ragsense's naive RAG pipeline, a Python callable, or an
HTTP endpoint. Each is set up once per knowledge source (condition) and asked one question at a time.

A user system as a Python callable is a factory ``build(documents, k)`` returning
``answer(question) -> (answer, retrieved_documents)``: the benchmark builds it once per condition
and k, so the system indexes exactly that condition's knowledge source.

A user system over HTTP implements two JSON endpoints (see docs/kinship.md):

* ``POST {url}/index`` with ``{"knowledge_source": ID, "documents": [text, ...]}``: index these
  documents under ``ID`` (any 2xx status means done).
* ``POST {url}/answer`` with ``{"knowledge_source": ID, "question": text, "k": n}``: answer from
  that source, retrieving ``n`` documents; reply ``{"answer": text, "documents": [text, ...]}``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ragsense.bench.kinship._source import KinshipCondition
from ragsense.embeddings import Embedder
from ragsense.errors import BackendUnavailableError, ModelCallError, ParameterError
from ragsense.models import GenerationConfig, LanguageModel
from ragsense.rag import (
    DEFAULT_GENERATION,
    HybridStore,
    NaiveRagPipeline,
    PromptFormat,
    RagPrompt,
    RetrievedDocument,
    VectorStore,
    VectorStoreKind,
    open_vector_store,
    resolve_prompt_format,
    retrieve_documents,
)

AnswerFn = Callable[[str], tuple[str, Sequence[str]]]
SystemFactory = Callable[[Sequence[str], int], AnswerFn]


@dataclass(frozen=True)
class SystemAnswer:
    """One answer: the text (None when the system only retrieves), and the retrieved documents as
    store ids (None when unknown)."""

    answer: str | None
    retrieved_ids: tuple[str, ...] | None
    documents_dropped: int = 0


@dataclass
class Timings:
    """Seconds spent per phase, summed over a run."""

    indexing: float = 0.0
    retrieval: float = 0.0
    generation: float = 0.0
    answering: float = 0.0  # user systems: retrieval and generation together

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in vars(self).items()}


class KinshipSystem(Protocol):
    """What the benchmark runner needs from a system under test."""

    name: str
    timings: Timings

    async def answer_condition(
        self, condition: KinshipCondition, questions: Sequence[str], k: int, *, source_id: str
    ) -> list[SystemAnswer | Exception]:
        """Answer each question independently from ``condition``'s documents with ``k`` retrieved.

        ``source_id`` names the knowledge source (source parameters and condition) uniquely."""
        ...


def _ids_of(condition: KinshipCondition, texts: Sequence[str]) -> tuple[str, ...]:
    by_text = {d.text.strip(): d.id for d in condition.documents}
    return tuple(by_text[t.strip()] for t in texts if isinstance(t, str) and t.strip() in by_text)


@dataclass
class PipelineSystem:
    """ragsense's :class:`~ragsense.rag.NaiveRagPipeline` over a vector store per condition.

    ``retrieval="hybrid"`` (default) fuses the dense ranking with BM25 (:class:`~ragsense.rag.HybridStore`);
    ``"dense"`` is the embedding ranking alone.

    Retrieval runs once per condition at the largest k asked so far and smaller k reuse its prefix
    (top-k is a prefix of top-K: the ranking is exact and ties follow store order). Generation is
    batched per (condition, k): all questions go to the generator in one call.
    """

    generator: LanguageModel | None
    embedder: Embedder
    store_kind: VectorStoreKind = "faiss"
    retrieval: Literal["dense", "hybrid"] = "hybrid"
    prompt: RagPrompt = field(default_factory=RagPrompt)
    prompt_format: PromptFormat = "auto"
    generation: GenerationConfig = DEFAULT_GENERATION
    name: str = "ragsense naive RAG"
    timings: Timings = field(default_factory=Timings)
    _stores: dict[str, VectorStore] = field(default_factory=dict, repr=False)
    _pipeline: NaiveRagPipeline | None = field(default=None, repr=False)
    _retrieved: dict[tuple[str, str], list[RetrievedDocument]] = field(default_factory=dict, repr=False)

    @property
    def prompt_format_used(self) -> str:
        """``chat`` or ``plain``: what ``prompt_format`` resolves to for this generator."""
        if self.generator is None:
            return "none"
        return resolve_prompt_format(self.prompt_format, self.generator)

    @property
    def document_order_used(self) -> str:
        """``best_first`` or ``best_last``: the order the documents are listed in the prompt."""
        if self.prompt.ordered(["best", "next"], chat=self.prompt_format_used == "chat")[0] == "best":
            return "best_first"
        return "best_last"

    def _retriever_settings(self) -> dict[str, Any]:
        return {
            "retrieval": self.retrieval,
            "store": self.store_kind,
            "embedder": self.embedder.name,
            "embedder_fingerprint": self.embedder.fingerprint,
        }

    def settings(self) -> dict[str, Any]:
        """Everything of this pipeline that changes its answers, as recorded in ``run.json``: the
        retriever, the generator, the prompt as resolved for it (format, document order, few-shot
        examples) and the decoding (stop strings, token cap, temperature)."""
        out = self._retriever_settings()
        if self.generator is not None:
            out.update(
                model=self.generator.info.name,
                model_fingerprint=self.generator.info.fingerprint,
                prompt_version=self.prompt.version,
                prompt_format=self.prompt_format_used,
                document_order=self.document_order_used,
                few_shot_examples=len(self.prompt.examples),
                max_new_tokens=self.generation.max_new_tokens,
                stop=list(self.generation.stop),
                temperature=self.generation.temperature,
                answer="first non-empty line of the generation",
            )
        return out

    def store(self, condition: KinshipCondition, source_id: str) -> VectorStore:
        if source_id not in self._stores:
            start = time.perf_counter()
            docs = condition.documents
            store: VectorStore = open_vector_store(
                self.store_kind, self.embedder, [d.text for d in docs], ids=[d.id for d in docs]
            )
            if self.retrieval == "hybrid":
                store = HybridStore(store)
            self.timings.indexing += time.perf_counter() - start
            self._stores = {source_id: store}  # one condition's store at a time
            self._retrieved = {}
            self._pipeline = None
        return self._stores[source_id]

    def retrieve(
        self, condition: KinshipCondition, questions: Sequence[str], k: int, *, source_id: str
    ) -> list[list[RetrievedDocument]]:
        """Top-k per question; computed at most once per (source, question) for the largest k."""
        store = self.store(condition, source_id)
        missing = [q for q in questions if len(self._retrieved.get((source_id, q), ())) < k]
        if missing:
            start = time.perf_counter()
            for q, docs in zip(missing, retrieve_documents(store, missing, k), strict=True):
                self._retrieved[(source_id, q)] = docs
            self.timings.retrieval += time.perf_counter() - start
        return [self._retrieved[(source_id, q)][:k] for q in questions]

    async def answer_condition(
        self, condition: KinshipCondition, questions: Sequence[str], k: int, *, source_id: str
    ) -> list[SystemAnswer | Exception]:
        retrieved = self.retrieve(condition, questions, k, source_id=source_id)
        if self._pipeline is None:
            if self.generator is None:
                raise ParameterError("the pipeline needs a generator model", parameter="generator")
            self._pipeline = NaiveRagPipeline(
                self.store(condition, source_id),
                self.generator,
                prompt=self.prompt,
                prompt_format=self.prompt_format,
                generation=self.generation,
            )
        start = time.perf_counter()
        answers = await self._pipeline.answer_from(questions, retrieved)
        self.timings.generation += time.perf_counter() - start
        return [
            SystemAnswer(a.answer, tuple(d.id for d in a.documents), a.documents_dropped) for a in answers
        ]


@dataclass
class RetrievalOnlySystem(PipelineSystem):
    """The pipeline's retriever alone: retrieval recall for every query at every k, no generation.

    Cheap (embeddings only), so it measures retrieval over all queries where the full pipeline
    samples; accuracy is reported as None.
    """

    name: str = "ragsense retriever only"

    def settings(self) -> dict[str, Any]:
        """The retriever's settings (nothing is generated)."""
        return self._retriever_settings()

    async def answer_condition(
        self, condition: KinshipCondition, questions: Sequence[str], k: int, *, source_id: str
    ) -> list[SystemAnswer | Exception]:
        retrieved = self.retrieve(condition, questions, k, source_id=source_id)
        return [SystemAnswer(None, tuple(d.id for d in docs)) for docs in retrieved]


@dataclass
class CallableSystem:
    """A user system given as a factory ``build(documents, k) -> answer(question)``."""

    factory: SystemFactory
    name: str = "python callable"
    timings: Timings = field(default_factory=Timings)

    async def answer_condition(
        self, condition: KinshipCondition, questions: Sequence[str], k: int, *, source_id: str
    ) -> list[SystemAnswer | Exception]:
        start = time.perf_counter()
        try:
            answer_fn = self.factory([d.text for d in condition.documents], k)
        except Exception as exc:  # the system could not be built: every question of this chunk fails
            return [RuntimeError(f"building the system failed: {type(exc).__name__}: {exc}")] * len(questions)
        finally:
            self.timings.indexing += time.perf_counter() - start
        out: list[SystemAnswer | Exception] = []
        for q in questions:
            start = time.perf_counter()
            try:
                out.append(_parse_answer(answer_fn(q), condition))
            except Exception as exc:
                out.append(exc)
            self.timings.answering += time.perf_counter() - start
        return out


def _parse_answer(value: Any, condition: KinshipCondition) -> SystemAnswer:
    if isinstance(value, str):
        return SystemAnswer(value, None)
    if isinstance(value, Sequence) and len(value) == 2 and isinstance(value[0], str):
        docs = value[1]
        if docs is None:
            return SystemAnswer(value[0], None)
        if isinstance(docs, Sequence) and not isinstance(docs, str):
            return SystemAnswer(value[0], _ids_of(condition, [str(d) for d in docs]))
    raise TypeError(
        f"a system must return (answer: str, retrieved_documents: list[str]); got {type(value).__name__}"
    )


@dataclass
class HttpSystem:
    """A user system behind the two-endpoint HTTP protocol in this module's docstring."""

    url: str
    timeout: float = 120.0
    name: str = "HTTP endpoint"
    timings: Timings = field(default_factory=Timings)
    _indexed: set[str] = field(default_factory=set, repr=False)

    def _client(self) -> Any:
        try:
            import httpx
        except ImportError as exc:
            raise BackendUnavailableError(
                "an HTTP system needs httpx: pip install 'ragsense[server]'"
            ) from exc
        return httpx

    def _post(self, httpx: Any, path: str, payload: dict[str, Any]) -> Any:
        url = self.url.rstrip("/") + path
        try:
            resp = httpx.post(url, json=payload, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise ModelCallError(f"the system at {url} failed: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 300:
            raise ModelCallError(f"the system at {url} answered HTTP {resp.status_code}: {resp.text[:200]}")
        try:
            return resp.json()
        except ValueError as exc:
            raise ModelCallError(
                f"the system at {url} answered with invalid JSON: {resp.text[:200]!r}"
            ) from exc

    async def answer_condition(
        self, condition: KinshipCondition, questions: Sequence[str], k: int, *, source_id: str
    ) -> list[SystemAnswer | Exception]:
        httpx = self._client()
        if source_id not in self._indexed:
            start = time.perf_counter()
            try:
                self._post(
                    httpx,
                    "/index",
                    {"knowledge_source": source_id, "documents": [d.text for d in condition.documents]},
                )
            except ModelCallError as exc:
                return [exc] * len(questions)
            finally:
                self.timings.indexing += time.perf_counter() - start
            self._indexed.add(source_id)
        out: list[SystemAnswer | Exception] = []
        for q in questions:
            start = time.perf_counter()
            try:
                body = self._post(httpx, "/answer", {"knowledge_source": source_id, "question": q, "k": k})
                if not isinstance(body, dict) or not isinstance(body.get("answer"), str):
                    raise ModelCallError(f"the system's reply has no string 'answer': {str(body)[:200]}")
                out.append(_parse_answer((body["answer"], body.get("documents")), condition))
            except Exception as exc:
                out.append(exc)
            self.timings.answering += time.perf_counter() - start
        return out
