#!/usr/bin/env python3
"""Build the HTML report of every transcript in a folder, and of the 50,000-message synthetic session.

For each file: one pass with --budget (default 8000) into a temporary contract, then
``pager.py report --history FILE --out report.html``, each in a process of its own, as a user
runs them. Prints one line per file: blocks, bytes of HTML, seconds of the report command,
and whether the page was built (exit 0, one timeline cell per block). Then the same for the
generated Claude Code session of scripts/benchmark-transcripts.py (--synthetic N messages;
0 skips it). Figures only: nothing is enforced but that every report builds (exit 1 otherwise).

Examples:
    python3 scripts/benchmark-report.py ../shared/data/transcripts-dev
    python3 scripts/benchmark-report.py ../shared/data/transcripts-dev --synthetic 0
"""

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parent.parent
PAGER = ROOT / "scripts" / "pager.py"
NOW = "2026-05-17T03:08:12+00:00"
SUFFIXES = (".json", ".jsonl", ".traj")  # the transcript files a folder may hold (README.md and such are skipped)
CELL = re.compile(rb'<i class="b d-')  # one timeline cell


def run(args: List[str]) -> "tuple[float, subprocess.CompletedProcess]":
    """Run pager.py with ``args`` in a process of its own; return (seconds, the finished process)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(PAGER), *args], capture_output=True, text=True)
    return time.perf_counter() - start, proc


def measure(history: Path, budget: int, name: str) -> bool:
    """Pass over ``history``, build its report, print one line; return True if the report was built."""
    with tempfile.TemporaryDirectory(prefix="pager-report-") as tmp:
        contract, out = Path(tmp) / "c.limn", Path(tmp) / "report.html"
        _, first = run(["--history", str(history), "--contract", str(contract), "--now", NOW,
                        "--budget", str(budget), "--json"])
        if first.returncode != 0:
            print(f"{name[:58]:58} pass FAILED: {first.stderr.strip().splitlines()[-1:]}")
            return False
        blocks = int(re.search(r'"blocks": (\d+)', first.stdout).group(1))
        seconds, made = run(["report", "--contract", str(contract), "--history", str(history), "--out", str(out)])
        if made.returncode != 0:
            print(f"{name[:58]:58} {blocks:>7,} report FAILED: {made.stderr.strip()}")
            return False
        page = out.read_bytes()
        cells = len(CELL.findall(page))
        status = "ok" if cells == blocks else f"FAILED ({cells:,} cells for {blocks:,} blocks)"
        print(f"{name[:58]:58} {blocks:>7,} {len(page):>12,} {seconds:>8.2f}s  {status}")
        return cells == blocks


def synthetic(messages: int) -> str:
    """Return the generated Claude Code session of scripts/benchmark-transcripts.py."""
    spec = importlib.util.spec_from_file_location("benchmark_transcripts", ROOT / "scripts" / "benchmark-transcripts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.synthetic_session(messages)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="folder of transcripts (searched recursively)")
    parser.add_argument("--budget", type=int, default=8000, help="token budget of the pass (default 8000)")
    parser.add_argument("--synthetic", type=int, default=50000, metavar="N",
                        help="messages of the generated Claude Code session (default 50000; 0: skip)")
    args = parser.parse_args(argv)
    data = Path(args.dir)
    files = sorted(p for p in data.rglob("*") if p.is_file() and p.suffix in SUFFIXES) if data.is_dir() else []
    print(f"pager.py report after one pass (--budget {args.budget}); seconds: the report command alone, "
          "a process of its own")
    print(f"{'file':58} {'blocks':>7} {'HTML bytes':>12} {'seconds':>9}")
    built = [measure(path, args.budget, str(path.relative_to(data))) for path in files]
    if not data.is_dir():
        print(f"benchmark-report: {data} not found; no transcript measured (the project does not ship them)")
    if args.synthetic:
        with tempfile.TemporaryDirectory(prefix="pager-report-") as tmp:
            path = Path(tmp) / "session.jsonl"
            path.write_text(synthetic(args.synthetic), encoding="utf-8")
            built.append(measure(path, args.budget, f"synthetic Claude Code session, {args.synthetic:,} messages"))
    return 0 if all(built) else 1


if __name__ == "__main__":
    sys.exit(main())
