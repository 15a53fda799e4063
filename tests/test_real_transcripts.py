"""Real agent transcripts (../shared/data/transcripts-dev) and the behaviours they need.

The first part runs the pager, as a user would, on every file of the development set (skipped
when the set is absent: the project does not ship it): the pass succeeds, the emitted request is
valid by tests/api_rules.py (written from the API documentation, independent of the engine), the
budget holds at 2000 and 8000 tokens by the counter the summary reports, the round trip is stable
(same format, 0 new, 0 moved, only the pass marker appended) and recall gives back exactly what
was paged.  The second part checks each behaviour on small synthetic inputs, which always run.
"""

import base64
import json
import struct
from pathlib import Path

import pytest

import api_rules
from conftest import ROOT, _pager

DATA = ROOT.parent / "shared" / "data" / "transcripts-dev"
# The sessions of Gemini CLI, GitHub Copilot CLI and OpenCode, taken like the development set.
NEW_DATA = ROOT.parent / "shared" / "data" / "transcripts-new"
FILES = sorted(p for folder in (DATA, NEW_DATA) if folder.is_dir() for p in folder.rglob("*")
               if p.is_file() and p.suffix in (".json", ".jsonl", ".traj"))
NOW, LATER = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"
EMITTED_AS = {name: spec.emits_as for name, spec in _pager._FORMATS.items()}  # each format class's
CHECKS = {"openai": api_rules.problems_chat, "anthropic": api_rules.problems_anthropic,
          "responses": api_rules.problems_responses, "gemini": api_rules.problems_gemini}


def file_id(path):
    """A real file's test id: its path in the development set, or under transcripts-new/."""
    return str(path.relative_to(DATA)) if path.is_relative_to(DATA) else str(path.relative_to(NEW_DATA.parent))


needs_data = pytest.mark.skipif(not FILES, reason=f"{DATA} not found (the project does not ship transcripts)")


def run(cli, history, contract, now, *flags):
    """Run one pass with --json; return (result, summary)."""
    result = cli("--history", history, "--contract", contract, "--now", now, "--json", *flags)
    assert result.code == 0, result.err[-400:]
    return result, json.loads(result.out)


def round_trip(cli, tmp_path, path, flags):
    """Run a pass with --emit, then feed the output back on the same contract; return both and the files."""
    contract, emitted = tmp_path / "c.limn", tmp_path / "out.json"
    first, s1 = run(cli, path, contract, NOW, *flags, "--emit", emitted)
    before = contract.read_text(encoding="utf-8")
    again, s2 = run(cli, emitted, contract, LATER, *flags)
    added = contract.read_text(encoding="utf-8")[len(before):]
    return first, s1, again, s2, json.loads(emitted.read_text(encoding="utf-8")), added


def ends_on_results(body, written):
    """Return True if an emitted request ends on tool results (the model answers them next)."""
    if written == "responses":
        items = body["input"] if isinstance(body, dict) else body
        return str(items[-1].get("type", "")).endswith("_output")
    if written == "gemini":
        return any("functionResponse" in part for part in body["contents"][-1]["parts"])
    messages = body["messages"] if isinstance(body, dict) else body
    last = messages[-1]
    if written == "openai":
        return last["role"] == "tool"
    return last["role"] == "user" and isinstance(last["content"], list) and any(
        part.get("type") == "tool_result" for part in last["content"])


@needs_data
@pytest.mark.parametrize("path", FILES, ids=[file_id(p) for p in FILES])
@pytest.mark.parametrize("budget, masked", [(None, False), (2000, False), (8000, False), (4000, True)],
                         ids=["default", "2000", "8000", "4000-mask-results"])
def test_real_transcript_pass_is_valid_budgeted_and_round_trips(cli, pager, tmp_path, path, budget, masked):
    flags = (["--budget", str(budget)] if budget else []) + (["--mask-results"] if masked else [])
    first, s1, again, s2, emitted, added = round_trip(cli, tmp_path, path, flags)
    written = EMITTED_AS[s1["format"]]
    assert CHECKS[written](emitted) == [], path.name
    # A session waiting on tool results still ends on them: never on an assistant turn (a prefill).
    text = path.read_text(encoding="utf-8")
    if pager.load(text, pager.detect_format(text)).blocks[-1]["role"] == "tool":
        assert ends_on_results(emitted, written)
    if budget:
        assert s1["tokens_after"] <= budget and not s1["over_budget"]
        assert s2["estimated_context_tokens"] <= budget  # the emitted file, recounted
    else:  # a default pass never grows a context: a block its stub would not shorten stays
        assert s2["estimated_context_tokens"] <= s1["estimated_context_tokens"]
    # The round trip: same format, every block under the id it had, nothing moved, only the marker.
    assert s2["format"] == written and (s2["new"], s2["moved"]) == (0, 0)
    assert added == f'remember a value called last-pager-pass with "{LATER.replace("Z", "+00:00")}"\n'
    # The counter never takes a streaming output count: the estimate is what the log's calls saw.
    if "recorded_context_tokens" in s1:
        assert s1["recorded_context_tokens"] >= s1["recorded_baseline_tokens"] > 0
    # The intent names the message it came from: the human's last request, or where no human wrote
    # (a session of slash commands only) the last user message.
    spoke = bool(pager.human_requests(pager.load(text, s1["format"])))
    source = "last human message" if spoke else "last user message"
    assert s1["intent_source"].startswith(source) and isinstance(s1["intent_block"], str)


@needs_data
@pytest.mark.parametrize("path", FILES, ids=[file_id(p) for p in FILES])
def test_recall_of_real_pages_is_exact(cli, pager, tmp_path, path):
    contract = tmp_path / "c.limn"
    first, _ = run(cli, path, contract, NOW, "--budget", "2000")
    conv = pager.load(path.read_text(encoding="utf-8"), pager.detect_format(path.read_text(encoding="utf-8")))
    texts = {b["id"]: b["text"] for b in conv.blocks}
    paged = [r["block"] for r in first.records if r["action"] == "page" and r["kind"] != "range"]
    for block in dict.fromkeys(paged[:3] + paged[-2:]):  # the first pages (archived ones first) and the last
        result = cli("recall", block, "--contract", contract, "--json")
        assert result.code == 0, result.err
        assert json.loads(result.out)["recalled"][0]["text"] == texts[block]


# --- synthetic inputs: one behaviour each ---


def cc(kind, uuid, parent, content, **extra):
    """Return one Claude Code JSONL line."""
    line = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "S", "isSidechain": False}
    if kind in ("user", "assistant"):
        line["message"] = {"role": kind, "content": content}
    line.update(extra)
    return json.dumps(line)


def wav(byte_rate, seconds):
    """Return a WAV file's bytes: its 44-byte header (the byte rate at offset 28) and silence."""
    return (b"RIFF" + bytes(4) + b"WAVE" + b"fmt " + bytes(12) + byte_rate.to_bytes(4, "little") + bytes(12)
            + bytes(int(byte_rate * seconds)))


def png(width, height, extra=0):
    """Return base64 of a PNG header for width x height, padded with extra bytes."""
    raw = b"\x89PNG\r\n\x1a\n" + b"\0\0\0\rIHDR" + struct.pack(">II", width, height) + b"\0" * (8 + extra)
    return base64.b64encode(raw).decode()


def test_streaming_output_tokens_are_not_a_size_and_the_recorded_context_is_reported(cli, tmp_path):
    text = "the estimate " * 300
    usage = {"input_tokens": 3, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200,
             "output_tokens": 1}
    lines = [cc("user", "u1", None, "Summarise the module."),
             cc("assistant", "a1", "u1", [{"type": "text", "text": text}],
                requestId="r", **{})]
    obj = json.loads(lines[1])
    obj["message"]["usage"], obj["message"]["id"] = usage, "msg_1"
    lines[1] = json.dumps(obj)
    (tmp_path / "s.jsonl").write_text("\n".join(lines))
    result, summary = run(cli, tmp_path / "s.jsonl", tmp_path / "c.limn", NOW)
    sizes = {r["role"]: r["tokens"] for r in result.records}
    assert sizes["assistant"] > 500  # 3,900 characters: never the 1 the stream recorded
    assert summary["recorded_context_tokens"] == 1203 and summary["recorded_baseline_tokens"] == 1203
    assert summary["estimated_context_tokens"] == sum(r["tokens"] for r in result.records)


def test_a_usage_of_zeros_is_not_a_recorded_context(cli, tmp_path):
    """A Claude Code log written through another model's endpoint records usage as all zeros: no
    call saw an empty context, so the summary reports no recorded context rather than 0."""
    lines = [cc("user", "u1", None, "Summarise the module."),
             cc("assistant", "a1", "u1", [{"type": "text", "text": "It reads the config."}])]
    obj = json.loads(lines[1])
    obj["message"]["usage"] = {"input_tokens": 0, "output_tokens": 0}
    lines[1] = json.dumps(obj)
    (tmp_path / "s.jsonl").write_text("\n".join(lines))
    _, summary = run(cli, tmp_path / "s.jsonl", tmp_path / "c.limn", NOW)
    assert "recorded_context_tokens" not in summary and summary["estimated_context_tokens"] > 0


def test_images_count_what_the_provider_charges_and_are_never_paged(cli, pager, tmp_path):
    big = png(1568, 1176, extra=200_000)
    small = png(200, 100)
    body = {"system": "s", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Look at these."},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": big}},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": small}}]},
        {"role": "assistant", "content": "Two charts."},
        {"role": "user", "content": "Compare the invoice totals."}]}
    conv = pager.load(json.dumps(body), "anthropic")
    images = [b for b in conv.blocks if b["kind"] == "media"]
    assert [b["tokens"] for b in images] == [1600, 27]  # capped; 200 * 100 / 750 rounded up
    assert images[0]["text"] == "[image 1568x1176, 1600 tokens]"
    chat = [{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + png(1024, 1024), "detail": "high"}}]}]
    assert pager.load(json.dumps(chat), "openai").blocks[0]["tokens"] == 85 + 170 * 4  # 768 x 768: 4 tiles
    # Between the cuts an image would be paged; it is evicted instead (a stub would lose it), with
    # the tool unit that holds it (a screenshot tool's call and result).
    shot = {"system": "s", "messages": [
        {"role": "user", "content": "Take a screenshot of the chart."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "screenshot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": small}}]}]},
        {"role": "assistant", "content": "A bar chart."},
        {"role": "user", "content": "Compare the invoice totals."}]}
    (tmp_path / "b.json").write_text(json.dumps(shot))
    result, _ = run(cli, tmp_path / "b.json", tmp_path / "c.limn", NOW, "--retain-cut", "0.99",
                    "--evict-cut", "0.01", "--emit", tmp_path / "o.json")
    actions = {r["block"]: (r["action"], r["reason"]) for r in result.records}
    assert actions["t1:result"] == ("evict", "media") and actions["t1"][0] == "evict"
    assert not any(r["action"] == "page" and r["kind"] == "media" for r in result.records)


def test_what_a_human_attached_is_a_floor_kept_whole(cli, pager, tmp_path):
    shot = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png(800, 600)}}
    body = {"system": "s", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "The totals column is cut off, see:"}, shot]}]}
    for n in range(30):
        body["messages"] += [{"role": "assistant", "content": f"step {n}: " + "checked the layout code " * 60},
                             {"role": "user", "content": f"go on with part {n}"}]
    body["messages"][-1]["content"] = [{"type": "text", "text": "And this one?"}, shot]
    (tmp_path / "b.json").write_text(json.dumps(body))
    conv = pager.load(json.dumps(body), "anthropic")
    images = [b["id"] for b in conv.blocks if b["kind"] == "media"]
    assert len(images) == 2 and [b["protected"] for b in conv.blocks[1:3]] == ["task", "human"]
    # A default pass pages most of the session; the human's screenshots stay whole, and the
    # intent comes from their words, never from a picture's label.
    result, summary = run(cli, tmp_path / "b.json", tmp_path / "c.limn", NOW)
    actions = {r["block"]: r["action"] for r in result.records}
    assert summary["page"] > 20 and [actions[i] for i in images] == ["retain", "retain"]
    assert summary["intent_block"] != images[1] and "one" not in summary["intent"]  # "one": a stop word
    # Under a budget each is kept while it fits, after the text floors' stubs (640 tokens each).
    result, summary = run(cli, tmp_path / "b.json", tmp_path / "d.limn", NOW, "--budget", "2000")
    actions = {r["block"]: r["action"] for r in result.records}
    assert [actions[i] for i in images] == ["retain", "retain"] and summary["tokens_after"] <= 2000
    result, summary = run(cli, tmp_path / "b.json", tmp_path / "e.limn", NOW, "--budget", "900")
    actions = {r["block"]: r["action"] for r in result.records}
    assert sorted(actions[i] for i in images) == ["evict", "retain"] and summary["tokens_after"] <= 900


def test_image_dimensions_from_every_header(pager):
    jpeg = b"\xff\xd8" + b"\xff\xe1" + struct.pack(">H", 5000) + b"x" * 4998 + \
        b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 768, 1024) + b"\0" * 20
    gif = b"GIF89a" + struct.pack("<HH", 640, 480) + b"\0" * 8
    webp = b"RIFF\0\0\0\0WEBPVP8X" + b"\0" * 8 + (1919).to_bytes(3, "little") + (1079).to_bytes(3, "little")
    for raw, size in ((jpeg, (1024, 768)), (gif, (640, 480)), (webp, (1920, 1080))):
        assert pager._image_size(base64.b64encode(raw).decode()) == size
    assert pager._image_size(base64.b64encode(b"not a picture").decode()) is None


