"""Gemini CLI, GitHub Copilot CLI and OpenCode sessions: read, paired, written back valid, stable.

Each format has a fixture written from the agent's documented session layout
(tests/fixtures/transcripts/make_fixtures.py); each behaviour is checked on it, and the pass is
checked on the real sessions of ../shared/data/transcripts-new when that folder is present
(skipped otherwise: the project does not ship transcripts).  The emitted requests are judged by
tests/api_rules.py, written from each API's documentation and independent of the engine.
"""

import json

import pytest

import api_rules
from conftest import ROOT
from test_real_transcripts import LATER, NOW, round_trip, run  # one pass, and a pass over what it emitted

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
NEW = ROOT.parent / "shared" / "data" / "transcripts-new"
REAL = sorted(p for p in NEW.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl")) if NEW.is_dir() else []
# fixture -> (the format it is read as, the format written back)
CASES = {"gemini_cli_session.json": ("gemini-cli", "gemini"), "gemini_cli_session.jsonl": ("gemini-cli", "gemini"),
         "copilot_cli_events.jsonl": ("copilot-cli", "openai"), "copilot_cli_legacy.json": ("copilot-cli", "openai"),
         "opencode_export.json": ("opencode", "openai")}
CHECKS = {"gemini": api_rules.problems_gemini, "openai": api_rules.problems_chat}
ASK = "The invoice totals are off by a cent in test_rounding. Find out why and fix it."
needs_real = pytest.mark.skipif(not REAL, reason=f"{NEW} not found (the project does not ship transcripts)")


def read(pager, name):
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return pager.load(text, pager.detect_format(text))


@pytest.mark.parametrize("name", CASES)
def test_each_session_file_is_detected_as_its_format(pager, name):
    text = (FIXTURES / name).read_text(encoding="utf-8")
    assert pager.detect_format(text) == CASES[name][0]
    assert read(pager, name).emit_format == CASES[name][1]


def test_gemini_cli_jsonl_reads_as_its_resume_does(pager):
    """The last copy of a message stands in the place of its first, $rewindTo drops the messages
    from the one it names, $set records are metadata: the JSONL file reads as the one-object file."""
    whole, lines = read(pager, "gemini_cli_session.json"), read(pager, "gemini_cli_session.jsonl")
    assert [(b["id"], b["text"]) for b in lines.blocks] == [(b["id"], b["text"]) for b in whole.blocks]
    assert lines.other_lines["earlier copy of a message"] == 2 and lines.other_lines["$rewindTo record"] == 1
    assert not any("credti" in b["text"] for b in lines.blocks)  # the rewound message is gone
    assert whole.other_lines["info message"] == 1 and whole.other_lines["user message not resumed"] == 1
    assert whole.other_lines["thought summary"] == 1  # a thought summary is never sent back


@pytest.mark.parametrize("name, pairs", [
    ("gemini_cli_session.json", ["read_file-1", "run_shell_command-2", "replace-3"]),
    ("copilot_cli_events.jsonl", ["call_view_1", "call_bash_2", "call_view_3"]),
    ("copilot_cli_legacy.json", ["toolu_read_1", "toolu_bash_2"]),
    ("opencode_export.json", ["call_read_1", "call_bash_2", "call_read_1~2", "call_bash_3"]),
])
def test_each_call_pairs_with_its_result(pager, name, pairs):
    conv = read(pager, name)
    units = {}
    for block in conv.blocks:
        if block["unit"]:
            units.setdefault(block["unit"], []).append((block["id"], block["role"]))
    assert units == {f"tool:{cid}": [(cid, "assistant"), (f"{cid}:result", "tool")] for cid in pairs}


def test_copilot_results_follow_their_request_and_an_unanswered_last_call_is_dropped(pager):
    conv = read(pager, "copilot_cli_events.jsonl")
    ids = [b["id"] for b in conv.blocks]
    assert ids.index("call_bash_2:result") < ids.index("call_view_3")  # results before the next request
    assert "call_bash_4" not in ids and any("call_bash_4" in r for r in conv.repairs)
    assert "hook.start" in conv.other_lines and "permission.requested" in conv.other_lines
    assert conv.other_lines["sub-agent event"] == 1 and not any("sub-agent" in b["text"] for b in conv.blocks)


def test_copilot_legacy_parallel_calls_are_one_assistant_message(pager):
    conv = read(pager, "copilot_cli_legacy.json")
    assert conv.repairs == []  # the second call's message joined the first: both answered
    out = pager.emit(conv, {})
    calls = [m for m in out if m.get("tool_calls")]
    assert len(calls) == 1 and [c["id"] for c in calls[0]["tool_calls"]] == ["toolu_read_1", "toolu_bash_2"]
    assert calls[0]["content"] == "Reading the module and running the tests."


def test_opencode_reads_what_opencode_sends(pager):
    conv = read(pager, "opencode_export.json")
    text = {b["id"]: b["text"] for b in conv.blocks}
    assert text["call_read_1:result"] == "[Old tool result content cleared]"  # pruned by OpenCode
    assert text["call_read_1~2:result"] == "File not found: /work/invoice/rounding.py"  # its error, as sent
    assert text["call_bash_3:result"] == "[Tool execution was interrupted]"  # aborted while running
    assert not any("shown to the user only" in t for t in text.values())  # an ignored part is not sent
    assert conv.other_lines["failed assistant message"] == 1 and conv.other_lines["reasoning part"] == 1
    out = pager.emit(conv, {})
    assert sum(1 for m in out if m["role"] == "assistant") == 4  # one assistant message per step


@pytest.mark.parametrize("name, humans, harness", [
    ("gemini_cli_session.json", [ASK, "Also keep the two-decimal rounding for negative credit notes."],
     ["Please continue."]),
    ("copilot_cli_events.jsonl", [ASK, "Commit it on a branch."],
     ["<current_datetime>", "\n\n<system_reminder>", "<system_reminder>", "<current_datetime>"]),
    ("copilot_cli_legacy.json", [ASK], ["\n\n<current_datetime>"]),
    ("opencode_export.json", [ASK, "Run the tests again."], ["Called the Read tool"]),
])
def test_human_requests_are_told_from_the_harness_text(cli, pager, tmp_path, name, humans, harness):
    conv = read(pager, name)
    assert [r["text"] for r in pager.human_requests(conv)] == humans
    marked = [b["text"] for b in conv.blocks if b["kind"] == "harness"]
    assert len(marked) == len(harness) and all(t.startswith(h) for t, h in zip(marked, harness))
    # The written-back request has no marks left: the contract carries them, so a round trip
    # reads the same human requests and the same harness texts.
    contract, emitted = tmp_path / "c.limn", tmp_path / "out.json"
    run(cli, FIXTURES / name, contract, NOW, "--emit", emitted)
    _, summary = run(cli, emitted, contract, LATER)
    assert summary["intent_source"].startswith("last human message")
    state = pager.read_contract_state(contract.read_text(encoding="utf-8"))
    again = pager._open_history(str(emitted), "auto", CASES[name][0], state.harness).conversation
    assert [r["text"] for r in pager.human_requests(again)] == humans
    kept = [b for b in again.blocks if b["text"] in marked and not b["stub"]]  # the pass may evict some
    assert all(b["kind"] == "harness" for b in kept) and {b["text"] for b in again.blocks if b["kind"] == "harness"} \
        <= set(marked)


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("budget", [None, 400, 150])
def test_pass_is_valid_budgeted_stable_and_recall_exact(cli, pager, tmp_path, name, budget):
    flags = ["--budget", str(budget)] if budget else []
    first, s1, _, s2, emitted, _ = round_trip(cli, tmp_path, FIXTURES / name, flags)
    fmt, written = CASES[name]
    assert s1["format"] == fmt and s2["format"] == written
    assert CHECKS[written](emitted) == [] and pager.validate(written, emitted) == []
    assert (s2["new"], s2["moved"]) == (0, 0)
    if budget:
        assert s1["tokens_after"] <= budget and s2["estimated_context_tokens"] <= budget
    conv = read(pager, name)
    texts = {b["id"]: b["text"] for b in conv.blocks}
    for record in first.records:
        if record["action"] == "page" and record["kind"] != "range":  # a range's recall: tests/test_ranges.py
            result = cli("recall", record["block"], "--contract", tmp_path / "c.limn", "--json")
            assert result.code == 0 and json.loads(result.out)["recalled"][0]["text"] == texts[record["block"]]


def test_gemini_request_keeps_its_parts_and_pairs_ids(pager):
    conv = read(pager, "gemini_cli_session.json")
    body = pager.emit(conv, {})
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user", "model", "user", "model"]
    calls = [p["functionCall"] for p in body["contents"][1]["parts"] if "functionCall" in p]
    answers = [p["functionResponse"] for p in body["contents"][2]["parts"]]
    assert [(c["id"], c["name"]) for c in calls] == [(a["id"], a["name"]) for a in answers]
    recorded = json.loads((FIXTURES / "gemini_cli_session.json").read_text(encoding="utf-8"))["messages"][2]
    assert answers[0] == dict(recorded["toolCalls"][0]["result"][0]["functionResponse"])  # as the CLI recorded it
    # the last result and the user's next words share one user turn (the API reads them as one)
    assert [list(p) for p in body["contents"][4]["parts"]] == [["functionResponse"], ["text"], ["text"]]
    assert [p.get("text") for p in body["contents"][4]["parts"][1:]] == [
        "Please continue.", "Also keep the two-decimal rounding for negative credit notes."]


def test_a_paged_call_leaves_no_half_pair_in_the_gemini_request(pager):
    conv = read(pager, "gemini_cli_session.json")
    body = pager.emit(conv, {"read_file-1": ("page", "[paged read_file-1 | turn 1 | assistant] totals.py"),
                             "read_file-1:result": ("page", "")})
    assert api_rules.problems_gemini(body) == [] and pager.validate("gemini", body) == []
    names = [p.get("functionCall", p.get("functionResponse", {})).get("id") for c in body["contents"] for p in c["parts"]]
    assert "read_file-1" not in names and "run_shell_command-2" in names
    assert any("[paged read_file-1" in p.get("text", "") for c in body["contents"] for p in c["parts"])


def test_a_gemini_body_without_call_ids_gets_ids_it_keeps(pager):
    body = {"systemInstruction": {"parts": [{"text": "You fix invoices."}]}, "contents": [
        {"role": "user", "parts": [{"text": ASK}]},
        {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"path": "totals.py"}},
                                     "thoughtSignature": "c2lnbmF0dXJl"}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"content": "x = 1"}}}]},
        {"role": "model", "parts": [{"text": "It is one line."}]}]}
    text = json.dumps(body)
    assert pager.detect_format(text) == "gemini"
    conv = pager.load(text, "gemini")
    out = pager.emit(conv, {})
    call, answer = out["contents"][1]["parts"][0], out["contents"][2]["parts"][0]
    assert call["thoughtSignature"] == "c2lnbmF0dXJl" and call["functionCall"]["id"] == answer["functionResponse"]["id"]
    assert answer["functionResponse"]["response"] == {"content": "x = 1"}  # an untouched result goes back as it came
    assert out["systemInstruction"] == body["systemInstruction"] and api_rules.problems_gemini(out) == []
    again = pager.load(json.dumps(out), "gemini")
    assert [b["id"] for b in again.blocks] == [b["id"] for b in conv.blocks]


