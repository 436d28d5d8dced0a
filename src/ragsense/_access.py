"""Who may call a ragsense HTTP service: API keys, the bind rule, and Host/Origin checks.

Both HTTP applications, ``ragsense guard`` (FastAPI) and ``ragsense serve`` (stdlib), use these, so the
rules are written once and stay the same. It is a ground-floor module (stdlib and ``ragsense.errors``
only): the two applications import it, never each other.

* **API keys** are kept only as SHA-256 digests, so a memory dump or a log line never shows one, and a
  presented key is compared with every stored digest by :func:`hmac.compare_digest` without stopping
  at the first match, so the time taken does not tell how close a guess was.
* **The bind rule**: without keys, a service refuses a non-loopback address unless told ``insecure``.
* **Credentials in URLs** (``http://user:password@host/v1``): :func:`without_credentials` takes them
  out of anything stored or shown (the run store, ``runs show``, reports, error messages).
* **Host and Origin** (as Jupyter does): a browser on any web page can send a ``no-cors`` POST to
  127.0.0.1, and a DNS-rebinding page can even read the answer. Both are told apart by their headers:
  on a loopback bind the ``Host`` must name a loopback host with the bound port, and a request that
  carries an ``Origin`` must come from the service's own origin.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import os
import re
import stat
import warnings
from collections.abc import Callable
from pathlib import Path

from ragsense.errors import ParameterError

# A URL's scheme and its user information: everything after "//" up to the last "@" before the path
# (greedy: an unescaped "@" inside a password still belongs to it).
# Quotes and angle brackets end it too, so that JSON and HTML around a URL are left whole.
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)[^/\s?#\"'<>]*@")


def without_credentials(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it removed: a URL's credentials must not
    reach a run store, a terminal, a log or a report (the URL itself, to reach the server, keeps them).

    >>> without_credentials("ragsense evaluate --base-url http://me:p@ss@host:8000/v1 rows.jsonl")
    'ragsense evaluate --base-url http://host:8000/v1 rows.jsonl'
    >>> without_credentials("see http://host/v1?a=b@c and mail@example.org")
    'see http://host/v1?a=b@c and mail@example.org'
    """
    return _USERINFO.sub(r"\1", text)


_MIN_KEY_CHARS = 16
# The names a loopback-bound service answers to; anything else in Host is a rebinding attempt.
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class ApiKeys:
    """The accepted keys, hashed. ``identify`` gives a key's short id (for metrics and logs) or None.

    >>> keys = ApiKeys(["correct-horse-battery-staple"])
    >>> keys.identify("correct-horse-battery-staple") == keys.ids[0], keys.identify("guess")
    (True, None)
    """

    def __init__(self, keys: list[str]) -> None:
        bad = [k for k in keys if len(k) < _MIN_KEY_CHARS]
        if bad:
            raise ValueError(f"an API key must have at least {_MIN_KEY_CHARS} characters")
        self._digests = [_digest(k) for k in dict.fromkeys(keys)]
        # The id is a prefix of the digest's hex: it names a key in metrics and logs without revealing it.
        self.ids = [d.hex()[:8] for d in self._digests]

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, env: str | None = None) -> ApiKeys:
        """Keys from ``path`` (one a line, ``#`` comments, blank lines ignored) and the variable ``env``."""
        keys: list[str] = []
        if path is not None:
            _warn_if_shared(Path(path))
            for line in Path(path).read_text(encoding="utf-8").splitlines():
                line = line.split("#", 1)[0].strip()
                if line:
                    keys.append(line)
        if env is not None:
            keys.extend(k.strip() for k in os.environ.get(env, "").split(",") if k.strip())
        return cls(keys)

    def __bool__(self) -> bool:
        return bool(self._digests)

    def identify(self, presented: str | None) -> str | None:
        """The id of the key ``presented`` is, or None. Constant time in what matches."""
        if presented is None:
            return None
        candidate = _digest(presented)
        found: str | None = None
        for key_id, digest in zip(self.ids, self._digests, strict=True):
            if hmac.compare_digest(candidate, digest) and found is None:
                found = key_id  # no early exit: every key is compared
        return found


def _warn_if_shared(path: Path) -> None:
    """Warn when other users of the machine may read a key file (as ssh does for a private key; a
    warning, not a refusal: a container's single user or a mounted secret may be group-readable)."""
    with contextlib.suppress(OSError):
        mode = path.stat().st_mode
        if mode & (stat.S_IRGRP | stat.S_IROTH):
            warnings.warn(
                f"API key file {str(path)!r} is readable by other users (mode {stat.S_IMODE(mode):o}); "
                f"restrict it: chmod 600 {str(path)!r}",
                UserWarning,
                stacklevel=3,
            )


def presented_key(header: Callable[[str], str | None]) -> str | None:
    """The key a request presents: ``X-API-Key``, else ``Authorization: Bearer KEY``; ``header``
    looks a header up by its lower-case name.

    >>> presented_key({"authorization": "Bearer abc"}.get), presented_key({}.get)
    ('abc', None)
    """
    presented = header("x-api-key")
    auth = header("authorization")
    if presented is None and auth is not None and auth[:7].lower() == "bearer ":
        presented = auth[7:].strip()
    return presented


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` counts).

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def check_bind(
    host: str, *, has_keys: bool, insecure: bool = False, key_hint: str = "--api-key-file"
) -> None:
    """Refuse to serve without API keys on a non-loopback address unless ``insecure``.

    >>> check_bind("127.0.0.1", has_keys=False)
    >>> check_bind("0.0.0.0", has_keys=False)
    Traceback (most recent call last):
    ...
    ragsense.errors.ParameterError: host: refusing to listen on 0.0.0.0 without API keys: ...
    """
    if not has_keys and not is_loopback(host) and not insecure:
        raise ParameterError(
            f"refusing to listen on {host} without API keys: give {key_hint} (or set the keys' "
            "environment variable), bind to 127.0.0.1, or pass --insecure",
            parameter="host",
        )


def allowed_hosts(bind_host: str, port: int) -> frozenset[str] | None:
    """The ``Host`` values a service bound to ``bind_host:port`` accepts; None: any (not loopback).

    >>> sorted(allowed_hosts("127.0.0.1", 8080))
    ['127.0.0.1:8080', '[::1]:8080', 'localhost:8080']
    >>> allowed_hosts("0.0.0.0", 8080) is None
    True
    """
    if not is_loopback(bind_host):
        return None  # reached under names the service cannot know; keys protect it instead
    return frozenset(f"{name}:{port}" for name in _LOOPBACK_NAMES)


def host_refusal(host: str | None, origin: str | None, allowed: frozenset[str] | None) -> str | None:
    """Why a request with these ``Host`` and ``Origin`` headers is refused (403), or None.

    ``Origin`` must be ``http://HOST`` (or https) of the request's own Host: a browser sends it on
    every cross-site POST, so a page elsewhere cannot use the service even where the Host is right.

    >>> ok = allowed_hosts("127.0.0.1", 80)
    >>> host_refusal("127.0.0.1:80", None, ok) is None, host_refusal("evil.test:80", None, ok) is None
    (True, False)
    >>> host_refusal("127.0.0.1:80", "https://evil.test", ok)
    'cross-origin requests are not allowed (Origin https://evil.test)'
    """
    if allowed is not None and (host is None or host.lower() not in allowed):
        return f"the Host header {(host or '')[:100]!r} is not this server's loopback address"
    if origin is not None and origin.lower() not in (f"http://{host}".lower(), f"https://{host}".lower()):
        return f"cross-origin requests are not allowed (Origin {origin[:100]})"
    return None
