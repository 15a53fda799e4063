"""Transcript formats: detection, loading, emitting, validation and bad input (pager.py's readers)."""

import copy
import hashlib
import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import api_rules
import pager as adapters
from pager import PagerError, detect_format, emit, load, validate

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
FIXTURES = {
    "pager_history.json": "pager",
    "openai_parallel.json": "openai",
    "openai_repairs.json": "openai",
    "responses_session.json": "responses",
    "anthropic_thinking.json": "anthropic",
    "anthropic_alternation.json": "anthropic",
    "anthropic_orphan.json": "anthropic",
    "claude_code_session.jsonl": "claude-code",
    "codex_rollout.jsonl": "codex",
    "codex_legacy_compacted.jsonl": "codex",
}
# Fixtures that need no repair: retaining everything must give the input back unchanged.
CLEAN_JSON = ["pager_history.json", "openai_parallel.json", "responses_session.json",
              "anthropic_thinking.json", "anthropic_alternation.json"]
PROPERTY = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def read(name):
    with open(os.path.join(HERE, "transcripts", name), encoding="utf-8") as fh:
        return fh.read()


def loaded(name):
    return load(read(name), FIXTURES[name])


def ids(conv):
    return [b["id"] for b in conv.blocks]


def block(conv, bid):
    return next(b for b in conv.blocks if b["id"] == bid)


def assert_text_sized(conv):
    """Assert every block is sized by its text, a tool call or result also by the call id it sends."""
    calls = {b["id"][:-len(":result")] for b in conv.blocks if b["id"].endswith(":result")}
    for b in conv.blocks:
        call_id = b["id"][:-len(":result")] if b["id"].endswith(":result") else b["id"]
        sends_id = call_id in calls
        expected = adapters.estimate_tokens(b["text"]) + adapters.estimate_tokens(call_id) if sends_id else None
        assert b["tokens"] == expected, b["id"]


def cid(role, kind, text, raw=None):
    """The content-derived id rule, written out independently of the module (``raw``: the part's
    JSON, which a picture, a reasoning item or a thinking block whose text says nothing adds)."""
    key = role + "\x00" + kind + "\x00" + text
    if raw is not None:
        key += "\x00" + json.dumps(raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "m-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def text_id(conv, start):
    """Return the id of the one block whose text starts with start."""
    found = [b["id"] for b in conv.blocks if b["text"].startswith(start)]
    assert len(found) == 1, (start, found)
    return found[0]


BLOCK_KEYS = {"id", "turn", "role", "text", "tokens", "pinned", "protected", "unit", "stub", "kind"}
ID_RE = re.compile(r"m-[0-9a-f]{12}(~[0-9]+)?\Z")


def one_line_error(excinfo):
    message = str(excinfo.value)
    assert message and "\n" not in message and "\r" not in message
    return message


# --- detection ---

@pytest.mark.parametrize("name,fmt", sorted(FIXTURES.items()))
def test_detect_fixture_golden(name, fmt):
    assert detect_format(read(name)) == fmt


@pytest.mark.parametrize("value,fmt", [
    ({"blocks": []}, "pager"),
    ({"model": "o4-mini", "input": "hi"}, "responses"),
    ([{"type": "function_call_output", "call_id": "c", "output": "x"}], "responses"),
    ([{"role": "user", "content": "hi"}], "openai"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "openai"),
    ({"system": "s", "messages": [{"role": "user", "content": "hi"}]}, "anthropic"),
    ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                     "content": "x"}]}], "anthropic"),
    ([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], "openai"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
     "openai"),
    # Plain text messages fit both APIs: the body's own keys tell an Anthropic request apart.
    ({"max_tokens": 9, "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"name": "f", "input_schema": {"type": "object"}}]}, "anthropic"),
    ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "code_execution_20250522",
                                                                 "name": "code_execution"}]}, "anthropic"),
    ({"messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": "auto"}}, "anthropic"),
    ({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "auto",
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "openai"),
    ({"messages": [{"role": "user", "content": "hi"}],
      "tool_choice": {"type": "function", "function": {"name": "f"}}}, "openai"),
    # Weaker hints (a parameter only the Messages API has, its thinking setting, a claude-* model)
    # decide plain text; a message's own OpenAI marker outweighs them.
    ({"max_tokens": 9, "model": "claude-sonnet-4-0", "thinking": {"type": "disabled"},
      "messages": [{"role": "user", "content": "hi"}]}, "anthropic"),
    ({"model": "claude-3-opus-20240229", "max_tokens": 30, "messages": [{"role": "user", "content": "hi"}]},
     "anthropic"),
    ({"stop_sequences": ["x"], "messages": [{"role": "user", "content": "hi"}]}, "anthropic"),
    ({"model": "anthropic/claude-3-opus", "messages": [{"role": "user", "content": "hi"}]}, "openai"),
    ({"model": "claude-3-opus", "messages": [{"role": "system", "content": "s"},
                                             {"role": "user", "content": "hi"}]}, "openai"),
    ({"thinking": {"type": "enabled"}, "messages": [{"role": "assistant", "content": "a",
                                                      "tool_calls": []}]}, "openai"),
])
def test_detect_rules(value, fmt):
    assert detect_format(json.dumps(value)) == fmt


def test_detect_single_jsonl_line_is_read_as_jsonl():
    line = {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "S",
            "message": {"role": "user", "content": "hi"}}
    assert detect_format(json.dumps(line)) == "claude-code"


def test_detect_jsonl_majority_wins():
    codex = json.dumps({"timestamp": "t", "type": "response_item",
                        "payload": {"type": "message", "role": "user", "content": "x"}})
    claude = json.dumps({"type": "summary", "summary": "s", "leafUuid": "u"})
    assert detect_format("\n".join([claude, codex, codex])) == "codex"
    assert detect_format("\n".join([claude, claude, codex])) == "claude-code"
    assert detect_format("\n".join([claude, codex])) == "claude-code"  # tie: first line


# --- loading ---

def test_block_shape_and_unique_ids():
    for name in FIXTURES:
        conv = loaded(name)
        assert len(set(ids(conv))) == len(conv.blocks), name
        assert adapters.conversation_blocks(conv) == conv.blocks
        for b in adapters.conversation_blocks(conv):
            assert set(b) == BLOCK_KEYS
            assert isinstance(b["turn"], int) and isinstance(b["text"], str)
            assert b["tokens"] is None or isinstance(b["tokens"], int)
            assert isinstance(b["pinned"], bool) and isinstance(b["stub"], bool)
            assert b["protected"] in (None, "system", "instructions", "task", "human", "summary", "conclusion",
                                      "archived", "compaction")
            assert b["unit"] is None or isinstance(b["unit"], str)
            assert b["id"] and not re.search('["\n\r\u2028\u2029]', b["id"])


def test_conversation_blocks_are_copies():
    conv = loaded("openai_parallel.json")
    handed = adapters.conversation_blocks(conv)
    handed[0]["text"] = "changed"
    assert conv.blocks[0]["text"] != "changed"


def test_content_ids_follow_the_rule():
    # Every block with no native id is m-<12 hex of sha256(role, kind, text)>.
    conv = load(json.dumps([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "look"},
        {"role": "user", "content": "look"}]), "openai")
    look = cid("user", "text", "look")
    image = {"type": "image_url", "image_url": {"url": "u"}}
    label = "[image, 1105 tokens]"  # no data: OpenAI's most for one picture
    media = "m-" + hashlib.sha256(("user\x00media\x00" + label + "\x00" + json.dumps(
        image, sort_keys=True, separators=(",", ":"))).encode()).hexdigest()[:12]
    # A repeated id takes the turn it sits in (turns are the human's requests), not a count.
    assert ids(conv) == [cid("system", "text", "be brief"), look, media, cid("assistant", "text", "ok"),
                         look + "~t2", look + "~t3"]
    assert all(ID_RE.match(i.split("~")[0]) for i in ids(conv))
    assert [b["turn"] for b in conv.blocks] == [0, 1, 1, 1, 2, 3]
    assert block(conv, media)["kind"] == "media" and block(conv, media)["tokens"] == 1105
    # The same text under another role is another block.
    assert cid("assistant", "text", "look") != look


def test_legacy_function_call_and_odd_text_get_content_ids():
    conv = load(json.dumps([
        {"role": "user", "content": "half \ud800 a pair"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "done"}]), "openai")
    call = cid("assistant", "call", "f({})")
    assert ids(conv) == [cid("user", "text", "half \ud800 a pair"), call, call + ":result"]
    assert block(conv, call)["unit"] == "tool:" + call