def test_compaction_boundary_archives_what_came_before(cli, pager, tmp_path):
    for parent_in_file in (True, False):
        lines = [cc("user", "u1", None, "Port the parser to Rust."),
                 cc("assistant", "a1", "u1", [{"type": "text", "text": "Ported the lexer."}]),
                 cc("system", "b1", None, None, subtype="compact_boundary",
                    logicalParentUuid="a1" if parent_in_file else "gone"),
                 cc("user", "s1", "b1", "This session is being continued from a previous conversation. "
                                        "The lexer is ported.", isCompactSummary=True),
                 cc("user", "u2", "s1", "Now port the parser tests."),
                 cc("assistant", "a2", "u2", [{"type": "text", "text": "On it."}])]
        path = tmp_path / f"s{parent_in_file}.jsonl"
        path.write_text("\n".join(lines))
        conv = pager.load(path.read_text(), "claude-code")
        archived = [b["text"] for b in conv.blocks if b["protected"] == "archived"]
        assert archived == ["Port the parser to Rust.", "Ported the lexer."], parent_in_file
        contract, out = tmp_path / f"c{parent_in_file}.limn", tmp_path / f"o{parent_in_file}.json"
        result, summary = run(cli, path, contract, NOW, "--emit", out)
        assert summary["archived"] == 2
        emitted = json.dumps(json.loads(out.read_text()))
        assert "Port the parser to Rust." not in emitted and "The lexer is ported." in emitted
        listed = cli("index", "--contract", contract, "--json")
        ids = {p["block"] for p in json.loads(listed.out)["paged"]}
        first = next(b["id"] for b in conv.blocks if b["text"] == "Port the parser to Rust.")
        assert first in ids
        assert cli("recall", first, "--contract", contract).out == "Port the parser to Rust."


