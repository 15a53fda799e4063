"""Issue 4 through the engine: every transcript format in, a valid compacted history out."""

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import pager as engine
from conftest import NOW, ROOT, replay, run_script

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
FORMAT_OF = {
    "pager_history.json": "pager", "openai_parallel.json": "openai", "openai_repairs.json": "openai",
    "responses_session.json": "responses", "anthropic_thinking.json": "anthropic",
    "anthropic_alternation.json": "anthropic", "anthropic_orphan.json": "anthropic",
    "claude_code_session.jsonl": "claude-code", "codex_rollout.jsonl": "codex",
    "codex_legacy_compacted.jsonl": "codex",
}


def _pass(cli, tmp_path, name, *flags, contract="c.limn", out="out.json"):
    result = cli("--history", FIXTURES / name, "--contract", tmp_path / contract, "--emit", tmp_path / out,
                 "--now", NOW, *flags)
    assert result.code == 0, result.err
    return result


@pytest.mark.parametrize("name", sorted(FORMAT_OF))
def test_every_format_is_detected_compacted_and_valid(cli, pager, tmp_path, name):
    result = _pass(cli, tmp_path, name)
    fmt = FORMAT_OF[name]
    assert f"({fmt} format, detected; intent from " in result.out
    emitted = json.loads((tmp_path / "out.json").read_text())
    assert pager.validate(fmt, emitted) == []
    _, values = replay((tmp_path / "c.limn").read_text())
    assert values["pager-format"] == fmt
    seen = {r["block"]: r["action"] for r in result.records}
    for action, name_ in pager.LIST_OF_ACTION.items():
        assert sorted(values[name_]) == sorted(b for b, a in seen.items() if a == action)


@pytest.mark.parametrize("name", sorted(FORMAT_OF))
def test_given_format_matches_detection(cli, tmp_path, name):
    result = _pass(cli, tmp_path, name, "--format", FORMAT_OF[name])
    assert f"({FORMAT_OF[name]} format, given;" in result.out


def test_a_tool_call_and_its_result_share_one_directive(cli, pager, tmp_path):
    result = _pass(cli, tmp_path, "openai_parallel.json", "--intent", "float rounding line_total decimal")
    by_id = {r["block"]: r for r in result.records}
    conv = pager.load((FIXTURES / "openai_parallel.json").read_text(), "openai")
    units = {}
    for block in conv.blocks:
        if block["unit"]:
            units.setdefault(block["unit"], set()).add(by_id[block["id"]]["action"])
    assert units and all(len(actions) == 1 for actions in units.values())
    # The huge, irrelevant `pip list` output goes, and its call goes with it.
    assert by_id["call_pip1:result"]["tokens"] > 2000
    assert by_id["call_pip1:result"]["action"] == by_id["call_pip1"]["action"] != "retain"
    emitted = json.dumps(json.loads((tmp_path / "out.json").read_text()))
    assert "Package            Version" not in emitted and "call_pip1" not in emitted


def test_system_and_current_turn_are_protected(cli, tmp_path):
    result = _pass(cli, tmp_path, "openai_parallel.json", "--intent", "zebra migration")
    by_id = {r["block"]: r for r in result.records}
    assert by_id["m-e855b89b490b"]["action"] == "retain" and by_id["m-e855b89b490b"]["reason"] == "system"
    assert by_id["m-ca5f57adec81"]["reason"] == "recent"  # the message the agent is answering
    assert 'add "m-e855b89b490b" to retained-blocks because "system; R=' in (tmp_path / "c.limn").read_text()


def test_keep_recent_protects_the_last_n_blocks(cli, tmp_path):
    result = _pass(cli, tmp_path, "openai_parallel.json", "--intent", "zebra", "--keep-recent", "3")
    reasons = [r["reason"] for r in result.records]
    assert reasons[-3:] == ["recent"] * 3
    _, values = replay((tmp_path / "c.limn").read_text())
    assert values["pager-keep-recent"] == 3


@pytest.mark.parametrize("flags, source, keywords", [
    (["--intent", "Why does the invoice rounding fail?"], "--intent", ["invoice", "rounding", "fail"]),
    (["--work-steps", "0"], "last human message", ["makes", "sense", "thanks", "please", "apply"]),
    ([], "last human message and recent work", ["makes", "sense", "thanks", "please", "apply", "line_total"]),
])
def test_intent_sources(cli, tmp_path, flags, source, keywords):
    result = cli("--history", FIXTURES / "openai_parallel.json", "--contract", tmp_path / "c.limn", "--json",
                 "--now", NOW, *flags)
    summary = json.loads(result.out)
    # the recent work adds the names of the last steps after the human's words
    shown = summary["intent"][:len(keywords)] if source.endswith("recent work") else summary["intent"]
    assert summary["intent_source"] == source and shown == keywords
    _, values = replay((tmp_path / "c.limn").read_text())
    assert values["pager-intent-source"] == source and values["pager-intent"] == " ".join(summary["intent"])