def test_openai_ids_turns_units_protected():
    conv = loaded("openai_parallel.json")
    raw = json.loads(read("openai_parallel.json"))["messages"]
    system = cid("developer", "text", raw[0]["content"])
    user = cid("user", "text", raw[1]["content"][0]["text"])
    assert ids(conv)[:6] == [system, user, "call_read1", "call_test1", "call_read1:result",
                             "call_test1:result"]
    assert block(conv, system)["protected"] == "system"
    assert block(conv, user)["protected"] == "task"  # the first human request
    # Parallel calls: each call is its own unit with its own result.
    assert block(conv, "call_read1")["unit"] == block(conv, "call_read1:result")["unit"] \
        == "tool:call_read1"
    assert block(conv, "call_test1")["unit"] == "tool:call_test1"
    assert block(conv, "call_read1")["text"].startswith('read_file({"path"')
    assert block(conv, "call_cfg1:result")["role"] == "tool"
    text6 = cid("assistant", "text", raw[5]["content"])
    # One human request: every block after it belongs to its turn.
    assert block(conv, text6)["turn"] == block(conv, "call_pip1")["turn"] == block(conv, user)["turn"] == 1
    assert len(block(conv, "call_pip1:result")["text"]) > 5000  # the huge, irrelevant result
    assert_text_sized(conv)


def test_openai_repairs_orphan_and_unanswered_calls():
    conv = loaded("openai_repairs.json")
    assert conv.repairs == [
        'messages[4].tool_call_id "call_9" has no matching tool call in the assistant message '
        'before it; dropped',
        'messages[5].tool_calls[1] tool call "call_3" has no tool message answering it; dropped',
        'messages[8].tool_calls[0] tool call "call_4" has no tool message answering it; dropped',
        'messages[8] has no content left; dropped']
    assert "call_3" not in ids(conv) and "call_9:result" not in ids(conv)
    # The final assistant message still awaits its result: the API refuses a request holding it.
    assert "call_4" not in ids(conv)
    out = emit(conv, {})
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "assistant",
                                        "tool", "user"]
    assert [c["id"] for c in out[4]["tool_calls"]] == ["call_2"]
    assert validate("openai", out) == []


def test_anthropic_system_thinking_units_and_errors():
    conv = loaded("anthropic_thinking.json")
    system = block(conv, "system")
    assert (system["role"], system["turn"], system["protected"]) == ("system", 0, "system")
    # Thinking + every tool_use of the turn + their results: one unit.
    raw = json.loads(read("anthropic_thinking.json"))["messages"]
    thinking = cid("assistant", "thinking", raw[3]["content"][0]["thinking"])
    turn4 = [b["id"] for b in conv.blocks if b["unit"] == "turn:" + thinking]
    assert turn4 == [thinking, "toolu_02Read", "toolu_03Cfg", "toolu_02Read:result",
                     "toolu_03Cfg:result"]
    text2 = cid("assistant", "text", raw[1]["content"][1]["text"])
    assert block(conv, text2)["unit"] is None  # text stays free
    [redacted_raw] = [part for message in raw if isinstance(message["content"], list)
                      for part in message["content"] if part.get("type") == "redacted_thinking"]
    redacted = cid("assistant", "thinking", "[redacted thinking]", redacted_raw)  # its data tells it apart
    assert block(conv, redacted)["unit"] == "turn:" + redacted  # redacted thinking alone
    assert block(conv, "toolu_04Pip")["unit"] == "tool:toolu_04Pip"
    assert block(conv, "toolu_03Cfg:result")["text"].startswith("[error] ")
    image = next(b for b in conv.blocks if b["kind"] == "media")
    assert image["text"].startswith("[image") and image["tokens"] >= 85
    assert conv.repairs == []


def test_anthropic_orphan_result_is_dropped_and_reported():
    conv = loaded("anthropic_orphan.json")
    assert conv.repairs == ['messages[0].content[0] tool_result "toolu_00Gone" has no matching '
                            'tool_use in the previous assistant message; dropped']
    out = emit(conv, {})
    assert out["messages"][0]["content"] == [
        {"type": "text", "text": "Continue from where you left off: bump the version."}]
    assert validate("anthropic", out) == []


@pytest.mark.parametrize("signature", [None, ""])
def test_a_thinking_block_without_its_signature_is_dropped_as_a_repair(signature):
    # The API refuses a request holding a thinking block without its signature (a log written
    # through another model's endpoint can hold "" or none): the reader drops it and says so; a
    # signed one in the same log is kept byte for byte, and the validator names the rule.
    unsigned = {"type": "thinking", "thinking": "look around first"}
    if signature is not None:
        unsigned["signature"] = signature
    signed = {"type": "thinking", "thinking": "now run it", "signature": "c2lnbmVk"}
    text = cc_lines(("user", "u1", None, "list the files", None, {}),
                    ("assistant", "a1", "u1", [unsigned, {"type": "text", "text": "Listing."}], "msg_1", {}),
                    ("user", "u2", "a1", "and run the tests", None, {}),
                    ("assistant", "a2", "u2", [signed] + use("tA"), "msg_2", {}))
    conv = load(text, "claude-code")
    assert conv.repairs == ["line 2.message.content[0] is a thinking block without its signature; dropped"]
    out = emit(conv, {})
    assert api_rules.problems_anthropic(out) == [] and validate("anthropic", out) == []
    assert out["messages"][1]["content"] == [{"type": "text", "text": "Listing."}]
    assert out["messages"][3]["content"][0] == signed
    body = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [unsigned]}]}
    assert validate("anthropic", body) == ["messages[1].content[0] is a thinking block without its signature"]
    assert load(json.dumps(body), "anthropic").repairs == [  # a message holding nothing else goes too
        "messages[1].content[0] is a thinking block without its signature; dropped",
        "messages[1] has no content left; dropped"]


def test_claude_code_branch_rebuild():
    conv = loaded("claude_code_session.jsonl")
    assert conv.skipped_lines == 1
    live = [b for b in conv.blocks if b["protected"] != "archived"]
    archived = [b for b in conv.blocks if b["protected"] == "archived"]
    texts = " ".join(b["text"] for b in conv.blocks)
    assert "Subagent" not in texts and "Found float math" not in texts  # sidechain
    assert "round() everywhere" not in texts and "wrap every total" not in texts  # dead end
    # The live context is the compaction summary and what follows it.
    assert live[0]["text"].startswith("This session is being") and live[0]["role"] == "user"
    assert live[0]["protected"] == "summary"  # the harness's summary (paged at worst), not the human's words
    # What came before the boundary (reached through logicalParentUuid) is archived: turn 0,
    # listed first, never in the live context.
    assert "toolu_01Bash" in ids(conv) and "toolu_04Edit:result" in ids(conv)
    assert {b["turn"] for b in archived} == {0} and conv.archived == len(archived)
    assert conv.blocks[:len(archived)] == archived
    # The first result hangs off its own tool_use line and is recovered.
    assert "toolu_01Bash:result" in ids(conv)
    # isMeta lines are the model's context too: kept, but never the human's.
    assert archived[0]["text"].startswith("Caveat:") and archived[0]["role"] == "user"
    task = next(b for b in live if b["protected"] == "task")
    assert task["text"] == "Now run the whole test suite." and task["turn"] == 1
    assert [b["turn"] for b in live] == [0, 0, 1, 1, 1, 1]
    assert conv.repairs == []


def test_claude_code_streaming_usage_is_not_a_size():
    conv = loaded("claude_code_session.jsonl")
    # output_tokens is a streaming count on each line: never a block's size.
    assert_text_sized(conv)
    assert set(conv.recorded) == {"recorded_context_tokens", "recorded_baseline_tokens"}
    archived = [b for b in conv.blocks if b["protected"] == "archived"]
    msg01 = [b["id"] for b in archived if b["role"] == "assistant"][:4]
    assert msg01[2:] == ["toolu_01Bash", "toolu_01Read"]
    assert block(conv, "toolu_03Edit:result")["text"].startswith("[error] <tool_use_error>")


def cc_lines(*specs):
    """Return Claude Code JSONL from (kind, uuid, parent, content, message id, extra) specs."""
    out = []
    for kind, uuid, parent, content, mid, extra in specs:
        line = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "S",
                "isSidechain": False}
        if kind in ("user", "assistant"):
            line["message"] = {"role": kind, "content": content}
            if mid:
                line["message"]["id"] = mid
        line.update(extra)
        out.append(json.dumps(line))
    return "\n".join(out)