def test_codex_compacted_line_archives_the_replaced_items(pager):
    lines = [{"type": "response_item", "payload": {"type": "message", "role": "user",
                                                    "content": [{"type": "input_text", "text": "Fix the build."}]}},
             {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                                    "content": [{"type": "output_text", "text": "Found the typo."}]}},
             {"type": "compacted", "payload": {"message": "s", "replacement_history": [
                 {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the build."}]}]}},
             {"type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": {
                 "input_tokens": 900, "cached_input_tokens": 800}}}}]
    conv = pager.load("\n".join(json.dumps(x) for x in lines), "codex")
    assert [(b["text"], b["protected"]) for b in conv.blocks] == [
        ("Fix the build.", "archived"), ("Found the typo.", "archived"), ("Fix the build.", "task")]
    assert conv.recorded["recorded_context_tokens"] == 900  # cached tokens are part of the input
    assert conv.other_lines == {"event_msg": 1}


def test_older_codex_rollout_reads(pager):
    lines = [{"id": "x", "timestamp": "t", "instructions": "be careful", "git": {"branch": "main"}},
             {"record_type": "state"},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Run the tests."}]},
             {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
             {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
    text = "\n".join(json.dumps(x) for x in lines)
    assert pager.detect_format(text) == "codex"
    conv = pager.load(text, "codex")
    assert [b["id"] for b in conv.blocks][1:] == ["c1", "c1:result"]
    assert conv.other_lines == {"header": 1, "record_type": 1}


def test_swe_agent_trajectory_reads_and_writes_back_chat_messages(cli, pager, tmp_path):
    traj = {"environment": "main", "info": {"exit_status": "submitted"}, "trajectory": [], "history": [
        {"role": "system", "content": "You are an agent.", "agent": "main", "message_type": "system_prompt"},
        {"role": "user", "content": "Fix issue 1867.", "agent": "main", "message_type": "observation"},
        {"role": "assistant", "content": "Let me look.", "thought": "t", "action": "ls", "agent": "main",
         "message_type": "action", "tool_calls": [{"id": "c1", "type": "function",
                                                   "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "content": "a.py", "agent": "main", "message_type": "observation", "tool_call_ids": ["c1"]},
        {"role": "assistant", "content": "Again.", "tool_calls": [{"id": "c1", "type": "function",
                                                                   "function": {"name": "bash", "arguments": "{\"x\": 1}"}}]},
        {"role": "tool", "content": "b.py", "tool_call_ids": ["c1"]}]}
    path = tmp_path / "t.traj"
    path.write_text(json.dumps(traj))
    assert pager.detect_format(path.read_text()) == "swe-agent"
    ids = [b["id"] for b in pager.load(path.read_text(), "swe-agent").blocks]
    assert ids[3:5] == ["c1", "c1:result"] and ids[6].startswith("c1~") and len(set(ids)) == len(ids)
    _, summary = run(cli, path, tmp_path / "c.limn", NOW, "--emit", tmp_path / "o.json")
    out = json.loads((tmp_path / "o.json").read_text())
    assert api_rules.problems_chat(out) == [] and summary["format"] == "swe-agent"
    assert not any(k in m for m in out for k in ("agent", "thought", "tool_call_ids"))


def test_swe_agent_user_messages_after_the_task_are_the_harness(cli, pager, tmp_path):
    """Without function calling SWE-agent sends each command's output as a user message, and a
    demonstration (is_demo) as one before the task: the task is the first other user message,
    and the intent comes from it, not from the last command's output."""
    traj = {"history": [
        {"role": "system", "content": "You are an agent.", "agent": "main", "message_type": "system_prompt"},
        {"role": "user", "content": "Here is a demonstration of fixing a lexer.", "agent": "main", "is_demo": True},
        {"role": "user", "content": "ISSUE: parse_total drops the cents.", "agent": "main",
         "message_type": "observation"},
        {"role": "assistant", "content": "Run it.\n```\npython totals.py\n```", "agent": "main",
         "message_type": "action", "thinking_blocks": [{"type": "thinking", "thinking": "t", "signature": "s"}]},
        {"role": "user", "content": "Your command ran successfully and did not produce any output.",
         "agent": "main", "message_type": "observation"}]}
    path = tmp_path / "demo.traj"  # no run record beside the history: SWE-agent's demonstrations are saved so
    path.write_text(json.dumps(traj))
    assert pager.detect_format(path.read_text()) == "swe-agent"
    conv = pager.load(path.read_text(), "swe-agent")
    assert [r["text"] for r in pager.human_requests(conv)] == ["ISSUE: parse_total drops the cents."]
    result, summary = run(cli, path, tmp_path / "c.limn", NOW, "--emit", tmp_path / "o.json")
    task = next(r for r in result.records if r["reason"] == "task")
    assert task["block"] == summary["intent_block"] and "parse_total" in summary["intent"]
    out = json.loads((tmp_path / "o.json").read_text())
    assert api_rules.problems_chat(out) == [] and not any("thinking_blocks" in m for m in out)


def test_subagent_log_is_the_subagents_conversation(pager):
    lines = [cc("user", "s1", None, "Explore the session model.", isSidechain=True, agentId="a"),
             cc("assistant", "s2", "s1", [{"type": "text", "text": "SessionLive holds it."}], isSidechain=True,
                agentId="a")]
    conv = pager.load("\n".join(lines), "claude-code")
    assert [b["text"] for b in conv.blocks] == ["Explore the session model.", "SessionLive holds it."]


def test_a_log_without_parent_links_reads_in_file_order(cli, pager, tmp_path):
    """Logs written by a tool or by hand may have no parentUuid at all: the file's order is the conversation."""
    lines = [json.dumps({"uuid": u, "type": t, "sessionId": "S", "isSidechain": False,
                         "message": {"role": t, "content": text}})
             for u, t, text in (("x1", "user", "Rename the config loader."), ("x2", "assistant", "Renamed it."),
                                ("x3", "user", "Now update its tests."))]
    conv = pager.load("\n".join(lines), "claude-code")
    assert [b["text"] for b in conv.blocks] == ["Rename the config loader.", "Renamed it.", "Now update its tests."]
    (tmp_path / "s.jsonl").write_text("\n".join(lines))
    _, summary = run(cli, tmp_path / "s.jsonl", tmp_path / "c.limn", NOW)
    assert summary["blocks"] == 3 and "tests" in summary["intent"]


def test_a_byte_order_mark_is_not_text(cli, tmp_path):
    """Some editors start a UTF-8 file with a byte order mark: the first line still reads."""
    lines = [cc("user", "u1", None, "List the files."), cc("assistant", "a1", "u1", [{"type": "text", "text": "Two."}])]
    (tmp_path / "s.jsonl").write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode("utf-8"))
    (tmp_path / "h.json").write_bytes(b"\xef\xbb\xbf" + json.dumps([{"role": "user", "content": "List the files."}]).encode())
    for name in ("s.jsonl", "h.json"):
        result, summary = run(cli, tmp_path / name, tmp_path / (name + ".limn"), NOW)
        assert summary["skipped_lines"] == 0 and summary["intent_block"] is not None, name


def test_orphaned_reasoning_is_never_emitted(pager):
    items = [{"role": "user", "content": "go"},
             {"type": "reasoning", "id": "rs_1", "summary": []},
             {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "ok"},
             {"type": "reasoning", "id": "rs_2", "summary": []},
             {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
             {"role": "developer", "content": "be brief"},
             {"role": "user", "content": "again"}]
    conv = pager.load(json.dumps(items), "responses")
    assert any("rs_2" in r or "input[4]" in r for r in conv.repairs)
    out = pager.emit(conv, {})
    assert api_rules.problems_responses(out) == [] and pager.validate("responses", out) == []
    # The engine's own check names the rule too.
    assert pager.validate("responses", items[:2] + items[6:]) != []


def test_intent_is_the_last_message_a_human_wrote(pager):
    conv = pager.load(json.dumps([
        {"role": "user", "content": "Fix the invoice rounding."},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "<task-notification>build finished</task-notification>"},
        {"role": "user", "content": "<system-reminder>todo list empty</system-reminder>"},
        {"role": "user", "content": "<local-command-stdout>ok</local-command-stdout>"}]), "openai")
    requests = pager.human_requests(conv)
    assert [r["text"] for r in requests] == ["Fix the invoice rounding."]
    plan = pager.plan_pass({"blocks": pager.conversation_blocks(conv)})
    assert plan.intent_source == "last human message" and plan.intent_block == requests[0]["id"]
    # mini-swe-agent sends each command's output back as a user message: not the human's either.
    mini = pager.load(json.dumps([
        {"role": "system", "content": "You can run bash."},
        {"role": "user", "content": "Please solve this issue: division by zero in tests/missing_colon.py"},
        {"role": "assistant", "content": "```bash\ncat tests/missing_colon.py\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\ndef division(a, b)\n</output>"}]), "openai")
    requests = pager.human_requests(mini)
    assert [r["text"][:25] for r in requests] == ["Please solve this issue: "]
    assert pager.plan_pass({"blocks": pager.conversation_blocks(mini)}).intent_block == requests[0]["id"]
    assert {b["turn"] for b in mini.blocks if b["role"] != "system"} == {1}
    meta = pager.load(cc("user", "m1", None, "Base for this skill", isMeta=True) + "\n"
                      + cc("user", "u1", "m1", "Real request"), "claude-code")
    assert [r["text"] for r in pager.human_requests(meta)] == ["Real request"]


def test_codex_instructions_and_compaction_summary_are_not_the_humans(pager):
    """Codex sends AGENTS.md, plugin lists and its compaction summary as user messages: none is a request."""
    def item(text):
        return json.dumps({"timestamp": "2026-01-01T10:00:00Z", "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}})
    lines = [json.dumps({"timestamp": "2026-01-01T10:00:00Z", "type": "session_meta",
                         "payload": {"id": "s", "cwd": "/w", "originator": "codex_cli_rs"}}),
             item("# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nLint first.\n</INSTRUCTIONS>"),
             item("<recommended_plugins>\nnone\n</recommended_plugins>"),
             item("Fix the flaky date test."),
             item("Another language model started to solve this problem and produced a summary: timezones.")]
    conv = pager.load("\n".join(lines), "codex")
    assert [r["text"] for r in pager.human_requests(conv)] == ["Fix the flaky date test."]
    assert [b["kind"] for b in conv.blocks if b["role"] == "user"] == [None, None, "task", "summary"]


def test_a_humans_message_is_never_evicted_and_the_task_is_kept(cli, tmp_path):
    history = [{"role": "user", "content": "Port the parser to Rust."}]
    for n in range(30):
        history += [{"role": "assistant", "content": f"step {n} done"}, {"role": "user", "content": f"next {n}"}]
    history += [{"role": "user", "content": "zebra"}]
    (tmp_path / "h.json").write_text(json.dumps(history))
    result, _ = run(cli, tmp_path / "h.json", tmp_path / "c.limn", NOW, "--intent", "zebra")
    users = [r for r in result.records if r["role"] == "user"]
    assert users[0]["action"] == "retain" and users[0]["reason"] == "task"
    assert all(r["action"] != "evict" for r in users)
    off, _ = run(cli, tmp_path / "h.json", tmp_path / "d.limn", NOW, "--intent", "zebra", "--no-protect-task")
    first = next(r for r in off.records if r["role"] == "user")
    assert first["reason"] != "task" and first["action"] in ("retain", "page")


def test_round_trip_stable_and_format_held_by_the_contract(cli, tmp_path):
    lines = [cc("user", "u1", None, "List the files."),
             cc("assistant", "a1", "u1", [{"type": "text", "text": "There are two."}])]
    (tmp_path / "s.jsonl").write_text("\n".join(lines))
    first, s1, again, s2, emitted, added = round_trip(cli, tmp_path, tmp_path / "s.jsonl", [])
    assert "system" not in emitted and s2["format"] == "anthropic"  # plain text, still read as anthropic
    assert (s2["new"], s2["moved"]) == (0, 0) and added.startswith("remember a value called last-pager-pass")
    assert [r["block"] for r in again.records] == [r["block"] for r in first.records]
    # A history of another format on the same contract is refused in one line.
    (tmp_path / "r.json").write_text(json.dumps([{"type": "message", "role": "user", "content": "hi"}]))
    refused = cli("--history", tmp_path / "r.json", "--contract", tmp_path / "c.limn")
    assert refused.code == 2 and "claude-code format" in refused.err and len(refused.err.splitlines()) == 1


def test_pager_notes_are_its_own_on_reread(pager):
    body = {"messages": [{"role": "user", "content": pager.OMITTED_NOTE},
                         {"role": "assistant", "content": "Two files."}]}
    conv = pager.load(json.dumps(body), "anthropic")
    assert [b["text"] for b in conv.blocks] == ["Two files."]
    assert pager.emit(conv, {}) == body


def test_unknown_parts_and_lines_are_carried_and_counted(cli, pager, tmp_path):
    lines = [cc("user", "u1", None, [{"type": "text", "text": "Check this."}, {"type": "hologram", "x": 1}]),
             json.dumps({"type": "brand-new-line", "uuid": "n1", "sessionId": "S"}),
             cc("assistant", "a1", "u1", [{"type": "text", "text": "Checked."}])]
    (tmp_path / "s.jsonl").write_text("\n".join(lines))
    result, summary = run(cli, tmp_path / "s.jsonl", tmp_path / "c.limn", NOW, "--keep-recent", "9",
                          "--emit", tmp_path / "o.json")
    assert summary["unknown_parts"] == {"hologram": 1} and summary["other_lines"] == {"brand-new-line": 1}
    out = json.loads((tmp_path / "o.json").read_text())
    assert {"type": "hologram", "x": 1} in out["messages"][0]["content"]
    (tmp_path / "odd.json").write_text(json.dumps({"turns": [1, 2]}))
    bad = cli("--history", tmp_path / "odd.json", "--contract", tmp_path / "d.limn")
    assert bad.code == 2 and len(bad.err.splitlines()) == 1
    assert str(tmp_path / "odd.json") in bad.err and "matches none of" in bad.err



@pytest.mark.parametrize("fmt, history", [
    ("anthropic", {"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": "Plan the orders migration."},
        {"role": "assistant", "content": [{"type": "compaction", "content": "We chose two phases. " * 20},
                                          {"type": "text", "text": "Ready."}]},
        {"role": "user", "content": "Which phase adds the index?"}]}),
    ("responses", [{"type": "message", "role": "user", "content": "Plan the orders migration."},
                   {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA" + "x" * 400},
                   {"type": "message", "role": "user", "content": "Which phase adds the index?"}])],
    ids=["anthropic-block", "responses-item"])
def test_a_providers_compaction_is_kept_like_the_instructions(cli, tmp_path, fmt, history):
    """A compaction block or item is the model's whole past: never paged or evicted, by default or under a budget."""
    path = tmp_path / "h.json"
    path.write_text(json.dumps(history))
    for flags in ([], ["--budget", "8000"], ["--budget", "30"]):
        contract = tmp_path / f"c{len(flags)}{flags[-1] if flags else ''}.limn"
        result, summary = run(cli, path, contract, NOW, *flags, "--emit", tmp_path / "o.json")
        assert summary["format"] == fmt  # no system key: the compaction block alone says Anthropic
        kept = [r for r in result.records if r["reason"] == "compaction"]
        assert len(kept) == 1 and kept[0]["action"] == "retain"
        assert CHECKS[fmt](json.loads((tmp_path / "o.json").read_text())) == []
        if flags == ["--budget", "30"]:  # it alone passes the budget: kept all the same, and said
            assert summary["over_budget"]


def test_parts_carried_as_they_are_count_their_whole_json(cli, tmp_path):
    """An MCP call's output or a server tool's result is sent whole: the budget counts all of it."""
    page = "The orders table holds one row per order and line. " * 40
    bodies = {"r.json": [{"type": "message", "role": "user", "content": "What does the orders table hold?"},
                         {"type": "mcp_call", "id": "mcp_1", "server_label": "db", "name": "describe",
                          "arguments": "{}", "output": page},
                         {"type": "message", "role": "assistant", "content": "One row per order line."}],
              "a.json": {"model": "m", "max_tokens": 9, "messages": [
                  {"role": "user", "content": "What does the orders table hold?"},
                  {"role": "assistant", "content": [
                      {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_fetch", "input": {"url": "u"}},
                      {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_1",
                       "content": {"type": "web_fetch_result", "url": "u", "content": {
                           "type": "document", "source": {"type": "text", "media_type": "text/plain", "data": page}}}},
                      {"type": "text", "text": "One row per order line."}]}]}}
    for name, body in bodies.items():
        folder = tmp_path / name.split(".")[0]
        folder.mkdir()
        (folder / name).write_text(json.dumps(body))
        _, summary = run(cli, folder / name, folder / "d.limn", NOW, "--keep-recent", "9")
        assert summary["estimated_context_tokens"] >= len(page) // 5, name  # not a 3-token label
        first, s1, again, s2, emitted, added = round_trip(cli, folder, folder / name, ["--budget", "300"])
        assert s1["tokens_after"] <= 300 and s2["estimated_context_tokens"] <= 300, name


def test_a_lone_surrogate_is_never_paged_and_written_back_as_its_escape(cli, tmp_path):
    """A log can cut a long output inside an emoji ("\\ud83d" alone: JSON, not UTF-8). No page store
    holds such a text: the block stays whole or goes (reason unstorable), the pass never crashes,
    and the emitted file keeps the escape, so the round trip reads the same block."""
    cut = "Release notes: rounding fixed " + "\ud83d"
    history = [{"role": "user", "content": "Fix the invoice rounding."},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": cut},
               {"role": "assistant", "content": "The rounding fix is in."}]
    path = tmp_path / "h.json"
    path.write_text(json.dumps(history))  # ensure_ascii: the surrogate is written as its escape
    # A retain cut no block reaches and an evict cut under every block: the call's unit would be paged.
    first, s1, again, s2, emitted, added = round_trip(cli, tmp_path, path,
                                                      ["--retain-cut", "1", "--evict-cut", "0", "--keep-recent", "0"])
    unit = [r for r in first.records if r["block"] in ("c1", "c1:result")]
    assert [(r["block"], r["action"], r["reason"]) for r in unit] == [("c1", "evict", "unit tool:c1"),
                                                                     ("c1:result", "evict", "unstorable")]
    kept, _ = run(cli, path, tmp_path / "k.limn", NOW, "--retain-cut", "0", "--evict-cut", "0", "--emit", tmp_path / "k.json")
    raw = (tmp_path / "k.json").read_text(encoding="utf-8")
    assert "\\ud83d" in raw and json.loads(raw)[2]["content"] == cut
    assert (s2["new"], s2["moved"]) == (0, 0) and added.startswith("remember a value called last-pager-pass")


def masked_results(records):
    """Return the ids of tool results paged while their call (the block id before ':result') is retained."""
    return [b for b, r in records.items() if r["role"] == "tool" and r["action"] == "page"
            and b.endswith(":result") and records.get(b[:-len(":result")], {}).get("action") == "retain"]


def test_mask_results_pages_a_large_result_in_place(cli, pager, tmp_path):
    path = ROOT / "tests" / "fixtures" / "transcripts" / "openai_parallel.json"
    _, whole = run(cli, path, tmp_path / "whole.limn", NOW)
    sizes = {r["block"]: r["tokens"] for r in _.records if r["role"] == "tool"}
    biggest = max(sizes, key=sizes.get)
    # Room for everything but half the largest result: it is paged in place, its call stays.
    budget = whole["estimated_context_tokens"] - sizes[biggest] // 2
    flags = ["--budget", str(budget), "--mask-results", "--evict-cut", "0", "--intent", "unrelated words only"]
    first, s1, again, s2, emitted, added = round_trip(cli, tmp_path, path, flags)
    records = {r["block"]: r for r in first.records}
    assert masked_results(records) == [biggest]
    assert api_rules.problems_chat(emitted) == [] and s1["tokens_after"] <= budget
    [answer] = [m for m in emitted["messages"] if m.get("tool_call_id") == biggest[:-len(":result")]]
    assert answer["content"].startswith(f"[paged {biggest} |")  # the stub, where the result was
    # Re-read, the stub is the same block, still paged; recall gives the result back whole.
    assert (s2["new"], s2["moved"]) == (0, 0)
    assert {r["block"]: r["action"] for r in again.records}[biggest] == "page"
    original = next(m["content"] for m in json.loads(path.read_text())["messages"]
                    if m.get("tool_call_id") == biggest[:-len(":result")])
    assert cli("recall", "--contract", tmp_path / "c.limn", biggest).out == original


@needs_data
@pytest.mark.parametrize("name", ["claude-code/reliability-python-to-rust-port.jsonl",
                                  "codex/acidicsoil-rollout-2025-11-17-019a93b9.jsonl",
                                  "openai/sweagent-marshmallow-1867-function-calling.traj"])
def test_mask_results_on_real_sessions_in_each_written_format(cli, tmp_path, name):
    if not (DATA / name).is_file():
        pytest.skip(f"{name} is not in {DATA}")  # a set of other real files put in its place
    first, s1, again, s2, emitted, added = round_trip(cli, tmp_path, DATA / name, ["--budget", "4000",
                                                                                 "--mask-results"])
    masked = masked_results({r["block"]: r for r in first.records})
    assert masked and CHECKS[EMITTED_AS[s1["format"]]](emitted) == []
    text = json.dumps(emitted)
    assert all(f"[paged {block} |" in text for block in masked)
    assert (s2["new"], s2["moved"]) == (0, 0)


# --- the open round trip: a request waiting on tool results still ends on them ---

_BIG_OUTPUT = "\n".join(f"{n}: value_{n} = compute_{n}(x)" for n in range(1500))  # about 9,000 tokens

OPEN_ROUND_TRIPS = {
    "anthropic": {"system": "You read code.", "messages": [
        {"role": "user", "content": "Explain what cache.py does"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should read the file first.", "signature": "c2ln"},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/w/cache.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": _BIG_OUTPUT}]}]},
    "openai": {"messages": [
        {"role": "system", "content": "You read code."},
        {"role": "user", "content": "Explain what cache.py does"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "read", "arguments": '{"path": "/w/cache.py"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": _BIG_OUTPUT}]},
    "responses": {"input": [
        {"role": "developer", "content": "You read code."},
        {"role": "user", "content": "Explain what cache.py does"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ZW5j"},
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": '{"path": "/w/cache.py"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": _BIG_OUTPUT}]},
}


@pytest.mark.parametrize("fmt", sorted(OPEN_ROUND_TRIPS))
def test_an_open_round_trip_keeps_its_call_and_pages_its_result_in_place(cli, tmp_path, fmt):
    body = OPEN_ROUND_TRIPS[fmt]
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body))
    first, s1, again, s2, emitted, added = round_trip(cli, tmp_path, path, ["--budget", "2000"])
    assert CHECKS[fmt](emitted) == [] and s1["tokens_after"] <= 2000
    # The request still ends on the result, which holds its stub; the call (and its thinking or
    # reasoning) is what the model wrote, untouched: a paged unit would have ended on an assistant turn.
    assert ends_on_results(emitted, fmt)
    items = emitted["input"] if fmt == "responses" else emitted["messages"]
    original = body["input"] if fmt == "responses" else body["messages"]
    assert items[:-1] == original[:-1]
    last = items[-1]
    result = last["output"] if fmt == "responses" else last["content"] if fmt == "openai" else last["content"][0]["content"]
    assert result.startswith("[paged ") and "value_1499" in result  # a giant's head and tail
    assert s2["format"] == fmt and (s2["new"], s2["moved"]) == (0, 0)


def test_a_unit_followed_by_more_conversation_still_pages_whole(cli, tmp_path):
    body = json.loads(json.dumps(OPEN_ROUND_TRIPS["openai"]))
    body["messages"].append({"role": "user", "content": "Never mind: what does cache.py export?"})
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body))
    first, s1, *_ = round_trip(cli, tmp_path, path, ["--budget", "2000"])
    actions = {r["block"]: r["action"] for r in first.records if r["role"] in ("assistant", "tool")}
    assert set(actions.values()) == {"page"}  # the call went with its result: that round trip is closed


# --- a default pass keeps what a stub would not shorten ---

def test_a_block_its_stub_would_not_shorten_stays_and_page_small_pages_it(cli, tmp_path):
    body = {"messages": [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 12}'},
        {"role": "assistant", "content": "It is 12 C."},
        {"role": "assistant", "content": "Paris weather report follows. " + "Mild and dry, light wind. " * 40}]}
    for n in range(6):  # later turns: the exchange above grows old
        body["messages"] += [{"role": "user", "content": f"Which museum is number {n}?"},
                             {"role": "assistant", "content": f"Museum {n} is open daily."}]
    body["messages"].append({"role": "user", "content": "And in Rome?"})
    path = tmp_path / "h.json"
    path.write_text(json.dumps(body))
    # --evict-cut 0: every block under the retain cut is paged, none evicted
    result, summary = run(cli, path, tmp_path / "c.limn", NOW, "--evict-cut", "0", "--emit", tmp_path / "o.json")
    why = {r["block"]: (r["action"], r["reason"]) for r in result.records}
    assert why["call_1"] == why["call_1:result"] == ("retain", "small")  # the unit costs less than its stub
    short = next(r["block"] for r in result.records if r["tokens"] <= 4 and r["role"] == "assistant")
    assert why[short] == ("retain", "small")
    assert summary["page"] == 1  # the long report: its stub is shorter
    _, again = run(cli, tmp_path / "o.json", tmp_path / "c.limn", LATER, "--evict-cut", "0")
    assert again["estimated_context_tokens"] < summary["estimated_context_tokens"]
    # --page-small (the PreCompact hook's pass): everything between the cuts is paged, short or not.
    result, summary = run(cli, path, tmp_path / "d.limn", NOW, "--evict-cut", "0", "--page-small")
    assert {r["reason"] for r in result.records}.isdisjoint({"small"}) and summary["page"] >= 3


def test_an_old_human_message_shorter_than_its_stub_stays_whole(cli, tmp_path):
    aside = "By the way, the staging box reboots nightly at two, so avoid long jobs around then please."
    messages = [{"role": "user", "content": "Fix the flaky upload test in the storage client."},
                {"role": "assistant", "content": "Looking at the upload test now."},
                {"role": "user", "content": aside}]
    for n in range(5):
        messages += [{"role": "assistant", "content": f"Retry loop step {n} added to the client."},
                     {"role": "user", "content": f"Continue with part {n}."}]
    path = tmp_path / "h.json"
    path.write_text(json.dumps({"messages": messages}))
    result, summary = run(cli, path, tmp_path / "c.limn", NOW)
    [record] = [r for r in result.records if r["tokens"] == 23 and r["role"] == "user"]
    # 23 tokens: more than a stub's header and recall note alone, less than its whole stub (the
    # aside itself as the summary). An old human message is scored out, then lifted to a page by
    # its floor; priced on its text, its stub would be longer: it stays.
    assert record["kind"] == "human" and record["similarity"] == 0.0
    assert (record["action"], record["reason"]) == ("retain", "small")


def _long_instructions(fmt):
    """Return a request of ``fmt`` whose system prompt (a short rule, then a skills list of about
    4,500 tokens) is larger than a budget of 3,000, and the skills list's text."""
    skills = "".join(f"- skill-{k}: read SKILL.md under skills/skill-{k} before using it for task kind {k}.\n"
                     for k in range(220))
    rule, ask = "Answer in English.", "Which skill formats the changelog?"
    talk = [("user", "List the skills you have."), ("assistant", "There are 220 of them, one per task kind."),
            ("user", ask)]
    if fmt == "openai":
        return [{"role": "system", "content": rule}, {"role": "developer", "content": skills},
                *[{"role": r, "content": t} for r, t in talk]], skills
    if fmt == "anthropic":
        return {"system": [{"type": "text", "text": rule}, {"type": "text", "text": skills}],
                "messages": [{"role": r, "content": t} for r, t in talk]}, skills
    return [{"type": "message", "role": "developer", "content": rule},
            {"type": "message", "role": "developer", "content": skills},
            *[{"type": "message", "role": r, "content": t} for r, t in talk]], skills


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "responses"])
def test_a_system_prompt_larger_than_the_budget_is_paged_not_overrun(cli, tmp_path, fmt):
    """Under a budget the system prompt is claimed in order while it fits; a part that does not fit
    is paged (its stub in place, its text recallable), never evicted, and the budget holds."""
    body, skills = _long_instructions(fmt)
    path = tmp_path / "h.json"
    path.write_text(json.dumps(body))
    first, s1, again, s2, emitted, added = round_trip(cli, tmp_path, path, ["--budget", "3000"])
    assert s1["format"] == fmt and not s1["over_budget"] and s1["tokens_after"] <= 3000
    system = [r for r in first.records if r["role"] in ("system", "developer")]
    assert [(r["action"], r["reason"]) for r in system] == [("retain", "system"), ("page", "budget-paged")]
    assert CHECKS[fmt](emitted) == []
    assert "Answer in English." in json.dumps(emitted) and skills not in json.dumps(emitted)
    recalled = cli("recall", system[1]["block"], "--contract", tmp_path / "c.limn", "--json")
    assert json.loads(recalled.out)["recalled"][0]["text"] == skills
    assert (s2["format"], s2["new"], s2["moved"]) == (fmt, 0, 0) and not s2["over_budget"]
    # without a budget the system prompt stays whole
    plain, _ = run(cli, path, tmp_path / "plain.limn", NOW)
    assert all(r["action"] == "retain" for r in plain.records if r["role"] in ("system", "developer"))


def test_codexs_own_item_metadata_stays_out_of_the_request(cli, tmp_path):
    """Newer Codex rollouts put internal_chat_message_metadata_passthrough on items: Codex's bookkeeping,
    which other providers refuse and the API reference does not know. Written back, items lack it."""
    meta = {"internal_chat_message_metadata_passthrough": {"turn_id": "t1"}}
    def item(payload):
        return json.dumps({"timestamp": "2026-01-01T10:00:00Z", "type": "response_item", "payload": {**payload, **meta}})
    lines = [json.dumps({"timestamp": "2026-01-01T10:00:00Z", "type": "session_meta",
                         "payload": {"id": "s", "cwd": "/w", "originator": "codex_cli_rs"}}),
             item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the tests."}]}),
             item({"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"cmd": "ls"}'}),
             item({"type": "function_call_output", "call_id": "call_1", "output": "test_dates.py"}),
             item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "One."}]})]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    first, s1, again, s2, emitted, _ = round_trip(cli, tmp_path, path, [])
    assert "internal_chat_message_metadata_passthrough" not in json.dumps(emitted)
    assert CHECKS["responses"](emitted) == []
    assert (s2["format"], s2["new"], s2["moved"]) == ("responses", 0, 0)


