"""Before and after a harness's compaction (issue 32 items 1, 2, 4): store everything, inject an index that names
what matters, and one command for a harness without hooks."""

import json
import shutil

import pytest

from conftest import NOW, ROOT, replay

import claude_hooks  # noqa: E402  (conftest puts scripts/ on sys.path)

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
CLAUDE = FIXTURES / "claude_code_session.jsonl"
CODEX = FIXTURES / "codex_rollout.jsonl"


def _pass(cli, history, contract, *flags):
    result = cli("--history", history, "--contract", contract, "--now", NOW, "--json", *flags)
    assert result.code == 0, result.err
    return json.loads(result.out), result.records


# --- item 1: before a compaction, store everything ---

@pytest.mark.parametrize("history", [CLAUDE, CODEX], ids=["claude-code", "codex"])
def test_before_compaction_pages_every_block_but_the_instructions(cli, tmp_path, history):
    plain, _ = _pass(cli, history, tmp_path / "plain.limn")
    assert plain["retain"] + plain["evict"] > 0  # by score, some would have stayed in context
    summary, records = _pass(cli, history, tmp_path / "c.limn", "--before-compaction")
    kept = [r for r in records if r["action"] != "page"]
    assert all(r["role"] in ("system", "developer") for r in kept), kept
    assert summary["page"] == len(records) - len(kept)
    assert any(r["reason"] == "before compaction" for r in records)
    text = (tmp_path / "c.limn").read_text()
    assert 'because "before compaction; R=' in text  # the contract says why
    lists = replay(text)[1]
    assert len(lists["paged-blocks"]) == summary["page"]
    # every page is recallable, exactly
    block = next(r["block"] for r in records if r["reason"] == "before compaction")
    assert cli("recall", block, "--contract", tmp_path / "c.limn", "--now", NOW).code == 0


def test_before_compaction_names_the_humans_first_and_last_requests(cli, tmp_path):
    summary, _ = _pass(cli, CLAUDE, tmp_path / "c.limn", "--before-compaction")
    assert summary["task"] == "pytest fails on tests/test_totals.py::test_rounding, can you find out why?"
    assert summary["last_request"] == "Now run the whole test suite."
    plain, _ = _pass(cli, CLAUDE, tmp_path / "d.limn")
    assert "task" not in plain and "last_request" not in plain


def test_before_compaction_takes_no_budget(cli, tmp_path):
    result = cli("--history", CLAUDE, "--contract", tmp_path / "c.limn", "--before-compaction", "--budget", "500")
    assert result.code == 2
    assert result.err == ("pager: error: --before-compaction takes no --budget: the compaction takes every block "
                          "out of the context, so every one is stored\n")
    assert not (tmp_path / "c.limn").exists()


def test_before_compaction_in_the_library(pager):
    messages = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Fix the invoice rounding in src/billing/totals.py."},
                {"role": "assistant", "content": "Done."},
                {"role": "user", "content": "Thanks, and the weather?"}]
    plain = pager.compact(messages)
    assert plain.report.counts["page"] < 3
    result = pager.compact(messages, before_compaction=True)
    assert result.report.counts == {"retain": 1, "page": 3, "evict": 0}
    assert "before compaction" in {d.reason for d in result.report.decisions if d.action == "page"}
    assert result.recall(result.report.paged)[result.report.paged[0]] == messages[1]["content"]
    with pytest.raises(pager.PagerError, match="takes no --budget"):
        pager.Pager(1000, before_compaction=True)


# --- item 2: the injected index ---

def _row(block, text, role="assistant", turn=1, kind=None):
    return (block, turn, role, kind, text)


def _ranked(pager, rows, known=()):
    return [(n.name, n.tier) for n in pager._index_names(rows, frozenset(known))]


def test_the_index_ranks_what_the_agent_wrote_before_its_calls_other_names_and_what_it_only_read(pager):
    # newest first: a tool result, its call, then an older message of the agent
    rows = [_row("c1:result", "Traceback: ValueError in ledger/export_rows.py", role="tool", turn=3),
            _row("c1", "Bash: pytest tests/test_ledger.py -k rounding_mode", turn=3),
            _row("m-1", "The ledger exporter rounds half-even; quantize_cents is wrong.", turn=2)]
    ranked = _ranked(pager, rows)
    tiers = dict(ranked)
    assert tiers["tests/test_ledger.py"] == pager.TIER_AGENT   # a path its call named: a file it ran
    assert tiers["quantize_cents"] == tiers["exporter"] == pager.TIER_AGENT  # its own words
    assert tiers["rounding_mode"] == pager.TIER_CALL           # another argument of its call
    assert tiers["ledger/export_rows.py"] == tiers["valueerror"] == pager.TIER_READ  # only read
    assert [t for _, t in ranked] == sorted(t for _, t in ranked)
    # ...so the newer result's names come after the older message's
    assert ranked.index(("quantize_cents", 0)) < ranked.index(("valueerror", 2))


