"""Coding sessions: identifiers as a programmer reads them, intent from the work, masking in a unit.

Masking in transcript formats (the result keeps its call id and holds its stub) is tested in
test_real_transcripts.py.
"""

import json

import pytest


def _matched(pager, intent_text, block_text):
    """Return the intent keywords a lone block holds when the intent is ``intent_text``."""
    keywords = pager.intent_keywords([intent_text])
    history = {"intent_ir": keywords, "blocks": [
        {"id": "old", "turn": 1, "role": "tool", "text": block_text},
        {"id": "now", "turn": 2, "role": "user", "text": "go on"}]}
    return pager.plan_pass(history).decisions[0].matched


@pytest.mark.parametrize("intent, text", [
    ("line_total", "def test_line_total():"),        # a test of the name
    ("line_total", "x = line_total_v2(order)"),       # a variant of the name
    ("test_line_total", "def line_total(order):"),    # the name a test is about
    ("lineTotal", "def line_total(order):"),          # camelCase meets snake_case
    ("line_total", "const lineTotal = 3;"),           # and back
    ("LineTotal", "class LineTotal:"),
    ("src/billing/totals.py", "edited totals.py"),    # a path meets its file name
    ("src/billing/totals.py", "the totals module"),   # and its stem
    ("Foo.bar", "bar() raised"),                      # a dotted name meets its last part
])
def test_an_identifier_meets_the_ways_a_programmer_writes_it(pager, intent, text):
    assert _matched(pager, intent, text)


@pytest.mark.parametrize("intent, text", [
    ("line_total", "line_totals = []"),   # another name
    ("line_total", "totally_different"),
    ("total", "line_total = 0"),          # a plain word does not reach inside an identifier
    ("line_total", "line total"),         # two words are not the identifier
])
def test_an_identifier_does_not_meet_other_names(pager, intent, text):
    assert not _matched(pager, intent, text)


def test_camel_case_intent_keywords_become_snake_case(pager):
    assert pager.intent_keywords(["Fix lineTotal and HTTPServer in Foo.bar"]) == [
        "fix", "line_total", "http_server", "foo", "bar"]


# --- intent from the work ---

def _session(*, human="continue", extra=()):
    """Return a small coding history: an old read of totals.py, unrelated work, then a failing test."""
    blocks = [
        {"id": "ask", "turn": 1, "role": "user", "text": "Fix the invoice rounding bug"},
        {"id": "c1", "turn": 2, "role": "assistant", "unit": "tool:c1",
         "text": 'Read({"file_path": "src/billing/totals.py"})'},
        {"id": "c1:result", "turn": 3, "role": "tool", "unit": "tool:c1",
         "text": "def line_total(qty, price):\n    return round(qty * price, 2)\n" * 3},
        {"id": "c2", "turn": 4, "role": "assistant", "unit": "tool:c2", "text": 'Bash({"command": "ls docs"})'},
        {"id": "c2:result", "turn": 5, "role": "tool", "unit": "tool:c2", "text": "index.md\nchangelog.md\n"},
        *[block for k in (1, 2, 3) for block in (
            {"id": f"f{k}", "turn": 4 + 2 * k, "role": "assistant", "unit": f"tool:f{k}",
             "text": 'Bash({"command": "git status"})'},
            {"id": f"f{k}:result", "turn": 5 + 2 * k, "role": "tool", "unit": f"tool:f{k}",
             "text": "nothing to commit"})],
        {"id": "more", "turn": 12, "role": "user", "text": human},
        {"id": "c3", "turn": 13, "role": "assistant", "unit": "tool:c3",
         "text": 'Bash({"command": "pytest tests/test_totals.py"})'},
        {"id": "c3:result", "turn": 14, "role": "tool", "unit": "tool:c3",
         "text": "FAILED tests/test_totals.py::test_line_total - ZeroDivisionError: division by zero"},
        *extra,
    ]
    return {"blocks": blocks}