def use(tid):
    return [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": "ls"}}]


def result(tid):
    return [{"type": "tool_result", "tool_use_id": tid, "content": "ok " + tid}]


def test_claude_code_recovers_sibling_tool_use_line():
    # The second tool_use line hangs off the first; the walk from the leaf passes only
    # through the first call and both results.
    text = cc_lines(("user", "u1", None, "list files twice", None, {}),
                    ("assistant", "a1", "u1", use("tA"), "msg_1", {}),
                    ("assistant", "a2", "a1", use("tB"), "msg_1", {}),
                    ("user", "r1", "a1", result("tA"), None, {}),
                    ("progress", "p1", "r1", None, None, {"data": {"type": "hook"}}),
                    ("user", "r2", "p1", result("tB"), None, {}),
                    ("assistant", "a3", "r2", [{"type": "text", "text": "done"}], "msg_2", {}))
    conv = load(text, "claude-code")
    assert conv.repairs == []
    assert ids(conv) == [cid("user", "text", "list files twice"), "tA", "tB", "tA:result", "tB:result",
                         cid("assistant", "text", "done")]
    assert validate("anthropic", emit(conv, {})) == []


def test_claude_code_missing_parent_is_reported():
    text = cc_lines(("user", "u2", "gone", "hello", None, {}),
                    ("assistant", "a2", "u2", [{"type": "text", "text": "hi"}], "m", {}))
    conv = load(text, "claude-code")
    assert conv.repairs == ['line 1: parent "gone" is not in the file; the branch starts there']
    assert ids(conv) == [cid("user", "text", "hello"), cid("assistant", "text", "hi")]


def test_a_missing_parent_mid_file_does_not_cut_the_session():
    """A line whose parent is missing from the file (a line the log never wrote, or one a copy left
    out) does not start the branch when earlier lines are there: the walk goes on from the line
    before it.  A real Claude Code 2.1 capture lost the human's request and the pass had no intent."""
    text = cc_lines(("user", "u1", None, "Run the command: echo three", None, {}),
                    ("assistant", "a1", "not-written", use("tA"), "m1", {}),
                    ("user", "r1", "a1", result("tA"), None, {}),
                    ("assistant", "a2", "also-gone", [{"type": "text", "text": "Printed three."}], "m2", {}))
    conv = load(text, "claude-code")
    assert ids(conv) == [cid("user", "text", "Run the command: echo three"), "tA", "tA:result",
                         cid("assistant", "text", "Printed three.")]
    assert conv.repairs == ['line 4: parent "also-gone" is not in the file; the walk goes on from line 3, the line before it',
                            'line 2: parent "not-written" is not in the file; the walk goes on from line 1, the line before it']
    assert [b["protected"] for b in conv.blocks][0] == "task"


def test_claude_code_text_line_before_results_is_reordered():
    # A user text line lands between the calls and their result line.
    text = cc_lines(("user", "u1", None, "run it", None, {}),
                    ("assistant", "a1", "u1", use("tA"), "msg_1", {}),
                    ("user", "q1", "a1", "also check the logs", None, {}),
                    ("user", "r1", "q1", result("tA"), None, {}))
    conv = load(text, "claude-code")
    out = emit(conv, {})
    assert [b["type"] for b in out["messages"][2]["content"]] == ["tool_result", "text"]
    assert validate("anthropic", out) == []


def test_anthropic_text_before_results_is_reordered():
    value = {"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": use("t1")},
        {"role": "user", "content": [{"type": "text", "text": "note"}] + result("t1")}]}
    out = emit(load(json.dumps(value), "anthropic"), {})
    assert [b["type"] for b in out["messages"][2]["content"]] == ["tool_result", "text"]
    assert validate("anthropic", out) == []


def test_claude_code_emits_alternating_anthropic():
    conv = loaded("claude_code_session.jsonl")
    out = emit(conv, {})
    assert set(out) == {"messages"}
    assert validate("anthropic", out) == []
    answers = [m for m in out["messages"] if m["role"] == "user" and isinstance(m["content"], list)
               and any(b.get("type") == "tool_result" for b in m["content"])]
    assert [b["tool_use_id"] for b in answers[0]["content"]] == ["toolu_05Bash"]
    # Only the live context is written back: nothing from before the compaction boundary.
    assert "toolu_01Bash" not in json.dumps(out)


def adapters_sig():
    return json.loads(read("anthropic_thinking.json"))["messages"][1]["content"][0]["signature"]


def test_codex_replacement_history_and_pending_call():
    conv = loaded("codex_rollout.jsonl")
    assert conv.skipped_lines == 1
    # The rollout ends while call_pt2 runs: the Responses API refuses a call with no output, so
    # it goes, and the reasoning item that produced it with it.
    assert conv.repairs == ['line 28.payload.call_id "call_pt2" has no output; dropped',
                            'line 27.payload is a reasoning item without the item it produced; dropped']
    live = [b for b in conv.blocks if b["protected"] != "archived"]
    texts = [b["text"] for b in live]
    assert "It builds the sdist" not in " ".join(texts)  # replaced by the compaction
    assert "It builds the sdist" in " ".join(b["text"] for b in conv.blocks)  # archived, as pages
    assert texts[3].startswith("Another language model")
    developer = next(b["id"] for b in live if b["text"].startswith("<permissions instructions>"))
    assert developer == cid("developer", "text", live[0]["text"])
    assert block(conv, developer)["protected"] == "system"  # developer message
    reasoning = next(b["id"] for b in live if b["text"] == "**Inspecting totals and tests**")
    assert [b["id"] for b in conv.blocks if b["unit"] == "turn:" + reasoning] == [
        reasoning, "call_rd1", "call_pt1", "call_rd1:result", "call_pt1:result"]
    assert block(conv, "call_ap1")["unit"] == block(conv, "call_ap1:result")["unit"]
    assert block(conv, "call_ap1:result")["text"].startswith("Success. Updated")
    assert block(conv, "call_pt1:result")["text"].startswith("Exit code: 1")
    assert "ghost" not in " ".join(texts)
    assert "call_pt2" not in ids(conv)
    out = emit(conv, {})
    assert isinstance(out, list) and "call_pt2" not in json.dumps(out)
    assert validate("responses", out) == [] and api_rules.problems_responses(out) == []


def test_codex_legacy_compaction_keeps_user_messages_and_drops_orphan():
    conv = loaded("codex_legacy_compacted.jsonl")
    live = [b for b in conv.blocks if b["protected"] != "archived"]
    assert [b["text"][:20] for b in live] == [
        "<environment_context", "Why is the nightly j", "The nightly job reco",
        "The job takes about "]
    assert [b["role"] for b in live] == ["user", "user", "user", "assistant"]
    # What the compaction took out is archived (stored as pages), not lost.
    assert [b["text"][:12] for b in conv.blocks if b["protected"] == "archived"] == ["shell({\"comm"]
    assert conv.repairs == ['line 6.payload.call_id "call_n1" has no matching earlier call; '
                            'dropped']


def test_responses_instructions_reasoning_unit():
    conv = loaded("responses_session.json")
    assert block(conv, "instructions")["turn"] == 0
    developer = cid("developer", "text", "Prefer small, reviewed patches. Never push.")
    assert ids(conv)[1] == developer and block(conv, developer)["protected"] == "system"
    assert [b["id"] for b in conv.blocks if b["unit"] == "turn:rs_01"] == [
        "rs_01", "call_grep", "call_cat", "call_grep:result", "call_cat:result"]
    assert block(conv, "msg_01")["unit"] is None  # item id: native
    image = next(b for b in conv.blocks if b["kind"] == "media")
    assert image["role"] == "user" and image["tokens"] >= 85


def test_pager_load_keeps_its_fields():
    conv = loaded("pager_history.json")
    assert block(conv, "block-0x01")["protected"] == "system"
    assert block(conv, "block-0x07")["pinned"] is True
    assert block(conv, "block-0x04")["tokens"] == 210
    assert block(conv, "block-0x03")["unit"] == "tool:call_1"


# --- emitting ---

@pytest.mark.parametrize("name", CLEAN_JSON)
def test_retain_all_round_trips(name):
    conv = loaded(name)
    assert emit(conv, {}) == json.loads(read(name))
    everything = {b["id"]: ("retain", None) for b in conv.blocks}
    assert emit(conv, everything) == json.loads(read(name))


def test_emit_is_deterministic():
    for name in FIXTURES:
        decisions = {b["id"]: ("page", "stub " + b["id"]) for b in loaded(name).blocks[::2]}
        first = json.dumps(emit(loaded(name), decisions), sort_keys=True)
        assert first == json.dumps(emit(loaded(name), decisions), sort_keys=True)


