"""What the Claude Code hooks skip to be quick (issue 28 item 1): no per-block records; the store counted, not listed."""

import shutil

import pytest

from conftest import ROOT

import claude_hooks  # noqa: E402  (conftest puts scripts/ on sys.path)
import pager as engine

CLAUDE = ROOT / "tests" / "fixtures" / "transcripts" / "claude_code_session.jsonl"


@pytest.fixture
def event(tmp_path):
    """A hook event for a copy of the Claude Code fixture session, in a fresh project folder."""
    project = tmp_path / "project"
    project.mkdir()
    transcript = tmp_path / "s.jsonl"
    shutil.copy(CLAUDE, transcript)
    return {"session_id": "s", "transcript_path": str(transcript), "cwd": str(project)}


def test_pre_compact_writes_no_per_block_records(event, monkeypatch):
    written = []
    real = engine._write_records
    monkeypatch.setattr(engine, "_write_records", lambda out, decisions: written.append(len(decisions)) or real(
        out, decisions))
    output = claude_hooks.pre_compact(dict(event, trigger="auto"))
    assert written == []  # no hook reads them: the pass is asked for none
    paged = int(output["systemMessage"].split(" blocks stored")[0].rsplit(" ", 1)[1])
    assert paged > 0  # the pass itself ran and stored its pages


def test_session_start_counts_the_pages_and_reads_only_the_newest(event, monkeypatch):
    claude_hooks.pre_compact(dict(event, trigger="auto"))
    statements, parsed = [], []
    real_open, real_state = engine.PageStore.open, engine.contract_state

    def traced(*args, **kwargs):
        store = real_open(*args, **kwargs)
        if store is not None:
            store._db.set_trace_callback(statements.append)
        return store

    monkeypatch.setattr(engine.PageStore, "open", staticmethod(traced))
    monkeypatch.setattr(engine, "contract_state", lambda *a, **k: parsed.append(a) or real_state(*a, **k))
    output = claude_hooks.session_start(dict(event, source="compact"))
    assert "[prosecode context pager]" in output["hookSpecificOutput"]["additionalContext"]
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT") and " FROM pages" in s]
    assert len(reads) == 2, reads  # how many pages (a count), then the newest pages' texts until enough
    assert "count(*)" in reads[0] and "ORDER BY rowid DESC" in reads[1]
    assert parsed == []  # the store says the last pass left it: the contract is not parsed


def test_the_store_counts_its_pages_and_lists_the_newest_without_range_rows(tmp_path):
    store = engine.PageStore.open(str(tmp_path / "s.pages.sqlite3"), create=True)
    try:
        store.begin()
        store.put_rows([(f"m-{k}", k, "tool", None, 10, "[]", "0" * 64, "t", "", f"text {k}") for k in range(5)]
                       + [("r-000000000001", 1, engine.RANGE, engine.RANGE, 30, "[]", "0" * 64, "t", "", "m-1\nm-2")])
        store.commit()
        assert store.count() == 5  # the range page's row is no page of a block
        assert [row[0] for row in store.newest(25)] == ["m-4", "m-3", "m-2"]  # newest first, until 25 tokens
        assert [row[0] for row in store.newest(25, {"m-1", "m-3"})] == ["m-3", "m-1"]
    finally:
        store.close()


def test_pre_compact_hands_the_blocks_on_with_the_collector_held(event, monkeypatch):
    """The blocks read from a long transcript are a million objects and no cycles: a full collection
    right after the read walked them all (0.18 s of the 50,000-message PreCompact)."""
    import gc

    held = []
    real = engine.conversation_blocks
    monkeypatch.setattr(engine, "conversation_blocks", lambda conv: held.append(not gc.isenabled()) or real(conv))
    assert gc.isenabled()
    claude_hooks.pre_compact(dict(event, trigger="auto"))
    assert held == [True]
    assert gc.isenabled()  # and given back afterwards


def test_the_hook_process_ends_with_its_output_flushed_and_its_exit_code(event):
    import json
    import subprocess
    import sys
    script = ROOT / "scripts" / "claude_hooks.py"
    # A large output left in the buffer, then the hook's fast exit: all of it arrives, and the code.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import claude_hooks; "
            "sys.stdout.write('x' * 100000); claude_hooks.exit_now(3)")
    done = subprocess.run([sys.executable, "-c", code, str(script.parent)], capture_output=True, text=True)
    assert (done.returncode, len(done.stdout)) == (3, 100000)
    # The pre-compact hook run as Claude Code runs it: its whole JSON line, exit 0, the pages stored.
    done = subprocess.run([sys.executable, str(script), "pre-compact"], input=json.dumps(event),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "blocks stored before the compaction" in json.loads(done.stdout)["systemMessage"]
