"""Plug-ins: the one registry type behind models, metrics, embedders and experiments.

Each kind of plug-in is an entry point group (``ragsense.models``, ``ragsense.metrics``,
``ragsense.embeddings``, ``ragsense.experiments``) read by an :class:`EntryPointRegistry`; ragsense's
built-ins are registered in its ``pyproject.toml`` the same way a plug-in registers its own
(docs/extending.md). This package sits on the ground floor: it imports only the standard library and
:mod:`ragsense.errors`.

>>> from ragsense.plugins import EntryPointRegistry
>>> EntryPointRegistry[object]("ragsense.metrics", kind="metric").plugin("consens").distribution
'ragsense'
"""

from __future__ import annotations

from ragsense.errors import PluginError
from ragsense.plugins._registry import EntryPointRegistry, Plugin, accepted_options

__all__ = ["EntryPointRegistry", "Plugin", "PluginError", "accepted_options"]