def test_anthropic_eviction_merges_two_user_messages():
    conv = loaded("anthropic_alternation.json")
    out = emit(conv, {text_id(conv, "setup.cfg says"): ("evict", None)})
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user", "assistant"]
    assert [b["text"][:8] for b in out["messages"][0]["content"]] == ["Morning!", "OK. Then"]
    assert validate("anthropic", out) == []


def test_anthropic_assistant_first_gets_user_note():
    conv = loaded("anthropic_alternation.json")
    out = emit(conv, {text_id(conv, "Morning!"): ("evict", None)})
    assert out["messages"][0] == {"role": "user", "content": adapters.OMITTED_NOTE}
    assert out["messages"][1]["role"] == "assistant"
    assert validate("anthropic", out) == []


def test_anthropic_everything_evicted_leaves_one_note():
    conv = loaded("anthropic_alternation.json")
    out = emit(conv, {b["id"]: ("evict", None) for b in conv.blocks})
    assert out == {"messages": [{"role": "user", "content": adapters.OMITTED_NOTE}]}
    assert validate("anthropic", out) == []


def test_anthropic_merge_keeps_thinking_first():
    value = {"messages": [
        {"role": "user", "content": "why is CI red?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]},
        {"role": "user", "content": "take your time"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "check the log", "signature": "sig"}] + use("t1")},
        {"role": "user", "content": result("t1")}]}
    out = emit(load(json.dumps(value), "anthropic"),
               {cid("user", "text", "take your time"): ("evict", None)})
    assert [b["type"] for b in out["messages"][1]["content"]] == ["thinking", "text", "tool_use"]
    assert validate("anthropic", out) == []


def test_anthropic_paged_thinking_unit_becomes_one_note():
    conv = loaded("anthropic_thinking.json")
    unit = [b["id"] for b in conv.blocks if b["unit"] == block(conv, "toolu_02Read")["unit"]]
    assert len(unit) == 5
    decisions = {bid: ("page", "[read totals.py; rounding.toml missing]") for bid in unit}
    out = emit(conv, decisions)
    assert validate("anthropic", out) == []
    flat = json.dumps(out)
    assert "toolu_02Read" not in flat and "toolu_03Cfg" not in flat
    assert flat.count("[read totals.py; rounding.toml missing]") == 1
    # The note's assistant message merged with the next assistant message.
    merged = out["messages"][3]
    assert merged["role"] == "assistant"
    assert merged["content"][0] == {"type": "text",
                                    "text": "[read totals.py; rounding.toml missing]"}
    assert merged["content"][-1]["id"] == "toolu_04Pip"


def test_anthropic_huge_result_paged_with_its_call():
    conv = loaded("anthropic_thinking.json")
    out = emit(conv, {"toolu_04Pip:result": ("page", "[pip list: 300 packages, irrelevant]"),
                      "toolu_04Pip": ("page", "[pip list: 300 packages, irrelevant]")})
    assert validate("anthropic", out) == []
    assert "Package            Version" not in json.dumps(out)
    assert len(json.dumps(out)) < len(read("anthropic_thinking.json")) / 2


def test_mixed_unit_directives_take_the_most_conservative():
    conv = loaded("openai_parallel.json")
    out = emit(conv, {"call_pip1": ("evict", None), "call_pip1:result": ("retain", None)})
    assert out == json.loads(read("openai_parallel.json"))
    out = emit(conv, {"call_pip1": ("evict", None), "call_pip1:result": ("page", "[pip]")})
    # The stub is a part of its own, never glued to the text (the next load must find it).
    assert out["messages"][5] == {"role": "assistant", "content": [
        {"type": "text", "text": "The failure is a float rounding issue. Let me check the "
                                 "environment and the rounding config."},
        {"type": "text", "text": "[pip]"}]}
    assert all(m.get("tool_call_id") != "call_pip1" for m in out["messages"])
    assert validate("openai", out) == []


def test_openai_paged_parallel_call_keeps_the_other():
    conv = loaded("openai_parallel.json")
    out = emit(conv, {"call_read1": ("page", "[read totals.py]"),
                      "call_read1:result": ("page", "[read totals.py]")})
    assert out["messages"][2] == {"role": "assistant", "content": "[read totals.py]",
                                  "tool_calls": [json.loads(read("openai_parallel.json"))
                                                 ["messages"][2]["tool_calls"][1]]}
    assert validate("openai", out) == []


def test_openai_paged_text_block_and_emptied_message():
    conv = loaded("openai_parallel.json")
    out = emit(conv, {text_id(conv, "tests/test_totals.py::"): ("page",
                                                                 "[asked why test_rounding fails]"),
                      text_id(conv, "Makes sense"): ("evict", None)})
    assert out["messages"][1] == {"role": "user", "content": [
        {"type": "text", "text": "[asked why test_rounding fails]"}]}
    assert out["messages"][-1]["role"] == "assistant"
    assert validate("openai", out) == []