def test_intent_file(cli, tmp_path):
    (tmp_path / "intent.txt").write_text("Fix the invoice rounding in totals.py\n")
    result = cli("--history", FIXTURES / "openai_parallel.json", "--contract", tmp_path / "c.limn", "--json",
                 "--intent-file", tmp_path / "intent.txt")
    summary = json.loads(result.out)
    assert summary["intent_source"] == "--intent-file" and summary["intent"] == ["fix", "invoice", "rounding", "totals", "py"]


def test_intent_ir_object_from_the_prompt_compiler(cli, tmp_path):
    history = {"intent_ir": {"schema": "prosecode.intent.v0", "verb": "fix", "slots": {"target": "invoice rounding"},
                             "confidence": 0.8},
               "blocks": [{"id": "b1", "turn": 1, "role": "user", "text": "invoice rounding is off"}]}
    (tmp_path / "h.json").write_text(json.dumps(history))
    summary = json.loads(cli("--history", tmp_path / "h.json", "--contract", tmp_path / "c.limn", "--json").out)
    assert summary["intent_source"] == "intent_ir (prosecode.intent.v0)"
    assert summary["intent"] == ["fix", "invoice", "rounding"]


def test_pager_history_without_intent_uses_its_last_user_message(cli, tmp_path):
    history = {"blocks": [{"id": "b1", "turn": 1, "role": "user", "text": "deploy the parser"},
                          {"id": "b2", "turn": 2, "role": "assistant", "text": "ok"},
                          {"id": "b3", "turn": 3, "role": "user", "text": "now the parser tests"}]}
    (tmp_path / "h.json").write_text(json.dumps(history))
    summary = json.loads(cli("--history", tmp_path / "h.json", "--contract", tmp_path / "c.limn", "--json").out)
    assert summary["intent_source"] == "last user message" and summary["intent"] == ["parser", "tests"]


def test_skipped_lines_and_repairs_are_reported(cli, tmp_path):
    result = _pass(cli, tmp_path, "claude_code_session.jsonl")
    assert re.search(r"; skipped 1 unreadable line\b", result.out)
    repaired = _pass(cli, tmp_path, "openai_repairs.json", contract="r.limn", out="r.json")
    repairs = [line for line in repaired.err.splitlines() if line.startswith("pager: repair: ")]
    assert len(repairs) == 4 and "; 4 repairs (see stderr)" in repaired.out
    assert 'tool_call_id "call_9" has no matching tool call' in repairs[0]


def test_stubs_come_back_and_are_restored(cli, pager, tmp_path):
    # The fixture's live blocks are too short for a stub to shorten (a pass keeps them, reason
    # "small"): a longer answer is added after its compaction boundary.
    lines = (FIXTURES / "claude_code_session.jsonl").read_text().splitlines()
    last = [json.loads(line) for line in lines if '"uuid"' in line and '"isSidechain": false' in line][-1]
    answer = {"type": "assistant", "uuid": "long-1", "parentUuid": last["uuid"], "sessionId": last["sessionId"],
              "message": {"role": "assistant", "content": [{"type": "text", "text": "The rounding lives in "
                                                            "totals.py. " + "It rounds each line first. " * 40}]}}
    ask = {"type": "user", "uuid": "long-2", "parentUuid": "long-1", "sessionId": last["sessionId"],
           "message": {"role": "user", "content": "Thanks. Now the parser tests please."}}
    session = tmp_path / "session.jsonl"
    session.write_text("\n".join(lines + [json.dumps(answer), json.dumps(ask)]) + "\n")
    first = cli("--history", session, "--contract", tmp_path / "c.limn", "--emit", tmp_path / "step1.json",
                "--now", NOW)
    assert first.code == 0, first.err
    # Blocks from before the compaction boundary are pages that are never written back.
    paged = [r["block"] for r in first.records if r["action"] == "page" and r["reason"] != "compacted"]
    assert paged
    store = pager.PageStore.open(str(tmp_path / "c.pages.sqlite3"), create=False)
    originals = {block: store.get(block).text for block in paged}
    store.close()
    again = cli("--history", tmp_path / "step1.json", "--contract", tmp_path / "c.limn", "--emit",
                tmp_path / "step2.json", "--now", NOW, "--keep-recent", "100")
    assert again.code == 0, again.err
    records = {r["block"]: r for r in again.records}
    for block in paged:  # read back under the ids the stubs carry, and protected by --keep-recent 100
        assert records[block]["stub"] is True and records[block]["action"] == "retain"
    step2 = json.loads((tmp_path / "step2.json").read_text())
    assert pager.validate("anthropic", step2) == []
    texts = [part["text"] for message in step2["messages"] for part in
             (message["content"] if isinstance(message["content"], list) else [{"text": message["content"]}])
             if isinstance(part, dict) and isinstance(part.get("text"), str)]
    for block, text in originals.items():  # the originals are back verbatim, no stub left
        assert text in texts, block
    assert not any(t.startswith("[paged ") for t in texts)