def test_tool_argument_names_are_ranked_ahead_of_read_only_ones(pager):
    rows = [_row("c2:result", "total_cents_check failed", role="tool"),
            _row("c2", 'Edit({"file_path": "src/ledger.py", "new_string": "def round_total_cents"})'),
            _row("c2x", "Read src/other.py")]  # an assistant page without a result: a message, not a call
    ranked = [name for name, _ in _ranked(pager, rows)]
    assert ranked.index("round_total_cents") < ranked.index("total_cents_check")
    assert ranked.index("src/ledger.py") < ranked.index("round_total_cents")  # the path it edited first
    assert dict(_ranked(pager, rows))["src/other.py"] == pager.TIER_AGENT


def test_within_a_tier_the_newest_page_comes_first(pager):
    rows = [_row(f"m-{k}", f"Read module_{k} again") for k in range(5)]  # newest first
    names = pager._index_names(rows)
    assert [n.name for n in names] == [f"module_{k}" for k in range(5)]
    assert [(n.age, n.block) for n in names] == [(k, f"m-{k}") for k in range(5)]


def test_the_index_puts_common_names_last_and_leaves_out_short_words_and_what_the_intent_says(pager):
    rows = [_row(f"m-{k}", f"shared_helper step {k}: parser{k} rewritten, ticket 440{k}") for k in range(4)]
    rows.append(_row("m-4", "step quietly"))
    ranked = [name for name, _ in _ranked(pager, rows, known={"rewritten"})]
    names = set(ranked)
    # held by more than RARE_HOLDERS pages: no pointer to one page, shown only after every rare name
    assert ranked[-1] == "shared_helper"
    assert "step" not in names and "quietly" in names  # a plain word counts from INDEX_WORD_CHARS letters
    assert "rewritten" not in names          # the intent says it: the model reads it there
    assert {"parser0", "4403"} <= names      # identifiers and numbers count at any length of 4+


def test_the_index_shows_a_path_whole_and_not_its_parts_again(pager):
    rows = [_row("a", "Edited src/billing/totals.py and docs/rounding-rules.md.", turn=2),
            _row("b", "The totals module is in billing; see rounding notes.", turn=1)]
    names = [name for name, _ in _ranked(pager, rows)]
    assert "src/billing/totals.py" in names and "docs/rounding-rules.md" in names
    assert "totals" not in names and "billing" not in names  # the path shows them
    text = pager.compaction_index(pager._index_names(rows), "HEAD")
    assert text.count("totals") == 1