def test_responses_paged_item_becomes_assistant_note():
    conv = loaded("responses_session.json")
    out = emit(conv, {"call_test": ("page", "[pytest: no export tests]"),
                      "call_test:result": ("page", "[pytest: no export tests]"),
                      "instructions": ("evict", None),
                      text_id(conv, "The CSV export"): ("page", "[timezone bug]")})
    assert "instructions" not in out and out["model"] == "o4-mini"
    assert out["input"][1] == {"role": "user", "content": "[timezone bug]"}
    assert {"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "[pytest: no export tests]"}]} in out["input"]
    assert validate("responses", out) == []


def test_pager_emit_stubs_and_evicts():
    conv = loaded("pager_history.json")
    out = emit(conv, {"block-0x06": ("page", "[pip list]"), "block-0x05": ("evict", None)})
    by_id = {b["id"]: b for b in out["blocks"]}
    assert "block-0x05" not in by_id
    assert by_id["block-0x06"]["text"] == "[pip list]" and by_id["block-0x06"]["stub"] is True
    assert by_id["block-0x07"] == json.loads(read("pager_history.json"))["blocks"][6]
    assert out["current_turn"] == 9 and validate("pager", out) == []


def test_empty_stub_falls_back():
    conv = loaded("pager_history.json")
    out = emit(conv, {"block-0x02": ("page", "")})
    assert out["blocks"][1]["text"] == "[paged block-0x02 | turn 2 | user]"
    # The fallback is a stub line: an API format reads it back as the same block.
    conv = loaded("openai_parallel.json")
    user = text_id(conv, "tests/test_totals.py::")
    out = emit(conv, {user: ("page", " ")})
    assert out["messages"][1]["content"] == [{"type": "text",
                                               "text": "[paged %s | turn 1 | user]" % user}]
    again = load(json.dumps(out), "openai")
    assert block(again, user)["stub"] is True


def test_emit_does_not_mutate_the_conversation():
    conv = loaded("anthropic_thinking.json")
    before = copy.deepcopy(conv.blocks)
    emit(conv, {b["id"]: ("page", "s") for b in conv.blocks})
    assert conv.blocks == before
    assert emit(conv, {}) == json.loads(read("anthropic_thinking.json"))


# --- stable ids and stubs across passes ---

API_FIXTURES = sorted(n for n, f in FIXTURES.items() if f != "pager")


def stub_line(b, summary="summary"):
    """Return the stub the engine writes for block b."""
    return "[paged %s | turn %d | %s | %d tokens] %s (recall: python3 scripts/pager.py recall " \
           "%s --contract C.limn)" % (b["id"], b["turn"], b["role"], len(b["text"]) // 4 + 1,
                                      summary, b["id"])


def giant_stub(b):
    """Return the stub the engine writes for block b as a giant (8-character head and tail), or its one line."""
    page = adapters.StoredPage(b["id"], b["turn"], b["role"], None, len(b["text"]) // 4 + 1, (), "", "",
                               "summary", b["text"])
    return adapters.make_stub(page, f"python3 scripts/pager.py recall {b['id']} --contract C.limn", edge=8)


def native_message_ids(name):
    """Return the Claude Code uuids and message ids: lost when written back as Anthropic."""
    if FIXTURES[name] != "claude-code":
        return set()
    found = set()
    for line in read(name).splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        found.add(obj.get("uuid"))
        if isinstance(obj.get("message"), dict):
            found.add(obj["message"].get("id"))
    return found - {None}


def drop_jsonl_line(text, index, reparent=False):
    """Return JSONL text without line index; reparent its child to its parent if asked."""
    lines = text.splitlines()
    gone = json.loads(lines.pop(index))
    if reparent:
        for i, line in enumerate(lines):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if obj.get("parentUuid") == gone["uuid"]:
                obj["parentUuid"] = gone["parentUuid"]
                lines[i] = json.dumps(obj)
    return "\n".join(lines)


def drop_json_items(key, *indexes):
    def drop(text):
        value = json.loads(text)
        items = value[key] if key else value
        for i in sorted(indexes, reverse=True):
            del items[i]
        return json.dumps(value)
    return drop


# fixture, how to remove a message from the middle of its input, blocks that go with it
MIDDLE_REMOVALS = [
    ("openai_parallel.json", drop_json_items("messages", 1), 1),
    ("anthropic_thinking.json", drop_json_items("messages", 1, 2), 4),
    ("anthropic_alternation.json", drop_json_items("messages", 1, 2), 2),
    ("responses_session.json", drop_json_items("input", 1), 1),
    ("codex_rollout.jsonl", lambda t: drop_jsonl_line(t, 12), 1),
    ("claude_code_session.jsonl", lambda t: drop_jsonl_line(t, 3, reparent=True), 1),
    ("pager_history.json", drop_json_items("blocks", 1), 1),
]


@pytest.mark.parametrize("name,drop,count", MIDDLE_REMOVALS)
def test_ids_stable_when_a_middle_message_is_removed(name, drop, count):
    before = loaded(name)
    after = load(drop(read(name)), FIXTURES[name])
    where = re.compile(r"(?<=line )\d+|(?<=\[)\d+(?=\])")  # the removal moves the lines and items after it
    assert [where.sub("N", r) for r in after.repairs] == [where.sub("N", r) for r in before.repairs]
    by_id = {b["id"]: b for b in before.blocks}
    kept = ids(after)
    # Every remaining block keeps its id (and so its text and role), in the same order.
    assert len(kept) == len(before.blocks) - count
    assert kept == [i for i in ids(before) if i in set(kept)]
    for b in after.blocks:
        assert (b["text"], b["role"], b["unit"] is None) == \
            (by_id[b["id"]]["text"], by_id[b["id"]]["role"], by_id[b["id"]]["unit"] is None)
    # Turns are the human's requests: removing a message shifts no turn but by the requests it held.
    removed_requests = sum(1 for b in before.blocks if b["protected"] in ("task", "human")) \
        - sum(1 for b in after.blocks if b["protected"] in ("task", "human"))
    if FIXTURES[name] != "pager":
        assert all(0 <= by_id[b["id"]]["turn"] - b["turn"] <= removed_requests for b in after.blocks)


def page_every_other_group(conv):
    """Return decisions paging every other unit (all members) or free block with stub lines."""
    groups = {}
    for b in conv.blocks:
        groups.setdefault(b["unit"] or "free:" + b["id"], []).append(b)
    decisions = {}
    for n, members in enumerate(groups.values()):
        if n % 2 == 0 and members[0]["protected"] != "archived":  # archived: never written back
            for b in members:
                decisions[b["id"]] = ("page", stub_line(b))
    return decisions


@pytest.mark.parametrize("name", API_FIXTURES)
def test_stubs_read_back_with_original_ids_and_restore(name):
    conv = loaded(name)
    fmt = conv.emit_format
    by_id = {b["id"]: b for b in conv.blocks}
    decisions = page_every_other_group(conv)
    out = emit(conv, decisions)
    assert validate(fmt, out) == []
    again = load(json.dumps(out), fmt)
    assert again.repairs == []
    stubs = [b for b in again.blocks if b["stub"]]
    assert sorted(b["id"] for b in stubs) == sorted(decisions)
    for b in stubs:
        assert b["text"] == stub_line(by_id[b["id"]])
        # The lines of one note (a paged unit) come back as one unit again.
        assert (b["unit"] is None or b["unit"].startswith("note:")) and b["tokens"] is None
        assert b["pinned"] is False
    # Blocks that were retained keep their ids (Claude Code message ids excepted: Anthropic
    # has no place for them).
    retained = [b["id"] for b in conv.blocks if b["id"] not in decisions and b["id"] not in native_message_ids(name)
                and b["protected"] != "archived"]
    assert retained and set(retained) <= set(ids(again))
    for bid in retained:
        assert block(again, bid)["text"] == by_id[bid]["text"] and not block(again, bid)["stub"]
    # Retaining the stubs with their full text restores them as plain text.
    restore = {b["id"]: ("retain", by_id[b["id"]]["text"] or "(empty)") for b in stubs}
    restored = emit(again, restore)
    assert validate(fmt, restored) == []
    third = load(json.dumps(restored), fmt)
    assert not any(b["stub"] for b in third.blocks)
    for b in stubs:
        text = by_id[b["id"]]["text"] or "(empty)"
        role = b["role"] if b["role"] != "tool" else "assistant"
        # A plain text part: a content id, or the prompt's own id for a one-block prompt.
        expected = {cid(role, "text", text)} | ({b["id"]} & {"system", "instructions"})
        found = [x for x in third.blocks if x["text"] == text and not x["unit"]]
        assert any(x["id"].split("~")[0] in expected for x in found), b["id"]
    # Paging the stubs again (refreshed or empty stub) keeps them stubs with the same ids.
    repaged = {b["id"]: ("page", "" if n % 2 else stub_line(by_id[b["id"]], "fresh"))
               for n, b in enumerate(stubs)}
    out4 = emit(again, repaged)
    assert validate(fmt, out4) == []
    fourth = load(json.dumps(out4), fmt)
    assert sorted(b["id"] for b in fourth.blocks if b["stub"]) == sorted(decisions)
    for n, b in enumerate(stubs):
        assert block(fourth, b["id"])["text"] == (b["text"] if n % 2
                                                  else stub_line(by_id[b["id"]], "fresh"))


def test_stub_lines_become_one_block_each():
    note = "[paged call_1 | turn 3 | assistant | 5 tokens] ran ls\n" \
           "[paged call_1:result | turn 4 | tool | 90 tokens] two files"
    value = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": note},
        {"role": "user", "content": "[paged m-0123456789ab | turn 1 | user | 3 tokens] hi"},
        {"role": "user", "content": "[paged m-0123456789ab | turn 1 | user | 3 tokens] hi"},
        {"role": "user", "content": "see [paged call_1 | turn 3 | assistant | 5 tokens]"},
        {"role": "user", "content": "[paged call_1 | turn 3 | assistant | 5 tokens] x\nmore"}]
    conv = load(json.dumps(value), "openai")
    # A stub keeps the turn and role it was paged under; the lines of one note are one unit.
    assert [(b["id"], b["turn"], b["role"], b["stub"], b["unit"]) for b in conv.blocks] == [
        (cid("user", "text", "go"), 1, "user", False, None),
        ("call_1", 3, "assistant", True, "note:call_1"),
        ("call_1:result", 4, "tool", True, "note:call_1"),
        ("m-0123456789ab", 1, "user", True, None),
        ("m-0123456789ab~t1", 1, "user", True, None),  # the same stub twice: no duplicate id
        (cid("user", "text", "see [paged call_1 | turn 3 | assistant | 5 tokens]"), 2, "user",
         False, None),
        (cid("user", "text", "[paged call_1 | turn 3 | assistant | 5 tokens] x\nmore"), 3,
         "user", False, None)]
    assert [b["text"] for b in conv.blocks[1:3]] == note.split("\n")
    # Untouched, the note is written back as it was; one line restored, the other stays a stub.
    assert emit(conv, {}) == value
    out = emit(conv, {"call_1": ("retain", "ls()")})
    assert out[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "ls()"},
        {"type": "text", "text": note.split("\n")[1]}]}
    assert validate("openai", out) == []
    # Retained text for a block that is not a stub is ignored.
    assert emit(conv, {cid("user", "text", "go"): ("retain", "other")})[0] == \
        {"role": "user", "content": "go"}


