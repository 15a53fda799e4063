"""Range pages under a budget: pressure pages and never evicts, the bounded page index, recall by range id,
the floors, and the contract matching the request (issue 31)."""

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import NOW, ROOT, replay, tool_chat

DEV = ROOT.parent / "shared" / "data" / "transcripts-dev"
RANGE_ID = re.compile(r"r-[0-9a-f]{12}")


def _pass(cli, history, contract, budget, out, now=NOW, *extra):
    result = cli("--history", history, "--contract", contract, "--budget", budget, "--emit", out, "--json",
                 "--now", now, *extra)
    assert result.code == 0, result.err
    return result


# --- the pure core ---

def test_plan_ranges_collapses_runs_bounds_the_index_and_merges_the_oldest(pager):
    blocks = [{"id": f"b{i}", "turn": i, "role": "user" if i % 2 else "assistant",
               "text": f"step {i} touched parser_{i}.py", "tokens": 50} for i in range(40)]
    decisions = pager.plan_pass({"intent_ir": ["nothing"], "blocks": blocks},
                                pager.Params(budget=100_000)).decisions
    table = pager._DecisionTable(*decisions.columns())
    table.action = ["page"] * 40
    table.reason = [pager.RANGED] * 40
    table.action[20], table.reason[20] = "retain", "score"  # a kept block ends a run
    names = lambda i: ("parser_%d" % i, "step")  # noqa: E731
    cost = lambda page: 10  # noqa: E731
    wide = pager._plan_ranges(table, 10_000, cost, names)
    assert sum(len(r.members) for r in wide) == 39 and len(wide) > 2
    assert all(20 not in r.positions for r in wide)
    # the newest ranges are the finest; a range's id comes from its blocks, in order
    assert len(wide[-1].members) == 1 and wide[-1].id == pager.range_id(wide[-1].members)
    narrow = pager._plan_ranges(table, 60, cost, names)  # the lines planned in LINES_SHARE of it: 3 of them
    assert sum(r.cost for r in narrow) <= 60 and len(narrow) == 3
    assert narrow[-1] == wide[-1] and len(narrow[0].members) > len(wide[0].members)  # the oldest merged
    # topics: distinctive names, none the kept context shows
    shown = pager._plan_ranges(table, 10_000, cost, names, shown={"parser_39"})
    assert "parser_39" not in shown[-1].summary and "topics: parser_38" in shown[-2].summary


def _ranged_edits(pager, count):
    """Return (decision table, names of a block, a line's cost) of ``count`` edits, each naming its own
    path and check, every one paged into range pages."""
    blocks = [{"id": f"b{i}", "turn": i, "role": "assistant", "text": f"edited src/module_{i}.py and ran check_{i}",
               "tokens": 60} for i in range(count)]
    decisions = pager.plan_pass({"intent_ir": ["nothing"], "blocks": blocks}, pager.Params(budget=100_000)).decisions
    table = pager._DecisionTable(*decisions.columns())
    table.action, table.reason = ["page"] * count, [pager.RANGED] * count
    return (table, lambda i: pager._names_of(blocks[i]["text"], compounds=True),
            lambda page: pager.estimate_tokens(page.summary) + 8)


def test_the_room_the_lines_leave_lists_more_names_per_block_and_the_index_stays_bounded(pager):
    table, names, cost = _ranged_edits(pager, 64)
    topics = lambda r: r.summary.split(pager.TOPICS_MARK)[1].split(", ") if pager.TOPICS_MARK in r.summary else []  # noqa: E731
    for room in (400, 900):
        ranges = pager._plan_ranges(table, room, cost, names)
        assert sum(r.cost for r in ranges) <= room
        # the room the lines leave lists more names: the oldest, longest range more than RANGE_TOPICS
        oldest = max(ranges, key=lambda r: len(r.members))
        assert len(oldest.members) > 8 and len(topics(oldest)) > pager.RANGE_TOPICS
        # names per block: no line lists fewer names per block than a longer one (RANGE_TOPICS at least)
        for a in ranges:
            for b in ranges:
                if len(a.members) < len(b.members) and len(topics(a)) >= pager.RANGE_TOPICS:
                    assert len(topics(a)) * len(b.members) >= len(topics(b)) * len(a.members) - len(b.members)
    # more room, more names in the index
    listed = lambda room: sum(len(topics(r)) for r in pager._plan_ranges(table, room, cost, names))  # noqa: E731
    assert listed(300) < listed(450) < listed(900) == listed(5000)  # at most 2 names a block: all of them