@pytest.mark.parametrize("body, problem", [
    ({"contents": []}, "empty"),
    ({"contents": [{"role": "user", "parts": []}]}, "parts"),
    ({"contents": [{"role": "user", "parts": [{"text": ""}]}]}, "empty text"),
    ({"contents": [{"role": "assistant", "parts": [{"text": "hi"}]}]}, "role"),
    ({"contents": [{"role": "user", "parts": [{"text": "a"}]},
                   {"role": "model", "parts": [{"functionCall": {"id": "1", "name": "f", "args": {}}}]},
                   {"role": "user", "parts": [{"text": "never answered"}]}]}, "function"),
    ({"contents": [{"role": "user", "parts": [{"text": "a"}]},
                   {"role": "model", "parts": [{"functionCall": {"id": "1", "name": "f", "args": {}}}]},
                   {"role": "user", "parts": [{"functionResponse": {"id": "2", "name": "f", "response": {}}}]}]}, "answer"),
    ({"contents": [{"role": "user", "parts": [{"functionResponse": {"id": "1", "name": "f", "response": {}}}]}]},
     "function"),
])
def test_the_gemini_rules_refuse_what_the_api_refuses(pager, body, problem):
    ours, theirs = pager.validate("gemini", body), api_rules.problems_gemini(body)
    assert ours and theirs, (ours, theirs)
    assert any(problem in p for p in ours + theirs)