def test_untouched_stub_note_is_written_verbatim():
    note = "[paged a | turn 2 | assistant | 5 tokens] x\n\n[paged b | turn 2 | tool | 5 tokens] y"
    value = {"messages": [{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": [{"type": "text", "text": note}]}]}
    conv = load(json.dumps(value), "anthropic")
    assert [b["id"] for b in conv.blocks if b["stub"]] == ["a", "b"]
    assert emit(conv, {}) == value
    assert emit(conv, {"a": ("retain", None), "b": ("retain", "   ")}) == value
    # The note's lines are one unit: evicting one line alone leaves the note whole.
    assert emit(conv, {"a": ("evict", None)}) == value
    out = emit(conv, {"a": ("evict", None), "b": ("evict", None)})
    assert out["messages"] == [{"role": "user", "content": "hi"}]


def test_stubs_in_system_prompts_and_instructions():
    stub = "[paged system | turn 0 | system | 9 tokens] rules"
    conv = load(json.dumps({"system": stub, "messages": [{"role": "user", "content": "hi"}]}),
                "anthropic")
    assert conv.blocks[0]["id"] == "system" and conv.blocks[0]["stub"] is True
    assert conv.blocks[0]["protected"] == "system"
    out = emit(conv, {"system": ("retain", "Be careful.")})
    assert out["system"] == [{"type": "text", "text": "Be careful."}]
    stub = "[paged instructions | turn 0 | system | 9 tokens] rules"
    conv = load(json.dumps({"instructions": stub, "input": "hi"}), "responses")
    assert conv.blocks[0]["id"] == "instructions" and conv.blocks[0]["stub"] is True
    assert emit(conv, {"instructions": ("retain", "Be careful.")})["instructions"] == \
        "Be careful."
    assert emit(conv, {})["instructions"] == stub


def test_claude_code_stub_and_blocks_get_no_usage_tokens():
    text = cc_lines(("user", "u1", None, "go", None, {}),
                    ("assistant", "a1", "u1", [
                        {"type": "text", "text": "[paged old | turn 2 | assistant | 5 tokens] s"},
                        {"type": "text", "text": "done"}], "msg_1",
                     {}))
    lines = [json.loads(x) for x in text.splitlines()]
    lines[1]["message"]["usage"] = {"output_tokens": 40}
    conv = load("\n".join(json.dumps(x) for x in lines), "claude-code")
    assert [(b["id"], b["stub"], b["tokens"]) for b in conv.blocks] == [
        (cid("user", "text", "go"), False, None), ("old", True, None), (cid("assistant", "text", "done"), False, None)]


def test_responses_rewritten_message_loses_its_id():
    value = [{"type": "message", "role": "assistant", "id": "msg_9", "content": [
        {"type": "output_text", "text": "first"}, {"type": "output_text", "text": "second"}]}]
    conv = load(json.dumps(value), "responses")
    first, second = cid("assistant", "text", "first"), cid("assistant", "text", "second")
    assert ids(conv) == [first, second]
    out = emit(conv, {first: ("evict", None)})
    assert out == [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "second"}]}]
    assert ids(load(json.dumps(out), "responses")) == [second]  # not msg_9
    assert emit(conv, {}) == value  # untouched: the id stays
    single = load(json.dumps([dict(value[0], content=value[0]["content"][:1])]), "responses")
    assert ids(single) == ["msg_9"]  # a one-block item keeps its native id


def test_native_ids_are_cleaned_for_contract_lines():
    value = [{"role": "user", "content": "go"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": 'call "a"\nb', "type": "function",
                  "function": {"name": "f", "arguments": "{}"}},
                 {"id": "x | turn 3 | y", "type": "function",
                  "function": {"name": "f", "arguments": "{}"}},
                 {"id": "call_\ud800", "type": "function",
                  "function": {"name": "f", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": 'call "a"\nb', "content": "1"},
             {"role": "tool", "tool_call_id": "x | turn 3 | y", "content": "2"},
             {"role": "tool", "tool_call_id": "call_\ud800", "content": "\ud800 3"}]
    conv = load(json.dumps(value), "openai")
    assert ids(conv)[1:4] == ["call _a__b", "x _ turn 3 _ y", "call__"]
    assert ids(conv)[4] == "call _a__b:result"
    out = emit(conv, {"x _ turn 3 _ y": ("page", ""), "x _ turn 3 _ y:result": ("page", "")})
    assert validate("openai", out) == []
    assert [c["id"] for c in out[1]["tool_calls"]] == ['call "a"\nb', "call_\ud800"]
    again = load(json.dumps(out), "openai")
    assert [b["id"] for b in again.blocks if b["stub"]] == ["x _ turn 3 _ y",
                                                             "x _ turn 3 _ y:result"]


def test_pager_ids_must_be_quotable_and_stub_is_read():
    with pytest.raises(PagerError) as excinfo:
        load(json.dumps({"blocks": [{"id": 'a"b', "turn": 1, "role": "user", "text": "x"}]}),
             "pager")
    assert one_line_error(excinfo) == 'blocks[0].id holds a double quote, which a contract line can\'t carry (got "a\\"b")'
    with pytest.raises(PagerError) as excinfo:
        load(json.dumps({"blocks": [{"id": "a", "turn": 1, "role": "user", "text": "x",
                                     "stub": 1}]}), "pager")
    assert one_line_error(excinfo) == "blocks[0].stub must be true or false (got 1)"


def test_pager_stub_round_trip():
    conv = loaded("pager_history.json")
    original = block(conv, "block-0x06")["text"]
    paged = emit(conv, {"block-0x06": ("page", "[paged block-0x06 | turn 5 | tool | 9 tokens] x")})
    again = load(json.dumps(paged), "pager")
    assert block(again, "block-0x06")["stub"] is True
    assert [b["id"] for b in again.blocks if b["stub"]] == ["block-0x06"]
    kept = emit(again, {"block-0x06": ("page", "")})
    assert kept == paged  # an empty stub keeps the stub it had
    restored = emit(again, {"block-0x06": ("retain", original)})
    assert restored == json.loads(read("pager_history.json"))
    assert validate("pager", restored) == []


# --- property tests: random decision maps always give a valid history ---

def unit_consistent_decisions(conv):
    """Strategy: decision maps that give all blocks of a unit the same directive."""
    groups = {}
    for b in conv.blocks:
        groups.setdefault(b["unit"] or "free:" + b["id"], []).append(b["id"])
    directive = st.one_of(st.just(("retain", None)), st.just(("evict", None)),
                          st.tuples(st.just("page"), st.text(max_size=12)))
    return st.fixed_dictionaries({key: directive for key in groups}).map(
        lambda chosen: {bid: chosen[key] for key, members in groups.items() for bid in members})


def any_decisions(conv):
    """Strategy: arbitrary per-block decision maps (units may disagree)."""
    directive = st.one_of(st.just(("retain", None)), st.just(("evict", None)),
                          st.tuples(st.just("page"), st.text(max_size=12)))
    return st.fixed_dictionaries({b["id"]: directive for b in conv.blocks})


@pytest.mark.parametrize("strategy", [unit_consistent_decisions, any_decisions],
                         ids=["unit-consistent", "arbitrary"])
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_property_random_decisions_validate(name, strategy):
    """Directives that keep each unit together, or that split units at random: the output stays valid."""
    conv = loaded(name)

    @PROPERTY
    @given(strategy(conv))
    def check(decisions):
        out = emit(conv, decisions)
        assert validate(conv.emit_format, out) == []

    check()


def pass_decisions(conv):
    """Strategy: any directive per block, as an engine pass may send them.

    Pages carry a stub line or a giant's stub (read back as the block), random text or nothing (fallback);
    retains may carry a text, which restores a stub block and is ignored for any other.
    """
    def directive(b):
        return st.one_of(st.just(("retain", None)), st.just(("evict", None)),
                         st.tuples(st.just("page"), st.one_of(st.just(stub_line(b)), st.just(giant_stub(b)),
                                                              st.text(max_size=12))),
                         st.tuples(st.just("retain"), st.text(max_size=12)))
    return st.fixed_dictionaries({b["id"]: directive(b) for b in conv.blocks})


def passes_stay_valid(conv, data, count=3):
    """Emit, load the output back and emit again count times; every output must validate."""
    fmt = conv.emit_format
    for _ in range(count):
        out = emit(conv, data.draw(pass_decisions(conv)))
        assert validate(fmt, out) == []
        conv = load(json.dumps(out), fmt)
        assert len(set(ids(conv))) == len(conv.blocks)
        for b in conv.blocks:
            assert set(b) == BLOCK_KEYS
            assert b["id"] and not re.search('["\n\r]', b["id"])
    assert validate(fmt, emit(conv, {})) == []


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_property_round_trips_validate(name):
    conv = loaded(name)

    @PROPERTY
    @given(st.data())
    def check(data):
        passes_stay_valid(conv, data)

    check()


@pytest.mark.parametrize("name", API_FIXTURES)
def test_property_ids_survive_a_pass(name):
    conv = loaded(name)
    by_id = {b["id"]: b for b in conv.blocks}
    native = native_message_ids(name)
    # Blocks from before a compaction boundary are pages only: never written back.
    archived = {b["id"] for b in conv.blocks if b["protected"] == "archived"}

    @PROPERTY
    @given(unit_consistent_decisions(conv), st.booleans())
    def check(decisions, giants):
        stub = giant_stub if giants else stub_line  # a giant's stub spans lines: header to end line
        decisions = {i: ("page", stub(by_id[i])) if d[0] == "page" else d
                     for i, d in decisions.items()}
        again = load(json.dumps(emit(conv, decisions)), conv.emit_format)
        # Paged blocks come back as stubs under their ids; retained blocks keep theirs.
        paged = {i for i, d in decisions.items() if d[0] == "page"} - archived
        assert {b["id"] for b in again.blocks if b["stub"]} == paged
        retained = {i for i, d in decisions.items() if d[0] == "retain"} - native - archived
        assert retained <= set(ids(again))
        for bid in retained:
            assert block(again, bid)["text"] == by_id[bid]["text"]

    check()


# Random synthetic histories: steps rendered into every format, including orphan results,
# unanswered and parallel calls, thinking and same-role neighbours.
WORDS = st.text(alphabet="abcdefgh ", min_size=1, max_size=12).map(lambda s: s + "x")
STEP = st.one_of(
    st.tuples(st.just("user"), WORDS),
    st.tuples(st.just("say"), WORDS),
    st.tuples(st.just("tools"), st.lists(st.booleans(), min_size=1, max_size=3),
              st.booleans(), st.booleans()),
)


def render(steps, fmt):
    """Return the text of a history in fmt built from abstract steps."""
    counter = [0]

    def cid():
        counter[0] += 1
        return "call_%d" % counter[0]

    anth, chat, items, lines = [], [], [], []
    parent = [None]

    def cc(kind, message):
        uuid = "u%d" % (len(lines) + 1)
        lines.append({"type": kind, "uuid": uuid, "parentUuid": parent[0], "sessionId": "S",
                      "isSidechain": False, "message": message})
        parent[0] = uuid

    for n, step in enumerate(steps):
        if step[0] == "user":
            anth.append({"role": "user", "content": step[1]})
            chat.append({"role": "user", "content": step[1]})
            items.append({"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": step[1]}]})
            cc("user", {"role": "user", "content": step[1]})
        elif step[0] == "say":
            anth.append({"role": "assistant", "content": [{"type": "text", "text": step[1]}]})
            chat.append({"role": "assistant", "content": step[1]})
            items.append({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": step[1]}]})
            cc("assistant", {"id": "msg_%d" % n, "role": "assistant",
                             "content": [{"type": "text", "text": step[1]}],
                             "usage": {"output_tokens": 7}})
        else:
            answered, thinking, orphan = step[1], step[2], step[3]
            calls = [cid() for _ in answered]
            blocks = ([{"type": "thinking", "thinking": "hmm", "signature": "sig"}]
                      if thinking else [])
            blocks += [{"type": "tool_use", "id": c, "name": "Bash", "input": {"n": n}}
                       for c in calls]
            anth.append({"role": "assistant", "content": blocks})
            chat.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for c in calls]})
            if thinking:
                items.append({"type": "reasoning", "summary": [], "encrypted_content": "e"})
            items.extend({"type": "function_call", "call_id": c, "name": "f",
                          "arguments": "{}"} for c in calls)
            for block_ in blocks:
                cc("assistant", {"id": "msg_%d" % n, "role": "assistant", "content": [block_],
                                 "usage": {"output_tokens": 11}})
            done = [c for c, ok in zip(calls, answered) if ok]
            if orphan:
                done.append("call_orphan_%d" % n)
            results = [{"type": "tool_result", "tool_use_id": c, "content": "out " + c,
                        "is_error": c.endswith("1")} for c in done]
            if results:
                anth.append({"role": "user", "content": results})
            chat.extend({"role": "tool", "tool_call_id": c, "content": "out"} for c in done)
            items.extend({"type": "function_call_output", "call_id": c, "output": "out"}
                         for c in done)
            for result in results:
                cc("user", {"role": "user", "content": [result]})
    if fmt == "anthropic":
        return json.dumps({"system": "sys", "messages": anth})
    if fmt == "openai":
        return json.dumps([{"role": "system", "content": "sys"}] + chat)
    if fmt == "responses":
        return json.dumps(items)
    if fmt == "codex":
        return "\n".join(json.dumps({"timestamp": "t", "type": "response_item", "payload": it})
                         for it in items)
    return "\n".join(json.dumps(line) for line in lines)


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses", "claude-code", "codex"])
def test_property_random_histories_load_and_emit_valid(fmt):
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(STEP, min_size=1, max_size=8), st.data())
    def check(steps, data):
        text = render(steps, fmt)
        assert detect_format(text) == fmt
        conv = load(text, fmt)
        assert len(set(ids(conv))) == len(conv.blocks)
        assert validate(conv.emit_format, emit(conv, {})) == []
        decisions = data.draw(unit_consistent_decisions(conv))
        assert validate(conv.emit_format, emit(conv, decisions)) == []
        decisions = data.draw(any_decisions(conv))
        assert validate(conv.emit_format, emit(conv, decisions)) == []
        passes_stay_valid(conv, data, count=2)

    check()