def test_the_intent_draws_on_the_recent_work_when_the_human_says_little(pager):
    plan = pager.plan_pass(_session())
    assert plan.intent_source == "last user message and recent work"
    assert {"test_line_total", "zero_division_error", "test_totals"} <= set(plan.keywords)
    by_id = {d.block: d for d in plan.decisions}
    # the old read of line_total meets the failing test; the unrelated listing does not
    assert by_id["c1:result"].matched and by_id["c1:result"].similarity > by_id["c2:result"].similarity
    # "continue" alone counts a third of a full request: the block that says it is no perfect match
    alone = {d.block: d for d in pager.plan_pass(_session(), pager.Params(work_steps=0)).decisions}
    assert alone["more"].own == 1.0 and by_id["more"].own < 0.5


def test_a_calls_escaped_line_breaks_do_not_make_names_of_the_work(pager):
    """A tool call's text is its arguments as JSON, where a script's line breaks are ``\\n``: the
    names after them are read as written (``_session_id``), not glued to the escape's ``n``."""
    script = json.dumps({"command": "_TEL_TIER=$(cat ~/.superstack/config.json)\n_SESSION_ID=$(uuidgen)"})
    history = {"blocks": [{"id": "u", "turn": 1, "role": "user", "text": "go on"},
                          {"id": "c", "turn": 1, "role": "assistant", "unit": "tool:c", "text": f"Bash({script})"}]}
    plan = pager.plan_pass(history)
    assert "_session_id" in plan.keywords and "superstack" in plan.keywords
    assert not {"n_session_id", "n_tel_tier"} & set(plan.keywords)
    # the same rule reads the call's text when it is matched: the name after the escape is found there
    call = next(d for d in plan.decisions if d.block == "c")
    assert "_session_id" in call.matched
    assert pager._names_of(f"Bash({script})") and "n_session_id" not in pager._names_of(f"Bash({script})")


def test_work_steps_zero_keeps_the_last_user_message_alone(pager):
    plan = pager.plan_pass(_session(), pager.Params(work_steps=0))
    assert plan.intent_source == "last user message" and plan.keywords == ["continue"]


def test_a_long_human_request_still_counts_in_full(pager):
    plan = pager.plan_pass(_session(human="check the docs changelog index for release notes"))
    by_id = {d.block: d for d in plan.decisions}
    before = {d.block: d for d in pager.plan_pass(_session()).decisions}
    assert by_id["c2:result"].matched and not before["c2:result"].matched
    assert by_id["c2:result"].similarity > by_id["c1:result"].similarity


def test_the_cli_records_and_shows_the_intent_source(cli, tmp_path):
    import json
    history = tmp_path / "h.json"
    history.write_text(json.dumps(_session()))
    contract = tmp_path / "c.limn"
    result = cli("--history", history, "--contract", contract, "--now", "2026-05-17T03:08:12Z")
    assert result.code == 0
    assert "intent from last user message and recent work" in result.out
    assert 'remember a value called pager-intent-source with "last user message and recent work"' \
        in contract.read_text()


# --- observation masking inside a unit ---

def _masking_history():
    big = "line %d of a long build log\n"
    blocks = [{"id": "ask", "turn": 1, "role": "user", "text": "Make the build pass"}]
    for k in range(4):
        blocks += [
            {"id": f"c{k}", "turn": 2 + 2 * k, "role": "assistant", "unit": f"tool:c{k}",
             "text": f'Bash({{"command": "make target{k}"}})'},
            {"id": f"c{k}:result", "turn": 3 + 2 * k, "role": "tool", "unit": f"tool:c{k}",
             "text": "".join(big % i for i in range(200))}]
    blocks.append({"id": "now", "turn": 20, "role": "user", "text": "continue"})
    return {"blocks": blocks}


def test_mask_results_keeps_calls_verbatim_and_pages_their_large_results(pager):
    params = dict(budget=1200, work_steps=0)
    whole = {d.block: d.action for d in pager.plan_pass(_masking_history(), pager.Params(**params)).decisions}
    plan = pager.plan_pass(_masking_history(), pager.Params(results_apart=True, **params))
    masked = {d.block: d.action for d in plan.decisions}
    calls = [f"c{k}" for k in range(4)]
    assert not all(whole[c] == "retain" for c in calls)  # whole units do not fit: calls go with them
    assert all(masked[c] == "retain" for c in calls)
    assert all(masked[f"{c}:result"] == "page" for c in calls)  # never evicted while their call stays
    assert plan.tokens_after <= 1200


