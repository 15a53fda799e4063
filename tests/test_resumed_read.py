"""A running Pager finishes only the messages new since its last call (issue 28, item 2: _FinishMemo).

The oracle: grown one message at a time, every request of a format ``compact`` takes (the fixtures,
the development requests, the Gemini and Chat bodies the session formats are written back as, the
library benchmark's conversations) is read by one Pager, and each read must equal reading that
list whole with a fresh one: the blocks, the repairs, the unknown parts, and the request written
back under three sets of directives.
"""

import copy
import json
import os
import random

import pytest

import pager as engine
from conftest import ROOT, load_script

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
DEV = ROOT.parent / "shared" / "data" / "transcripts-dev"
LIST_KEYS = {"openai": "messages", "anthropic": "messages", "responses": "input", "gemini": "contents"}
SESSIONS = {"gemini_cli_session.json": "gemini-cli", "copilot_cli_events.jsonl": "copilot-cli",
            "opencode_export.json": "opencode"}  # read, then written back as an API body (gemini, openai)


def _benchmark_lists():
    module = load_script("benchmark-library")
    return {"conversation": module.make_conversation(120), "coding list": module.make_coding_list(120)}


def _requests():
    """Return (name, format, value) for every request of a format compact takes."""
    found = []
    paths = sorted(FIXTURES.glob("*.json")) + (sorted(DEV.glob("*/*.json")) if DEV.is_dir() else [])
    for path in paths:
        value = json.loads(path.read_text(encoding="utf-8"))
        fmt = engine._detect_value(value)
        if fmt in LIST_KEYS:
            found.append((path.name, fmt, value))
    for name, fmt in SESSIONS.items():
        body = engine.emit(engine.load((FIXTURES / name).read_text(encoding="utf-8"), fmt), {})
        found.append((f"{name} written back", engine._detect_value(body), body))
    for name, messages in _benchmark_lists().items():
        found.append((name, "openai", messages))
    return found


REQUESTS = _requests()


def _grown(value, key, count):
    """Return ``value`` with its first ``count`` messages (a copy: the caller's list is not shared)."""
    if isinstance(value, list):
        return copy.deepcopy(value[:count])
    return copy.deepcopy({**value, key: value[key][:count]})


def _assert_same_read(resumed, whole, where):
    assert resumed.blocks == whole.blocks, where
    assert resumed.repairs == whole.repairs, where
    assert resumed.unknown_parts == whole.unknown_parts, where
    assert (resumed.definitions_tokens, resumed.archived) == (whole.definitions_tokens, whole.archived), where
    ids = [b["id"] for b in whole.blocks]
    for decisions in ({}, {i: "page" for i in ids[::3]}, {i: ("page", f"[paged {i}]") for i in ids[1::2]}):
        assert engine.emit(resumed, decisions) == engine.emit(whole, decisions), (where, decisions)


def _resumed(before, after):
    """Return True if ``after`` was read on from ``before``: its first messages are the same objects."""
    return bool(before is not None and before._msgs and after._msgs and after._msgs[0] is before._msgs[0])


def test_the_requests_cover_every_format_compact_reads_as_messages():
    assert {fmt for _, fmt, _ in REQUESTS} == set(LIST_KEYS)


