#!/usr/bin/env python3
"""Capture every output the pager gives for a fixed set of inputs, to compare before and after a change.

usage: speed_baseline.py OUTDIR [--dev DIR]

For every development transcript (default ../shared/data/transcripts-dev) and three generated
inputs (a Claude Code session, a pager-schema history, the library's conversations),
it runs the CLI pass at the default settings and at --budget 8000 with a fixed --now, and writes
per case: stdout (the --json summary), stderr (the per-block records), the contract, the emitted
history and a dump of the page store's rows.  The library cases write the compacted messages and
report of a first and a repeat ``Pager.compact`` call.  Compare two runs with ``diff -r``.
"""

import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGER = ROOT / "scripts" / "pager.py"
NOW = "2026-01-01T00:00:00Z"
SUFFIXES = (".json", ".jsonl", ".traj")


def _load_script(name):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WORK = Path(tempfile.gettempdir()) / "speed-baseline-work"  # one fixed path: it appears in stubs and summaries


class _workdir:
    """The fixed work directory, emptied before and after each run."""

    def __enter__(self):
        import shutil
        shutil.rmtree(WORK, ignore_errors=True)
        WORK.mkdir()
        return WORK

    def __exit__(self, *exc):
        import shutil
        shutil.rmtree(WORK, ignore_errors=True)


def dump_store(path):
    if not path.exists():
        return "(no store)\n"
    con = sqlite3.connect(str(path))
    try:
        return "\n".join(con.iterdump()) + "\n"
    finally:
        con.close()


def run_cli(history, out):
    out.mkdir(parents=True, exist_ok=True)
    for label, flags in (("default", []), ("budget", ["--budget", "8000"])):
        with _workdir() as tmp:
            contract, emitted = Path(tmp) / "c.limn", Path(tmp) / "out.json"
            proc = subprocess.run([sys.executable, str(PAGER), "--history", str(history), "--contract",
                                   str(contract), "--now", NOW, "--json", "--emit", str(emitted), *flags],
                                  capture_output=True)
            (out / f"{label}.exit").write_text(f"{proc.returncode}\n")
            (out / f"{label}.stdout").write_bytes(proc.stdout)
            (out / f"{label}.stderr").write_bytes(proc.stderr)
            (out / f"{label}.limn").write_bytes(contract.read_bytes() if contract.exists() else b"")
            (out / f"{label}.emit").write_bytes(emitted.read_bytes() if emitted.exists() else b"")
            (out / f"{label}.store").write_text(dump_store(Path(tmp) / "c.pages.sqlite3"))


def library_cases(out, dev):
    sys.path.insert(0, str(ROOT / "scripts"))
    import pager
    lib = _load_script("benchmark-library")
    convs = {"conversation": lib.make_conversation(2000)}
    if hasattr(lib, "make_coding_list"):
        convs["coding-list"] = lib.make_coding_list(2000)
    for sub in ("anthropic", "openai", "responses"):
        for path in sorted((dev / sub).glob("*.json")) if dev.is_dir() else []:
            convs[f"{sub}-{path.stem}"] = json.loads(path.read_text(encoding="utf-8"))
    for name, msgs in convs.items():
        for budget in (None, 8000):
            agent = pager.Pager(budget, now=NOW)
            lines = []
            for step, value in enumerate((msgs, msgs)):
                try:
                    res = agent.compact(value)
                except pager.PagerError as exc:
                    lines.append(f"error: {exc}")
                    continue
                report = res.report.to_dict()
                report.pop("cached")
                lines.append(json.dumps({"messages": res.messages, "report": report}, sort_keys=True))
            (out / f"library-{name}-{budget}.txt").write_text("\n".join(lines) + "\n")


def main(argv):
    outdir = Path(argv[0])
    dev = Path(argv[argv.index("--dev") + 1]) if "--dev" in argv else ROOT.parent / "shared" / "data" / "transcripts-dev"
    outdir.mkdir(parents=True, exist_ok=True)
    for path in sorted(p for p in dev.rglob("*") if p.is_file() and p.suffix in SUFFIXES):
        run_cli(path, outdir / str(path.relative_to(dev)).replace("/", "__"))
        print("done", path.name, flush=True)
    bench_t, bench_p = _load_script("benchmark-transcripts"), _load_script("benchmark-pager")
    with tempfile.TemporaryDirectory(prefix="speed-baseline-") as tmp:
        session = Path(tmp) / "session.jsonl"
        session.write_text(bench_t.synthetic_session(4000), encoding="utf-8")
        run_cli(session, outdir / "synthetic-claude-code")
        blocks = Path(tmp) / "blocks.json"
        blocks.write_text(json.dumps(bench_p.synthetic_history(3000)), encoding="utf-8")
        run_cli(blocks, outdir / "synthetic-pager")
    (outdir / "library").mkdir(exist_ok=True)
    library_cases(outdir / "library", dev)
    print("captured into", outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