def test_a_picture_ending_the_conversation_in_a_tool_result_stays_with_its_call(cli, tmp_path):
    """The open round trip's result is a picture (a URL image a tool returned): a default pass keeps
    it with its call (it is recent), so the request still ends on the result; under a budget the unit
    is kept whole while it fits and else evicted whole, never paged (a stub would lose the picture)."""
    url = {"type": "image", "source": {"type": "url", "url": "https://example.com/logo.png"}}
    body = {"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "What is shown in the image from get_image?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "I'll fetch the image."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "get_image", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [url]}]}]}
    (tmp_path / "b.json").write_text(json.dumps(body))
    result, summary = run(cli, tmp_path / "b.json", tmp_path / "c.limn", NOW, "--emit", tmp_path / "o.json")
    emitted = json.loads((tmp_path / "o.json").read_text())
    actions = {r["block"]: (r["action"], r["reason"]) for r in result.records}
    assert actions["toolu_1:result"] == ("retain", "recent") and actions["toolu_1"][0] == "retain"
    assert emitted["messages"] == body["messages"] and ends_on_results(emitted, "anthropic")
    for budget, kept in ((1700, "retain"), (500, "evict")):
        result, summary = run(cli, tmp_path / "b.json", tmp_path / f"{budget}.limn", NOW, "--budget", str(budget),
                              "--emit", tmp_path / f"{budget}.json")
        actions = {r["block"]: r["action"] for r in result.records}
        assert actions["toolu_1:result"] == actions["toolu_1"] == kept and summary["tokens_after"] <= budget
        assert api_rules.problems_anthropic(json.loads((tmp_path / f"{budget}.json").read_text())) == []


def test_a_part_read_by_a_label_only_is_never_paged(cli, tmp_path):
    """A part carried as it is whose text is a label (a server tool's fetched document, a hosted web
    search) is kind "opaque": kept whole or evicted with its unit, never paged, because the store
    could give back only the label.  A server tool's call, whose text is its name and input, is not."""
    page = "Pydantic AI is a Python agent framework. " * 500  # about 5,000 tokens
    body = {"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": "Summarise ai.pydantic.dev"},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_fetch", "input": {"url": "https://ai.pydantic.dev"}},
            {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_1", "content": {
                "type": "web_fetch_result", "url": "https://ai.pydantic.dev", "content": {
                    "type": "document", "title": "Pydantic AI",
                    "source": {"type": "text", "media_type": "text/plain", "data": page}}}},
            {"type": "text", "text": "It is a Python agent framework."}]},
        {"role": "user", "content": "Which page of the docs covers the fetch tool?"}]}
    (tmp_path / "b.json").write_text(json.dumps(body))
    result, summary = run(cli, tmp_path / "b.json", tmp_path / "c.limn", NOW, "--budget", "2000",
                          "--emit", tmp_path / "o.json")
    records = {r["block"]: r for r in result.records}
    fetched = [r for r in result.records if r["kind"] == "opaque"]
    assert len(fetched) == 1 and fetched[0]["tokens"] > 4000 and fetched[0]["action"] == "evict"
    assert [r["kind"] for r in result.records if r["block"] != fetched[0]["block"]].count("opaque") == 0
    assert summary["tokens_after"] <= 2000 and summary["page"] == 0
    emitted = json.loads((tmp_path / "o.json").read_text())
    assert api_rules.problems_anthropic(emitted) == [] and "srvtoolu_1" not in json.dumps(emitted)
    assert records[fetched[0]["block"]]["reason"] in ("opaque", "budget-evicted", "unit srvtoolu_1")
    # A hosted web search item of a Responses history is opaque too.
    items = [{"type": "message", "role": "user", "content": "Find the release notes."},
             {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "notes"}},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Found them."}]}]
    (tmp_path / "r.json").write_text(json.dumps(items))
    result, _ = run(cli, tmp_path / "r.json", tmp_path / "r.limn", NOW)
    assert [r["kind"] for r in result.records if r["role"] == "assistant"][0] == "opaque"


def test_shell_and_apply_patch_calls_pair_with_their_outputs(cli, pager, tmp_path):
    """The Responses API's hosted shell and apply_patch tools: shell_call is answered by
    shell_call_output and apply_patch_call by apply_patch_call_output (same call_id).  Each pair
    is one unit, so no budget keeps one without the other; the patch is the call's text."""
    patch = {"type": "update_file", "path": "src/totals.py", "diff": "@@\n-return a\n+return round(a, 2)\n"}
    items = [{"type": "message", "role": "user", "content": "Round the totals in src/totals.py"}]
    for n in range(12):
        items += [{"type": "shell_call", "id": f"sh_{n}", "call_id": f"call_s{n}", "status": "completed",
                   "action": {"commands": [f"sed -n {n},+40p src/totals.py"]}},
                  {"type": "shell_call_output", "call_id": f"call_s{n}", "status": "completed",
                   "output": [{"stdout": f"line {n}: total = a + b\n" * 60, "stderr": "",
                               "outcome": {"type": "exit", "exit_code": 0}}]}]
    items += [{"type": "apply_patch_call", "id": "ap_1", "call_id": "call_p", "status": "completed", "operation": patch},
              {"type": "apply_patch_call_output", "call_id": "call_p", "status": "completed", "output": "Done."},
              {"type": "message", "role": "user", "content": "Now run the tests."}]
    conv = pager.load(json.dumps(items), "responses")
    by_id = {b["id"]: b for b in conv.blocks}
    assert by_id["call_p"]["unit"] == by_id["call_p:result"]["unit"] is not None
    assert "src/totals.py" in by_id["call_p"]["text"] and "round(a, 2)" in by_id["call_p"]["text"]
    assert by_id["call_s3"]["unit"] == by_id["call_s3:result"]["unit"] is not None
    path = tmp_path / "r.json"
    path.write_text(json.dumps(items))
    first, s1, again, s2, emitted, added = round_trip(cli, tmp_path, path, ["--budget", "1500"])
    assert s1["tokens_after"] <= 1500 and s1["evict"] + s1["page"] > 0
    assert api_rules.problems_responses(emitted) == [] and (s2["new"], s2["moved"]) == (0, 0)
    calls = {i["call_id"] for i in emitted if i.get("type") in ("shell_call", "apply_patch_call")}
    outputs = {i["call_id"] for i in emitted if i.get("type") in ("shell_call_output", "apply_patch_call_output")}
    assert calls == outputs


def test_a_computer_use_screenshot_counts_as_a_picture(pager):
    """A computer_call_output's computer_screenshot is a picture: counted by OpenAI's tile rule, and
    the result holding it is media (never paged), not a 10-token label."""
    shot = {"type": "computer_screenshot", "image_url": "data:image/png;base64," + png(1024, 768)}
    items = [{"type": "message", "role": "user", "content": "Open the settings page."},
             {"type": "computer_call", "id": "cu_1", "call_id": "call_c", "status": "completed",
              "action": {"type": "screenshot"}, "pending_safety_checks": []},
             {"type": "computer_call_output", "call_id": "call_c", "output": shot}]
    result = next(b for b in pager.load(json.dumps(items), "responses").blocks if b["id"] == "call_c:result")
    assert result["kind"] == "media" and result["text"].startswith("[image 1024x768,")
    assert result["tokens"] >= 85 + 170 * 4  # 1024 x 768 fits as 1024 x 768 -> 768 short side: 4 tiles