def test_mask_results_emits_the_call_and_a_stub_for_its_result(cli, tmp_path):
    import json
    history = tmp_path / "h.json"
    history.write_text(json.dumps(_masking_history()))
    out = tmp_path / "out.json"
    result = cli("--history", history, "--contract", tmp_path / "c.limn", "--budget", "1200", "--mask-results",
                 "--work-steps", "0", "--emit", out, "--now", "2026-05-17T03:08:12Z")
    assert result.code == 0, result.err
    emitted = {b["id"]: b for b in json.loads(out.read_text())["blocks"]}
    assert emitted["c0"]["text"].startswith("Bash(") and not emitted["c0"].get("stub")
    assert emitted["c0:result"]["stub"] is True and emitted["c0:result"]["text"].startswith("[paged c0:result")


# --- cache-stable compaction: two watermarks ---

def _grow(pager, cli, tmp_path, sizes, *flags, before=()):
    """Replay a growing history pass by pass (after the blocks ``before``); return [(summary, emitted blocks)]."""
    import json
    blocks, passes = [], []
    for n, size in enumerate(sizes):
        blocks.append({"id": f"b{n}", "turn": n + 1, "role": "assistant" if n % 2 else "user",
                       "text": f"step {n} " + "word " * size})
        history = tmp_path / "h.json"
        history.write_text(json.dumps({"blocks": [*before, *blocks]}))
        out = tmp_path / "out.json"
        result = cli("--history", history, "--contract", tmp_path / "c.limn", "--budget", "1000", "--json",
                     "--emit", out, "--now", f"2026-05-17T03:{n:02d}:00Z", *flags)
        assert result.code == 0, result.err
        passes.append((json.loads(result.out.splitlines()[-1]), json.loads(out.read_text())["blocks"]))
    return passes


def test_watermarks_keep_the_emitted_prefix_until_the_trigger_then_compact_to_the_target(pager, cli, tmp_path):
    passes = _grow(pager, cli, tmp_path, [150] * 14, "--target", "0.6")
    assert "compacted" not in passes[0][0]  # a first pass has sent nothing yet: it fits the whole budget
    compacted = [summary["compacted"] for summary, _ in passes[1:]]
    assert compacted.count(True) >= 2 and compacted.count(False) >= 8
    for (summary, emitted), (_, before) in zip(passes[1:], passes):
        assert summary["tokens_after"] <= 1000  # never over the budget
        if not summary["compacted"]:  # between compactions: what was sent stays byte for byte
            assert emitted[:len(before)] == before
        else:
            assert summary["tokens_after"] <= 600


def test_watermarks_are_the_default_under_a_budget(pager, cli, tmp_path):
    passes = _grow(pager, cli, tmp_path, [150] * 14)
    compacted = [summary["compacted"] for summary, _ in passes[1:]]
    assert compacted.count(True) >= 2 and compacted.count(False) >= 8
    # down to the default 0.8 (four steps of 190 tokens), not to 0.7 (three)
    assert all(700 < s["tokens_after"] <= 800 and s["compacted_to"] == 0.8 for s, _ in passes[1:] if s["compacted"])
    # A first pass over the whole history (a fresh contract) fills the budget, not the target.
    first = cli("--history", tmp_path / "h.json", "--contract", tmp_path / "fresh.limn", "--budget", "1000",
                "--json", "--now", "2026-05-17T04:00:00Z")
    assert first.code == 0 and json.loads(first.out.splitlines()[-1])["tokens_after"] > 900