def test_one_range_of_hundreds_of_blocks_fills_the_room_its_line_is_given_name_by_name(pager):
    # a long session under a small budget: the lines merge into one range of 300 blocks; the room
    # left after its eight planned topics is less than an eighth of a name per block, and is still
    # spent on names (a per-block step left it unused: eight topics under a 300-block range)
    table, names, cost = _ranged_edits(pager, 300)
    for room in (80, 120):
        [line] = pager._plan_ranges(table, room, cost, names)
        listed = line.summary.split(pager.TOPICS_MARK)[1].split(", ")
        assert len(line.members) == 300 and pager.RANGE_TOPICS < len(listed) < 300 // 8
        assert room - 6 < line.cost <= room  # less room left than one more name costs


def test_lines_an_earlier_pass_gave_more_names_are_cut_to_their_plan_in_less_room(pager):
    # An earlier pass gave the lines the names its room had (the fill). A later pass plans the same
    # ranges in less room (a compaction that fits the whole budget leaves the index less): the lines
    # it keeps list their first RANGE_TOPICS names, as they were planned, and stay in the room.
    table, names, cost = _ranged_edits(pager, 64)
    before = pager._plan_ranges(table, 580, cost, names)
    known = {r.id: r.summary for r in before}
    assert sum(r.cost for r in before) > 520
    after = pager._plan_ranges(table, 520, cost, names, known=known)
    assert [r.id for r in after] == [r.id for r in before]  # the same ranges
    assert sum(r.cost for r in after) <= 520
    assert all(r.summary.split(pager.TOPICS_MARK)[1].split(", ")
               == known[r.id].split(pager.TOPICS_MARK)[1].split(", ")[:pager.RANGE_TOPICS] for r in after)
    # in the room they had, every line keeps its text
    assert [r.summary for r in pager._plan_ranges(table, 580, cost, names, known=known)] == list(known.values())


def test_range_pages_read_back_in_one_message_stay_apart(pager):
    # two range lines an earlier request wrote into one message come back as one unit (a note)
    table = pager._DecisionTable(*pager.plan_pass({"intent_ir": ["x"], "blocks": [
        {"id": rid, "turn": 3, "role": "range", "text": "b1\nb2"} for rid in ("r-aaaaaaaaaaaa", "r-bbbbbbbbbbbb")]},
        pager.Params(budget=100_000)).decisions.columns())
    table.action, table.reason, table.kind = ["page"] * 2, [pager.RANGED] * 2, [pager.RANGE] * 2
    known = {"r-aaaaaaaaaaaa": pager.range_summary(3, 3, 2, 90, ["totals"]),
             "r-bbbbbbbbbbbb": pager.range_summary(3, 3, 2, 80, ["ledger"])}
    ranges = pager._plan_ranges(table, 10_000, lambda page: 10, lambda i: (), known=known,
                                units=["note:r-aaaaaaaaaaaa"] * 2)
    assert [r.id for r in ranges] == ["r-aaaaaaaaaaaa", "r-bbbbbbbbbbbb"]
    assert [r.summary for r in ranges] == [known["r-aaaaaaaaaaaa"], known["r-bbbbbbbbbbbb"]]


def test_a_range_line_lists_the_path_a_tool_call_named_before_a_word_only_read(pager):
    texts = ["Read src/billing/ledger_totals.py to find the rounding",  # the agent's tool call
             "class Ledger: quarterly reconciliation, carried forward"]  # its result: only read
    blocks = [{"id": "c1", "turn": 1, "role": "assistant", "text": texts[0], "unit": "u1"},
              {"id": "c1:result", "turn": 1, "role": "tool", "text": texts[1], "unit": "u1"}]
    decisions = pager.plan_pass({"intent_ir": ["nothing"], "blocks": blocks}, pager.Params(budget=100_000)).decisions
    table = pager._DecisionTable(*decisions.columns())
    table.action, table.reason = ["page"] * 2, [pager.RANGED] * 2
    names = lambda i: pager._names_of(texts[i], compounds=True)  # noqa: E731
    cost = lambda page: len(page.summary) // 4  # noqa: E731
    [line] = pager._plan_ranges(table, 10_000, cost, names, units=["u1", "u1"])
    topics = line.summary.split("topics: ")[1].split(", ")
    # the path whole, first (its parts are not repeated); the words only read after it
    assert topics[0] == "src/billing/ledger_totals.py" and "ledger_totals" not in topics
    assert topics.index("reconciliation") > 0 and "rounding" in topics
    # a line that must shrink loses its last topics: the path stays
    [short] = pager._plan_ranges(table, cost(line.page()) - 4, cost, names, units=["u1", "u1"])
    assert short.summary.split("topics: ")[1].split(", ")[0] == "src/billing/ledger_totals.py"
    assert len(short.summary) < len(line.summary) and "reconciliation" not in short.summary


def test_a_compacted_lists_range_lines_naming_the_paths_its_calls_named_first(pager):
    msgs = pager.compact(tool_chat(120), budget=2000).messages
    lines = [m["content"] for m in msgs if isinstance(m.get("content"), str) and m["content"].startswith("[paged r-")]
    units = [line for line in lines if "| 2 blocks |" in line]  # one call and its result
    assert units
    for line in units:
        step = re.search(r"src/mod_(\d+)\.py", line).group(1)
        assert f"topics: src/mod_{step}.py, helper_{step}" in line  # the path before the call's other names