def test_index_lines_group_consecutive_pages_and_show_the_first_ones_id(pager):
    per_page = 7
    names = [pager._IndexName(f"name_{k}_{j}", 0, k, f"m-{k}", 9 - k) for k in range(8) for j in range(per_page)]
    lines = pager.compaction_index(names, "HEAD").splitlines()
    assert lines[0] == "HEAD"
    # pages newest first, a line taking pages until it holds INDEX_LINE_NAMES names
    pages_a_line = -(-pager.INDEX_LINE_NAMES // per_page)
    assert lines[1].startswith("turn 9: m-0 ...: name_0_0 name_0_1 ")
    assert lines[1].split(": ", 2)[2].split() == [f"name_{k}_{j}" for k in range(pages_a_line) for j in range(per_page)]
    assert lines[2].startswith(f"turn {9 - pages_a_line}: m-{pages_a_line} ...: ")
    single = pager.compaction_index([pager._IndexName("only_name", 1, 0, "m-5", 4)], "HEAD")
    assert single == "HEAD\nturn 4: m-5: only_name"  # one page: no "..."


def test_the_index_shows_the_best_ranked_names_that_fit_in_the_newest_pages_order(pager):
    names = [pager._IndexName("old_agent_name", 0, 5, "m-5", 1), pager._IndexName("new_read_name", 2, 0, "m-0", 2)]
    assert pager.compaction_index(names, "HEAD") == "HEAD\nturn 2: m-0 ...: new_read_name old_agent_name"
    assert pager.compaction_index(names, "HEAD", 12) == "HEAD\nturn 1: m-5: old_agent_name"  # the rank decides


@pytest.mark.parametrize("tokens", [40, 120, 600])
def test_the_index_fits_its_cap(pager, tokens):
    rows = [_row(f"m-{k:04d}", " ".join(f"ident_{k}_{j}" for j in range(5)), turn=1000 - k) for k in range(300)]
    text = pager.compaction_index(pager._index_names(rows), "[head] search and recall", tokens)
    assert pager.estimate_tokens(text) <= tokens < pager.estimate_tokens(text) + 30  # and fills it
    assert text.count("\n") > 0


def test_the_store_gives_the_newest_pages_in_the_sessions_order(cli, tmp_path):
    import pager as engine
    contract = tmp_path / "c.limn"
    _, records = _pass(cli, CLAUDE, contract, "--before-compaction")
    order = [r["block"] for r in records if r["action"] == "page"]
    store = engine.PageStore.open(str(tmp_path / "c.pages.sqlite3"), create=False)
    try:
        rows = store.newest(10 ** 9, set(order))
        assert [row[0] for row in rows] == order[::-1]
        assert {row[2] for row in rows} >= {"assistant", "tool", "user"}
        few = store.newest(1, set(order))
        assert [row[0] for row in few] == order[-1:]  # stops once the tokens are read
        assert [row[0] for row in store.newest(10 ** 9, set(order[:2]))] == order[1::-1]  # only those asked
    finally:
        store.close()


def test_index_command_prints_the_injected_index_within_its_cap(cli, tmp_path):
    contract = tmp_path / "c.limn"
    _pass(cli, CLAUDE, contract, "--before-compaction")
    result = cli("index", "--contract", contract, "--tokens", "300", "--intent", "use ROUND_HALF_UP")
    assert result.code == 0
    text = result.out.rstrip("\n")
    head, *lines = text.splitlines()
    assert pager_tokens(text) <= 300
    # the fixture's 23 blocks and its queued input line
    assert head.startswith("[prosecode context pager] 24 blocks from before the compaction are stored verbatim.")
    assert f'search "NAME" --contract {contract} ; read it: python3 scripts/pager.py recall ID --contract' in head
    assert lines and all(line.startswith("turn ") for line in lines)
    # the page holding the intent comes first (All 12 tests pass ... quantizes with ROUND_HALF_UP)...
    assert lines[0].split(": ")[1].split(" ")[0] == "m-4defaef549dd"
    assert "round_half_up" not in "\n".join(lines)  # ...and a name the intent says is not repeated
    listed = [b for line in lines for b in line.split(": ")[1].split(" ") if b != "..."]
    assert cli("recall", *listed[:3], "--contract", contract, "--now", NOW).code == 0


def pager_tokens(text):
    import pager
    return pager.estimate_tokens(text)


def test_the_index_reads_the_contract_when_the_store_no_longer_matches_it(cli, tmp_path):
    contract = tmp_path / "c.limn"
    _pass(cli, CLAUDE, contract, "--before-compaction")
    argv = ("index", "--contract", contract, "--tokens", "2000")
    fast = cli(*argv).out
    first = fast.splitlines()[1].split(": ")[1].split(" ")[0]
    assert cli("recall", first, "--contract", contract, "--now", NOW).code == 0  # the contract moves on
    slow = cli(*argv).out
    assert first not in slow and "23 blocks from before" in slow
    # the same answer as the parse gives, when nothing changed since the pass
    copy = tmp_path / "copy"
    copy.mkdir()
    _pass(cli, CLAUDE, copy / "c.limn", "--before-compaction")
    import sqlite3
    db = sqlite3.connect(copy / "c.pages.sqlite3")
    db.execute("DROP TABLE contract_match")
    db.commit()
    db.close()
    parsed = cli("index", "--contract", copy / "c.limn", "--tokens", "2000").out
    assert parsed.replace(str(copy / "c.limn"), "C") == fast.replace(str(contract), "C")


# --- item 4: one command for Codex and other harnesses ---

def test_compaction_command_stores_the_rollout_and_prints_the_next_first_message(cli, tmp_path):
    contract = tmp_path / "c.limn"
    result = cli("compaction", "--history", CODEX, "--contract", contract, "--tokens", "500", "--now", NOW)
    assert result.code == 0, result.err
    assert pager_tokens(result.out.rstrip("\n")) <= 500
    assert result.out.startswith("Task statement, the human's first request (verbatim):\nWhat does `make release` do?")
    assert "The human's last request (verbatim):\ntest_rounding fails; fix it with Decimal" in result.out
    assert "[prosecode context pager] 20 blocks from before the compaction are stored verbatim." in result.out
    assert "{" not in result.err  # no per-block records
    lists = replay(contract.read_text())[1]
    assert len(lists["paged-blocks"]) == 20
    as_json = json.loads(cli("compaction", "--history", CODEX, "--contract", tmp_path / "d.limn", "--json",
                             "--now", NOW).out)
    assert as_json["pass"]["page"] == 20 and as_json["text"].startswith("Task statement")


# --- the hooks read the compaction summary ---

def test_compaction_summary_and_its_pending_work(tmp_path):
    transcript = tmp_path / "s.jsonl"
    shutil.copy(CLAUDE, transcript)
    assert claude_hooks.compaction_summary(str(transcript)).startswith("This session is being continued")
    assert claude_hooks.compaction_summary(str(tmp_path / "missing.jsonl")) == ""
    summary = ("This session is being continued.\n1. Primary Request and Intent: fix rounding\n"
               "7. Pending Tasks:\n- rerun tests/test_totals.py with ROUND_HALF_UP\n8. Current Work: x")
    with transcript.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted"}) + "\n")
        fh.write(json.dumps({"type": "user", "isCompactSummary": True,
                             "message": {"role": "user", "content": [{"type": "text", "text": summary}]}}) + "\n")
    assert claude_hooks.compaction_summary(str(transcript)) == summary  # the last one
    assert claude_hooks.pending_work(summary).startswith("7. Pending Tasks:\n- rerun")
    assert claude_hooks.pending_work("no sections here") == "no sections here"


def test_session_start_builds_the_index_for_the_summarys_pending_work(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    transcript = tmp_path / "s.jsonl"
    shutil.copy(CLAUDE, transcript)
    event = {"session_id": "s", "transcript_path": str(transcript), "cwd": str(project)}
    assert set(claude_hooks.pre_compact(dict(event, trigger="auto"))) == {"systemMessage"}

    def index_part():
        output = claude_hooks.session_start(dict(event, source="compact"))["hookSpecificOutput"]["additionalContext"]
        assert pager_tokens(output) <= claude_hooks.DEFAULT_CONTEXT_TOKENS
        return output.split("[prosecode context pager]")[1]

    before = index_part()
    assert "invoice_total" in before and "unit_price" in before
    with transcript.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "user", "isCompactSummary": True, "message": {
            "role": "user", "content": "9. Optional Next Step: check invoice_total against unit_price"}}) + "\n")
    after = index_part()
    # the summary's pending work is the index's intent: the names it says are not repeated
    assert "invoice_total" not in after and "unit_price" not in after