def test_watermarks_hold_in_a_history_with_a_compaction_boundary(pager, cli, tmp_path):
    """Blocks before a harness's compaction boundary (archived) are in no request, so the last
    directives' size leaves them out too: the passes between compactions keep the emitted prefix
    as they do without them (the archived blocks' stubs were counted, and every pass compacted)."""
    archived = [{"id": f"old{k}", "turn": 0, "role": "assistant" if k % 2 else "user", "protected": "archived",
                 "text": f"old step {k} " + "word " * 150} for k in range(40)]
    passes = _grow(pager, cli, tmp_path, [150] * 14, before=archived)
    compacted = [summary["compacted"] for summary, _ in passes[1:]]
    assert compacted.count(True) >= 2 and compacted.count(False) >= 8
    for (summary, emitted), (_, before) in zip(passes[1:], passes):
        assert summary["tokens_after"] <= 1000
        assert all(b.get("stub") for b in emitted if b["id"].startswith("old"))  # never sent verbatim again
        if not summary["compacted"]:
            assert emitted[:len(before)] == before


def test_a_pass_that_keeps_the_directives_sends_the_range_lines_it_sent(pager, cli, tmp_path, monkeypatch):
    """A compaction plans its range pages in the room its fit left; the pass after it keeps its
    directives and has the whole index room, where the oldest runs merge otherwise. It sends the
    lines the agent was sent (_ranges_kept), so the request stays the same byte for byte. On a real
    session that had its own compactions (the development set's; skipped where it is absent)."""
    from conftest import ROOT
    source = ROOT.parent / "shared" / "data" / "transcripts-dev" / "claude-code" / "planetfall-d43002f0-2manual.jsonl"
    if not source.exists():
        pytest.skip("the development transcripts are not beside the repository")
    lines = source.read_text(encoding="utf-8").split("\n")
    first, later = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("\n".join(lines[:-21]) + "\n")
    later.write_text("\n".join(lines[:-11]) + "\n")

    def passes(folder):
        out = []
        for k, history in enumerate((first, later, later)):
            emitted = folder / f"o{k}.json"
            result = cli("--history", history, "--contract", folder / "c.limn", "--budget", "8000", "--json", "--quiet",
                         "--emit", emitted, "--now", f"2026-05-17T04:0{k}:00Z")
            assert result.code == 0, result.err
            out.append((json.loads(result.out.splitlines()[-1]), json.loads(emitted.read_text())["messages"]))
        return out

    (tmp_path / "kept").mkdir()
    (_, _), (grew, sent), (again, resent) = passes(tmp_path / "kept")
    assert grew["compacted"] and again["compacted"] is False  # the blocks before its boundaries cost nothing
    assert resent == sent and again["tokens_after"] == grew["tokens_after"]
    # planned anew, the range lines come out otherwise: the request would change with nothing new
    monkeypatch.setattr(pager._Scorer, "_ranges_kept", lambda self, decisions: None)
    (tmp_path / "planned").mkdir()
    (_, _), (_, sent), (_, resent) = passes(tmp_path / "planned")
    assert resent != sent


def test_a_pass_that_grew_past_the_room_between_the_watermarks_compacts_to_the_whole_budget(pager, cli, tmp_path):
    # Each step is about 380 tokens: more than the 300 between the target (0.7) and the trigger
    # (1.0) of a 1,000-token budget, so once the budget is full every pass compacts whatever the
    # target. Then fitting 700 would keep no prefix and only hold one step verbatim, not two: the
    # pass fits the whole budget.
    passes = _grow(pager, cli, tmp_path, [300] * 8, "--target", "0.7")
    later = [summary for summary, _ in passes[2:]]
    assert all(s["compacted"] for s in later)
    assert all(s["compacted_to"] == 1.0 and s["grown"] > 300 for s in later)
    assert all(700 < s["tokens_after"] <= 1000 for s in later)
    # Steps of about 190 tokens fit that room: a compaction goes down to the target, as before.
    (tmp_path / "small").mkdir()
    small = _grow(pager, cli, tmp_path / "small", [150] * 14, "--target", "0.7")
    compacting = [summary for summary, _ in small[1:] if summary["compacted"]]
    assert compacting and all(s["compacted_to"] == 0.7 and s["grown"] <= 300 for s in compacting)
    assert all(s["tokens_after"] <= 700 for s in compacting)


