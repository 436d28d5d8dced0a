"""Frameworks' telemetry off before any test module imports a framework (each reads its switch once, at
import): the same variables the integrations set, ``ragsense.integrations.TELEMETRY_OFF``."""

import os

from ragsense.integrations import TELEMETRY_OFF

os.environ.update(TELEMETRY_OFF)