def test_a_plain_text_document_counts_its_text(pager):
    """Anthropic charges a plain-text document (and a custom-content one) as its text: 40,000
    characters are about 10,000 tokens, not the 1,600 a picture is capped at."""
    text = "the service level agreement says " * 1200
    doc = {"type": "document", "title": "SLA", "source": {"type": "text", "media_type": "text/plain", "data": text}}
    custom = {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": text}]}}
    body = {"messages": [{"role": "user", "content": [doc, {"type": "text", "text": "Summarise."}]},
                         {"role": "assistant", "content": "Done."},
                         {"role": "user", "content": [custom, {"type": "text", "text": "And this one?"}]}]}
    media = [b for b in pager.load(json.dumps(body), "anthropic").blocks if b["kind"] == "media"]
    assert len(media) == 2 and all(b["tokens"] >= pager.estimate_tokens(text) for b in media)


def test_a_slash_commands_arguments_are_what_the_human_typed(cli, pager, tmp_path):
    """Claude Code writes "/apply-grant help me apply..." as tags (<command-name>, <command-args>)
    and then the skill's body as an isMeta line: the arguments are the human's request (the task,
    the intent), the tags' words are not in the intent, and the skill body is the harness's."""
    command = ("<command-message>apply-grant</command-message>\n<command-name>/apply-grant</command-name>\n"
               "<command-args>help me apply for the agentic engineering grant</command-args>")
    lines = [cc("user", "u1", None, command),
             cc("user", "u2", "u1", [{"type": "text", "text": "Base directory for this skill: /skills/apply-grant\n"
                                                                "Fill in telemetry_tier from config.json"}], isMeta=True),
             cc("assistant", "a1", "u2", [{"type": "text", "text": "Reading the grant page."}],
                message_id="x")]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    conv = pager.load(path.read_text(), "claude-code")
    assert [r["text"] for r in pager.human_requests(conv)] == [command]
    assert pager._MARKUP.typed_command(command) == "/apply-grant help me apply for the agentic engineering grant"
    assert pager._MARKUP.typed_command("<command-name>/clear</command-name>\n<command-args></command-args>") is None
    # /compact's arguments tell the summary what to keep: the harness's, like /model's.
    assert pager._MARKUP.typed_command("<command-name>/compact</command-name><command-args>keep the plan</command-args>") is None
    # Managing plugins is the harness's business too (a real session held only such commands).
    assert pager._MARKUP.typed_command("<command-name>/plugin</command-name>\n<command-args>install x@y</command-args>") is None
    _, summary = run(cli, path, tmp_path / "c.limn", NOW)
    assert summary["intent_source"].startswith("last human message")
    assert {"agentic", "grant", "engineering"} <= set(summary["intent"])
    assert not {"command", "args", "telemetry_tier", "skill"} & set(summary["intent"])


def test_a_plain_text_swe_agent_trajectory_round_trips(cli, pager, tmp_path):
    """Without function calling every command's output is a user message; written back as Chat
    messages they have no SWE-agent marks left, so the next pass (the contract says swe-agent)
    reads them by the same rule: the same task, the same turns and ids, nothing new or moved."""
    history = [{"role": "system", "content": "You are an autonomous programmer.", "agent": "primary"},
               {"role": "user", "content": pager._MARKUP.rows["SWE-agent"].demonstration + "\n--- DEMONSTRATION ---\n"
                + "ls\nfile.py\n" * 300, "agent": "primary", "is_demo": True},
               {"role": "user", "content": "ISSUE: Pixel Representation should be optional.", "agent": "primary"}]
    for n in range(10):
        history += [{"role": "assistant", "content": f"Step {n}.\n```\nopen dataset_{n}.py\n```", "agent": "primary",
                     "thought": "t", "action": f"open dataset_{n}.py\n"},
                    {"role": "user", "content": f"[File: dataset_{n}.py (40 lines)]\n" + "x = 1\n" * 40
                     + "(Open file: dataset.py)\nbash-$", "agent": "primary"}]
    path = tmp_path / "t.traj"
    path.write_text(json.dumps({"history": history, "info": {}, "trajectory": []}))
    for flags in ([], ["--budget", "2000"]):
        folder = tmp_path / ("b" if flags else "d")
        folder.mkdir()
        first, s1, again, s2, emitted, added = round_trip(cli, folder, path, flags)
        assert s1["format"] == "swe-agent" and api_rules.problems_chat(emitted) == []
        assert (s2["new"], s2["moved"]) == (0, 0), flags
        assert s2["intent"] == s1["intent"] and "pixel" in " ".join(s1["intent"])
        # Every block keeps its turn: the outputs did not become a human's turns on the re-read.
        turns = {r["block"]: r["turn"] for r in first.records}
        assert {r["block"]: r["turn"] for r in again.records} == {r["block"]: turns[r["block"]] for r in again.records}
        assert max(r["turn"] for r in first.records) == 1  # one human turn: the task
        assert added.startswith("remember a value called last-pager-pass")


def test_the_request_the_model_answers_next_is_claimed_before_the_task(cli, tmp_path):
    """Under a budget too small for both, the human's last message (the question the model answers
    next) keeps its place and the task statement gives way: a request ending on the task alone would
    have the model answer the first request again (a recorded Chat body, at --budget 80)."""
    task = "David Nguyen is a sophomore majoring in computer science with a GPA of 3.8. " * 4  # 76 tokens
    body = {"model": "m", "messages": [
        {"role": "user", "content": task},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "extract_student_info", "arguments": json.dumps({"name": "David Nguyen", "gpa": 3.8,
                                                                     "major": "computer science"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"gpa_verified\": true}"},
        {"role": "user", "content": "Can you summarize the student's academic performance?"}]}
    (tmp_path / "b.json").write_text(json.dumps(body))
    result, summary = run(cli, tmp_path / "b.json", tmp_path / "c.limn", NOW, "--budget", "80",
                          "--emit", tmp_path / "o.json")
    emitted = json.loads((tmp_path / "o.json").read_text())
    assert summary["tokens_after"] <= 80 and api_rules.problems_chat(emitted) == []
    assert emitted["messages"][-1] == body["messages"][-1]
    # With room for both, both stay: the task statement whole.
    result, summary = run(cli, tmp_path / "b.json", tmp_path / "d.limn", NOW, "--budget", "400",
                          "--emit", tmp_path / "p.json")
    kept = json.loads((tmp_path / "p.json").read_text())["messages"]
    assert kept[0] == body["messages"][0] and kept[-1] == body["messages"][-1]


def test_an_unknown_part_is_labelled_by_what_it_names(pager):
    """A part type the pager does not know (Claude Code's tool search answers with ``tool_reference``
    parts) reads as its type and its short string fields, so its page gives back the tool names; a
    part with long fields keeps the bare type label (its size still counts its whole JSON)."""
    lines = [cc("user", "u1", None, "Find a tool that can search the web."),
             cc("assistant", "a1", "u1", [{"type": "tool_use", "id": "toolu_1", "name": "ToolSearch",
                                            "input": {"query": "web"}}], message_id="m1"),
             cc("user", "u2", "a1", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                 {"type": "tool_reference", "tool_name": "WebSearch"},
                 {"type": "tool_reference", "tool_name": "WebFetch"},
                 {"type": "blob", "data": "x" * 500}]}])]
    blocks = {b["id"]: b for b in pager.load("\n".join(lines) + "\n", "claude-code").blocks}
    assert blocks["toolu_1:result"]["text"] == "[tool_reference: WebSearch]\n[tool_reference: WebFetch]\n[blob]"


def test_an_mcp_call_reads_as_its_name_and_input_and_shares_a_unit_with_its_result(pager):
    """Anthropic's MCP connector writes mcp_tool_use and its mcp_tool_result in one assistant turn:
    the call reads like a server tool's (name and input, pageable text), the result is opaque, and
    the two are one unit, so no budget keeps the result without its call."""
    body = {"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": "Search GitHub for pydantic-ai."},
        {"role": "assistant", "content": [
            {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "search_repositories", "server_name": "github",
             "input": {"query": "pydantic-ai in:name"}},
            {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "is_error": False,
             "content": [{"type": "text", "text": "{\"total_count\": 461}"}]},
            {"type": "text", "text": "There are 461 matches."}]}]}
    blocks = pager.load(json.dumps(body), "anthropic").blocks
    call = next(b for b in blocks if b["text"].startswith("search_repositories("))
    result = next(b for b in blocks if b["kind"] == "opaque")
    assert call["text"] == 'search_repositories({"query":"pydantic-ai in:name"})' and call["kind"] is None
    assert call["unit"] is not None and call["unit"] == result["unit"]


def test_chat_reasoning_fields_count_and_travel_with_their_calls(cli, pager, tmp_path):
    """An OpenAI-compatible server's reasoning sent back on an assistant message (Moonshot's and
    DeepSeek's reasoning_content, OpenRouter's reasoning_details) is all sent, so all of it counts:
    one block, in one unit with the calls it led to, kept as the fields it was or paged whole."""
    thinking = "weighing the forecast sources " * 1500  # about 11,000 tokens
    call = {"id": "get_weather:0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    body = {"model": "kimi-k2-thinking", "messages": [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": "", "reasoning_content": thinking, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "get_weather:0", "name": "get_weather", "content": "sunny, 21 C"},
        {"role": "user", "content": "And tomorrow?"}]}
    conv = pager.load(json.dumps(body), "openai")
    reasoning = next(b for b in conv.blocks if b["text"] == thinking)
    assert reasoning["unit"] == next(b for b in conv.blocks if b["id"] == "get_weather:0")["unit"]
    (tmp_path / "h.json").write_text(json.dumps(body))
    _, s1 = run(cli, tmp_path / "h.json", tmp_path / "c.limn", NOW, "--budget", "2000", "--emit", tmp_path / "o.json")
    emitted = json.loads((tmp_path / "o.json").read_text())
    assert s1["tokens_before"] > pager.estimate_tokens(thinking)  # the reasoning counts
    assert s1["tokens_after"] <= 2000 and len(json.dumps(emitted)) / 4 < 2000  # by its own count and by size
    assert api_rules.problems_chat(emitted) == []
    assert not any("reasoning_content" in m for m in emitted["messages"])
    _, s2 = run(cli, tmp_path / "o.json", tmp_path / "c.limn", LATER, "--budget", "2000")
    assert (s2["new"], s2["moved"]) == (0, 0)
    recalled = cli("recall", reasoning["id"], "--contract", tmp_path / "c.limn", "--json")
    assert json.loads(recalled.out)["recalled"][0]["text"] == thinking
    # With room, the reasoning goes back as the fields it was: OpenRouter's details, encrypted entry and all.
    details = [{"type": "reasoning.text", "text": "Add them.", "index": 0},
               {"type": "reasoning.encrypted", "data": "Q" * 300, "format": "google-gemini-v1", "index": 1}]
    small = dict(body, messages=[body["messages"][0], dict(body["messages"][1], reasoning_content=None,
                                                           reasoning_details=details), *body["messages"][2:]])
    (tmp_path / "s.json").write_text(json.dumps(small))
    run(cli, tmp_path / "s.json", tmp_path / "d.limn", NOW, "--budget", "8000", "--emit", tmp_path / "p.json")
    assert json.loads((tmp_path / "p.json").read_text()) == small


def test_what_a_text_part_carries_beside_its_text_counts(cli, pager, tmp_path):
    """An Anthropic text block's citations (and a Responses output_text's annotations) are sent
    with the text, so they count: the budget holds by the size of what is written."""
    cited = [{"type": "char_location", "cited_text": "a long cited passage " * 300, "document_index": 0,
              "document_title": "Spec", "start_char_index": 0, "end_char_index": 6300}] * 3
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [
        {"role": "user", "content": "Summarise the spec."},
        {"role": "assistant", "content": [{"type": "text", "text": "It says X.", "citations": cited}]},
        {"role": "user", "content": "What else?"}]}
    conv = pager.load(json.dumps(body), "anthropic")
    answer = next(b for b in conv.blocks if b["text"] == "It says X.")
    assert answer["tokens"] > pager.estimate_tokens(json.dumps(cited)) * 0.9
    (tmp_path / "h.json").write_text(json.dumps(body))
    _, summary = run(cli, tmp_path / "h.json", tmp_path / "c.limn", NOW, "--budget", "2000", "--emit", tmp_path / "o.json")
    emitted = json.loads((tmp_path / "o.json").read_text())
    assert summary["tokens_after"] <= 2000 and len(json.dumps(emitted)) / 4 < 2000
    assert api_rules.problems_anthropic(emitted) == []
    # An empty annotations list or a null citations field is nothing sent: no cost beyond the text.
    plain = pager.load(json.dumps({"input": [{"role": "assistant", "type": "message", "content": [
        {"type": "output_text", "text": "Done.", "annotations": [], "logprobs": []}]}]}), "responses")
    assert plain.blocks[0]["tokens"] in (None, pager.estimate_tokens("Done."))


