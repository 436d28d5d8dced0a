"""Structured output: the schema-guided JSON decoder, ``ragsense serve``'s ``response_format`` and the
openai client's ``json_schema`` requests.

The decoder is tested with a scripted score/generate pair (fast, exact) and with the bundled SmolLM2,
locally and through real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from ragsense.errors import CapabilityError, ModelCallError, ParameterError
from ragsense.models import ChatMessage, Generation, GenerationConfig, ModelInfo, load_model
from ragsense.models._fake import FakeModel
from ragsense.models._structured import (
    UnsupportedSchemaError,
    decode_structured,
    decode_structured_sync,
    generate_structured,
    generate_structured_sync,
    parse_schema,
    strip_added_bos,
    validate_instance,
)

httpx = pytest.importorskip("httpx")

from ragsense.serve import start_in_thread  # noqa: E402

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "maxLength": 200},
        "label": {"type": "string", "enum": ["relevant", "irrelevant"]},
    },
    "required": ["reason", "label"],
    "additionalProperties": False,
}


class Script:
    """A scripted model: ``score`` prefers choices by a rule, ``generate`` replays texts in order.

    Every call is recorded, so tests can check what the decoder asked for."""

    def __init__(
        self,
        texts: Sequence[str | Generation] = (),
        prefer: Callable[[str, str], float] | None = None,
    ) -> None:
        self.texts = list(texts)
        self.prefer = prefer or (lambda prompt, choice: 0.0)
        self.scored: list[tuple[str, tuple[str, ...]]] = []
        self.generated: list[tuple[str, GenerationConfig]] = []

    def score(self, prompt: str, choices: Sequence[str]) -> list[float]:
        self.scored.append((prompt, tuple(choices)))
        return [self.prefer(prompt, c) for c in choices]

    def generate(self, prompt: str, config: GenerationConfig) -> Generation:
        self.generated.append((prompt, config))
        item = self.texts.pop(0) if self.texts else ""
        return item if isinstance(item, Generation) else Generation(item, "stop", max(1, len(item) // 4))

    def run(self, schema: dict[str, Any], config: GenerationConfig | None = None) -> Any:
        out = decode_structured_sync(
            "PROMPT", schema, config or GenerationConfig(), score=self.score, generate=self.generate
        )
        value = json.loads(out.text)
        validate_instance(schema, value)
        return value


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


# -- the decoder with a scripted model ---------------------------------------------------------------
def test_compact_json_in_property_order_and_what_the_model_is_asked() -> None:
    script = Script(["The passage names Paris"], prefer=lambda p, c: 1.0 if "irrelevant" in c else 0.0)
    out = decode_structured_sync(
        "PROMPT",
        JUDGE_SCHEMA,
        GenerationConfig(max_new_tokens=30),
        score=script.score,
        generate=script.generate,
    )
    assert out.text == '{"reason": "The passage names Paris", "label": "irrelevant"}'
    assert out.finish_reason == "stop" and out.n_tokens == 5
    [(prompt, config)] = script.generated
    assert prompt == 'PROMPT{"reason": "'
    assert config.stop == ('"', "\n") and config.temperature == 0 and config.max_new_tokens == 30
    [(prompt, choices)] = script.scored
    assert prompt == 'PROMPT{"reason": "The passage names Paris", "label":'
    assert choices == (' "relevant"}', ' "irrelevant"}')  # the leading space starts the continuation


def test_escaped_quote_cut_by_the_stop_string_resumes_generation() -> None:
    # A generator honouring stop='"' cuts `\"` after its backslash: the decoder puts the quote back.
    script = Script(["He said \\", "hi\\", " and left"])
    value = script.run(_object(reason={"type": "string"}))
    assert value == {"reason": 'He said "hi" and left'}
    assert [p for p, _ in script.generated] == [
        'PROMPT{"reason": "',
        'PROMPT{"reason": "He said \\"',
        'PROMPT{"reason": "He said \\"hi\\"',
    ]


def test_model_escapes_are_decoded_and_written_back_properly() -> None:
    # A generator that ignores stop strings: the decoder finds the closing quote itself.
    raw = 'a\\\\b \\n\\t caf\\u00e9 \\ud83d\\ude00 C:\\path \\"q\\" end" , "label": "x"}'
    value = Script([raw]).run(_object(reason={"type": "string"}))
    assert value == {"reason": 'a\\b \n\t café 😀 C:\\path "q" end'}
    assert Script(["first line\nsecond line"]).run(_object(r={"type": "string"})) == {"r": "first line"}
    tab = Script([Generation("tab\there\\", "length", 9)])  # cut by max_new_tokens after a backslash
    assert tab.run(_object(r={"type": "string"})) == {"r": "tab\there"}
    out = decode_structured_sync(
        "P",
        _object(r={"type": "string"}),
        GenerationConfig(),
        score=Script().score,
        generate=Script(["a \\ud800 lone"]).generate,
    )
    assert "\n" not in out.text and json.loads(out.text) == {"r": "a \ufffd lone"}


def test_max_length_and_token_budget() -> None:
    script = Script(["abcdefghij"])
    value = script.run(_object(r={"type": "string", "maxLength": 4}), GenerationConfig(max_new_tokens=100))
    assert value == {"r": "abcd"}
    assert script.generated[0][1].max_new_tokens == 12  # maxLength + 8: no need for more tokens
    script = Script([Generation("long", "length", 5)])
    assert script.run(_object(r={"type": "string"}), GenerationConfig(max_new_tokens=5)) == {"r": "long"}
    assert script.generated[0][1].max_new_tokens == 5
    script = Script(["unused"])
    assert script.run(_object(r={"type": "string", "maxLength": 0})) == {"r": ""}
    assert script.generated == []


def test_enum_values_sharing_a_prefix_are_told_apart_by_the_closing_quote() -> None:
    schema = _object(answer={"type": "string", "enum": ["yes", "yes, partly", "no"]}, n={"type": "boolean"})
    script = Script(prefer=lambda p, c: {' "yes, partly",': -1.0, ' "yes",': -2.0}.get(c, -5.0))
    assert script.run(schema)["answer"] == "yes, partly"
    assert script.scored[0][1] == (' "yes",', ' "yes, partly",', ' "no",')
    tie = Script(prefer=lambda p, c: -1.0)
    assert tie.run(schema) == {"answer": "yes", "n": True}  # ties go to the first value


def test_optional_string_null_or_generated() -> None:
    schema = _object(
        a={"anyOf": [{"type": "string"}, {"type": "null"}]},
        b={"type": ["null", "string"]},
        c={"oneOf": [{"type": "null"}, {"type": "string", "enum": ["x", "y"]}]},
    )
    script = Script(["text"], prefer=lambda p, c: 1.0 if (c == " null") != p.endswith('"b":') else 0.0)
    assert script.run(schema) == {"a": None, "b": "text", "c": "x"}
    assert script.scored[0][1] == (" null", ' "')
    assert script.scored[2][1] == (' "x"}', ' "y"}', " null}")
    null_c = Script(["t"], prefer=lambda p, c: 1.0 if "null" in c else 0.0)
    assert null_c.run(schema) == {"a": None, "b": None, "c": None}


def test_array_of_strings() -> None:
    schema = _object(
        tags={"type": "array", "items": {"type": "string"}, "maxItems": 3}, done={"type": "boolean"}
    )
    # Go on for two items, then close.
    tails = {"[": '"', '"one"': ",", '"two"': "]"}
    script = Script(
        ["one", "two"],
        prefer=lambda p, c: next(
            (1.0 if c == want else 0.0 for t, want in tails.items() if p.endswith(t)), 0.0
        ),
    )
    value = script.run(schema)
    assert value == {"tags": ["one", "two"], "done": True}
    prompts = [p for p, _ in script.scored]
    assert prompts[0].endswith('"tags": [') and prompts[1].endswith('"tags": ["one"')
    assert script.generated[1][0].endswith('"tags": ["one", "')
    always = Script(["a", "b", "c", "d"], prefer=lambda p, c: 1.0 if c in ('"', ",", " true}") else 0.0)
    assert always.run(schema) == {"tags": ["a", "b", "c"], "done": True}  # capped at maxItems
    never = Script(["a"], prefer=lambda p, c: 1.0 if c == "]" else 0.0)
    assert never.run(schema)["tags"] == []
    forced = Script(["a", "b"], prefer=lambda p, c: 1.0 if c == "]" else 0.0)
    forced_schema = _object(t={"type": "array", "items": {"type": "string"}, "minItems": 2})
    assert forced.run(forced_schema) == {"t": ["a", "b"]}
    enum_items = Script(
        prefer=lambda p, c: {'"b"': 1.0, ",": 1.0 if p.count('"b"') < 2 else -1.0}.get(c, 0.0)
    )
    enum_schema = _object(t={"type": "array", "items": {"enum": ["a", "b"]}})
    assert enum_items.run(enum_schema) == {"t": ["b", "b"]}
    default_cap = Script([], prefer=lambda p, c: 1.0 if c in ('"', ",") else 0.0)
    assert len(default_cap.run(_object(t={"type": "array", "items": {"type": "string"}}))["t"]) == 16


def test_integers_enumerated_or_generated() -> None:
    schema = _object(score={"type": "integer", "minimum": 1, "maximum": 10}, year={"type": "integer"})
    script = Script([" 1984, and more"], prefer=lambda p, c: 1.0 if c == " 10," else 0.0)
    assert script.run(schema) == {"score": 10, "year": 1984}
    assert script.scored[0][1] == tuple(f" {i}," for i in range(1, 11))  # ` 1,` is not a prefix of ` 10,`
    assert script.generated[0][1].stop == (",", "}")
    clamp = _object(n={"type": "integer", "minimum": 0, "exclusiveMaximum": 1000})
    assert Script([" 123456"]).run(clamp) == {"n": 999}
    assert Script([" -5"]).run(clamp) == {"n": 0}
    assert Script([" none"]).run(_object(n={"type": "integer", "minimum": 7})) == {"n": 7}
    assert Script([' "42"']).run(_object(n={"type": "integer"})) == {"n": 42}


def test_enum_of_scalars_const_and_empty_object() -> None:
    schema = _object(v={"enum": [1, 2.5, True, None, "s"]}, c={"const": "fixed"})
    script = Script(prefer=lambda p, c: 1.0 if c == " 2.5," else 0.0)
    assert script.run(schema) == {"v": 2.5, "c": "fixed"}
    assert len(script.scored) == 1  # a const needs no model call
    assert Script().run({"type": "object", "properties": {}}) == {}


def test_async_driver_equals_sync_driver() -> None:
    texts = ["why \\", "not\\", " now"]
    sync = Script(texts, prefer=lambda p, c: len(c))
    expected = decode_structured_sync(
        "P", JUDGE_SCHEMA, GenerationConfig(), score=sync.score, generate=sync.generate
    )
    script = Script(texts, prefer=lambda p, c: len(c))

    async def score(p: str, choices: Sequence[str]) -> list[float]:
        return script.score(p, choices)

    async def generate(p: str, config: GenerationConfig) -> Generation:
        return script.generate(p, config)

    got = asyncio.run(
        decode_structured("P", JUDGE_SCHEMA, GenerationConfig(), score=score, generate=generate)
    )
    assert got == expected and json.loads(got.text)["label"] == "irrelevant"


@pytest.mark.parametrize(
    ("schema", "construct"),
    [
        ({"type": "array", "items": {"type": "string"}}, "the top level must be an object"),
        ({"type": "object", "properties": {"a": {"type": "number"}}}, "properties.a: 'type': 'number'"),
        ({"type": "object", "properties": {"a": {"type": "object"}}}, "a nested object"),
        ({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}, "keyword 'pattern'"),
        ({"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}}, "keyword 'minLength'"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}}, "keyword '$ref'"),
        ({"type": "object", "$defs": {}, "properties": {}}, "keyword '$defs'"),
        ({"type": "object", "properties": {"a": {}}}, "a schema without 'type'"),
        (
            {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "boolean"}]}}},
            "'anyOf' other than",
        ),
        ({"type": "object", "properties": {"a": {"type": ["integer", "null"]}}}, "a nullable integer"),
        ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}, "items"),
        ({"type": "object", "properties": {"a": {"type": "integer", "minimum": 3, "maximum": 1}}}, "empty"),
        ({"type": "object", "properties": {"a": {"type": "string", "enum": [1]}}}, "does not match"),
        ({"type": "object", "properties": {}, "required": ["b"]}, "'required' names"),
        ({"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}, "additionalProp"),
        ("{not json", "not valid JSON"),
    ],
)
def test_unsupported_schemas_name_the_construct(schema: Any, construct: str) -> None:
    with pytest.raises(
        UnsupportedSchemaError, match=r"unsupported JSON schema construct|not valid JSON"
    ) as info:
        parse_schema(schema if isinstance(schema, str) else json.dumps(schema))
    assert construct in str(info.value)
    assert isinstance(info.value, CapabilityError)


def test_annotations_are_ignored_and_validation_catches_bad_replies() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Judgment",
        "type": "object",
        "properties": {"label": {"type": "string", "enum": ["a", "b"], "description": "the label"}},
    }
    assert parse_schema(schema).names == ("label",)
    validate_instance(schema, {"label": "a"})
    for bad in ({"label": "c"}, {}, ["a"]):
        with pytest.raises(ValueError):
            validate_instance(schema, bad)


class _Tokenizer:
    def __init__(self, adds_bos: bool) -> None:
        self.adds_bos = adds_bos
        self.bos_token, self.bos_token_id = "<s>", 1

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": ([1] if add_special_tokens and self.adds_bos else []) + [5] * len(text)}


def test_strip_added_bos() -> None:
    assert strip_added_bos(_Tokenizer(True), "<s>[INST] hi") == "[INST] hi"
    assert strip_added_bos(_Tokenizer(False), "<s>[INST] hi") == "<s>[INST] hi"  # SmolLM2's case
    assert strip_added_bos(_Tokenizer(True), "plain prompt") == "plain prompt"
    assert strip_added_bos(None, "<s>x") == "<s>x"


class _InfoOnly:
    info = ModelInfo(name="bare", backend="none", context_window=64, fingerprint="bare")

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def aclose(self) -> None:
        return None


def test_generate_structured_on_a_model_object() -> None:
    out = asyncio.run(
        generate_structured(FakeModel(), "Is Paris relevant?", JUDGE_SCHEMA, GenerationConfig())
    )
    validate_instance(JUDGE_SCHEMA, json.loads(out.text))
    with pytest.raises(CapabilityError, match="scores continuations and generates text"):
        asyncio.run(generate_structured(_InfoOnly(), "p", JUDGE_SCHEMA, GenerationConfig()))
    with pytest.raises(UnsupportedSchemaError):
        asyncio.run(generate_structured(FakeModel(), "p", {"type": "string"}, GenerationConfig()))


# -- the server and the client with a fake model -------------------------------------------------------
class _StructuredBackend(FakeModel):
    """A backend whose own chat honours json_schema: the server passes the schema through."""

    structured_output = True

    def __init__(self) -> None:
        super().__init__("structured")
        self.schemas: list[str | None] = []

    async def chat(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]:
        self.schemas.append(config.json_schema)
        if config.json_schema and "number" in config.json_schema:
            raise CapabilityError("this backend cannot do numbers")
        return [Generation('{"label": "relevant"}', "stop", 3) for _ in conversations]


@pytest.fixture
def fake_server() -> Iterator[tuple[str, _StructuredBackend]]:
    backend = _StructuredBackend()
    server, url = start_in_thread(backend, log_requests=False)
    yield url, backend
    server.close()


def _chat(url: str, **body: Any) -> Any:
    body.setdefault("messages", [{"role": "user", "content": "hi"}])
    return httpx.post(url + "/chat/completions", json=body, timeout=30)


def test_response_format_errors(fake_server: tuple[str, _StructuredBackend]) -> None:
    url, backend = fake_server
    r = _chat(url, response_format={"type": "json_object"})
    assert r.status_code == 400 and "only 'json_schema'" in r.json()["error"]["message"]
    r = _chat(url, response_format={"type": "yaml"})
    assert r.status_code == 400 and "'yaml' is not supported" in r.json()["error"]["message"]
    r = _chat(url, response_format={"type": "json_schema", "json_schema": {"name": "x"}})
    assert r.status_code == 400 and "needs 'json_schema'" in r.json()["error"]["message"]
    r = _chat(url, response_format={"type": "text"})
    assert r.status_code == 200 and backend.schemas == [None]


def test_backend_declaring_structured_output_gets_the_schema(
    fake_server: tuple[str, _StructuredBackend],
) -> None:
    url, backend = fake_server
    client = load_model("openai:structured", base_url=url, max_retries=0)
    conversation = [ChatMessage("user", "Is it relevant?")]
    schema = json.dumps(JUDGE_SCHEMA)
    [out] = asyncio.run(client.chat([conversation], GenerationConfig(json_schema=schema, stop=("}",))))
    assert out.text == '{"label": "relevant"}'
    assert backend.schemas and json.loads(backend.schemas[-1] or "") == JUDGE_SCHEMA
    with pytest.raises(ModelCallError, match="HTTP 400: this backend cannot do numbers"):
        bad = json.dumps({"type": "object", "properties": {"x": {"type": "number"}}})
        asyncio.run(client.chat([conversation], GenerationConfig(json_schema=bad)))
    asyncio.run(client.aclose())


def test_client_request_shape_and_errors() -> None:
    client = load_model("openai:m", base_url="http://127.0.0.1:9/v1", max_retries=0)
    with pytest.raises(CapabilityError, match="needs chat"):  # refused before any request is sent
        asyncio.run(client.generate(["p"], GenerationConfig(json_schema=json.dumps(JUDGE_SCHEMA))))
    from ragsense.models._openai_server import response_format

    assert response_format(json.dumps(JUDGE_SCHEMA)) == {
        "type": "json_schema",
        "json_schema": {"name": "ragsense_judgment", "schema": JUDGE_SCHEMA, "strict": True},
    }
    with pytest.raises(ParameterError, match="json_schema"):
        response_format("[1, 2")


class _ChatOnly(_InfoOnly):
    """A chat model without a chat renderer, scoring or a structured_output declaration."""

    chat_available = True

    async def chat(
        self, conversations: Sequence[Sequence[ChatMessage]], config: GenerationConfig
    ) -> list[Generation]:
        return [Generation("free text") for _ in conversations]


def test_server_without_a_chat_renderer_refuses_structured_output() -> None:
    server, url = start_in_thread(_ChatOnly(), log_requests=False)
    try:
        r = _chat(url, response_format={"type": "json_schema", "json_schema": {"schema": JUDGE_SCHEMA}})
        assert r.status_code == 400 and "cannot produce structured output" in r.json()["error"]["message"]
    finally:
        server.close()


# -- SmolLM2, locally and through the server ---------------------------------------------------------
CONVERSATION = [
    ChatMessage("system", "You judge whether a passage is relevant to a question. Answer in JSON."),
    ChatMessage(
        "user",
        "Question: What is the capital of France?\n"
        "Passage: Paris is the capital and largest city of France.\nIs the passage relevant?",
    ),
]


@pytest.fixture(scope="module")
def smol_server(smollm2: Any) -> Iterator[tuple[Any, str]]:
    server, url = start_in_thread(smollm2, model_name="smol", log_requests=False)
    yield smollm2, url
    server.close()


@pytest.mark.model
def test_smollm2_through_the_server_equals_local(smol_server: tuple[Any, str]) -> None:
    model, url = smol_server
    config = GenerationConfig(max_new_tokens=24, json_schema=json.dumps(JUDGE_SCHEMA))
    client = load_model("openai:smol", base_url=url, max_retries=0, timeout=120)
    [remote] = asyncio.run(client.chat([CONVERSATION], config))
    value = json.loads(remote.text)
    validate_instance(JUDGE_SCHEMA, value)
    assert value["label"] in ("relevant", "irrelevant") and value["reason"].strip()
    local = generate_structured_sync(model, model.render_chat(CONVERSATION), JUDGE_SCHEMA, config)
    assert local.text == remote.text  # greedy: the same document locally and over HTTP
    assert remote.n_tokens == model.count_tokens(remote.text)

    unsupported = GenerationConfig(
        json_schema=json.dumps({"type": "object", "properties": {"x": {"type": "number"}}})
    )
    with pytest.raises(ModelCallError, match=r"HTTP 400: unsupported JSON schema construct at properties\.x"):
        asyncio.run(client.chat([CONVERSATION], unsupported))
    asyncio.run(client.aclose())
    r = _chat(url, response_format={"type": "json_object"})
    assert r.status_code == 400 and "json_object" in r.json()["error"]["message"]


@pytest.mark.model
def test_smollm2_richer_schema(smollm2: Any) -> None:
    schema = _object(
        verdict={"type": "string", "enum": ["yes", "yes, partly", "no"]},
        confident={"type": "boolean"},
        score={"type": "integer", "minimum": 1, "maximum": 3},
        cities={"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 2},
        note={"type": ["string", "null"], "maxLength": 30},
    )
    out = generate_structured_sync(
        smollm2, smollm2.render_chat(CONVERSATION), schema, GenerationConfig(max_new_tokens=8)
    )
    value = json.loads(out.text)
    validate_instance(schema, value)
    assert list(value) == ["verdict", "confident", "score", "cities", "note"]
    assert out.text == json.dumps(value, ensure_ascii=False)  # compact, canonical JSON