def test_a_path_with_a_line_number_is_named_as_the_path(pager):
    compounds = [n for n in pager._names_of("src/app/route.ts:15: import x; src/app/route.ts:73", compounds=True)
                 if "/" in n]
    assert compounds == ["src/app/route.ts"]


@pytest.mark.parametrize("text", [
    "a..b -a.b x/y-z. __init__.py ./run.sh src//lib/x.rs a.b..c.d",  # doubled and trailing joints
    "see lib/pager.py:12, then https://example.org/a-b/c.d; v1.2.3-rc1 and é.tude/ça-va",
    ("w" * 3000 + " ") * 3 + "long_" * 400 + "x.py " + "more.py",  # long words: tried at word starts only
    "no joint at all in these words",
], ids=["joints", "urls-and-versions", "long-words", "none"])
def test_compound_names_are_the_words_joined_by_dots_slashes_and_hyphens(pager, text):
    # The reference: every non-overlapping run of words joined by single . / - from left to right.
    expected = [c for c in re.findall(r"\w+(?:[./-]\w+)+", text)
                if pager.NAME_MIN_CHARS <= len(c) <= pager.COMPOUND_MAX_CHARS]
    assert pager._compounds_in(text) == expected
    assert bool(expected) == (text != "no joint at all in these words")


def test_budget_pages_what_does_not_fit_and_never_evicts_a_human(pager):
    blocks = [{"id": f"h{i}", "turn": i, "role": "user", "text": f"request {i}: " + "words " * 60,
               "protected": "human"} for i in range(1, 60)]
    plan = pager.plan_pass({"intent_ir": ["request"], "blocks": blocks}, pager.Params(budget=400, keep_recent=0))
    assert not any(d.action == "evict" for d in plan.decisions)
    assert all(d.reason != "budget-evicted" for d in plan.decisions)
    ranged = {d.block for d in plan.decisions if d.reason == pager.RANGED}
    assert ranged and ranged == {b for r in plan.ranges for b in r.members}
    assert plan.tokens_after <= 400
    assert {d.block: d.reason for d in plan.decisions}["h59"] == pager.CURRENT  # the last request


def test_the_current_step_is_a_floor(pager):
    blocks = [{"id": "task", "turn": 1, "role": "user", "text": "Port the parser.", "protected": "task"}]
    for i in range(30):
        blocks.append({"id": f"c{i}", "turn": 1, "role": "assistant", "text": f"read file_{i}.py",
                       "unit": f"tool:{i}"})
        blocks.append({"id": f"r{i}", "turn": 1, "role": "tool", "text": "line of code\n" * 80, "unit": f"tool:{i}"})
    plan = pager.plan_pass({"intent_ir": ["parser"], "blocks": blocks}, pager.Params(budget=1500, keep_recent=0))
    by_id = {d.block: (d.action, d.reason) for d in plan.decisions}
    assert by_id["c29"] == ("retain", pager.CURRENT) and by_id["r29"] == ("retain", pager.CURRENT)
    assert plan.tokens_after <= 1500


# --- the command line: contract, store, recall, round trip ---

def test_range_pages_are_recorded_stored_and_recalled_exact_and_in_order(cli, pager, tmp_path):
    history, contract, out = tmp_path / "chat.json", tmp_path / "c.limn", tmp_path / "out.json"
    msgs = tool_chat(120)
    history.write_text(json.dumps(msgs))
    result = _pass(cli, history, contract, 2000, out)
    assert not any(r["action"] == "evict" for r in result.records)
    emitted = out.read_text()
    ranges = list(dict.fromkeys(RANGE_ID.findall(emitted)))
    assert ranges
    text = contract.read_text()
    for rid in ranges:  # each recorded with its id in paged-blocks, the words in the vocabulary
        assert re.search(rf'add "{rid}" to paged-blocks because "range; turns \d+-\d+; \d+ blocks; ', text)
    _, values = replay(text)
    assert set(ranges) <= set(values["paged-blocks"])
    for line in text.splitlines():
        pager.check_statement(line)
    # the emitted index holds its share of the budget
    lines = [line for line in emitted.split('"') if line.startswith("[paged r-")]
    assert sum(pager.estimate_tokens(line) for line in lines) <= 200 + len(lines)
    state = pager.contract_state(str(contract))
    store = pager.PageStore.open(str(tmp_path / "c.pages.sqlite3"), create=False)
    members = store.range_members(ranges[-1])
    store.close()
    assert members and all(state.directives[m] == "page" for m in members)
    recalled = cli("recall", ranges[-1], "--contract", contract, "--json", "--now", NOW)
    assert recalled.code == 0, recalled.err
    got = json.loads(recalled.out)["recalled"]
    assert [r["block"] for r in got] == members
    originals = {m["tool_call_id"]: m["content"] for m in msgs if m["role"] == "tool"}
    for r in got:
        if r["block"].endswith(":result"):
            assert r["text"] == originals[r["block"][:-len(":result")]]
    after = pager.contract_state(str(contract))
    assert after.directives[ranges[-1]] == "retain" and all(after.directives[m] == "retain" for m in members)
    # a block inside another range is recalled by its own id
    store = pager.PageStore.open(str(tmp_path / "c.pages.sqlite3"), create=False)
    inner = store.range_members(ranges[0])[0]
    store.close()
    one = cli("recall", inner, "--contract", contract, "--now", NOW)
    assert one.code == 0 and one.out