def test_one_long_step_among_small_ones_compacts_to_the_target_and_the_next_pass_keeps_the_prefix(
        pager, cli, tmp_path):
    # Steps of about 250 tokens (two blocks of 127) and then one block of 377: that pass grew by
    # more than the 300 between target and trigger, but its steps are typically smaller, so it
    # compacts to the target and the small step after it grows in place.
    passes = _grow(pager, cli, tmp_path, [100] * 14 + [300] + [100] * 3, "--target", "0.7")
    burst, after = passes[14][0], passes[15]
    assert burst["compacted"] and burst["grown"] > 300 and burst["compacted_to"] == 0.7
    assert after[0]["compacted"] is False and after[1][:len(passes[14][1])] == passes[14][1]


def test_pass_growth_is_this_pass_and_the_median_of_the_recent_steps(pager):
    roles = ["user"] + ["assistant", "tool"] * 4
    tokens = [50, 10, 90, 10, 990, 10, 90, 10, 990]
    # the last step is new: 1,000 tokens now; its steps are 100, 1,000, 100, 1,000: the median of the
    # last three is 1,000
    assert pager._pass_growth(roles, tokens, [False] * 7 + [True] * 2) == (1000, 1000)
    # three steps new (an agent paging every third step): three times the median of those three
    assert pager._pass_growth(roles, tokens, [False] * 3 + [True] * 6) == (2100, 3000)
    tokens[4] = 90  # one long step among short ones: typical growth stays short
    assert pager._pass_growth(roles, tokens, [False] * 7 + [True] * 2) == (1000, 100)
    assert pager._pass_growth([], [], []) == (0, 0)


def test_the_summary_line_says_why_a_compaction_fitted_the_whole_budget(cli, tmp_path):
    import json
    history, contract = tmp_path / "h.json", tmp_path / "c.limn"
    blocks = [{"id": f"b{n}", "turn": n + 1, "role": "assistant" if n % 2 else "user",
               "text": f"step {n} " + "word " * 300} for n in range(3)]
    lines = []
    for n in (1, 2, 3):
        history.write_text(json.dumps({"blocks": blocks[:n]}))
        result = cli("--history", history, "--contract", contract, "--budget", "1000", "--target", "0.7",
                     "--now", f"2026-05-17T03:0{n}:00Z")
        assert result.code == 0, result.err
        lines.append(result.out)
    assert "compacted to 1 of the budget (the history grew 377 tokens since the pass before" in lines[2]
    assert "more than the 300 between --target and --trigger)" in lines[2]


def test_without_a_target_every_pass_refits_the_whole_budget(pager, cli, tmp_path):
    passes = _grow(pager, cli, tmp_path, [150] * 10, "--target", "none")
    assert all("compacted" not in summary for summary, _ in passes)
    assert max(summary["tokens_after"] for summary, _ in passes) > 900


@pytest.mark.parametrize("flags, message", [
    (["--target", "0.7"], "--target needs --budget"),
    (["--budget", "100", "--target", "0.9", "--trigger", "0.8"], "must not exceed --trigger"),
    (["--budget", "100", "--target", "0"], "--target must be a positive number"),
    (["--budget", "100", "--target", "0.7", "--trigger", "1.2"], "--trigger must not exceed 1"),
    (["--budget", "100", "--target", "most"], "--target must be a number or none"),
    (["--target", "none"], "--target needs --budget"),
])
def test_watermark_flags_are_checked(cli, tmp_path, flags, message):
    import json
    history = tmp_path / "h.json"
    history.write_text(json.dumps({"blocks": [{"id": "a", "turn": 1, "role": "user", "text": "hi"}]}))
    result = cli("--history", history, "--contract", tmp_path / "c.limn", *flags)
    assert result.code == 2 and message in result.err


