"""Loading a transcript: how a JSONL text is split into lines, detection's parse, and what loading keeps alive."""

import json

import pytest

from pager import detect_format, load


def _line_breakers():
    """Every character ``str.splitlines()`` breaks a line at (all of them are in the first plane)."""
    return [chr(c) for c in range(0x10000) if len(f"a{chr(c)}b".splitlines()) > 1]


def _json_allows_raw(char):
    """True when JSON lets ``char`` stand unescaped inside a string."""
    try:
        return json.loads(f'"a{char}b"') == f"a{char}b"
    except ValueError:
        return False


# The characters str.splitlines() breaks at that JSON allows raw inside a string: a JSONL record
# may hold them (JavaScript's JSON.stringify writes U+2028 and U+2029 raw; so does ensure_ascii=False).
RAW_BREAKERS = [c for c in _line_breakers() if _json_allows_raw(c)]


def test_the_breakers_json_allows_raw_are_nel_and_the_unicode_separators():
    assert RAW_BREAKERS == ["\x85", "\u2028", "\u2029"]


def _claude_session(char):
    """A Claude Code session of four lines whose texts, call input and result all hold ``char``."""
    rows = [
        {"type": "user", "message": {"role": "user", "content": f"Fix the invoice{char}rounding please."}},
        {"type": "assistant", "message": {"id": "msg_1", "role": "assistant", "content": [
            {"type": "text", "text": f"Reading{char}the file."},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": f"a{char}b.py"}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": f"def total():{char}    return 1"}]}},
        {"type": "assistant", "message": {"id": "msg_2", "role": "assistant", "content": [
            {"type": "text", "text": f"Done{char}now."}]}},
    ]
    lines, parent = [], None
    for n, row in enumerate(rows):
        row.update({"uuid": f"u{n}", "parentUuid": parent, "sessionId": "S", "isSidechain": False,
                    "timestamp": "2026-01-01T00:00:00Z"})
        parent = row["uuid"]
        lines.append(json.dumps(row, ensure_ascii=False))
    return lines


def _codex_rollout(char):
    """A Codex rollout of five lines whose message texts and call output hold ``char``."""
    rows = [
        {"type": "session_meta", "payload": {"id": "s", "cwd": "/w", "originator": "codex_cli_rs"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"What does{char}make release do?"}]}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "call_id": "c1",
                                              "arguments": json.dumps({"command": ["cat", f"Make{char}file"]},
                                                                        ensure_ascii=False)}},
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1",
                                              "output": f"release:{char}\tbuild"}},
        {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": f"It builds{char}and tags."}]}},
    ]
    return [json.dumps(dict(row, timestamp="2026-01-01T00:00:00Z"), ensure_ascii=False) for row in rows]


@pytest.mark.parametrize("char", RAW_BREAKERS, ids=lambda c: f"U+{ord(c):04X}")
@pytest.mark.parametrize("fmt, make", [("claude-code", _claude_session), ("codex", _codex_rollout)])
def test_a_line_holding_a_json_legal_line_breaker_is_read_whole(fmt, make, char):
    lines = make(char)
    assert all(char in line for line in lines[1:])  # the character is raw in the file, not escaped
    text = "\n".join(lines) + "\n"
    assert detect_format(text) == fmt
    conv = load(text, fmt)
    assert conv.skipped_lines == 0
    assert sum(conv.other_lines.values()) == (1 if fmt == "codex" else 0)  # Codex's session_meta line
    texts = [b["text"] for b in conv.blocks]
    # every text, call and result kept whole, the character in place
    assert sum(char in t for t in texts) == (5 if fmt == "claude-code" else 4), texts
    same = load(text.replace(char, " "), fmt)
    assert [b["role"] for b in conv.blocks] == [b["role"] for b in same.blocks]


@pytest.mark.parametrize("fmt, make", [("claude-code", _claude_session), ("codex", _codex_rollout)])
def test_crlf_line_ends_read_as_lf(fmt, make):
    lines = make(" ")
    lf, crlf = load("\n".join(lines) + "\n", fmt), load("\r\n".join(lines) + "\r\n", fmt)
    assert crlf.skipped_lines == 0
    assert crlf.blocks == lf.blocks
    assert detect_format("\r\n".join(lines)) == fmt
