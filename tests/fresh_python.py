"""Run a snippet in a fresh interpreter: plotting set-up changes process-wide state (rcParams,
warning filters, logging), and stderr is what the book build would see."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def run_python(code: str, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg", **env}, timeout=timeout,
    )