def test_an_open_call_may_end_the_gemini_request(pager):
    body = {"contents": [{"role": "user", "parts": [{"text": "a"}]},
                         {"role": "model", "parts": [{"functionCall": {"id": "1", "name": "f", "args": {}}}]}]}
    assert pager.validate("gemini", body) == [] and api_rules.problems_gemini(body) == []


@needs_real
@pytest.mark.parametrize("path", REAL, ids=[str(p.relative_to(NEW)) if REAL else "" for p in REAL])
def test_real_sessions_pass_valid_budgeted_stable_and_recall_exact(cli, pager, tmp_path, path):
    first, s1, _, s2, emitted, _ = round_trip(cli, tmp_path, path, ["--budget", "8000"])
    written = {"gemini-cli": "gemini", "copilot-cli": "openai", "opencode": "openai"}[s1["format"]]
    assert CHECKS[written](emitted) == [] and s2["format"] == written and (s2["new"], s2["moved"]) == (0, 0)
    assert s1["tokens_after"] <= 8000 and s2["estimated_context_tokens"] <= 8000
    text = path.read_text(encoding="utf-8")
    conv = pager.load(text, s1["format"])
    assert pager.human_requests(conv) and s1["intent_source"].startswith("last human message")
    texts = {b["id"]: b["text"] for b in conv.blocks}
    paged = [r["block"] for r in first.records if r["action"] == "page" and r["kind"] != "range"]
    for block in dict.fromkeys(paged[:2] + paged[-2:]):
        result = cli("recall", block, "--contract", tmp_path / "c.limn", "--json")
        assert result.code == 0 and json.loads(result.out)["recalled"][0]["text"] == texts[block]