# --- validators catch what the APIs reject ---

def test_validate_anthropic_problems():
    bad = {"messages": [
        {"role": "assistant", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "x"},
                                     {"type": "tool_result", "tool_use_id": "t1",
                                      "content": "r"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9",
                                      "content": "r"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": "no results here"},
        {"role": "assistant", "content": ""},
    ]}
    problems = validate("anthropic", bad)
    assert "messages[0].role must be user (got assistant)" in problems
    assert any("messages[1] has the same role" in p for p in problems)
    assert "messages[2].content[1] tool_result must come before other blocks" in problems
    assert any(p.startswith('messages[3].content[0].tool_use_id "t9" has no matching')
               for p in problems)
    assert 'messages[4] tool_use "t2" is not answered in messages[5]' in problems
    assert "messages[6].content is empty" in problems
    assert validate("anthropic", {"messages": []}) == ["messages is empty"]


def test_validate_anthropic_allows_pending_final_call():
    ok = {"messages": [{"role": "user", "content": "go"},
                       {"role": "assistant", "content": [{"type": "tool_use", "id": "t",
                                                          "name": "f", "input": {}}]}]}
    assert validate("anthropic", ok) == []
    assert validate("claude-code", ok) == []


def test_validate_openai_problems():
    bad = [
        {"role": "user", "content": "go"},
        {"role": "tool", "tool_call_id": "c9", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": []},
    ]
    problems = validate("openai", bad)
    assert any(p.startswith('messages[1].tool_call_id "c9" has no matching') for p in problems)
    assert 'messages[2].tool_calls id "c2" is not answered by a tool message' in problems
    assert "messages[5] is an empty assistant message without tool_calls" in problems
    assert "messages[6].content is empty" in problems
    pending = bad[:1] + [bad[2]]  # the final message's call awaits its result: the API refuses it too
    assert validate("openai", pending) == [f'messages[1].tool_calls id "{c}" is not answered by a tool message'
                                           for c in ("c1", "c2")]


def test_validate_responses_problems():
    bad = [
        {"role": "user", "content": "go"},
        {"type": "function_call_output", "call_id": "c0", "output": "x"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"role": "user", "content": "next"},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
    ]
    problems = validate("codex", bad)
    assert problems == ['input[1].call_id "c0" has no earlier matching call',
                        'input[2] function_call "c1" has no output',
                        'input[4] function_call "c2" has no output']  # at the end too
    assert validate("responses", []) == ["input is empty"]


def test_validate_pager_problems():
    assert validate("pager", {"blocks": [{"id": "a", "turn": 1, "role": "user", "text": "x"},
                                         {"id": "a", "turn": "2", "role": "user",
                                          "text": "y", "stub": "yes"}]}) == [
        'blocks[1].turn must be an integer (got "2")']


# --- bad input raises PagerError with a one-line message ---

@pytest.mark.parametrize("text,expected", [
    ("", "input is empty: nothing to detect"),
    ("   \n", "input is empty: nothing to detect"),
    ('{"messages": [', "not a known history format: invalid JSON at line 1 column 15"),
    ('{"foo": 1}', 'not a known history format: a JSON object with keys "foo"'),
    ("[]", "not a known history format: a JSON array"),
    ("not json\nat all", "not a known history format: invalid JSON"),
])
def test_detect_bad_input(text, expected):
    with pytest.raises(PagerError) as excinfo:
        detect_format(text)
    assert one_line_error(excinfo).startswith(expected)


@pytest.mark.parametrize("fmt,value,expected", [
    ("xml", [], 'unknown format "xml" (expected one of pager, openai, responses, anthropic, '
                'claude-code, codex, swe-agent, gemini, gemini-cli, copilot-cli, opencode)'),
    ("openai", {"messages": [{"role": "user", "content": "a"}, 7]},
     "messages[1] must be an object (got number)"),
    ("openai", [{"role": "robot", "content": "a"}],
     'messages[0].role must be one of system, developer, user, assistant, tool, function '
     '(got "robot")'),
    ("openai", [{"role": "tool", "content": "a"}],
     "messages[0].tool_call_id must be a string (got null)"),
    ("openai", [{"role": "user", "content": 5}],
     "messages[0].content must be a string, an array of parts or null (got number)"),
    ("anthropic", {"messages": [{"role": "system", "content": "a"}]},
     'messages[0].role must be user or assistant (got "system")'),
    ("anthropic", {"messages": [{"role": "assistant", "content": [{"type": "tool_use"}]}]},
     "messages[0].content[0].id must be a string (got null)"),
    ("anthropic", {"messages": [{"role": "user", "content": ["x"]}]},
     "messages[0].content[0] must be an object with a type"),
    ("responses", [{"content": "x"}], "input[0] has no type"),
    ("responses", [{"type": "function_call_output", "output": "x"}],
     "input[0].call_id must be a string (got null)"),
    ("pager", {"blocks": [{"id": "b1", "turn": "7a", "role": "user", "text": "x"}]},
     'blocks[0].turn must be an integer (got "7a")'),
    ("pager", {"blocks": [{"id": "b1", "turn": 1, "role": "user", "text": "x"},
                          {"id": "b1", "turn": 2, "role": "user", "text": "y"}]},
     'blocks[1].id "b1" duplicates blocks[0].id'),
    ("pager", {"turns": []}, "pager history must be an object with a blocks list"),
])
def test_load_bad_input(fmt, value, expected):
    with pytest.raises(PagerError) as excinfo:
        load(json.dumps(value), fmt)
    assert one_line_error(excinfo) == expected


def test_load_invalid_json_names_line_and_column():
    with pytest.raises(PagerError) as excinfo:
        load('{"messages": [\n  {"role": "user",}\n]}', "openai")
    assert one_line_error(excinfo).startswith("input: invalid JSON at line 2 column 19")


def test_claude_code_without_conversation_lines():
    text = "\n".join([json.dumps({"type": "summary", "summary": "s", "leafUuid": "x"}),
                      "{corrupt"])
    assert detect_format(text) == "claude-code"
    with pytest.raises(PagerError) as excinfo:
        load(text, "claude-code")
    assert one_line_error(excinfo) == "claude-code transcript has no user or assistant lines"


def test_claude_code_subagent_log_reads_as_its_own_conversation():
    text = "\n".join([json.dumps({"type": "user", "uuid": "s1", "parentUuid": None, "isSidechain": True,
                                  "agentId": "a1", "sessionId": "S",
                                  "message": {"role": "user", "content": "find the float math"}}),
                      json.dumps({"type": "assistant", "uuid": "s2", "parentUuid": "s1", "isSidechain": True,
                                  "agentId": "a1", "sessionId": "S",
                                  "message": {"role": "assistant", "id": "msg_s",
                                              "content": [{"type": "text", "text": "totals.py:5"}]}})])
    conv = load(text, "claude-code")
    assert [(b["role"], b["text"], b["protected"]) for b in conv.blocks] == [
        ("user", "find the float math", "task"), ("assistant", "totals.py:5", "conclusion")]


def test_codex_without_items():
    text = json.dumps({"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}})
    with pytest.raises(PagerError) as excinfo:
        load(text, "codex")
    assert one_line_error(excinfo) == ("codex rollout has no conversation items (response_item lines or bare "
                                       "items): nothing to page")


@pytest.mark.parametrize("decisions,expected", [
    ({"call_read1": ("keep", None)},
     'decisions["call_read1"]: unknown directive "keep" (expected retain, page or evict)'),
    ({"nope": ("retain", None)}, 'decisions: unknown block id "nope"'),
    ({"call_read1": ("page", 3)}, 'decisions["call_read1"]: stub must be a string (got 3)'),
    ({"call_read1": ("retain", 3)},
     'decisions["call_read1"]: retained text must be a string or null (got 3)'),
    ({"call_read1": ("page",)},
     'decisions["call_read1"] must be a (directive, stub) pair (got ["page"])'),
    ([("call_read1", "retain")], "decisions must map block ids to directives (got array)"),
])
def test_emit_bad_decisions(decisions, expected):
    conv = loaded("openai_parallel.json")
    with pytest.raises(PagerError) as excinfo:
        emit(conv, decisions)
    assert one_line_error(excinfo) == expected


def test_validate_unknown_format():
    with pytest.raises(PagerError) as excinfo:
        validate("palm", [])
    assert one_line_error(excinfo).startswith('unknown format "palm"')


def test_format_error_is_always_one_line():
    assert str(PagerError("a\nb\r\nc")) == "a b c"


def test_a_thinking_block_whose_text_says_nothing_is_told_apart_by_its_signature(pager):
    """Claude Code writes "thinking": "" with a signature in every turn: their ids must not collide."""
    empty = [{"type": "thinking", "thinking": "", "signature": sig} for sig in ("EqA1", "EqB2")]
    redacted = [{"type": "redacted_thinking", "data": data} for data in ("d1", "d2")]
    ids = {pager._content_id("assistant", "thinking", "", raw) for raw in empty}
    ids |= {pager._content_id("assistant", "thinking", pager.REDACTED_THINKING, raw) for raw in redacted}
    assert len(ids) == 4
    # a thinking block with text keeps the id its text gives (contracts written before keep theirs)
    said = {"type": "thinking", "thinking": "Check the parser.", "signature": "EqC3"}
    assert pager._content_id("assistant", "thinking", "Check the parser.", said) == \
        pager._content_id("assistant", "thinking", "Check the parser.")


def test_a_stub_keeps_its_id_when_a_kept_twin_is_written_before_it(pager):
    """Two turns open with the same signed thinking text; the first turn's unit is paged, so its
    results go and the two assistant messages merge, the second's thinking first. Read back, the
    stub names the paged block and the thinking keeps the id it had: 0 new, 0 moved."""
    def turn(k):
        return [{"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Look at the file first.", "signature": f"sig{k}"},
                    {"type": "tool_use", "id": f"toolu_{k}", "name": "Read", "input": {"path": f"f{k}.py"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{k}",
                                              "content": f"contents of f{k}.py"}]}]
    body = {"system": "Be brief.", "messages": [{"role": "user", "content": "Review both files."},
                                                *turn(1), *turn(2), {"role": "user", "content": "Done?"}]}
    conv = pager.load(json.dumps(body), "anthropic")
    ids = [b["id"] for b in conv.blocks]
    unit = next(b["unit"] for b in conv.blocks if b["id"] == "toolu_1")  # the turn: thinking, call, result
    first = next(b for b in conv.blocks if b["unit"] == unit and b["text"] == "Look at the file first.")
    paged = {b["id"]: ("page", f"[paged {b['id']} | turn 1 | {b['role']} | 5 tokens] (recall: x)")
             for b in conv.blocks if b["unit"] == unit}
    out = pager.emit(conv, paged)
    merged = out["messages"][1]
    assert merged["content"][0]["type"] == "thinking" and merged["content"][0]["signature"] == "sig2"
    again = pager.load(json.dumps(out), "anthropic")
    assert first["id"] in {b["id"] for b in again.blocks if b["stub"]}
    assert {b["id"] for b in again.blocks} <= set(ids)  # nothing new: every block has the id it had


def test_transcript_benchmark_times_the_generated_session_in_pairs_against_the_target(tmp_path):
    """The generated session's pass is timed against json.loads in pairs (--repeats), the median of the
    pairs' ratios printed against issue 28's 7x; without transcripts that is all the benchmark does."""
    import subprocess
    import sys
    from conftest import ROOT
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark-transcripts.py"), str(tmp_path / "none"),
                           "--synthetic", "400", "--repeats", "2"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert "synthetic Claude Code session: 400 messages" in first and "2 pairs" in first
    assert "(median of the pairs" in first and "target <= 7x: " in first and first.endswith("; ok")