def test_reading_the_emitted_request_back_knows_the_ranges_again(cli, pager, tmp_path):
    history, contract, out, again = (tmp_path / n for n in ("chat.json", "c.limn", "out.json", "again.json"))
    history.write_text(json.dumps(tool_chat(120)))
    _pass(cli, history, contract, 8000, out)
    second = _pass(cli, out, contract, 8000, again, "2026-05-17T03:09:12+00:00")
    summary = json.loads(second.out)
    assert (summary["new"], summary["moved"]) == (0, 0)
    assert RANGE_ID.findall(out.read_text()) == RANGE_ID.findall(again.read_text())
    assert json.loads(out.read_text()) == json.loads(again.read_text())


def test_the_watermarks_keep_a_range_line_between_compactions(cli, tmp_path):
    history, contract, out = tmp_path / "chat.json", tmp_path / "c.limn", tmp_path / "out.json"
    msgs = tool_chat(300)
    history.write_text(json.dumps(msgs))
    _pass(cli, history, contract, 8000, out)
    first = json.loads(out.read_text())
    assert RANGE_ID.search(json.dumps(first))
    history.write_text(json.dumps(msgs + [{"role": "user", "content": "And the tax lines?"}]))
    second = _pass(cli, history, contract, 8000, out, "2026-05-17T03:09:12+00:00")
    assert json.loads(second.out)["compacted"] is False
    assert json.loads(out.read_text())[:len(first)] == first  # the prefix, range lines included, is the same