def test_a_gemini_cli_checkpoint_replaces_every_message(pager):
    """A ``$set`` holding ``messages`` is a checkpoint: the messages before it are replaced."""
    header = {"sessionId": "s1", "projectHash": "p1", "startTime": "t0", "lastUpdated": "t0", "kind": "main"}
    old = {"id": "u1", "timestamp": "t1", "type": "user", "content": [{"text": "An old request, compressed away."}]}
    new = {"id": "u2", "timestamp": "t2", "type": "user", "content": [{"text": "Fix the rounding in totals.py."}]}
    text = "\n".join(json.dumps(x) for x in (header, old, {"$set": {"messages": [new]}}))
    conv = pager.load(text, pager.detect_format(text))
    assert conv.fmt == "gemini-cli" and [b["text"] for b in conv.blocks] == ["Fix the rounding in totals.py."]


@pytest.mark.parametrize("lines, expected", [
    ([{"sessionId": "s1", "projectHash": "p1", "startTime": "t0", "lastUpdated": "t0"}],
     "gemini-cli chat file has no user or gemini message the CLI would resume: nothing to page"),
    ([{"type": "hook.start", "data": {}, "id": "e1", "timestamp": "t0", "parentId": None}],
     "copilot-cli session has no user, assistant or tool message: nothing to page"),
])
def test_a_session_with_nothing_to_page_is_one_error_line(cli, tmp_path, lines, expected):
    history = tmp_path / "session.jsonl"
    history.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    result = cli("--history", history, "--contract", tmp_path / "c.limn", "--now", NOW)
    assert result.code == 2 and result.err.strip() == f"pager: error: {history}: {expected}"
    assert not (tmp_path / "c.limn").exists()


