"""The library's Pager keeps the messages it has read: the same messages are not read again, changed ones are."""

import copy

import pytest

import pager as engine
from conftest import load_script


def _openai():
    return [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the invoice rounding in billing/totals.py."},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "billing/totals.py"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "def total(x):\n    return round(x, 2)"},
            {"role": "assistant", "content": "The rounding happens per line; it should happen once."}]


def _anthropic():
    return {"system": "You are a coding agent.", "messages": [
        {"role": "user", "content": "Fix the invoice rounding in billing/totals.py."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading the file."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "billing/totals.py"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "def total(x):\n    return round(x, 2)"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "The rounding happens per line."}]}]}


def _responses():
    return [{"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Fix the invoice rounding in billing/totals.py."}]},
            {"type": "function_call", "call_id": "fc_1", "name": "read_file",
             "arguments": '{"path": "billing/totals.py"}'},
            {"type": "function_call_output", "call_id": "fc_1", "output": "def total(x):\n    return round(x, 2)"},
            {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "The rounding happens per line."}]}]


def _pager():
    return {"blocks": [{"id": "b1", "turn": 1, "role": "user", "text": "Fix the invoice rounding."},
                       {"id": "b2", "turn": 1, "role": "tool", "text": "def total(x):\n    return round(x, 2)"},
                       {"id": "b3", "turn": 1, "role": "assistant", "text": "The rounding happens per line."}]}


def _change_openai(m):
    m[3]["content"] = "def total(x):\n    return x.quantize(CENT)"


def _change_anthropic(m):
    m["messages"][2]["content"][0]["content"] = "def total(x):\n    return x.quantize(CENT)"


def _change_responses(m):
    m[2]["output"] = "def total(x):\n    return x.quantize(CENT)"


def _change_pager(m):
    m["blocks"][1]["text"] = "def total(x):\n    return x.quantize(CENT)"


SHAPES = [("openai", _openai, _change_openai), ("anthropic", _anthropic, _change_anthropic),
          ("responses", _responses, _change_responses), ("pager", _pager, _change_pager)]


@pytest.fixture
def reads(monkeypatch):
    """Count the Pager's reads of a message list (its conversion to blocks)."""
    calls = []
    real = engine._read_value

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "_read_value", counted)
    return calls


def _calls(budget, steps, cache=True):
    """Run ``steps`` (each returns the messages of one call) on one Pager; return every call's output."""
    saved = engine._fingerprint
    if not cache:  # the reference: no fingerprint, so every call reads its messages afresh
        engine._fingerprint = lambda value: None
    try:
        agent = engine.Pager(budget)
        out = []
        for step in steps:
            result = agent.compact(step())
            report = result.report.to_dict()
            report.pop("cached")  # blocks whose scoring features came from the cache: not this cache
            out.append((copy.deepcopy(result.messages), report))
        return out
    finally:
        engine._fingerprint = saved


@pytest.mark.parametrize("fmt, make, change", SHAPES, ids=[s[0] for s in SHAPES])
@pytest.mark.parametrize("budget", [None, 60])
def test_the_same_messages_are_read_once(reads, fmt, make, change, budget):
    messages = make()
    steps = [lambda: messages, lambda: messages, lambda: copy.deepcopy(messages)]  # a copy: equal values
    cached = _calls(budget, steps)
    assert reads == [fmt]
    assert cached == _calls(budget, steps, cache=False)


@pytest.mark.parametrize("fmt, make, change", SHAPES, ids=[s[0] for s in SHAPES])
@pytest.mark.parametrize("budget", [None, 60])
def test_a_message_changed_in_place_is_read_again(reads, fmt, make, change, budget):
    def steps():
        messages = make()

        def edited():
            change(messages)  # the caller edits its own list: the same objects, a new text inside
            return messages
        return [lambda: messages, edited]

    cached = _calls(budget, steps())
    assert reads == [fmt, fmt]
    assert cached == _calls(budget, steps(), cache=False)
    assert "quantize" in repr(cached[1]) and "quantize" not in repr(cached[0])


def test_a_grown_list_is_read_with_its_new_message(reads):
    messages = _openai()
    agent = engine.Pager(None)
    agent.compact(messages)
    messages.append({"role": "user", "content": "Now run the tests."})
    result = agent.compact(messages)
    assert reads == ["openai", "openai"]
    assert result.messages[-1] == {"role": "user", "content": "Now run the tests."}


def test_a_type_that_cannot_be_fingerprinted_is_read_every_call():
    class Text(str):
        """A str of the caller's own type: equal to its text, but no fingerprint holds it."""

    assert engine._fingerprint([{"role": "user", "content": Text("hi")}]) is None
    assert engine._fingerprint([{"role": "user", "content": True}]) != engine._fingerprint(
        [{"role": "user", "content": 1}])


def _coding_list(reads_count):
    """Return a Chat list of one request and ``reads_count`` file reads (call and result), for range pages."""
    msgs = [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the invoice rounding in the billing module."}]
    for k in range(reads_count):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{k}", "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "src/mod{k}.py"}}'}}]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{k}",
                     "content": "\n".join(f"def helper_{k}_{j}(x):\n    return x.field_{k}_{j}" for j in range(12))})
    return msgs