def test_only_the_first_range_line_says_how_to_recall_and_its_command_recalls_any_range(cli, pager, tmp_path):
    history, contract, out = tmp_path / "chat.json", tmp_path / "c.limn", tmp_path / "out.json"
    history.write_text(json.dumps(tool_chat(120)))
    _pass(cli, history, contract, 8000, out)
    lines = [m["content"] for m in json.loads(out.read_text())
             if isinstance(m.get("content"), str) and m["content"].startswith("[paged r-")]
    assert len(lines) > 2
    first, rest = lines[0], lines[1:]
    assert first.endswith(pager.RANGE_HINT_TAIL + ")") and "(recall: " in first
    assert not any("recall" in line for line in rest)  # each later line is only its id, turns, size and topics
    # the first line's command, with another range's id, recalls that range
    command = re.search(r"\(recall: (.+?); ", first).group(1)
    other = RANGE_ID.match(rest[-1][len("[paged "):]).group()
    argv = shlex.split(command.replace(RANGE_ID.search(command).group(), other))
    done = subprocess.run(argv + ["--json", "--now", NOW], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [r["block"] for r in json.loads(done.stdout)["recalled"]] == \
        pager.PageStore.open(str(tmp_path / "c.pages.sqlite3"), create=False).range_members(other)


def test_a_lone_range_line_carries_the_command_alone(pager):
    r = pager.RangePage("r-1", ("b1",), (0,), 1, 1, 40, pager.range_summary(1, 1, 1, 40, ["totals"]), 0)
    [line] = pager.range_stubs([r], lambda rid: f"prosecode-pager recall {rid} --contract c.limn")
    assert line.endswith("topics: totals (recall: prosecode-pager recall r-1 --contract c.limn)")
    assert pager.RANGE_HINT_TAIL not in line


def test_index_share_is_a_flag(cli, tmp_path):
    history, contract, out = tmp_path / "chat.json", tmp_path / "c.limn", tmp_path / "out.json"
    history.write_text(json.dumps(tool_chat(200)))
    _pass(cli, history, contract, 8000, out, NOW, "--index-share", "0.3", "--target", "none")
    wide = RANGE_ID.findall(out.read_text())
    (tmp_path / "c.limn").unlink()
    (tmp_path / "c.pages.sqlite3").unlink()
    _pass(cli, history, contract, 8000, out, NOW, "--index-share", "0.05", "--target", "none")
    assert len(set(RANGE_ID.findall(out.read_text()))) < len(set(wide))
    bad = cli("--history", history, "--contract", contract, "--budget", "8000", "--index-share", "1.5")
    assert bad.code == 2 and "--index-share must be a number between 0 and 1 (got 1.5)" in bad.err


# --- the library and the tools ---

def test_library_pager_pages_a_long_tool_list_with_a_recallable_index(pager):
    msgs = tool_chat(1000)  # 2,002 messages
    assert len(msgs) == 2002
    p = pager.Pager(budget=8000)
    out, report = p.compact(msgs)
    assert report.counts["page"] > 0 and report.counts["evict"] == 0
    ranges = list(dict.fromkeys(RANGE_ID.findall(json.dumps(out))))
    index = p.index()
    assert ranges and all(rid in index for rid in ranges)
    texts = p.recall(ranges[-1])
    originals = {m["tool_call_id"]: m["content"] for m in msgs if m["role"] == "tool"}
    results = [b for b in texts if b.endswith(":result")]
    assert results and all(texts[b] == originals[b[:-len(":result")]] for b in results)
    answer, failed = p.recall_text([ranges[0]])
    assert not failed and "==> call_" in answer
    compacted, report = pager.compact(msgs, budget=8000)
    assert RANGE_ID.search(json.dumps(compacted)) and report.counts["evict"] == 0


def test_mcp_recall_takes_a_range_id(cli, tmp_path):
    import mcp_server
    history, contract, out = tmp_path / "chat.json", tmp_path / "c.limn", tmp_path / "out.json"
    history.write_text(json.dumps(tool_chat(80)))
    _pass(cli, history, contract, 2000, out)
    rid = RANGE_ID.findall(out.read_text())[0]
    text = mcp_server.recall([rid], str(contract))
    assert text.startswith("==> ") and "src/mod_" in text


# --- the contract matches the request, on every development file ---

DEV_FILES = sorted(p for p in DEV.glob("*/*") if p.suffix in (".json", ".jsonl", ".traj")) if DEV.is_dir() else []


@pytest.mark.skipif(not DEV_FILES, reason="../shared/data/transcripts-dev is absent")
@pytest.mark.parametrize("path", DEV_FILES, ids=lambda p: p.name[:40])
def test_the_contract_matches_the_request(cli, pager, tmp_path, path):
    """Every block recorded retain is verbatim in the emitted request; every block recorded page is a
    stub there or a block of a range page it lists; none is evicted for the budget; none over it."""
    original = pager.load(path.read_text(encoding="utf-8"), pager.detect_format(path.read_text(encoding="utf-8")))
    texts = {b["id"]: b["text"] for b in original.blocks}
    for budget in (None, 2000, 8000):
        folder = tmp_path / str(budget)
        folder.mkdir()
        contract, out = folder / "c.limn", folder / "out.json"
        argv = ["--history", path, "--contract", contract, "--emit", out, "--json", "--now", NOW]
        result = cli(*argv, *(["--budget", budget] if budget else []))
        assert result.code == 0, result.err
        emitted = out.read_text(encoding="utf-8")
        back = pager.load(emitted, pager.detect_format(emitted))
        kept = {b["text"] for b in back.blocks if not b["stub"]}
        stubs = {b["id"] for b in back.blocks if b["stub"]}
        listed = set()
        store = pager.PageStore.open(str(folder / "c.pages.sqlite3"), create=False)
        if store is not None:
            for sid in stubs:
                listed.update(store.range_members(sid))
            store.close()
        for r in result.records:
            if r["action"] == "retain":
                assert texts[r["block"]] in kept, (budget, r["block"], r["reason"])
            elif r["action"] == "page" and r["reason"] != "compacted":  # before a boundary: in no request
                assert r["block"] in stubs or r["block"] in listed, (budget, r["block"], r["reason"])
            else:
                assert not r["reason"].startswith("budget"), (budget, r["block"], r["reason"])
        if budget:
            summary = json.loads(result.out)
            assert summary["tokens_after"] <= budget or summary["fixed_tokens"] > budget, summary


def test_instructions_sent_again_are_sent_and_counted_once(pager):
    rules = "Follow AGENTS.md: run the tests before you commit. " * 40
    blocks = [{"id": "d1", "turn": 0, "role": "developer", "text": rules},
              {"id": "u1", "turn": 1, "role": "user", "text": "fix the parser"},
              {"id": "d2", "turn": 1, "role": "developer", "text": rules},
              {"id": "u2", "turn": 2, "role": "user", "text": "and run the tests"}]
    plan = pager.plan_pass({"blocks": blocks}, pager.Params(budget=2000))
    by_id = {d.block: (d.action, d.reason) for d in plan.decisions}
    assert by_id["d1"] == ("page", "repeated by d2") and by_id["d2"] == ("retain", "system")
    assert plan.tokens_after < 2 * pager.estimate_tokens(rules)


def test_search_finds_a_range_members_own_page_never_the_range_row(cli, pager, tmp_path):
    """A range page's store row holds its members' ids: search (FTS5 and the scan alike) answers with the
    member whose text holds the name, and never with the range row; the injected index lists members only."""
    history, contract, out = tmp_path / "chat.json", tmp_path / "c.limn", tmp_path / "out.json"
    history.write_text(json.dumps(tool_chat(120)))
    _pass(cli, history, contract, 2000, out)
    ranges = list(dict.fromkeys(RANGE_ID.findall(out.read_text())))
    store = pager.PageStore.open(str(tmp_path / "c.pages.sqlite3"), create=False)
    try:
        members = store.range_members(ranges[0])
        member = next(m for m in members if m.endswith(":result"))
        name = re.search(r"helper_\d+", store.get(member).text).group(0)
        for scan in (True, False):
            by_name = store.search(name, limit=5, scan=scan)
            assert by_name and by_name[0]["id"] == member, (scan, by_name)
            assert all(hit["kind"] != pager.RANGE for hit in store.search(member, limit=50, scan=scan))
            assert all(not RANGE_ID.fullmatch(hit["id"]) for hit in store.search(name, limit=50, scan=scan))
        assert not any(RANGE_ID.fullmatch(block) for block, _, _ in store.sizes())
    finally:
        store.close()
    found = cli("search", name, "--contract", contract, "--json")
    assert found.code == 0 and json.loads(found.out)[0]["id"] == member


def test_no_range_page_where_the_blocks_fit_verbatim_without_its_line(pager):
    """Room set aside for range lines is not taken from blocks that fit verbatim without it: at 60 tokens
    what the score keeps (28 tokens) is sent whole, not paged into a 37-token range line (which made
    the pass 60 tokens, over twice what the verbatim text costs)."""
    log = "FAILED tests/test_invoice.py::test_total - assert 10.01 == 10.0\n" * 12
    history = {"intent_ir": ["invoice", "total"], "blocks": [
        {"id": "u1", "turn": 1, "role": "user", "text": "The invoice total is off by one cent."},
        {"id": "t2", "turn": 2, "role": "tool", "text": log},
        {"id": "a3", "turn": 3, "role": "assistant", "text": "The rounding in invoice.py uses floats."},
        {"id": "u4", "turn": 4, "role": "user", "text": "Please fix the invoice total."}]}
    plan = pager.plan_pass(history, pager.Params(budget=60))
    actions = {d.block: d.action for d in plan.decisions}
    assert actions == {"u1": "retain", "t2": "evict", "a3": "retain", "u4": "retain"}
    assert not plan.ranges and plan.tokens_after == sum(d.tokens for d in plan.decisions if d.action == "retain")
    # where the blocks do not fit even without a line, the range page stays (never an eviction for room)
    tight = pager.plan_pass(history, pager.Params(budget=12))
    assert {d.block: d.action for d in tight.decisions}["u1"] == "page" and tight.ranges


def test_range_pages_have_records_so_the_round_trip_names_no_new_ids(cli, tmp_path):
    """Each range page gets a record after the blocks' own (kind and reason "range", its members'
    tokens): the pass over the emitted request reads its line back as a block of that id, and before
    this the round trip's records named 4-12 ids the first pass never had (../shared/tools/real-smoke.py)."""
    history, contract, out, again = (tmp_path / n for n in ("chat.json", "c.limn", "out.json", "again.json"))
    history.write_text(json.dumps(tool_chat(120)))
    first = _pass(cli, history, contract, 8000, out)
    ranges = [r for r in first.records if r["kind"] == "range"]
    emitted = set(RANGE_ID.findall(out.read_text()))
    assert ranges and {r["block"] for r in ranges} == emitted
    assert all((r["role"], r["action"], r["reason"], r["stub"]) == ("range", "page", "range", True) for r in ranges)
    paged = {r["block"]: r["tokens"] for r in first.records if r["reason"] == "budget-ranged"}
    assert sum(r["tokens"] for r in ranges) == sum(paged.values())
    assert first.records[-len(ranges):] == ranges  # after every block's own record
    second = _pass(cli, out, contract, 8000, again, "2026-05-17T03:09:12+00:00")
    assert {r["block"] for r in second.records} <= {r["block"] for r in first.records}


# --- recency fills first (issue 31 item 4) ---

def _tool_session(steps, intent_word="ledger"):
    """A request, then ``steps`` tool round trips in one turn (a coding agent's run); step 3 names the intent."""
    blocks = [{"id": "ask", "turn": 1, "role": "user", "protected": "human",
               "text": f"Fix the {intent_word} rounding in src/totals.py."}]
    for k in range(steps):
        word = intent_word if k == 3 else f"module_{k}"
        blocks.append({"id": f"c{k}", "turn": 1, "role": "assistant", "unit": f"tool:c{k}",
                       "text": f'Bash({{"command": "grep -n {word} src/part_{k}.py"}})'})
        blocks.append({"id": f"c{k}:result", "turn": 1, "role": "tool", "unit": f"tool:c{k}",
                       "text": f"src/part_{k}.py: {word} " + "line of output " * 30})
    return blocks


def test_recent_share_keeps_the_newest_tool_work_verbatim_first(pager):
    """With --recent-share 1 the room left after the floors goes to the newest round trips, newest first,
    until one does not fit; value per token alone keeps the old step that names the intent instead."""
    blocks = _tool_session(12)
    history = {"intent_ir": ["ledger"], "blocks": blocks}
    by_value = pager.plan_pass(history, pager.Params(budget=900, keep_recent=0, target=None))
    recent = pager.plan_pass(history, pager.Params(budget=900, keep_recent=0, target=None, recent_share=1.0))
    kept = lambda plan: [d.block for d in plan.decisions if d.action == "retain"]
    assert "c3:result" in kept(by_value) and "c3:result" not in kept(recent)
    steps = [k for k in range(12) if f"c{k}:result" in kept(recent)]
    assert steps == list(range(steps[0], 12)) and len(steps) >= 3  # a run of the newest steps, unbroken
    assert recent.tokens_after <= 900 and not any(d.action == "evict" for d in recent.decisions)
    # a history without tool work (a conversation) is placed by value alone, whatever the share
    chat = {"intent_ir": ["ledger"], "blocks": [dict(b, unit=None) if "unit" in b else b for b in blocks]}
    same = [pager.plan_pass(chat, pager.Params(budget=900, keep_recent=0, target=None, recent_share=s))
            for s in (0.0, 1.0)]
    assert [d.action for d in same[0].decisions] == [d.action for d in same[1].decisions]


def test_recency_passes_over_a_giant_and_a_stale_read_without_stopping(pager):
    """A giant result (paged as its head and tail) and a round trip a later one repeats (the same command
    run again: stale) are passed over, and the walk goes on to the steps before them, which value per
    token alone would not keep (it keeps step 3, which names the intent)."""
    blocks = _tool_session(10)
    blocks[-1] = dict(blocks[-1], text="huge output line\n" * 600)  # the newest result: a giant
    blocks[-4] = dict(blocks[-4], text=blocks[-6]["text"])  # step 8 runs step 7's command again...
    blocks[-3] = dict(blocks[-3], text=blocks[-5]["text"])  # ...and reads the same output: step 7 is stale
    history = {"intent_ir": ["ledger"], "blocks": blocks}
    plans = {share: pager.plan_pass(history, pager.Params(budget=800, keep_recent=0, target=None,
                                                           recent_share=share)) for share in (0.0, 1.0)}
    why = {share: {d.block: (d.action, d.reason) for d in plan.decisions} for share, plan in plans.items()}
    recent = why[1.0]
    assert recent["c9:result"][0] == recent["c7:result"][0] == recent["c7"][0] == "page"
    assert all(recent[f"c{k}:result"][0] == "retain" for k in (8, 6, 5, 4))
    assert recent["c3:result"][0] == "page" and why[0.0]["c3:result"][0] == "retain"
    assert all(plan.tokens_after <= 800 for plan in plans.values())


def test_recent_share_is_a_flag_and_bad_values_are_refused(cli, tmp_path):
    history = tmp_path / "h.json"
    history.write_text(json.dumps({"intent_ir": ["ledger"], "blocks": _tool_session(6)}))
    good = cli("--history", history, "--contract", tmp_path / "c.limn", "--budget", "600", "--recent-share", "1",
               "--json", "--now", NOW)
    assert good.code == 0, good.err
    for bad in ("1.5", "-0.1", "nan"):
        result = cli("--history", history, "--contract", tmp_path / "d.limn", "--budget", "600",
                     "--recent-share", bad, "--now", NOW)
        assert result.code == 2 and result.err.count("\n") == 1 and "--recent-share" in result.err
        assert not (tmp_path / "d.limn").exists()


def test_under_a_budget_tool_work_under_the_evict_cut_is_paged_not_evicted(pager):
    """The score evicts noise; under a budget, in a history with tool work, nothing under the evict cut
    is evicted: the agent's steps, the tool output and the harness's own text are paged instead (range
    pages hold them, recallable; an agent may use a skill's body or an old result again). Without a
    budget the score's evictions stand."""
    blocks = _tool_session(12, intent_word="ledger")
    blocks.insert(3, {"id": "meta", "turn": 1, "role": "user", "kind": "harness",
                      "text": "Caveat: the messages below were generated by the user while running local commands."})
    history = {"intent_ir": ["ledger"], "current_turn": 40, "blocks": blocks}  # all of it long ago
    free = pager.plan_pass(history, pager.Params(keep_recent=0))
    budget = pager.plan_pass(history, pager.Params(budget=300, keep_recent=0))
    scored_out = {d.block for d in free.decisions if d.action == "evict"}
    assert {"c0:result", "c1", "meta"} <= scored_out  # old, off-intent work and harness text: under the evict cut
    assert not any(d.action == "evict" for d in budget.decisions)
    ranged = {b for r in budget.ranges for b in r.members}
    assert {"c0:result", "c1", "meta"} <= ranged and budget.tokens_after <= 300


def test_a_callers_empty_recall_hint_leaves_every_range_line_whole(pager):
    out = pager.Pager(8000, hint=lambda block: "").compact(tool_chat(120))
    lines = [m["content"] for m in out.messages if isinstance(m.get("content"), str) and "| range |" in m["content"]]
    assert len(lines) > 1 and all("recall" not in line and "range id" not in line for line in lines)
    assert all(line.endswith("]") or re.search(r"topics: [^ ]+(, [^ ]+)*$", line) for line in lines)
    assert all(pager.STUB_LINE_RE.match(line) for line in lines)


def test_a_bounded_recall_gives_a_range_back_in_parts_and_goes_on_from_where_it_stopped(cli, pager, tmp_path):
    history, contract, out = tmp_path / "chat.json", tmp_path / "c.limn", tmp_path / "out.json"
    history.write_text(json.dumps(tool_chat(120)))
    _pass(cli, history, contract, 2000, out)
    rid = RANGE_ID.findall(out.read_text())[0]
    store = pager.PageStore.open(str(tmp_path / "c.pages.sqlite3"), create=False)
    members = store.range_members(rid)
    sizes = {m: store.row(m).tokens for m in members}
    store.close()
    assert sum(sizes.values()) > 1000
    first = cli("recall", rid, "--contract", contract, "--max-tokens", "300", "--json", "--now", NOW)
    assert first.code == 0, first.err
    body = json.loads(first.out)
    got = [r["block"] for r in body["recalled"]]
    assert got == members[:len(got)] and 0 < len(got) < len(members)
    assert sum(sizes[b] for b in got) <= 300 or len(got) == 1
    assert sum(sizes[b] for b in got) + sizes[members[len(got)]] > 300  # it stopped at the first that did not fit
    assert body["left"] == {"blocks": len(members) - len(got), "tokens": sum(sizes[b] for b in members[len(got):]),
                            "next": members[len(got)]}
    state = pager.contract_state(str(contract))
    assert all(state.directives[b] == "retain" for b in got)
    assert state.directives[members[len(got)]] == "page" and state.directives[rid] == "page"  # the rest: later
    # the text form ends with the line that says where to go on
    again = cli("recall", rid, "--contract", contract, "--max-tokens", "300", "--now", NOW)
    assert again.out.rstrip().endswith(f"go on with --from {members[len(got)]}]")
    rest = cli("recall", rid, "--contract", contract, "--from", members[len(got)], "--json", "--now", NOW)
    assert [r["block"] for r in json.loads(rest.out)["recalled"]] == members[len(got):]
    assert "left" not in json.loads(rest.out)
    state = pager.contract_state(str(contract))
    assert state.directives[rid] == "retain" and all(state.directives[m] == "retain" for m in members)
    # bad input: one line, exit 2, the contract unchanged
    before = contract.read_text()
    for flags, message in ((["--max-tokens", "0"], "--max-tokens must be a positive integer (got \"0\")"),
                           (["--from", "nosuch"], "--from \"nosuch\" is not one of the blocks these ids give back")):
        bad = cli("recall", rid, "--contract", contract, *flags, "--now", NOW)
        assert bad.code == 2 and message in bad.err and len(bad.err.strip().splitlines()) == 1, bad.err
    assert contract.read_text() == before


def test_the_library_recall_tool_gives_a_long_range_in_parts(pager):
    agent = pager.Pager(2000)
    out = agent.compact(tool_chat(120))
    rid = RANGE_ID.findall(json.dumps(out.messages))[0]
    whole = agent.recall(rid)

    def call(arguments):
        done = agent.run_tool_call({"id": "c1", "type": "function",
                                    "function": {"name": pager.RECALL_TOOL_NAME, "arguments": json.dumps(arguments)}})
        return done["content"]

    part = call({"ids": [rid], "max_tokens": 300})
    shown = re.findall(r"^==> (\S+) <==$", part, re.M)
    start = re.search(r"go on with --from (\S+)\]$", part.rstrip()).group(1)
    assert shown == list(whole)[:len(shown)] and 0 < len(shown) < len(whole) and start == list(whole)[len(shown)]
    rest = call({"ids": [rid], "from": start})
    assert re.findall(r"^==> (\S+) <==$", rest, re.M) == list(whole)[len(shown):] and "stopped" not in rest
    assert call({"ids": [rid], "max_tokens": 0}).startswith("error: max_tokens must be a positive integer")
    assert call({"ids": [rid], "from": "nosuch"}).startswith('error: --from "nosuch" is not one of the blocks')
    schema = pager.recall_tool("openai")["function"]["parameters"]
    assert schema["required"] == ["ids"] and set(schema["properties"]) == {"ids", "max_tokens", "from"}