@pytest.mark.parametrize("name, fmt, value", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_a_list_read_on_message_by_message_equals_reading_it_whole(name, fmt, value):
    key = LIST_KEYS[fmt]
    agent = engine.Pager(None)
    for count in range(1, len(value if isinstance(value, list) else value[key]) + 1):
        conv = agent._conversation(fmt, _grown(value, key, count), False)
        _assert_same_read(conv, engine._read_value(fmt, _grown(value, key, count)), f"{name}: {count} messages")


def _loop_points(fmt, value, key):
    """Return the lengths at which an agent loop calls compact: where the list read whole leaves no
    call open (a call's results are in) and nothing repaired."""
    total = len(value if isinstance(value, list) else value[key])
    points = []
    for count in range(1, total + 1):
        whole = engine._read_value(fmt, _grown(value, key, count), memo=engine._FinishMemo())
        if whole._memo is not None and whole._memo.clean:
            points.append(count)
    return points


def test_an_agent_loop_reads_on_at_every_call_in_every_format():
    """Called where an agent loop calls compact, a Pager reads on at every call after its first whose
    new messages are well formed, in every format; and each read equals reading the list whole."""
    resumed = dict.fromkeys(LIST_KEYS, 0)
    for name, fmt, value in REQUESTS:
        key = LIST_KEYS[fmt]
        agent, before = engine.Pager(None), None
        for count in _loop_points(fmt, value, key):
            conv = agent._conversation(fmt, _grown(value, key, count), False)
            _assert_same_read(conv, engine._read_value(fmt, _grown(value, key, count)), f"{name}: {count} messages")
            if name in ("conversation", "coding list") and before is not None:
                assert _resumed(before, conv), (name, count)
            resumed[fmt] += _resumed(before, conv)
            before = conv
    assert all(resumed.values()), resumed


def test_a_read_on_builds_the_blocks_of_the_new_messages_alone(monkeypatch):
    messages = _benchmark_lists()["coding list"]
    agent = engine.Pager(None)
    agent._conversation("openai", messages, False)
    built = []
    real = engine._part_block
    monkeypatch.setattr(engine, "_part_block", lambda msg, part, *rest: built.append(part) or real(msg, part, *rest))
    grown = messages + [{"role": "user", "content": "Now run the tests for the rounding fix."}]
    conv = agent._conversation("openai", grown, False)
    assert [p.text for p in built] == ["Now run the tests for the rounding fix."]
    assert conv.blocks[-1]["text"] == "Now run the tests for the rounding fix." and len(conv.blocks) == len(grown)


def test_new_words_of_the_assistant_move_its_conclusion_off_the_block_before():
    messages = [{"role": "user", "content": "Why is the invoice total off by a cent?"},
                {"role": "assistant", "content": "Each line is rounded before the sum."}]
    agent = engine.Pager(None)
    first = agent._conversation("openai", messages, False)
    assert first.blocks[-1]["kind"] == "conclusion"
    grown = messages + [{"role": "assistant", "content": "Rounding the sum once fixes it."}]
    conv = agent._conversation("openai", grown, False)
    assert _resumed(first, conv)
    assert [b["kind"] for b in conv.blocks] == ["task", None, "conclusion"]
    _assert_same_read(conv, engine._read_value("openai", copy.deepcopy(grown)), "conclusion moved")


def _responses_repeating_a_call_id():
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Read the totals."}]},
            {"type": "function_call", "call_id": "fc_1", "name": "read_file", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "fc_1", "output": "def total(x): ..."}]


@pytest.mark.parametrize("fmt, start, more", [
    # a call id the earlier messages hold: reading the whole list drops it as a repeat
    ("responses", _responses_repeating_a_call_id(),
     [{"type": "function_call", "call_id": "fc_1", "name": "read_file", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "fc_1", "output": "again"}]),
    # a stub line the pager wrote: its id is reserved over the whole list
    ("openai", [{"role": "user", "content": "Fix the rounding."}],
     [{"role": "user", "content": "[paged m-0123456789ab | turn 1 | tool | 40 tokens] totals.py"}]),
    # a tool result with no call: a repair of the new messages
    ("openai", [{"role": "user", "content": "Fix the rounding."}],
     [{"role": "tool", "tool_call_id": "call_9", "content": "orphan"}]),
], ids=["repeated call id", "stub line", "repair"])
def test_what_only_the_whole_list_settles_is_read_whole(fmt, start, more):
    agent = engine.Pager(None)
    first = agent._conversation(fmt, copy.deepcopy(start), False)
    assert first._memo is not None and first._memo.clean
    conv = agent._conversation(fmt, copy.deepcopy(start + more), False)
    assert not _resumed(first, conv)
    _assert_same_read(conv, engine._read_value(fmt, copy.deepcopy(start + more)), fmt)