def test_a_range_pages_topics_follow_a_text_edited_in_place(monkeypatch):
    """A text's names (range topics) are remembered keyed by the text itself: an edited one is read anew."""
    def steps():
        messages = _coding_list(30)

        def edited_and_grown():
            call = messages[58]["tool_calls"][0]["function"]  # the newest paged read's call: its path leads the topics
            call["arguments"] = call["arguments"].replace("src/mod28.py", "src/zanzibar28.py")  # in place
            messages.extend(_coding_list(31)[-2:])
            return messages
        return [lambda: messages, edited_and_grown]

    def run():
        agent = engine.Pager(1500)
        return [(copy.deepcopy(r.messages), r.report.counts) for r in (agent.compact(step()) for step in steps())]

    cached = run()
    ranges = [m["content"] for m in cached[1][0] if isinstance(m.get("content"), str) and "| range |" in m["content"]]
    assert any("src/zanzibar28.py" in line for line in ranges)  # the edited text's names, not the old ones
    assert not any("src/mod28.py" in line for line in ranges)
    monkeypatch.setattr(engine, "_fingerprint", lambda value: None)  # the reference: nothing kept between calls
    assert cached == run()


@pytest.mark.parametrize("more", [[], [{"role": "user", "content": "Now run the tests."}]],
                         ids=["the same messages", "one message more"])
def test_a_message_edited_after_the_call_is_never_served_stale(more):
    """A message kept verbatim comes back as the caller's own object; edited in place after the call,
    it is not served for the equal copies of the original the caller sends next (the read is whole)."""
    messages = _openai()
    agent = engine.Pager(None)
    out = agent.compact(messages).messages
    assert out[4] is messages[4]  # the object itself: what the caller may edit
    out[4]["content"] = "EDITED after the call"
    sent = copy.deepcopy(_openai()) + more
    result = agent.compact(sent).messages
    assert "EDITED" not in repr(result)
    assert result == engine.Pager(None).compact(copy.deepcopy(sent)).messages


def _scored(report):
    decisions = report.to_dict()
    decisions.pop("cached")  # blocks whose scoring features came from the cache: the only difference allowed
    return decisions


@pytest.mark.parametrize("size", [120, 200])
def test_a_running_pager_scores_each_call_as_a_fresh_pass_does(size):
    """Blocks scored from the cache note what a fresh pass notes of their texts: a file read again
    pages the earlier read (at R 0, "repeated by"), whichever call first saw it."""
    messages = load_script("benchmark-library").make_coding_list(size)
    agent = engine.Pager(None)
    repeated = 0
    for count in range(10, len(messages) + 1, 7):
        running = _scored(agent.compact(copy.deepcopy(messages[:count])).report)
        assert running == _scored(engine.Pager(None).compact(copy.deepcopy(messages[:count])).report), count
        repeated = max(repeated, sum(d["reason"].startswith("repeated by") or d["R"] == 0 for d in running["decisions"]))
    assert repeated  # the list reads some file again: the rule is exercised


def test_a_system_prompt_sent_again_pages_its_earlier_copy_in_a_running_pager():
    system = {"role": "system", "content": "You are a coding agent. Follow the repository's rules."}
    messages = [system, {"role": "user", "content": "Fix the invoice rounding in billing/totals.py."},
                {"role": "assistant", "content": "Reading billing/totals.py now."}]
    # every call fits afresh (no directive stands from the last), and one intent keeps the cache
    agent = engine.Pager(400, target=None, intent="invoice rounding")
    agent.compact(copy.deepcopy(messages))
    grown = messages + [copy.deepcopy(system), {"role": "user", "content": "Go on with the rounding fix."}]
    running = agent.compact(copy.deepcopy(grown)).report.to_dict()["decisions"]
    fresh = engine.Pager(400, target=None, intent="invoice rounding").compact(
        copy.deepcopy(grown)).report.to_dict()["decisions"]
    assert running[0]["reason"] == fresh[0]["reason"] and running[0]["reason"].startswith("repeated by")
    assert agent.compact(copy.deepcopy(grown)).report.cached  # (the cache was in use)


def test_a_text_no_store_can_hold_is_never_paged_on_a_later_call(tmp_path):
    """A lone surrogate (no UTF-8 store holds it) makes its block unpageable, also when a later call
    scores it from the cache: that call once tried to store it and failed with UnicodeEncodeError."""
    messages = [{"role": "user", "content": "Fix the invoice rounding please."},
                {"role": "assistant", "content": "A lone surrogate \ud800 in a long reply. " + "word " * 300},
                {"role": "user", "content": "Go on with the invoice rounding."}]
    agent = engine.Pager(120, contract=str(tmp_path / "c.limn"), target=None, intent="invoice rounding",
                         now="2026-01-01T00:00:00Z")
    first = agent.compact(copy.deepcopy(messages)).report.to_dict()["decisions"][1]
    grown = messages + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "More invoice rounding."}]
    later = agent.compact(copy.deepcopy(grown)).report
    assert later.cached
    assert (first["action"], first["reason"]) == (later.to_dict()["decisions"][1]["action"],
                                                  later.to_dict()["decisions"][1]["reason"]) == ("evict", "unstorable")