def test_the_hooks_drop_the_engines_records_and_keep_its_error_lines():
    sink = claude_hooks._Diagnostics()
    sink.write('{"block": "b1"}\n{"block": "b2"}\n')
    sink.write("pager: repair: line 3 dropped\n")
    assert sink.getvalue() == "pager: repair: line 3 dropped\n"


def test_attachment_lines_and_queued_input_are_stored_before_a_compaction(cli, tmp_path):
    lines = CLAUDE.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    extra = [
        {"type": "attachment", "uuid": "att-1", "parentUuid": last.get("uuid"), "sessionId": last.get("sessionId"),
         "attachment": {"type": "file", "filename": "src/billing/ledger_export.py",
                        "content": {"type": "text", "file": {"filePath": "src/billing/ledger_export.py",
                                                             "content": "def export_ledger_rows(): ..."}}}},
        {"type": "queue-operation", "operation": "enqueue", "sessionId": last.get("sessionId"),
         "content": "Also bump LEDGER_SCHEMA_VERSION to 7"},
        {"type": "attachment", "uuid": "att-2", "attachment": {"type": "task_reminder", "content": []}},  # no text
    ]
    history = tmp_path / "s.jsonl"
    history.write_text("\n".join(lines + [json.dumps(o) for o in extra]) + "\n", encoding="utf-8")
    plain, records = _pass(cli, history, tmp_path / "plain.limn")
    assert not any(r["kind"] == "attachment" for r in records)  # an ordinary pass reads the conversation only
    summary, records = _pass(cli, history, tmp_path / "c.limn", "--before-compaction", "--emit", tmp_path / "out.json")
    aside = [r for r in records if r["kind"] == "attachment"]
    # the two lines above and the fixture's own queued input
    assert len(aside) == 3 and all(r["action"] == "page" and r["reason"] == "before compaction" for r in aside)
    assert summary["blocks"] == plain["blocks"] + 3
    assert "a-" not in (tmp_path / "out.json").read_text()  # never written back: the model never saw them
    hits = json.loads(cli("search", "export_ledger_rows", "--contract", tmp_path / "c.limn", "--json").out)
    assert hits[0]["kind"] == "attachment" and "export_ledger_rows" in hits[0]["line"]
    queued = json.loads(cli("search", "LEDGER_SCHEMA_VERSION", "--contract", tmp_path / "c.limn", "--json").out)
    text = cli("recall", queued[0]["id"], "--contract", tmp_path / "c.limn", "--now", NOW).out
    assert text == "[queued input] Also bump LEDGER_SCHEMA_VERSION to 7"
