"""What the Claude Code hooks skip to be quick (issue 28 item 1): no per-block records, one read of the page sizes."""

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


def test_session_start_reads_the_page_sizes_once(event, monkeypatch):
    claude_hooks.pre_compact(dict(event, trigger="auto"))
    statements = []
    real_open = engine.PageStore.open

    def traced(*args, **kwargs):
        store = real_open(*args, **kwargs)
        if store is not None:
            store._db.set_trace_callback(statements.append)
        return store

    monkeypatch.setattr(engine.PageStore, "open", staticmethod(traced))
    output = claude_hooks.session_start(dict(event, source="compact"))
    assert "[prosecode context pager]" in output["hookSpecificOutput"]["additionalContext"]
    scans = [s for s in statements if s.startswith("SELECT") and " FROM pages" in s and " IN (" not in s]
    assert len(scans) == 1, scans  # every page's turn and size, once; then the listed pages' texts
    assert any(" FROM pages WHERE block IN (" in s for s in statements)