def test_a_bodys_tool_definitions_are_spoken_for_under_a_budget(cli, pager, tmp_path):
    """A request body's tool definitions go with every request and are never paged: under --budget
    they are counted first, so the whole request, definitions and all, fits; when they alone pass
    the budget the summary says so."""
    tools = [{"name": f"tool_{i}", "description": "does one thing with many options " * 60,
              "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}} for i in range(10)]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": "Be brief.", "tools": tools, "messages": [
        {"role": "user", "content": "Plan the migration. " * 40}, {"role": "assistant", "content": "Step one. " * 300},
        {"role": "user", "content": "What comes next?"}]}
    conv = pager.load(json.dumps(body), "anthropic")
    assert conv.definitions_tokens == pager.estimate_tokens(json.dumps(tools, separators=(",", ":")))
    (tmp_path / "h.json").write_text(json.dumps(body))
    # 6,200: the definitions, the floors (the last request, the agent's last turn) and a range page's line
    _, fits = run(cli, tmp_path / "h.json", tmp_path / "c.limn", NOW, "--budget", "6200", "--emit", tmp_path / "o.json")
    emitted = json.loads((tmp_path / "o.json").read_text())
    assert fits["definitions_tokens"] == conv.definitions_tokens and not fits["over_budget"]
    assert fits["tokens_after"] <= 6200 and len(json.dumps(emitted)) / 4 <= 6200 * 1.05
    assert emitted["tools"] == tools and "What comes next?" in json.dumps(emitted["messages"][-1])
    result, over = run(cli, tmp_path / "h.json", tmp_path / "d.limn", NOW, "--budget", "2000")
    assert over["over_budget"] and "tool definitions" in result.err
    # The library counts them the same way.
    report = pager.Pager(6200).compact(body).report
    assert conv.definitions_tokens < report.tokens_after <= 6200


def test_a_chat_refusal_beside_null_content_is_the_assistants_turn(cli, pager, tmp_path):
    """OpenAI returns a refusal as {"content": null, "refusal": "..."}, and clients send that message
    back as it came: it is the assistant's turn, not an empty message to drop."""
    body = {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "Write the exploit."},
        {"role": "assistant", "content": None, "refusal": "I can't help with that, but I can explain the fix."},
        {"role": "user", "content": "Explain the fix then."}]}
    conv = pager.load(json.dumps(body), "openai")
    assert not conv.repairs and [b["role"] for b in conv.blocks] == ["user", "assistant", "user"]
    assert pager.emit(conv, {}) == body  # untouched: written back as it came
    refusal = conv.blocks[1]["id"]
    paged = pager.emit(conv, {refusal: "page"})["messages"][1]
    assert "refusal" not in paged and api_rules.problems_chat(pager.emit(conv, {refusal: "page"})) == []
    (tmp_path / "h.json").write_text(json.dumps(body))
    run(cli, tmp_path / "h.json", tmp_path / "c.limn", NOW, "--emit", tmp_path / "o.json")
    _, again = run(cli, tmp_path / "o.json", tmp_path / "c.limn", LATER)
    assert (again["new"], again["moved"]) == (0, 0)


def test_a_chat_replys_annotations_count_while_they_are_sent(pager):
    """A search model's reply carries url-citation annotations beside its content: sent back with
    the message as it came, so they count with its text; once the text changes they are left out."""
    notes = [{"type": "url_citation", "url_citation": {"url": f"https://docs.example.com/page/{i}",
                                                       "title": f"Release notes, part {i}", "start_index": 0,
                                                       "end_index": 9}} for i in range(30)]
    body = {"model": "gpt-4o-search-preview", "messages": [
        {"role": "user", "content": "What changed in the release?"},
        {"role": "assistant", "content": "Two things.", "annotations": notes},
        {"role": "user", "content": "Thanks."}]}
    conv = pager.load(json.dumps(body), "openai")
    reply = conv.blocks[1]
    assert reply["tokens"] >= pager.estimate_tokens(json.dumps(notes, separators=(",", ":")))
    assert pager.emit(conv, {}) == body
    paged = pager.emit(conv, {reply["id"]: "page"})
    assert "annotations" not in paged["messages"][1] and api_rules.problems_chat(paged) == []


def test_a_changed_chat_reply_keeps_its_kept_reasoning_and_writes_a_refusal_once(pager):
    """A reply rebuilt because one of its parts changed still sends the reasoning that was kept, and
    writes a kept refusal once (as a content part), not also as the message-level field."""
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in (1, 2)]
    refused = {"messages": [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": None, "refusal": "Not that one.", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "one"}, {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "user", "content": "Next."}]}
    reply = pager.emit(pager.load(json.dumps(refused), "openai"), {"c2": "evict", "c2:result": "evict"})["messages"][1]
    assert "refusal" not in reply and reply["content"] == [{"type": "refusal", "refusal": "Not that one."}]
    assert [c["id"] for c in reply["tool_calls"]] == ["c1"]
    thought = {"messages": [{"role": "user", "content": "Go."},
                            {"role": "assistant", "content": "Done thinking aloud.", "reasoning_content": "Weigh it."},
                            {"role": "user", "content": "Next."}]}
    conv = pager.load(json.dumps(thought), "openai")
    text = next(b["id"] for b in conv.blocks if b["text"] == "Done thinking aloud.")
    reply = pager.emit(conv, {text: "evict"})["messages"][1]
    assert reply["reasoning_content"] == "Weigh it." and reply["content"] == ""


def test_an_ismeta_prompt_stays_the_harnesss_once_written_back(cli, pager, tmp_path):
    """A plugin's SDK prompt is a user line Claude Code marks ``isMeta``, with no known opening.  The
    Anthropic body a pass writes cannot carry the mark, so the contract's directive does ("harness;")
    and the next pass marks the same text again: it does not become a human's request, the turns and
    the ids of repeated texts stay, and a human's message merged beside it stays the human's."""
    observe = "Hello memory agent, keep observing the primary session and record what it learns. " * 6
    switch = "--- MODE SWITCH: PROGRESS SUMMARY --- wrap the whole answer in summary tags. " * 6
    lines = [cc("user", "u1", None, "Why does the looper register the input channel twice?"),
             cc("assistant", "a1", "u1", [{"type": "text", "text": "Looking at view_root_impl."}], message_id="x1"),
             cc("user", "u2", "a1", observe, isMeta=True),
             cc("assistant", "a2", "u2", [{"type": "text", "text": "Noted."}], message_id="x2"),
             cc("user", "u3", "a2", switch, isMeta=True),
             cc("user", "u4", "u3", "Also check the choreographer path."),
             cc("assistant", "a3", "u4", [{"type": "text", "text": "Noted."}], message_id="x3")]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    conv = pager.load(path.read_text(), "claude-code")
    assert [r["text"] for r in pager.human_requests(conv)] == [
        "Why does the looper register the input channel twice?", "Also check the choreographer path."]
    for flags in ([], ["--budget", "2000"]):
        folder = tmp_path / ("b" if flags else "d")
        folder.mkdir()
        first, s1, again, s2, emitted, added = round_trip(cli, folder, path, flags)
        # The two prompts are the harness's: so the records and the contract's directives say.
        prompts = [r for r in first.records if r["kind"] == "harness"]
        assert len(prompts) == 2 and all(r["role"] == "user" for r in prompts)
        contract = (folder / "c.limn").read_text(encoding="utf-8")
        for record in prompts:
            assert any(line.startswith(f'add "{record["block"]}" to ') and 'because "harness; ' in line
                       for line in contract.splitlines())
        # Written back, the kept prompt and the human's message after it share one user message.
        if prompts[1]["action"] == "retain":
            merged = [m["content"] for m in emitted["messages"] if m["role"] == "user"
                      and "choreographer" in json.dumps(m["content"])]
            assert len(merged) == 1 and [p["text"][:9] for p in merged[0]] == ["--- MODE ", "Also chec"]
        assert s2["format"] == "anthropic" and (s2["new"], s2["moved"]) == (0, 0), flags
        assert added == f'remember a value called last-pager-pass with "{LATER.replace("Z", "+00:00")}"\n'
        turns = {r["block"]: (r["turn"], r["kind"]) for r in first.records}
        assert [(r["block"], r["turn"], r["kind"]) for r in again.records if turns[r["block"]] != (r["turn"], r["kind"])] == [], flags
        assert {r["block"] for r in again.records} == {r["block"] for r in first.records if r["action"] != "evict"}
        assert max(t for t, _ in turns.values()) == 2  # two human turns, not four
        assert "choreographer" in s1["intent"] and s1["intent_turn"] == 2


def test_a_chat_spoken_reply_is_the_assistants_turn(cli, pager, tmp_path):
    """With audio output an assistant's reply is a message field, ``audio``: clients send back
    {"content": null, "audio": {"id"}}, some the whole response object (data, transcript).  It is
    the assistant's turn, not an empty message to drop: one block (kind media, never paged) that
    counts what audio costs, kept whole as the turn's conclusion by a default pass, and left out
    with its field when a budget evicts it."""
    data = base64.b64encode(wav(48000, 2.0)).decode()  # 2 s of 24 kHz 16-bit mono
    body = {"model": "gpt-4o-audio-preview", "modalities": ["text", "audio"], "messages": [
        {"role": "user", "content": "Is a golden retriever a good family dog?"},
        {"role": "assistant", "content": None, "refusal": None, "audio": {"id": "audio_1"}},
        {"role": "user", "content": "Why do you say they are loyal?"},
        {"role": "assistant", "content": "Here is why.", "audio": {
            "id": "audio_2", "data": data, "expires_at": 1733621847,
            "transcript": "They bond closely with their family and follow them around."}},
        {"role": "user", "content": "And with small children?"}]}
    conv = pager.load(json.dumps(body), "openai")
    assert not conv.repairs and [(b["role"], b["kind"]) for b in conv.blocks] == [
        ("user", "task"), ("assistant", "media"), ("user", "human"), ("assistant", None),
        ("assistant", "media"), ("user", "human")]
    first, second = conv.blocks[1], conv.blocks[4]
    assert first["tokens"] == pager.ANTHROPIC_IMAGE_MAX  # an id alone: the most for unknown media
    assert second["tokens"] == 2 * pager.AUDIO_TOKENS_PER_SECOND  # 2 s, a token per 50 ms
    assert "follow them around" in second["text"]
    said = {"id": "audio_3", "transcript": "They bond closely with their family."}
    voice = {"role": "user", "content": "Why?"}, {"role": "assistant", "content": None, "audio": said}
    assert pager.load(json.dumps(list(voice)), "openai").blocks[1]["tokens"] == \
        pager.REPLY_AUDIO_PER_TEXT_TOKEN * pager.estimate_tokens(said["transcript"])
    assert pager.emit(conv, {}) == body  # untouched: written back as it came
    # Evicted, the field goes; a message left with nothing goes too; the rest stays valid.
    out = pager.emit(conv, {first["id"]: "evict", second["id"]: "evict"})
    assert [m.get("audio") for m in out["messages"]] == [None] * 4
    assert out["messages"][2] == {"role": "assistant", "content": "Here is why."}
    assert api_rules.problems_chat(out) == []
    (tmp_path / "h.json").write_text(json.dumps(body))
    first_pass, summary = run(cli, tmp_path / "h.json", tmp_path / "c.limn", NOW, "--emit", tmp_path / "o.json")
    assert {r["block"]: r["action"] for r in first_pass.records}[first["id"]] == "retain"
    assert json.loads((tmp_path / "o.json").read_text())["messages"][1]["audio"] == {"id": "audio_1"}
    _, again = run(cli, tmp_path / "o.json", tmp_path / "c.limn", LATER)
    assert (again["new"], again["moved"]) == (0, 0)
    # Under a budget the id-only reply (1,600 tokens) does not fit: it goes, message and all.
    records, summary = run(cli, tmp_path / "h.json", tmp_path / "b.limn", NOW, "--budget", "1000",
                           "--emit", tmp_path / "b.json")
    emitted = json.loads((tmp_path / "b.json").read_text())
    assert summary["tokens_after"] <= 1000 and api_rules.problems_chat(emitted) == []
    actions = {r["block"]: r["action"] for r in records.records}
    assert (actions[first["id"]], actions[second["id"]]) == ("evict", "retain")
    assert "audio_1" not in json.dumps(emitted) and "audio_2" in json.dumps(emitted)


def test_an_assistant_input_text_part_goes_back_as_output_text(cli, pager, tmp_path):
    """A client that types its own earlier replies as input parts (req_llm recorded one: the API
    answered 400, "Supported values are: 'output_text' and 'refusal'") gets the request repaired:
    the part goes back as output_text, the repair is reported, and the round trip is stable."""
    body = {"model": "gpt-5-mini", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Respond with a single word 'Hi'."}]},
        {"role": "assistant", "content": [{"type": "input_text", "text": "Hi"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "Hi again"}]}]}
    assert api_rules.problems_responses(body) != []  # what the API refused
    conv = pager.load(json.dumps(body), "responses")
    assert conv.repairs == ["input[1] is an assistant message with input_text parts; sent as output_text"]
    out = pager.emit(conv, {})
    assert out["input"][1] == {"role": "assistant", "content": [{"type": "output_text", "text": "Hi"}]}
    assert out["input"][0] == body["input"][0] and api_rules.problems_responses(out) == []
    (tmp_path / "h.json").write_text(json.dumps(body))
    _, first = run(cli, tmp_path / "h.json", tmp_path / "c.limn", NOW, "--emit", tmp_path / "o.json")
    assert first["repairs"] == conv.repairs
    _, again = run(cli, tmp_path / "o.json", tmp_path / "c.limn", LATER)
    assert (again["new"], again["moved"], again["repairs"]) == (0, 0, [])


def test_a_reasoning_items_id_counts_beside_its_text(pager):
    """A Responses reasoning item goes back with its id (rs_ and 50 characters; an old Codex rollout
    holds 143 such items): the budget counts it, as it counts a call's id."""
    rid = "rs_03a7232a4a5a3a1e0168c202b0e2408194b0cec21f4d37f4a0"
    items = [{"type": "message", "role": "user", "content": "Add the task."},
             {"type": "reasoning", "id": rid, "summary": [{"type": "summary_text", "text": "Plan the task."}]},
             {"type": "function_call", "call_id": "call_1", "name": "pwd", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "call_1", "output": "/repo"},
             {"type": "reasoning", "summary": []},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Added."}]}]
    blocks = pager.load(json.dumps(items), "responses").blocks
    assert blocks[1]["tokens"] == pager.estimate_tokens("Plan the task.") + pager.estimate_tokens(rid)
    assert blocks[-2]["text"] == "[reasoning]" and blocks[-2]["tokens"] is None  # no id: its text is its size


def test_a_swe_agent_demonstration_in_its_own_words_stays_the_harnesss(cli, pager, tmp_path):
    """A configuration may open its demonstrations with its own words, not SWE-agent's preamble:
    only ``is_demo`` tells them apart, and the Chat messages a pass writes back lose it.  The
    contract carries the mark (kind harness), so the next pass finds the same task."""
    history = [{"role": "system", "content": "You are an autonomous programmer.", "agent": "primary"},
               {"role": "user", "content": "A solved issue, for reference:\n" + "open parser.py\nedit 3:4\n" * 40,
                "agent": "primary", "is_demo": True},
               {"role": "user", "content": "ISSUE: the lexer drops a trailing comma.", "agent": "primary"}]
    for n in range(6):
        history += [{"role": "assistant", "content": f"Step {n}.\n```\nopen lexer_{n}.py\n```", "agent": "primary"},
                    {"role": "user", "content": f"[File: lexer_{n}.py (30 lines)]\n" + "tok = 1\n" * 30,
                     "agent": "primary"}]
    path = tmp_path / "t.traj"
    path.write_text(json.dumps({"history": history, "info": {}}))
    conv = pager.load(path.read_text(), "swe-agent")
    assert [r["text"] for r in pager.human_requests(conv)] == ["ISSUE: the lexer drops a trailing comma."]
    assert [b["kind"] for b in conv.blocks if b["role"] == "user"][0] == "harness"
    for flags in ([], ["--budget", "2000"]):
        folder = tmp_path / ("b" if flags else "d")
        folder.mkdir()
        first, s1, again, s2, emitted, added = round_trip(cli, folder, path, flags)
        assert (s2["new"], s2["moved"]) == (0, 0) and s2["intent"] == s1["intent"], flags
        turns = {r["block"]: (r["turn"], r["kind"]) for r in first.records}
        # (a stub's record has no kind: its page in the store keeps it)
        assert [(r["block"], r["turn"], r["kind"]) for r in again.records
                if turns[r["block"]][0] != r["turn"] or (turns[r["block"]][1] != r["kind"] and not r["stub"])] == [], flags
        assert added.startswith("remember a value called last-pager-pass")


def test_a_body_continuing_a_stored_response_keeps_the_outputs_it_answers(cli, pager, tmp_path):
    """With ``previous_response_id`` (or a ``conversation``) the server holds the earlier turns: the
    input holds only the new items, such as the outputs of the stored response's calls.  Such an
    output is not an orphan to drop (the API would find the stored call unanswered): it is kept
    verbatim whatever the budget (pinned).  Without that key the same output is still repaired."""
    answer = json.dumps({"forecast": "rain", "detail": "showers later in the day " * 30})
    body = {"model": "gpt-5", "previous_response_id": "resp_abc", "input": [
        {"type": "function_call_output", "call_id": "call_stored", "output": answer},
        {"role": "user", "content": "And tomorrow in Oslo?"},
        {"type": "function_call", "call_id": "call_2", "name": "weather", "arguments": json.dumps({"day": 2})},
        {"type": "function_call_output", "call_id": "call_2", "output": "sunny"}]}
    conv = pager.load(json.dumps(body), "responses")
    assert conv.repairs == [] and conv.blocks[0]["pinned"] and api_rules.problems_responses(body) == []
    (tmp_path / "h.json").write_text(json.dumps(body))
    records, summary = run(cli, tmp_path / "h.json", tmp_path / "c.limn", NOW, "--budget", "100",
                           "--emit", tmp_path / "o.json")
    emitted = json.loads((tmp_path / "o.json").read_text())
    assert emitted["input"][0] == body["input"][0] and api_rules.problems_responses(emitted) == []
    assert records.records[0]["reason"] == "pinned"
    _, again = run(cli, tmp_path / "o.json", tmp_path / "c.limn", LATER, "--budget", "100")
    assert (again["new"], again["moved"], again["repairs"]) == (0, 0, [])
    # An item_reference names a stored item: the output after it may answer that call.
    referenced = [{"type": "item_reference", "id": "fc_stored"}] + body["input"]
    conv = pager.load(json.dumps(referenced), "responses")
    assert conv.repairs == [] and conv.blocks[0]["pinned"] and conv.blocks[1]["pinned"]
    assert api_rules.problems_responses(referenced) == []
    for key, value in (("conversation", "conv_1"), ("previous_response_id", None)):
        other = dict(body, **{key: value})
        if value is None:
            del other[key]
        repairs = pager.load(json.dumps(other), "responses").repairs
        assert repairs == ([] if key == "conversation" else
                           ['input[0].call_id "call_stored" has no matching earlier call; dropped'])


def test_a_session_no_human_wrote_takes_its_intent_without_the_harness_tags(cli, pager, tmp_path):
    """A Claude Code session of slash commands only has no human request: the intent is the last
    user message, read without its markup (<command-name>, <local-command-stdout>...)."""
    lines = [cc("user", "u1", None, "<command-name>/model</command-name>\n<command-message>model</command-message>\n"
                                   "<command-args></command-args>"),
             cc("user", "u2", "u1", "<local-command-stdout>Set model to opus (claude-opus-4-1)</local-command-stdout>")]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert pager.human_requests(pager.load(path.read_text(), "claude-code")) == []
    _, summary = run(cli, path, tmp_path / "c.limn", NOW)
    assert summary["intent_source"].startswith("last user message")
    assert {"model", "opus"} <= set(summary["intent"])
    assert not {"local", "command", "stdout"} & set(summary["intent"])


def test_search_results_in_a_tool_result_count_and_page_their_text(cli, pager, tmp_path):
    """Anthropic search_result blocks (a RAG tool's answer) carry their text inside: a tool result
    holding them counts that text and, paged, gives it back on recall (it read as two labels)."""
    guide = "Round once, on the invoice total, never per line. " * 30
    result = {"type": "search_result", "source": "https://docs.example.com/rounding", "title": "Rounding guide",
              "content": [{"type": "text", "text": guide}], "citations": {"enabled": True}}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [
        {"role": "user", "content": "How should the invoice total round?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "search",
                                           "input": {"q": "rounding"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [result]}]},
        {"role": "assistant", "content": "Round once, on the total."},
        {"role": "user", "content": "Thanks. Now add the currency code to the PDF header."}]}
    block = pager.load(json.dumps(body), "anthropic").blocks[2]
    assert block["role"] == "tool" and guide.strip() in block["text"] and "Rounding guide" in block["text"]
    assert block["tokens"] >= len(guide) // 4
    (tmp_path / "h.json").write_text(json.dumps(body))
    records, _ = run(cli, tmp_path / "h.json", tmp_path / "c.limn", NOW, "--budget", "200")
    assert {r["block"]: r["action"] for r in records.records}[block["id"]] == "page"
    recalled = cli("recall", block["id"], "--contract", tmp_path / "c.limn", "--json")
    assert guide.strip() in json.loads(recalled.out)["recalled"][0]["text"]