def test_bad_transcript_input(cli, tmp_path):
    meta_only = tmp_path / "meta.jsonl"
    meta_only.write_text('{"type": "summary", "summary": "x"}\n{"type": "file-history-snapshot"}\n')
    result = cli("--history", meta_only, "--contract", tmp_path / "c.limn", "--format", "claude-code")
    assert result.code == 2 and result.err.startswith(f"pager: error: {meta_only}: ")
    assert len(result.err.splitlines()) == 1 and not (tmp_path / "c.limn").exists()
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("this is not a transcript\n")
    result = cli("--history", garbage, "--contract", tmp_path / "c.limn")
    assert result.code == 2 and result.err.startswith(f"pager: error: {garbage}: ") and "Traceback" not in result.err
    result = cli("--history", garbage, "--contract", tmp_path / "c.limn", "--format", "xml")
    assert result.code == 2 and "argument --format: invalid choice: 'xml'" in result.err


@pytest.mark.parametrize("flags, expected", [
    (["--intent", "a", "--intent-file", "f"], "give --intent or --intent-file, not both"),
    (["--emit", "o.json", "--with-index"], "--with-index is for the pager format; for openai, list pages with 'pager.py index'"),
    (["--keep-recent", "-1"], 'argument --keep-recent: --keep-recent must be a non-negative integer (got "-1")'),
])
def test_bad_format_flags(cli, tmp_path, flags, expected):
    result = cli("--history", FIXTURES / "openai_parallel.json", "--contract", tmp_path / "c.limn", *flags)
    assert (result.code, result.err) == (2, f"pager: error: {expected}\n")


def test_missing_intent_file(cli, tmp_path):
    result = cli("--history", FIXTURES / "openai_parallel.json", "--contract", tmp_path / "c.limn",
                 "--intent-file", tmp_path / "nope.txt")
    assert (result.code, result.err) == (2, f"pager: error: {tmp_path / 'nope.txt'}: no such file\n")


_WORDS = ["rounding", "invoice", "totals", "decimal", "pip", "config", "test", "float", "zebra", "error", "file"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(n for n, f in FORMAT_OF.items() if f != "pager")),
       st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4),
       st.one_of(st.none(), st.integers(50, 3000)), st.floats(0.0, 1.0))
def test_any_intent_and_budget_gives_a_valid_history(tmp_path_factory, name, words, budget, alpha):
    import pager
    folder = tmp_path_factory.mktemp("prop")
    args = ["--history", str(FIXTURES / name), "--contract", str(folder / "c.limn"), "--emit",
            str(folder / "out.json"), "--intent", " ".join(words), "--alpha", str(alpha), "--now", NOW]
    if budget is not None:
        args += ["--budget", str(budget)]
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert pager.main(args) == 0
    emitted = json.loads((folder / "out.json").read_text())
    assert pager.validate(FORMAT_OF[name], emitted) == []


def test_readme_format_examples_run(tmp_path):
    result = run_script("--history", FIXTURES / "codex_rollout.jsonl", "--contract", tmp_path / "c.limn",
                        "--emit", tmp_path / "o.json", "--now", NOW)
    assert result.code == 0 and "(codex format, detected;" in result.out


def test_instructions_a_harness_sends_as_a_user_message_are_kept_like_the_system_prompt(cli, tmp_path):
    # Codex sends a repository's AGENTS.md and the working environment as user messages. A default
    # pass keeps them like the system prompt; under a budget smaller than the AGENTS.md they
    # compete like the rest, and the budget holds.
    rules = "# AGENTS.md instructions for /home/dev/src/invoicer\n\n<INSTRUCTIONS>\n" + "\n".join(
        f"- Rule {n}: run pytest -q before committing module_{n}.py; keep decimal rounding half-even."
        for n in range(120)) + "\n</INSTRUCTIONS>"
    agents = {"timestamp": "2026-03-03T14:00:00.000Z", "type": "response_item", "payload": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": rules}]}}
    lines = (FIXTURES / "codex_rollout.jsonl").read_text().splitlines()
    history = tmp_path / "rollout.jsonl"
    after = next(n for n, line in enumerate(lines) if '"type": "compacted"' in line) + 1  # in the live context
    history.write_text("\n".join(lines[:after] + [json.dumps(agents)] + lines[after:]) + "\n")

    def run(*flags, contract):
        result = cli("--history", history, "--contract", tmp_path / contract, "--emit", tmp_path / (contract + ".json"),
                     "--now", NOW, "--json", *flags)
        assert result.code == 0, result.err
        return json.loads(result.out.strip().splitlines()[-1]), {r["block"]: r for r in result.records}

    conv = engine.load(history.read_text(), "codex")
    instructions = {b["id"]: b for b in conv.blocks if b["protected"] == "instructions"}
    assert sorted(b["text"].split()[0] for b in instructions.values()) == ["#", "<environment_context>"]
    _, plain = run(contract="plain.limn")
    assert {(plain[b]["action"], plain[b]["reason"]) for b in instructions} == {("retain", "system")}
    summary, tight = run("--budget", "1200", contract="tight.limn")
    assert summary["tokens_after"] <= 1200 and not summary["over_budget"]
    agents_id = next(b for b, block in instructions.items() if block["text"].startswith("# AGENTS.md"))
    assert tight[agents_id]["action"] != "retain" and tight[agents_id]["reason"] != "system"