def test_the_library_pager_keeps_its_last_directives_between_compactions(pager):
    agent = pager.Pager(1000, target=0.6)
    blocks, previous, compactions = [], None, 0
    for n in range(14):
        blocks.append({"id": f"b{n}", "turn": n + 1, "role": "assistant" if n % 2 else "user",
                       "text": f"step {n} " + "word " * 150})
        result = agent.compact({"blocks": list(blocks)})
        assert result.report.tokens_after <= 1000
        emitted = result.messages["blocks"]
        if previous is not None and emitted[:len(previous)] != previous:
            compactions += 1
            assert result.report.tokens_after <= 600
        previous = emitted
    assert 2 <= compactions <= 5


def test_the_library_draws_on_the_work_only_when_asked(pager):
    history = _session()
    assert pager.Pager().compact(history).report.intent_source == "last user message"
    assert pager.Pager(work_steps=3).compact(history).report.intent_source == "last user message and recent work"


# --- repeats ---

def test_a_command_run_again_pages_the_earlier_run_first(pager):
    log = "".join(f"test_{k} passed\n" for k in range(60))
    blocks = [{"id": "ask", "turn": 1, "role": "user", "text": "run the tests"}]
    for n, (cid, out) in enumerate((("r1", log + "1 failed"), ("other", "ok"), ("r2", log + "all passed"))):
        command = 'Bash({"command": "pytest -q"})' if cid != "other" else 'Bash({"command": "git diff"})'
        blocks += [{"id": cid, "turn": 2 + 2 * n, "role": "assistant", "unit": f"tool:{cid}", "text": command},
                   {"id": f"{cid}:result", "turn": 3 + 2 * n, "role": "tool", "unit": f"tool:{cid}", "text": out}]
    blocks.append({"id": "now", "turn": 9, "role": "user", "text": "go on"})
    by_id = {d.block: d for d in pager.plan_pass({"blocks": blocks}, pager.Params(work_steps=0)).decisions}
    assert by_id["r1"].action == by_id["r1:result"].action == "page"
    assert by_id["r1:result"].reason == "repeated by r2" and by_id["r1:result"].R == 0.0
    assert by_id["r2:result"].reason != "repeated by r2" and by_id["other"].reason == "score"


def test_the_stub_of_a_repeated_run_names_the_newer_copy_and_is_priced_as_written(pager, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short contract path: the stubs name it
    log = "".join(f"test_{k} passed\n" for k in range(150))
    messages = [{"role": "user", "content": "run the tests"}]
    for cid, out in (("r1", log + "1 failed"), ("r2", log + "all passed")):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
                         {"id": cid, "type": "function", "function": {"name": "bash",
                                                                      "arguments": '{"command": "pytest -q"}'}}]},
                     {"role": "tool", "tool_call_id": cid, "content": out}]
    messages.append({"role": "user", "content": "go on"})
    history, out = tmp_path / "chat.json", tmp_path / "out.json"
    history.write_text(json.dumps(messages))
    budget = 470  # the stubs, and room set aside for a range page's line
    result = cli("--history", history, "--contract", "c.limn", "--budget", budget, "--json",
                 "--emit", out, "--now", "2026-05-17T03:00:00Z")
    assert result.code == 0, result.err
    records = {r["block"]: r for r in result.records}
    assert records["r1"]["reason"] == "repeated by r2" and records["r1"]["action"] == "page"
    emitted = json.loads(out.read_text())
    [note] = [m["content"] for m in emitted if "[paged r1 " in str(m.get("content"))]
    assert note.count("(newer copy: r2; recall:") == 2  # the call's stub and its result's
    # the budget counted the stub as written, newer copy and all: re-read, the output costs what was reported
    again = cli("--history", out, "--contract", "c.limn", "--json", "--now", "2026-05-17T03:01:00Z")
    summary = json.loads(result.out.splitlines()[-1])
    assert json.loads(again.out.splitlines()[-1])["estimated_context_tokens"] == summary["tokens_after"] <= budget


# --- giants: a paged block far over its share of the budget keeps its head and tail ---

