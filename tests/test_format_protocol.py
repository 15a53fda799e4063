"""Issue 27: one class per format behind one protocol, one probe order, one markup row per harness."""

import ast
import json

import pytest

import pager as engine
from conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
SOURCE = (ROOT / "scripts" / "pager.py").read_text(encoding="utf-8")


# --- the protocol and its registry ---

def test_every_format_is_one_class_registered_under_its_name_in_the_listed_order():
    assert engine.FORMATS == ("pager", "openai", "responses", "anthropic", "claude-code", "codex", "swe-agent",
                              "gemini", "gemini-cli", "copilot-cli", "opencode")
    for name, spec in engine._FORMATS.items():
        assert isinstance(spec, engine._Format) and spec.name == name
        assert spec.emits_as in engine._FORMATS and engine._FORMATS[spec.emits_as].emits_as == spec.emits_as
    assert sorted(engine._PROBE_ORDER) == sorted(engine.FORMATS)  # each format probed exactly once


@pytest.mark.parametrize("member,base", [("claude-code", "anthropic"), ("codex", "responses"),
                                         ("swe-agent", "openai")])
def test_a_family_member_inherits_its_apis_pairing_writing_and_checking(member, base):
    child, parent = type(engine._FORMATS[member]), type(engine._FORMATS[base])
    assert issubclass(child, parent) and engine._FORMATS[member].emits_as == base
    for method in ("pair", "units", "write", "check"):
        assert getattr(child, method) is getattr(parent, method), method
    assert engine._FORMATS[member].tool_api == base


def test_only_formats_whose_written_back_form_loses_marks_read_it_back_themselves():
    own = {name for name, spec in engine._FORMATS.items() if spec.read_back is not None}
    assert own == {"claude-code", "swe-agent", "gemini", "gemini-cli", "copilot-cli", "opencode"}


# --- detection: the probe order, not exclusion lists ---

def _claimers(value):
    return [name for name in engine._PROBE_ORDER if engine._FORMATS[name].claims(value)]


def test_a_mini_swe_agent_list_is_a_chat_list_too_and_the_probe_order_makes_it_a_trajectory():
    run = [{"role": "system", "content": "You are a helpful assistant."},
           {"role": "user", "content": "Fix the failing test in totals.py"},
           {"role": "assistant", "content": "THOUGHT: look\n```bash\nls\n```"},
           {"role": "user", "content": "<returncode>0</returncode>\n<output>totals.py</output>"}]
    assert _claimers(run) == ["swe-agent", "openai"]  # swe-agent is asked first
    assert engine.detect_format(json.dumps(run)) == "swe-agent"


def test_a_pager_history_with_an_input_field_is_the_pagers_because_pager_probes_first():
    value = {"blocks": [], "input": []}
    assert _claimers(value) == ["pager", "responses"]
    assert engine.detect_format(json.dumps(value)) == "pager"


def test_a_codex_bare_item_with_claude_keys_counts_for_claude_code_which_probes_first():
    line = {"type": "message", "uuid": "u1", "role": "user", "content": []}
    claimers = [n for n in engine._PROBE_ORDER if engine._FORMATS[n].claims_line(line)]
    assert claimers == ["claude-code", "codex"]
    assert engine.detect_format(json.dumps(line) + "\n") == "claude-code"


@pytest.mark.parametrize("name,fmt", [("pager_history.json", "pager"), ("openai_parallel.json", "openai"),
                                      ("responses_session.json", "responses"),
                                      ("anthropic_thinking.json", "anthropic")])
def test_each_json_fixture_is_claimed_first_by_its_own_format(name, fmt):
    assert _claimers(json.loads((FIXTURES / name).read_text()))[0] == fmt


# --- the library reads the classes ---

def test_the_library_lists_come_from_the_classes():
    assert engine.TOOL_APIS == ("openai", "responses", "anthropic")
    assert engine.LIBRARY_FORMATS == ("pager", "openai", "responses", "anthropic", "gemini")


@pytest.mark.parametrize("call,expected", [
    ({"id": "c1", "type": "function", "function": {"name": "recall_pages", "arguments": "{}"}},
     ("openai", "c1", "recall_pages", "{}")),
    ({"type": "function_call", "call_id": "c2", "name": "recall_pages", "arguments": "{}"},
     ("responses", "c2", "recall_pages", "{}")),
    ({"type": "tool_use", "id": "c3", "name": "recall_pages", "input": {"ids": ["x"]}},
     ("anthropic", "c3", "recall_pages", {"ids": ["x"]})),
    ("not a call", ("openai", None, None, None)),
])
def test_a_tool_call_is_read_by_the_class_of_its_api(call, expected):
    assert engine._tool_call_parts(call) == expected


