"""``ragsense serve``: any ragsense model behind an OpenAI-compatible HTTP API (stdlib only).

An application on top of the model layer: it uses only the public capabilities of
:mod:`ragsense.models` (``score``, ``prompt_logprobs``, ``generate``, ``chat``, ``SupportsTokenAccess``
for token ids). The request handling lives in :mod:`ragsense.serve._service`, the HTTP transport in
:mod:`ragsense.serve._http`.

Endpoints (the subset ragsense's own ``openai`` backend and most evaluation tools use):

* ``GET /v1/models``: the OpenAI list format, plus vLLM's ``max_model_len``. ``GET /health``.
* ``POST /v1/completions``: ``prompt`` (a string or a list of strings), ``max_tokens`` (default 16),
  ``temperature`` (default 1.0), ``stop``, ``seed``, ``echo``, ``logprobs`` (0-20).

  - With ``echo: true`` and ``logprobs`` set, ``choices[i].logprobs`` lists the prompt's tokens
    (the tokenizer's own token strings), ``token_logprobs``, ``text_offset`` (character starts),
    ``top_logprobs`` and ``text_end_offset`` (character ends; an extension other clients ignore).
    The first token's logprob is ``null`` unless the tokenizer adds a BOS: the BOS itself is not
    listed, so the first text token gets a real log-probability. Use ``max_tokens: 0`` to score only;
    with ``max_tokens > 0`` the text is also continued, but the log-probabilities cover the prompt.
    They come from the model's ``prompt_logprobs`` (:class:`~ragsense.models.SupportsPromptLogprobs`);
    a model with ``score`` only is scored as ``ScoreRequest("", prompt)``.
  - Without ``echo``, the prompt is continued with the model's ``generate``. Log-probabilities of
    generated tokens are not supported (HTTP 400).
* ``POST /v1/chat/completions``: ``messages`` (system, user, assistant turns), ``max_tokens``,
  ``temperature``, ``stop``, ``seed``; rendered with the model's chat template (HTTP 400 for a model
  without one, such as a base model).

  - ``response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`` asks for
    structured output: the reply is a JSON document valid under ``schema``, decoded greedily whatever
    the temperature (``stop`` is ignored); ``max_tokens`` bounds each free-string field. A backend
    with the :class:`~ragsense.models.SupportsStructuredChat` capability gets the schema as
    ``GenerationConfig.json_schema``; any other model with
    :class:`~ragsense.models.SupportsChatTemplate`, ``score`` and ``generate`` is decoded here by
    :func:`ragsense.models.generate_structured`. A schema outside its subset is HTTP 400 naming the construct.
    ``{"type": "json_object"}`` (JSON without a schema) is HTTP 400; ``{"type": "text"}`` is the default.
* ``POST /tokenize`` (also ``/v1/tokenize``): vLLM's ``{"prompt", "add_special_tokens"}`` or
  llama.cpp's ``{"content", "add_special"}`` -> ``{"tokens": [ids], "count": n, "max_model_len"}``.

Errors are OpenAI-style JSON ``{"error": {"message", "type", "code", "param"}}``: 400 for bad requests
(a body nested too deeply included), 422 for a number out of its range or not finite (``param`` names
it: ``temperature`` 0-2, ``max_tokens`` up to the context window, ``logprobs`` 0-20, ``seed``), 404 for
unknown paths or model names, 500 for model failures; the server itself keeps running.

Access, as in ``ragsense guard`` (:mod:`ragsense._access`): with ``api_keys`` every endpoint but
``/health`` needs ``Authorization: Bearer KEY`` or ``X-API-Key`` (401); without keys a non-loopback
host is refused unless ``insecure``; on a loopback bind a foreign ``Host`` or a cross-site ``Origin``
is 403. Logged request paths have their control characters escaped. Limits
(:class:`ServeLimits`, each a flag of ``ragsense serve``): 10 s for a request's headers and 10 s for
its body (408), 256 connections (past that the oldest still sending is closed), an 8 MB body (413),
64 prompts and 1,000,000 characters of prompts or messages a request (413, ``param`` names the
field). Requests are
served one at a time (a lock around the model): torch already uses every core it is given.

>>> from ragsense.models import load_model
>>> server, url = start_in_thread(load_model("fake"), log_requests=False)
>>> url.startswith("http://127.0.0.1:")
True
>>> server.close()
"""

from ragsense.serve._http import RagsenseHTTPServer, run_server, serve, start_in_thread
from ragsense.serve._service import ModelService, RequestError, ServeLimits

__all__ = [
    "ModelService",
    "RagsenseHTTPServer",
    "RequestError",
    "ServeLimits",
    "run_server",
    "serve",
    "start_in_thread",
]