def _giant_chat():
    log = "".join(f"2026-01-01 12:00:{k % 60:02d} worker[{k}] processed batch {k} of 3000 ok\n" for k in range(3000))
    return [{"role": "user", "content": "why does the nightly job fail?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash",
                                                              "arguments": '{"command": "cat nightly.log"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": log + "FATAL: disk quota exceeded on /var/spool\n"},
            {"role": "user", "content": "go on"}]


@pytest.mark.parametrize("masked", [False, True], ids=["paged-unit", "mask-results"])
def test_a_giant_keeps_its_head_and_tail_and_round_trips(pager, cli, tmp_path, masked):
    import api_rules
    messages = _giant_chat()
    history, out, contract = tmp_path / "chat.json", tmp_path / "out.json", tmp_path / "c.limn"
    history.write_text(json.dumps(messages))
    flags = ["--budget", "8000", "--json"] + (["--mask-results"] if masked else [])
    first = cli("--history", history, "--contract", contract, "--emit", out, "--now", "2026-05-17T03:00:00Z", *flags)
    assert first.code == 0, first.err
    records = {r["block"]: r for r in first.records}
    assert records["c1:result"]["action"] == "page" and records["c1:result"]["tokens"] > 0.25 * 8000
    emitted = json.loads(out.read_text())
    assert api_rules.problems_chat(emitted) == []
    text = json.dumps(emitted)
    # the head and the tail verbatim, the middle paged, between a header and an end line
    assert "[paged c1:result | turn 1 | tool | " in text and "tokens | head and tail]" in text
    assert "worker[0] processed batch 0 of 3000 ok\\n" in text and "FATAL: disk quota exceeded on /var/spool" in text
    assert "worker[1500] processed" not in text and "[end of paged c1:result]" in text
    if masked:  # the result keeps its call id and holds the giant's stub; the call stays
        assert records["c1"]["action"] == "retain"
        [answer] = [m for m in emitted if m.get("tool_call_id") == "c1"]
        assert answer["content"].startswith("[paged c1:result | turn 1 | tool |")
    # the budget priced the stub as written; read back, nothing is new or moved and c1:result is still paged
    again = cli("--history", out, "--contract", contract, "--json", "--now", "2026-05-17T03:01:00Z",
                "--budget", "8000", *(["--mask-results"] if masked else []))
    assert again.code == 0, again.err
    summary, reread = json.loads(first.out.splitlines()[-1]), json.loads(again.out.splitlines()[-1])
    assert reread["estimated_context_tokens"] == summary["tokens_after"] <= 8000
    assert (reread["new"], reread["moved"]) == (0, 0)
    assert {r["block"]: r["action"] for r in again.records}["c1:result"] == "page"
    assert cli("recall", "--contract", contract, "c1:result").out == messages[2]["content"]


def test_without_a_budget_no_block_is_a_giant(pager):
    page = pager.StoredPage("b", 1, "tool", None, 50_000, (), "", "", "summary", "x\n" * 100_000)
    assert "\n" not in pager.make_stub(page, "hint")
    assert pager._giant_edge(50_000, None) == 0 and pager._giant_edge(1_000, 8000) == 0
    assert pager._giant_edge(2_001, 8000) == 800
    assert pager._giant_edge(10_000, 1000) == 0  # a small budget: a one-line stub says more than 25-token edges


# --- rare names the recent work shares; blocks that hold no rare name ---

def _unit(uid, call, result):
    return [{"id": uid, "turn": 1, "role": "assistant", "unit": f"tool:{uid}", "text": call},
            {"id": f"{uid}:result", "turn": 1, "role": "tool", "unit": f"tool:{uid}", "text": result}]


def _rare_session(filler=12):
    """A coding session of one turn: an old read that alone names parse_invoice_total, an old read of
    another file, status checks whose every word many blocks share, then a test of parse_invoice_total."""
    blocks = [{"id": "ask", "turn": 1, "role": "user", "text": "Make the test suite pass"}]
    blocks += _unit("old", 'Read({"file_path": "src/invoices/reader.py"})',
                    "def parse_invoice_total(lines):\n    return sum(line.amount for line in lines)\n" * 6)
    blocks += _unit("other", 'Read({"file_path": "src/shipping/labels.py"})',
                    "def render_shipping_label(parcel):\n    return parcel.address.upper()\n" * 6)
    for k in range(filler):
        blocks += _unit(f"f{k}", 'Bash({"command": "git status"})',
                        "On branch main\nnothing to commit, working tree clean")
    blocks += _unit("now", 'Bash({"command": "pytest -k parse_invoice_total"})',
                    "FAILED tests/test_reader.py::test_parse_invoice_total - AssertionError")
    return {"blocks": blocks}


def test_under_a_budget_an_old_block_sharing_a_rare_name_with_the_recent_work_scores_at_least_a_half(pager):
    params = pager.Params(budget=300, keep_recent=0)
    by_id = {d.block: d for d in pager.plan_pass(_rare_session(), params).decisions}
    # "parse_invoice_total" is held by two blocks of 31: the old read and the test run that names it
    assert by_id["old:result"].own >= 1 - pager.RARE_SHARE
    assert by_id["other:result"].own < 0.1 and by_id["f0:result"].own < 0.1
    # without the work in the intent ("Make the test suite pass" alone) nothing lifts the old read
    alone_params = pager.Params(budget=300, keep_recent=0, work_steps=0)
    alone = {d.block: d for d in pager.plan_pass(_rare_session(), alone_params).decisions}
    assert alone["old:result"].own < 0.1


def test_without_a_budget_rare_names_change_nothing(pager):
    # there the cuts decide: the floor would lift the recent work's neighbourhood over the retain cut
    plan = pager.plan_pass(_rare_session(), pager.Params(keep_recent=0))
    plain = {d.block: (d.own, d.action) for d in plan.decisions}
    assert plain["old:result"][0] < 0.5
    assert plain["old:result"][1] != "retain"


def test_under_a_budget_the_block_the_recent_work_names_is_kept_and_common_blocks_go_first(pager):
    # one turn: nothing is protected for being recent (--keep-recent 0), as for a transcript; 300
    # tokens for the blocks, and the line of the range page that holds what does not fit
    budget = 300 + pager._Scorer([], pager.Params(budget=1000))._least_range_line()
    plan = pager.plan_pass(_rare_session(), pager.Params(budget=budget, keep_recent=0))
    kept = {d.block for d in plan.decisions if d.action == "retain"}
    assert {"old", "old:result", "now", "now:result"} <= kept
    # the other read holds names no other block holds; the status checks hold none: under the
    # budget they compete at COMMON_WORTH of their value per token and go before it
    assert {"other", "other:result"} <= kept
    assert not any(block.startswith("f") for block in kept)
    assert plan.tokens_after <= budget
    # with the intent from the human alone, the cheap status checks win over both reads
    alone = pager.plan_pass(_rare_session(), pager.Params(budget=budget, keep_recent=0, work_steps=0))
    kept_alone = {d.block for d in alone.decisions if d.action == "retain"}
    assert not {"old:result", "other:result"} & kept_alone
    assert sum(block.startswith("f") for block in kept_alone) >= 12


def test_in_a_short_history_no_name_is_rare(pager):
    blocks = _rare_session(filler=0)["blocks"][:7]  # 7 blocks: fewer than RARE_PER_BLOCKS
    blocks.append({"id": "again", "turn": 1, "role": "assistant", "unit": "tool:again",
                   "text": 'Bash({"command": "pytest -k parse_invoice_total"})'})
    plan = pager.plan_pass({"blocks": blocks}, pager.Params(budget=300, keep_recent=0))
    by_id = {d.block: d for d in plan.decisions}
    assert by_id["old:result"].own < 1 - pager.RARE_SHARE


def test_the_library_cache_scores_rare_names_as_a_fresh_pass_does(pager):
    session = _rare_session()
    fresh = pager.plan_pass(session, pager.Params(budget=300, keep_recent=0, target=None))
    agent = pager.Pager(300, work_steps=3, keep_recent=0, target=None)
    first = agent.compact(session)
    again = agent.compact(session)  # every block from the cache
    for result in (first, again):
        assert [(d.block, d.action, round(d.own, 6)) for d in result.report.decisions] == \
            [(d.block, d.action, round(d.own, 6)) for d in fresh.decisions]