def test_an_ides_context_is_the_harnesss_and_the_words_after_it_the_humans(pager):
    """Claude Code in an IDE puts the open file and the selected lines before the prompt: as a
    block of its own it is the harness's (it must not become the task statement); words after
    it in the same block are what the human typed."""
    opened = ("<ide_opened_file>The user opened the file /repo/spec/invoice_spec.rb in the IDE. This may or may "
              "not be related to the current task.</ide_opened_file>")
    selected = ("<ide_selection>The user selected the lines 8 to 9 from /repo/app/invoice.rb:\ntotal.round(2)\n\n"
                "This may or may not be related to the current task.</ide_selection>\nRound once, on the total.")
    lines = [cc("user", "u1", None, [{"type": "text", "text": opened},
                                     {"type": "text", "text": "Why does the invoice spec fail?"}]),
             cc("assistant", "a1", "u1", [{"type": "text", "text": "The total rounds per line."}], message_id="x1"),
             cc("user", "u2", "a1", [{"type": "text", "text": selected}]),
             cc("user", "u3", "u2", [{"type": "text", "text": opened}])]
    conv = pager.load("\n".join(lines) + "\n", "claude-code")
    assert [r["text"] for r in pager.human_requests(conv)] == ["Why does the invoice spec fail?", selected]
    assert pager._MARKUP.after_context(opened) is None and pager._MARKUP.after_context(selected) == "Round once, on the total."


def test_audio_counts_by_its_length_not_its_bytes(pager):
    """A user's spoken question (Chat input_audio) costs by its length (the pager takes a token per
    50 ms): a 10 s WAV is 200 tokens, not the 107,000 its 320 KB of data came to by the file rule,
    which made a budget evict the human's own request.  Other encodings are taken at 128 kbit/s."""
    clip = base64.b64encode(wav(32000, 10.0)).decode()
    mp3 = base64.b64encode(b"ID3" + bytes(47997)).decode()  # 48,000 bytes: 3 s at 128 kbit/s
    for data, fmt, tokens in ((clip, "wav", 200), (mp3, "mp3", 60)):
        body = [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": data, "format": fmt}},
                                             {"type": "text", "text": "What did I just say?"}]}]
        block = pager.load(json.dumps(body), "openai").blocks[0]
        assert block["kind"] == "media" and block["tokens"] == tokens, fmt


def test_a_merged_assistant_turn_holding_thinking_starts_with_it(pager):
    """Anthropic refuses an assistant turn that holds thinking but opens with anything else ("the
    first block must be thinking or redacted_thinking").  Paging or evicting a tool unit merges the
    assistant messages around it; the merged turn still opens with the kept thinking, and both
    validators catch a turn that does not."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": [
                {"role": "user", "content": "Fix the totals."},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "Read first.", "signature": "s1"},
                                                  {"type": "text", "text": "Let me look."},
                                                  {"type": "tool_use", "id": "A", "name": "read", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "A", "content": "x = 1\n" * 200}]},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "Now edit.", "signature": "s2"},
                                                  {"type": "tool_use", "id": "B", "name": "edit", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "B", "content": "ok"}]}]}
    conv = pager.load(json.dumps(body), "anthropic")
    unit = [b["id"] for b in conv.blocks if b["unit"] == conv.blocks[1]["unit"]]
    for verb in ("page", "evict"):
        out = pager.emit(conv, {block: verb for block in unit})
        merged = out["messages"][1]["content"]
        assert merged[0]["type"] == "thinking" and "Let me look." in json.dumps(merged), verb
        assert api_rules.problems_anthropic(out) == [] and pager.validate("anthropic", out) == []
    wrong = json.loads(json.dumps(body))
    wrong["messages"][3]["content"].insert(0, {"type": "text", "text": "Editing."})
    assert any("must start with it" in p for p in api_rules.problems_anthropic(wrong))
    assert any("thinking first" in p for p in pager.validate("anthropic", wrong))


def mini_swe_agent_trajectory(steps=6, task_words=40):
    """A mini-swe-agent 2.x trajectory (``trajectory_format`` mini-swe-agent-1.1): tool calls, each
    message with its ``extra`` bookkeeping, a format error sent as a user message, the exit record."""
    task = "<pr_description>The ledger export rounds negative totals the wrong way. " \
        + "See ledger/export.py and round_half_even. " * task_words + "</pr_description>"
    messages = [{"role": "system", "content": "You run one bash command per reply."},
                {"role": "user", "content": task}]
    for n in range(steps):
        call = f"call_{n}"
        messages += [{"role": "assistant", "content": None, "function_call": None, "annotations": [],
                      "provider_specific_fields": {"refusal": None},
                      "tool_calls": [{"id": call, "type": "function",
                                      "function": {"name": "bash", "arguments": json.dumps({"command": f"cat f{n}.py"})}}],
                      "extra": {"actions": [{"command": f"cat f{n}.py", "tool_call_id": call}],
                                "response": {"id": f"chatcmpl-{n}", "usage": {"prompt_tokens": 900 + n}}}},
                     {"role": "tool", "tool_call_id": call, "content": f"<returncode>0</returncode>\n<output>\n"
                      + f"def export_{n}(rows):\n    return sum(rows)\n" * 12 + "</output>",
                      "extra": {"raw_output": "...", "returncode": 0}}]
        if n == 2:
            messages.append({"role": "user", "content": "Please always provide EXACTLY ONE action; found none.",
                             "extra": {"interrupt_type": "FormatError"}})
    messages.append({"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}})
    return {"info": {"exit_status": "Submitted", "mini_version": "2.2.4"}, "messages": messages,
            "trajectory_format": "mini-swe-agent-1.1", "instance_id": "ledger-7"}


def test_a_mini_swe_agent_trajectory_reads_as_the_trajectory_it_is(cli, pager, tmp_path):
    """mini-swe-agent saves ``info``, ``messages`` and ``trajectory_format``: a trajectory, not a
    request body.  Its messages carry ``extra`` (the raw response, the raw output), which it strips
    before each call, and it ends on a record of role ``exit`` that no model saw.  The pager reads it
    as format swe-agent: the exit record counted among the other lines, ``extra`` left out of what it
    writes back, and the task the only human request (a format error is the harness's)."""
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(mini_swe_agent_trajectory()))
    text = path.read_text()
    assert pager.detect_format(text) == "swe-agent"
    conv = pager.load(text, "swe-agent")
    assert conv.other_lines == {"info": 1, "trajectory_format": 1, "instance_id": 1, "exit message": 1}
    assert [r["text"][:16] for r in pager.human_requests(conv)] == ["<pr_description>"]
    result, summary = run(cli, path, tmp_path / "c.limn", NOW, "--emit", tmp_path / "o.json")
    out = json.loads((tmp_path / "o.json").read_text())
    assert summary["format"] == "swe-agent" and api_rules.problems_chat(out) == []
    assert not any("extra" in m or "provider_specific_fields" in m for m in out)
    assert {m["role"] for m in out} == {"system", "user", "assistant", "tool"}
    assert "round_half_even" in summary["intent"] and "exactly" not in summary["intent"]


