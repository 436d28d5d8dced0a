"""A guard on a slow fake model in a process of its own, for the SIGTERM test.

python _slow_server.py PORT DELAY
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _helpers import SlowFake

from ragsense.guard import GuardConfig, serve

if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("ragsense.guard").setLevel(logging.INFO)
    port, delay = int(sys.argv[1]), float(sys.argv[2])
    serve(GuardConfig(model=SlowFake(delay), max_batch_rows=2, max_wait_ms=0), port=port, log_level="warning")
