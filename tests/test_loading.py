"""Loading a transcript: how a JSONL text is split into lines, detection's parse, and what loading keeps alive."""

import gc
import json
import sys

import pytest

from pager import PagerError, detect_format, load


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


def _long_session(messages):
    """A Claude Code session of ``messages`` user/assistant lines, with one line that is not JSON among them."""
    lines, parent = [], None
    for n in range(messages):
        role = ("user", "assistant")[n % 2]
        content = f"Step {n}: the invoice rounding, line {n}." if role == "user" else [
            {"type": "text", "text": f"Looked at totals.py for step {n}."}]
        message = {"role": role, "content": content, **({"id": f"msg_{n}"} if role == "assistant" else {})}
        lines.append(json.dumps({"type": role, "message": message, "uuid": f"u{n}", "parentUuid": parent,
                                 "sessionId": "S", "timestamp": "2026-01-01T00:00:00Z"}))
        parent = f"u{n}"
    lines.insert(5, "{not json")
    return "\n".join(lines) + "\n"


def _count_scans(pager, monkeypatch):
    """Return the list of lines the JSON scanner is started on (a line read alone, or scanned where it lies)."""
    parsed = []
    real = pager._JSON_SCAN

    def scan(text, at):
        end = text.find("\n", at)
        parsed.append(text[at:end if end >= 0 else len(text)])
        return real(text, at)
    monkeypatch.setattr(pager, "_JSON_SCAN", scan)
    return parsed


@pytest.mark.parametrize("limit", [3, 2000])  # detection stops inside the file, or reads all of it
def test_load_auto_parses_each_line_once(pager, monkeypatch, limit):
    text = _long_session(40)
    plain = load(text, detect_format(text))
    monkeypatch.setattr(pager, "DETECT_LINES", limit)
    parsed = _count_scans(pager, monkeypatch)
    conv = load(text, "auto")
    assert sorted(parsed) == sorted(line for line in text.split("\n") if line)  # every line once, no line twice
    assert conv.blocks == plain.blocks
    assert conv.skipped_lines == plain.skipped_lines == 1


def test_the_cli_reads_a_jsonl_log_with_one_parse_per_line(cli, pager, monkeypatch, tmp_path):
    text = _long_session(30)
    history = tmp_path / "session.jsonl"
    history.write_text(text, encoding="utf-8")
    parsed = _count_scans(pager, monkeypatch)
    result = cli("--history", str(history), "--contract", str(tmp_path / "c.limn"), "--now", "2026-01-01T00:00:00Z")
    assert result.code == 0, result.err
    assert sorted(parsed) == sorted(line for line in text.split("\n") if line)


def test_detection_keeps_no_reference_to_the_text():
    text = _long_session(10)  # JSONL: the whole text is not one JSON value, so its parse fails
    gc.collect()
    gc.disable()  # a cycle holding the text would stay until the collector ran
    try:
        before = sys.getrefcount(text)
        assert detect_format(text) == "claude-code"
        assert sys.getrefcount(text) == before
        with pytest.raises(PagerError):
            detect_format(text.replace("\"type\"", "\"kind\""))  # no known line: the failure names the JSON error
    finally:
        gc.enable()


def test_detection_failures_still_name_the_json_problem():
    with pytest.raises(PagerError, match=r"invalid JSON at line 2 column 1 .*no line is a Claude Code or Codex"):
        detect_format('{"a": 1}\n{"b": 2}\n')
    with pytest.raises(PagerError, match="nested too deeply"):
        detect_format("[" * 100000)
    with pytest.raises(PagerError, match="input is empty"):
        detect_format(" \n\t ")


def _records_line_by_line(text):
    """(line number, object) of each line json.loads reads alone as an object, and the count of the others."""
    records, skipped = [], 0
    for number, line in enumerate(text.split("\n"), 1):
        if not line or line.isspace():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            skipped += 1
            continue
        if isinstance(value, dict):
            records.append((number, value))
        else:
            skipped += 1
    return records, skipped


# Lines a scan of the whole text could read otherwise than json.loads reads the line alone: a value
# cut at a line break (its rest on the next line), a value running on into the next lines, white
# space first, extra data after the value, a value that is no object, a \r before the \n.
MALFORMED_LINES = ['{"type": "user", "n": 1}', '{"a":', '1}', '[', '{"b": 2}', '{"c": 3},', "  ", "",
                   '   {"d": 4}', '{"e": 5} {"f": 6}', "[1, 2]", '{"g": 7}\r', '{"h": "x\u2028y"}', "nul", '{"i": 8}']


@pytest.mark.parametrize("head", [None, 2])  # read from the start, or on from detection's head
def test_a_value_running_past_its_line_leaves_each_line_read_as_json_loads_reads_it_alone(pager, head):
    text = "\n".join(MALFORMED_LINES)
    if head is not None:
        pager._JSONL_HEADS[id(text)] = pager._jsonl_head(text, head)
    records, skipped = pager._jsonl_records(text)
    assert (records, skipped) == _records_line_by_line(text)
    # every object line that stands alone is read, those before and after the runaway value alike
    assert [n for n, _ in records] == [1, 5, 9, 12, 13, 15] and skipped == 7
