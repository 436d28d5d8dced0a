"""``python -m ragsense`` runs the command-line interface."""

import sys

from ragsense.cli import main

sys.exit(main())