def test_a_paged_swe_agent_task_stays_the_task_on_the_round_trip(cli, pager, tmp_path):
    """Unprotected, the task may be paged (under a budget it is a floor, kept verbatim).  Read back,
    its stub is the pager's own text, and the next user message (here a format error) must not
    become the task: the stub's recorded turn says the task came before it, so every block keeps
    its turn and id."""
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(mini_swe_agent_trajectory(steps=8, task_words=120)))
    first, s1, again, s2, emitted, added = round_trip(cli, tmp_path, path, ["--no-protect-task"])
    assert any(r["kind"] == "task" and r["action"] == "page" for r in first.records)  # the case in question
    assert (s2["new"], s2["moved"]) == (0, 0) and s1["format"] == "swe-agent"
    turns = {r["block"]: r["turn"] for r in first.records}
    assert {r["block"]: r["turn"] for r in again.records} == {r["block"]: turns[r["block"]] for r in again.records}
    assert added.startswith("remember a value called last-pager-pass")


def test_other_agents_context_blocks_are_the_harnesss_not_the_task(cli, pager, tmp_path):
    """Crush sends ``<system_reminder>`` (its spelling) before the human's words, and Cline and Roo
    Code send ``<environment_details>`` (the editor's state) after them, each a text block of its
    own: neither is the task statement or the intent, which come from the human's words."""
    reminder = "<system_reminder>Your todo list is empty; use the todos tool if it helps.</system_reminder>"
    editor = "<environment_details>\n# VSCode Visible Files\nsrc/ledger.ts\n\n# Current Mode\ncode\n</environment_details>"
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [
        {"role": "user", "content": [{"type": "text", "text": reminder},
                                     {"type": "text", "text": "List the ledger modules."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ledger.ts and export.ts."}]},
        {"role": "user", "content": [{"type": "text", "text": "<task>\nRound the export totals half-even.\n</task>"},
                                     {"type": "text", "text": editor}]}]}
    conv = pager.load(json.dumps(body), "anthropic")
    assert [r["text"] for r in pager.human_requests(conv)] == [
        "List the ledger modules.", "<task>\nRound the export totals half-even.\n</task>"]
    (tmp_path / "b.json").write_text(json.dumps(body))
    result, summary = run(cli, tmp_path / "b.json", tmp_path / "c.limn", NOW)
    task = next(r for r in result.records if r["reason"] == "task")
    assert task["block"] == conv.blocks[1]["id"] and "todo" not in summary["intent"]
    assert "export" in summary["intent"] and "vscode" not in summary["intent"]


def test_a_mini_swe_agent_message_list_is_a_run_whose_task_is_its_first_request(cli, pager, tmp_path):
    """mini-swe-agent 1.x saved a run as a bare message list: each command's output is a user
    message (``<returncode>``...) and the last user message is often what it submitted (a diff).
    Neither is a human's request: the list is read as a trajectory (format swe-agent), whose task is
    the first user message, and it round-trips at a budget with every block on its turn."""
    messages = [{"role": "system", "content": "You are a helpful assistant that can run bash commands."},
                {"role": "user", "content": "Please solve this issue: totals.py rounds -0.5 up to 0.\n" * 3}]
    for n in range(8):
        messages += [{"role": "assistant", "content": f"THOUGHT: look at step {n}.\n```bash\ncat totals_{n}.py\n```"},
                     {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n"
                      + f"def total_{n}(x):\n    return round(x)\n" * 20 + "</output>"}]
    messages += [{"role": "assistant", "content": "Submit.\n```bash\ngit diff && echo COMPLETE_TASK_AND_SUBMIT\n```"},
                 {"role": "user", "content": "diff --git a/totals.py b/totals.py\n-    return round(x)\n+    return q(x)\n"}]
    text = json.dumps(messages)
    assert pager.detect_format(text) == "swe-agent"
    conv = pager.load(text, "swe-agent")
    assert [r["text"][:26] for r in pager.human_requests(conv)] == ["Please solve this issue: t"]
    path = tmp_path / "run.json"
    path.write_text(text)
    for flags in ([], ["--budget", "700"]):
        folder = tmp_path / ("b" if flags else "d")
        folder.mkdir()
        first, s1, again, s2, emitted, added = round_trip(cli, folder, path, flags)
        assert s1["format"] == "swe-agent" and api_rules.problems_chat(emitted) == []
        assert (s2["new"], s2["moved"]) == (0, 0) and max(r["turn"] for r in first.records) == 1, flags
        assert s2["format"] == "openai"  # the form the pass wrote, read by the session's rule
        assert "diff" not in s1["intent"] and "totals" in " ".join(s1["intent"])
        turns = {r["block"]: r["turn"] for r in first.records}
        # a range page read back stands for blocks of the first pass: it takes the first one's turn
        turns.update({r["block"]: r["turn"] for r in again.records
                      if r["block"].startswith(pager.RANGE_PREFIX) and r["turn"] in turns.values()})
        assert {r["block"]: r["turn"] for r in again.records} == {r["block"]: turns[r["block"]] for r in again.records}
    # A request body holding such messages is still a request: its shell (model, tools) must survive.
    assert pager.detect_format(json.dumps({"model": "gpt-4o", "messages": messages})) == "openai"


def test_after_a_compaction_that_took_every_request_the_intent_is_the_humans_last_word(cli, tmp_path):
    """A manual /compact leaves the live context with the summary and the harness's lines (the
    command's echo, its output): no request a human wrote.  The intent is then the human's last
    request from before the boundary, named as such, never the command's output or the summary."""
    lines = [cc("user", "u1", None, "Run ls -la in the workspace."),
             cc("assistant", "a1", "u1", [{"type": "text", "text": "Listed it."}]),
             cc("user", "u2", "a1", "Write the totals to ledger_report.txt please."),
             cc("assistant", "a2", "u2", [{"type": "text", "text": "Written."}]),
             cc("system", "b1", None, None, subtype="compact_boundary", logicalParentUuid="a2"),
             cc("user", "s1", "b1", "This session is being continued from a previous conversation. "
                                    "Summary: the totals report was written.", isCompactSummary=True),
             cc("user", "m1", "s1", "Caveat: The messages below were generated by the user while running "
                                    "local commands.", isMeta=True),
             cc("user", "m2", "m1", "<command-name>/compact</command-name>\n<command-args></command-args>"),
             cc("user", "m3", "m2", "<local-command-stdout>Compacted (ctrl+o to see full summary)"
                                    "</local-command-stdout>")]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines))
    result, summary = run(cli, path, tmp_path / "c.limn", NOW, "--work-steps", "0")
    assert summary["intent_source"] == "last human message (before the compaction boundary)"
    assert {"totals", "ledger_report"} <= set(summary["intent"]) and "compacted" not in summary["intent"]
    assert summary["intent_turn"] == 0 and summary["archived"] == 4


def test_a_harness_tag_with_attributes_is_still_the_harnesss(pager):
    """Mastra retries a refused prefill by sending ``<system-reminder type="...">continue</system-reminder>``
    as a user message: the tag's attributes do not make it a human's request."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": [
        {"role": "user", "content": "Reply with one sentence naming the ALPHA build."},
        {"role": "assistant", "content": "The ALPHA build"},
        {"role": "user", "content": '<system-reminder type="prefill-retry">continue</system-reminder>'}]}
    conv = pager.load(json.dumps(body), "anthropic")
    assert [r["text"] for r in pager.human_requests(conv)] == ["Reply with one sentence naming the ALPHA build."]
    assert pager._MARKUP.opens_harness_text('<task-notification id="7">done</task-notification>')
    assert not pager._MARKUP.opens_harness_text("<task-notifications> is the tag I mean")  # another word


def test_a_cline_tool_report_is_the_harnesss_and_feedback_in_one_the_humans(cli, pager, tmp_path):
    """Cline and Roo Code send each tool's result back as user text ("[read_file for 'x'] Result:",
    the header alone or with the result), with the editor's state and a to-do reminder beside it.
    None is the human's request: the session is one task.  The human's own words come back inside
    a report only as <feedback> or <answer>, and that report is the human's next request."""
    editor = "<environment_details>\n# VSCode Visible Files\nledger/export.ts\n</environment_details>"
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "<task>\nMake the ledger export round half-even.\n</task>"},
        {"type": "text", "text": "\n# task_progress RECOMMENDED\n\nKeep a to-do list in task_progress."},
        {"type": "text", "text": editor}]}]
    for n, name in enumerate(["export.ts", "round.ts", "totals.ts", "ledger [v2].ts"]):
        call = f"toolu_{n}"
        messages += [{"role": "assistant", "content": [
            {"type": "text", "text": f"Reading {name}."},
            {"type": "tool_use", "id": call, "name": "read_file", "input": {"path": name}}]},
            {"role": "user", "content": ([{"type": "text", "text": f"[read_file for '{name}'] Result:"},
                                          {"type": "text", "text": f"export function f{n}(x) {{ return Math.round(x); }}\n" * 30}]
                                         if n % 2 else
                                         [{"type": "text", "text": f"[read_file for '{name}'] Result:\n"
                                           + f"export function f{n}(x) {{ return Math.round(x); }}\n" * 30}])
             + [{"type": "text", "text": editor}]}]
    messages += [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_done", "name": "attempt_completion", "input": {"result": "Done."}}]},
        {"role": "user", "content": [{"type": "text", "text": "[attempt_completion] Result:\nThe user has provided "
                                      "feedback on the results.\n<feedback>\nAlso cover the negative refunds.\n</feedback>"},
                                     {"type": "text", "text": editor}]}]
    conv = pager.load(json.dumps(messages), "anthropic")
    assert [r["text"][:6] for r in pager.human_requests(conv)] == ["<task>", "[attem"]
    path = tmp_path / "api_conversation_history.json"
    path.write_text(json.dumps(messages))
    for flags in ([], ["--budget", "600"]):
        folder = tmp_path / ("b" if flags else "d")
        folder.mkdir()
        first, s1, again, s2, emitted, added = round_trip(cli, folder, path, flags)
        assert api_rules.problems_anthropic(emitted) == [] and (s2["new"], s2["moved"]) == (0, 0), flags
        assert max(r["turn"] for r in first.records) == 2 and {"negative", "refunds"} <= set(s1["intent"])
        assert not {"vscode", "task_progress"} & set(s1["intent"])


def test_a_clients_own_fields_are_left_out_of_an_anthropic_body(cli, pager, tmp_path):
    """Cline saves its history with its own keys (a message's ``metrics`` and ``modelInfo``, a text
    block's ``reasoning_details`` and ``call_id``, a thinking block's ``summary``); the Messages API
    refuses any field it does not take.  What a pass writes leaves them out, reported as one repair."""
    messages = [{"role": "user", "content": [{"type": "text", "text": "<task>\nList the ledger modules.\n</task>"}]},
                {"role": "assistant", "metrics": {"tokens": {"prompt": 900}}, "modelInfo": {"modelId": "claude"},
                 "content": [{"type": "thinking", "thinking": "Look first.", "signature": "c2ln", "summary": []},
                             {"type": "text", "text": "ledger.ts and export.ts.", "reasoning_details": [],
                              "call_id": ""}]},
                {"role": "user", "content": "Now round the export totals half-even."}]
    assert api_rules.problems_anthropic({"messages": messages}) != []  # the API would refuse it as saved
    conv = pager.load(json.dumps(messages), "anthropic")
    assert conv.repairs == ["fields the Messages API does not take were left out: call_id (1), metrics (1), "
                            "modelInfo (1), reasoning_details (1), summary (1)"]
    path = tmp_path / "h.json"
    path.write_text(json.dumps(messages))
    first, s1, again, s2, emitted, added = round_trip(cli, tmp_path, path, [])
    assert api_rules.problems_anthropic(emitted) == [] and (s2["new"], s2["moved"]) == (0, 0)
    kept = emitted["messages"][1]
    assert set(kept) == {"role", "content"} and {"type": "text", "text": "ledger.ts and export.ts."} in kept["content"]
    assert all(set(b) <= {"type", "thinking", "signature"} for b in kept["content"] if b["type"] == "thinking")


def test_codexs_open_tabs_are_not_the_intent_but_its_active_file_is(cli, tmp_path):
    """Codex in an IDE opens the human's message with the editor's state: the active file, the open
    tabs, then "## My request for Codex:".  The intent reads the request and the active file, not
    the list of tabs that happen to be open."""
    request = ("# Context from my IDE setup:\n\n## Active file: ledger/export_totals.py\n\n## Open tabs:\n"
               "- swagger.json: references/swagger.json\n- Dockerfile: apps/web/Dockerfile\n\n"
               "## My request for Codex:\nRound the refunds half-even.\n")
    lines = [{"type": "session_meta", "payload": {"id": "s", "cwd": "/repo"}},
             {"type": "response_item", "payload": {"type": "message", "role": "user",
                                                   "content": [{"type": "input_text", "text": request}]}},
             {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                                   "content": [{"type": "output_text", "text": "Looking."}]}}]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    result, summary = run(cli, path, tmp_path / "c.limn", NOW, "--work-steps", "0")
    assert {"refunds", "half", "even", "export_totals"} <= set(summary["intent"])
    assert not {"swagger", "dockerfile", "tabs"} & set(summary["intent"])
