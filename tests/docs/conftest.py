"""The documentation examples' summary: how many blocks were skipped (and why), and the time per page."""

from __future__ import annotations

from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from ._run import SKIPPED, TIMES

    if not TIMES and not SKIPPED:
        return
    terminalreporter.section("documentation examples")
    terminalreporter.write_line(f"{len(SKIPPED)} blocks not run (skip, slow without -m slow, or needs):")
    for block in SKIPPED:
        if block.skip is not None:
            reason = f"skip: {block.skip}"
        elif block.missing:
            reason = f"needs {', '.join(block.missing)} (not installed)"
        else:
            reason = f"slow: {block.slow}"
        terminalreporter.write_line(f"  {block.where}: {reason}")
    wall, cpu = sum(t[0] for t in TIMES.values()), sum(t[1] for t in TIMES.values())
    terminalreporter.write_line(f"{len(TIMES)} blocks ran in {wall:.1f} s ({cpu:.1f} s of CPU); the slowest:")
    for where, (seconds, cpu_seconds) in sorted(TIMES.items(), key=lambda item: -item[1][0])[:8]:
        terminalreporter.write_line(f"  {where}: {seconds:.1f} s ({cpu_seconds:.1f} s of CPU)")