def test_the_library_compacts_a_gemini_body_in_its_own_shape(pager):
    body = pager.emit(read(pager, "gemini_cli_session.json"), {})
    out, report = pager.compact(body, budget=150)
    assert set(out) == {"contents"} and api_rules.problems_gemini(out) == [] and report.format == "gemini"
    assert report.tokens_after <= 150


def _copilot_legacy(**changes):
    value = json.loads((FIXTURES / "copilot_cli_legacy.json").read_text(encoding="utf-8"))
    value.update(changes)
    return json.dumps(value)


def _gemini_jsonl_with(record):
    return (FIXTURES / "gemini_cli_session.jsonl").read_text(encoding="utf-8") + json.dumps(record) + "\n"


def _copilot_events_with_requests(requests):
    lines = (FIXTURES / "copilot_cli_events.jsonl").read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        event = json.loads(line)
        if event.get("type") == "assistant.message":
            event["data"]["toolRequests"] = requests
        out.append(json.dumps(event))
    return "\n".join(out) + "\n"


def _gemini_with_tool_calls(calls):
    value = json.loads((FIXTURES / "gemini_cli_session.json").read_text(encoding="utf-8"))
    for msg in value["messages"]:
        if msg.get("type") == "gemini":
            msg["toolCalls"] = calls
    return json.dumps(value)


MALFORMED = {  # a field of the wrong type that a reader once met with a TypeError (found by tests/test_fuzz.py)
    "gemini-cli messages a number": ("gemini-cli", json.dumps({"sessionId": "s", "messages": 5}),
                                     "pager: error: h.json: gemini-cli chat file: messages must be an array (got number)"),
    "gemini-cli toolCalls true": ("gemini-cli", _gemini_with_tool_calls(True), None),
    "gemini-cli $rewindTo an object": ("gemini-cli", _gemini_jsonl_with({"$rewindTo": {"id": "x"}}), None),
    "copilot-cli toolRequests a number": ("copilot-cli", _copilot_events_with_requests(1.5), None),
    "copilot-cli legacy timeline a number": ("copilot-cli", _copilot_legacy(timeline=5), None),
    "copilot-cli legacy tool_calls a number": ("copilot-cli", _copilot_legacy(chatMessages=[
        {"role": "user", "content": "Fix the rounding."},
        {"role": "assistant", "content": "Reading.", "tool_calls": []},
        {"role": "assistant", "content": None, "tool_calls": 7}]),
        "pager: error: h.json: messages[2].tool_calls must be an array"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_field_is_refused_in_one_line_or_passed_over(cli, tmp_path, monkeypatch, name):
    """Exit 2 with one line naming the field, or (a field the reader passes over, as it does others) a pass."""
    fmt, text, refusal = MALFORMED[name]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h.json").write_text(text, encoding="utf-8")
    result = cli("--history", "h.json", "--contract", "c.limn", "--format", fmt, "--now", NOW)
    if refusal is not None:
        assert (result.code, result.err) == (2, refusal + "\n")
        assert not (tmp_path / "c.limn").exists()
    else:
        assert result.code == 0, result.err
        assert (tmp_path / "c.limn").exists()