@pytest.mark.parametrize("api", ["openai", "responses", "anthropic"])
def test_a_recall_answer_takes_the_shape_of_the_calls_api(api):
    result = engine._FORMATS[api].tool_result("c9", "text", failed=True)
    problems = engine.validate(api, {"openai": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "recall_pages", "arguments": "{}"}}]}, result],
        "responses": [{"type": "function_call", "call_id": "c9", "name": "recall_pages", "arguments": "{}"}, result],
        "anthropic": [{"role": "user", "content": "recall"},
                      {"role": "assistant", "content": [{"type": "tool_use", "id": "c9", "name": "recall_pages",
                                                         "input": {}}]},
                      {"role": "user", "content": [result]}]}[api])
    assert problems == []
    assert result.get("is_error") is (True if api == "anthropic" else None)


# --- harness markup: one row per harness, one classifier ---

def _markup_literals():
    found = set()
    for row in engine.HARNESS_MARKUP:
        found.update(row.text + row.instructions + row.summaries + row.relayed + row.request_context)
        found.update(row.context + row.commands)
        found.update(x for x in (row.reports, row.demonstration) if x)
    found.discard(engine.OMITTED_NOTE)  # the pager's own note: a named constant, used by its writers
    return found


def _code_strings(tree):
    """Every string constant of the code that is not a docstring."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_each_harness_literal_is_spelled_once_in_the_engine():
    strings = _code_strings(ast.parse(SOURCE))
    for literal in _markup_literals():
        assert sum(literal in s for s in strings) == 1, literal


def test_the_pass_plan_holds_no_harness_literal():
    start = SOURCE.index("# ===== The pass plan =====")
    end = SOURCE.index("# =====", start + 10)
    plan = "\n".join(s for s in _code_strings(ast.parse(SOURCE[start:end])))
    assert not [literal for literal in _markup_literals() if literal in plan]
    assert "_MARKUP.request_words(" in SOURCE[start:end]  # it asks the classifier


def test_the_rows_name_every_harness_the_engine_knows():
    assert [row.harness for row in engine.HARNESS_MARKUP] == [
        "Claude Code", "Codex", "IDE context", "Cline / Roo Code", "Crush", "Mastra", "SWE-agent",
        "mini-swe-agent", "Gemini CLI", "GitHub Copilot CLI", "OpenCode", "the pager"]


def test_a_new_harness_is_one_row():
    rows = engine.HARNESS_MARKUP + (engine._Markup("Zed", text=("<zed-status>",), instructions=("<zed-rules>",),
                                                   summaries=("Summary of the earlier thread:",)),)
    reader = engine._MarkupReader(rows)
    assert reader.opens_harness_text('  <zed-status kind="lint">3 warnings</zed-status>')  # Mastra's attributes rule
    assert "<zed-rules>" in reader.instructions and "Summary of the earlier thread:" in reader.summaries
    assert not engine._MARKUP.opens_harness_text("<zed-status>ok</zed-status>")


@pytest.mark.parametrize("text,expected", [
    ("<command-name>/review</command-name><command-args>the totals patch</command-args>", "/review the totals patch"),
    ("<command-name>/model</command-name><command-args>opus</command-args>", None),  # sets the harness up
    ("<command-message>review</command-message><command-name>/review</command-name><command-args></command-args>",
     None),
    ("Fix the rounding", None),
])
def test_a_typed_slash_command_is_read_from_the_claude_code_row(text, expected):
    assert engine._MARKUP.typed_command(text) == expected


def test_the_intent_reads_a_codex_ide_request_without_its_open_tabs():
    text = ("# Context from my IDE setup:\n\n## Active file: totals.py\n\n## Open tabs:\n- a.md: a.md\n- b.py: b.py\n\n"
            "## My request for Codex:\nFix the rounding")
    words = engine._MARKUP.request_words(text)
    assert "a.md" not in words and "totals.py" in words and words.endswith("Fix the rounding")


@pytest.mark.parametrize("text,before,expected", [
    ("[read_file for 'totals.py'] Result:\n1 def total()", None, True),
    ("[TASK RESUMPTION] This task was interrupted", None, True),
    ("[read_file for 'totals.py'] Result:", "whole", True),
    ("Please read totals.py", None, False),
])
def test_a_cline_tool_report_is_read_from_its_row(text, before, expected):
    assert engine._MARKUP.is_report(text, whole=before == "whole") is expected


def test_only_the_pagers_own_format_takes_directives_block_by_block():
    assert [name for name, spec in engine._FORMATS.items() if spec.per_block] == ["pager"]
    history = {"blocks": [
        {"id": "a", "turn": 1, "role": "assistant", "text": "call the tests", "unit": "tool:a"},
        {"id": "b", "turn": 1, "role": "tool", "text": "2 failed", "unit": "tool:a"}]}
    conv = engine.load(json.dumps(history), "pager")
    out = engine.emit(conv, {"a": ("retain", None), "b": ("evict", None)})
    assert [block["id"] for block in out["blocks"]] == ["a"]  # its unit is not settled for it