@pytest.mark.parametrize("fmt, messages", [
    ("anthropic", {"messages": [{"role": "user", "content": "Fix the rounding."},
                                {"role": "assistant", "content": [
                                    {"type": "thinking", "thinking": "Per line?", "signature": "c2ln"},
                                    {"type": "text", "text": "Looking."}]}]}),
    ("responses", [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it."}]},
                   {"type": "reasoning", "id": "rs_1", "summary": []},
                   {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "On it."}]}]),
    ("openai", [{"role": "user", "content": "Fix the rounding."},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}]),
], ids=["anthropic turn goes on", "responses turn goes on", "open call"])
def test_a_read_that_new_messages_could_join_is_not_read_on(fmt, messages):
    agent = engine.Pager(None)
    first = agent._conversation(fmt, messages, False)
    assert first._memo is not None and not first._memo.clean


@pytest.mark.parametrize("fmt, start, more", [
    ("anthropic", {"messages": [{"role": "user", "content": "Fix the rounding."},
                                {"role": "assistant", "content": [
                                    {"type": "thinking", "thinking": "Per line?", "signature": "c2ln"},
                                    {"type": "text", "text": "Looking."}]}]},
     [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def total(x): ..."}]}]),
    ("responses", [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it."}]},
                   {"type": "reasoning", "id": "rs_1", "summary": []},
                   {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "On it."}]}],
     [{"type": "function_call", "call_id": "fc_1", "name": "read_file", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "fc_1", "output": "def total(x): ..."}]),
], ids=["anthropic", "responses"])
def test_a_model_turn_that_goes_on_across_two_calls_reads_as_one_turn(fmt, start, more):
    """The new messages join the last call's model turn (its thinking's or reasoning's unit): read whole."""
    key = LIST_KEYS[fmt]
    grown = ({**start, key: start[key] + more} if isinstance(start, dict) else start + more)
    agent = engine.Pager(None)
    agent._conversation(fmt, copy.deepcopy(start), False)
    conv = agent._conversation(fmt, copy.deepcopy(grown), False)
    whole = engine._read_value(fmt, copy.deepcopy(grown))
    assert len({b["unit"] for b in whole.blocks if b["unit"]}) == 1  # one turn: thinking, text, call and result
    _assert_same_read(conv, whole, fmt)


LIBRARY_FUZZ_CASES = int(os.environ.get("PAGER_FUZZ_CASES", "300")) // 5  # the CLI fuzz's knob, a fifth of it


def test_fuzz_a_running_pager_on_mutated_requests():
    """Requests with one message mutated (test_fuzz's hostile values), each grown over four calls of one
    Pager: every call refuses with a PagerError, or reads what a whole read gives and, with no budget
    (no directive stands from a call to the next), answers as a fresh Pager does."""
    import test_fuzz  # its mutations; imported here, as it imports the engine at load

    rng = random.Random(int(os.environ.get("PAGER_FUZZ_SEED", "11")))
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(LIBRARY_FUZZ_CASES):
        name, fmt, value = rng.choice(REQUESTS)
        key = LIST_KEYS[fmt]
        value = copy.deepcopy(value)
        items = value if isinstance(value, list) else value[key]
        at = rng.randrange(len(items))
        items[at] = test_fuzz._mutate_value(rng, items[at]) if isinstance(items[at], (dict, list)) \
            else test_fuzz._hostile_value(rng)
        budget = rng.choice([None, None, 60, 4000])
        agent = engine.Pager(budget)
        for count in sorted({rng.randrange(1, len(items) + 1) for _ in range(3)} | {len(items)}):
            where = f"{name}, message {at} mutated, {count} messages, budget {budget}"
            try:
                result = agent.compact(_grown(value, key, count), format=fmt)
            except (engine.PagerError, RecursionError):
                outcomes["refused"] += 1
                continue
            outcomes["ok"] += 1
            _assert_same_read(agent._read[3], engine._read_value(fmt, _grown(value, key, count)), where)
            if budget is None:
                fresh = engine.Pager(None).compact(_grown(value, key, count), format=fmt)
                assert result.messages == fresh.messages, where
                assert {**result.report.to_dict(), "cached": 0} == {**fresh.report.to_dict(), "cached": 0}, where
    assert outcomes["ok"] > LIBRARY_FUZZ_CASES and outcomes["refused"], outcomes
