"""The Claude Code plugin: manifest, hooks run exactly as Claude Code runs them, and the real CLI's validator."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, load_script

import claude_hooks  # noqa: E402  (conftest puts scripts/ on sys.path)
import pager  # noqa: E402

DEV_SET = ROOT.parent / "shared" / "data" / "transcripts-dev"
FIXTURE = ROOT / "tests" / "fixtures" / "transcripts" / "claude_code_session.jsonl"
MANIFEST = ROOT / ".claude-plugin" / "plugin.json"
HOOKS = ROOT / "hooks" / "hooks.json"
INDEX_LINE = re.compile(r"^turn (\d+): (.+?): ")  # the injected index: turn T: ids: names

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


def _benchmark():
    return load_script("benchmark-hooks")


def hook_command(event):
    """Return the command line hooks/hooks.json gives Claude Code for ``event``."""
    return json.loads(HOOKS.read_text(encoding="utf-8"))["hooks"][event][0]["hooks"][0]["command"]


def run_hook(event_name, stdin, project, env=None):
    """Run a hook as Claude Code does: its command through the shell, JSON on stdin, the project as cwd."""
    environ = {k: v for k, v in os.environ.items() if k not in claude_hooks.TOKEN_ENV}
    environ.update(CLAUDE_PLUGIN_ROOT=str(ROOT), CLAUDE_PROJECT_DIR=str(project), **(env or {}))
    text = stdin if isinstance(stdin, str) else json.dumps(stdin)
    return subprocess.run(["/bin/sh", "-c", hook_command(event_name)], input=text, capture_output=True,
                          text=True, cwd=project, env=environ, timeout=300)


def events(session_id, transcript, project, custom=None, harness="claude-code"):
    """Return the PreCompact and SessionStart inputs the harness sends for one compaction.

    Claude Code: session_id, transcript_path, cwd, hook_event_name, then trigger and
    custom_instructions, or source. Codex 0.169 (its hook input schemas): no custom_instructions;
    model and turn_id in PreCompact; model and permission_mode in SessionStart.
    """
    common = {"session_id": session_id, "transcript_path": str(transcript), "cwd": str(project)}
    if harness == "codex":
        return (dict(common, hook_event_name="PreCompact", trigger="auto", model="gpt-5.5", turn_id="turn-1"),
                dict(common, hook_event_name="SessionStart", source="compact", model="gpt-5.5",
                     permission_mode="default"))
    return (dict(common, hook_event_name="PreCompact", trigger="manual" if custom else "auto",
                 custom_instructions=custom),
            dict(common, hook_event_name="SessionStart", source="compact", model="claude-opus-5-5"))


def compact(session_id, transcript, project, custom=None, env=None, harness="claude-code"):
    """Run both hooks of one compaction; return the SessionStart output object."""
    pre, start = events(session_id, transcript, project, custom, harness)
    first = run_hook("PreCompact", pre, project, env)
    assert first.returncode == 0 and first.stderr == ""
    assert set(json.loads(first.stdout)) == {"systemMessage"}  # allowed by both harnesses' PreCompact output
    assert json.loads(first.stdout)["systemMessage"].startswith("prosecode pager: ")
    second = run_hook("SessionStart", start, project, env)
    assert second.returncode == 0, second.stderr
    assert not (project / ".prosecode" / "hooks.log").exists(), (project / ".prosecode" / "hooks.log").read_text()
    return json.loads(second.stdout)


def context_of(output):
    """Check the SessionStart output against the hooks reference; return its additionalContext."""
    assert set(output) == {"hookSpecificOutput"}
    specific = output["hookSpecificOutput"]
    assert set(specific) == {"hookEventName", "additionalContext"}
    assert specific["hookEventName"] == "SessionStart"
    assert isinstance(specific["additionalContext"], str) and specific["additionalContext"]
    return specific["additionalContext"]


def indexed_ids(context):
    return [block for m in map(INDEX_LINE.match, context.splitlines()) if m for block in m.group(2).split(" ")
            if block != "..."]  # "...": more pages of the line, found by searching its names


def recall_command(context):
    """Return the recall command of the index's head line, ``ID`` standing for the block id."""
    line = next(line for line in context.splitlines() if line.startswith("[prosecode context pager] "))
    return line.split("; read it: ", 1)[1].split(". Lines: ", 1)[0]


def search_command(context):
    line = next(line for line in context.splitlines() if line.startswith("[prosecode context pager] "))
    return line.split("any word: ", 1)[1].split(" ; read it: ", 1)[0]


def transcript_strings(path):
    """Return (every string a transcript's messages and tool outputs hold, tool call id -> tool name).

    Claude Code: ``message.content`` (string, text parts, tool_use, tool_result). Codex: the
    ``payload`` of response items (message content, function_call, function_call_output), or an
    older rollout's bare items.
    """
    found, calls = set(), {}

    def walk(value):
        if isinstance(value, str):
            found.add(value)
            if value.startswith('{"output"'):  # Codex wraps shell output as JSON: {"output": ..., "metadata": ...}
                walk(json.loads(value))
        elif isinstance(value, list):
            texts = [item.get("text") for item in value if isinstance(item, dict) and isinstance(item.get("text"), str)]
            found.update(("\n".join(texts), "".join(texts)))  # a result's text parts, read as one text
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            if value.get("type") in ("tool_use", "function_call", "custom_tool_call", "local_shell_call"):
                calls[value.get("id") if value.get("type") == "tool_use" else value.get("call_id")] = value.get("name")
            for key in ("text", "content", "thinking", "output", "summary"):
                walk(value.get(key))
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("message"), dict):
            walk(obj["message"].get("content"))
        elif isinstance(obj, dict) and obj.get("type") == "response_item":
            walk(obj.get("payload"))
        elif isinstance(obj, dict) and isinstance(obj.get("type"), str) and "payload" not in obj:
            walk(obj)  # an older rollout's bare item (message, reasoning, function_call and its output)
    return found, calls


PART_LABEL = re.compile(r"\[[a-z_]+(?:[ :,][^\]\n]*)?\]")


def check_recalls(context, transcript, project, limit=None, fmt="claude-code"):
    """Run the injected recall command on each indexed id: the text is the block's, as in the transcript."""
    conv = pager.load(Path(transcript).read_text(encoding="utf-8"), fmt)
    blocks = {b["id"]: b for b in pager.conversation_blocks(conv) + conv.aside}  # aside: attachment lines
    raw, calls = transcript_strings(transcript)
    ids = indexed_ids(context)[:limit]
    assert ids, "the index lists no paged block"
    command = recall_command(context)
    for block in ids:
        proc = subprocess.run(["/bin/sh", "-c", command.replace(" recall ID ", f" recall {shlex.quote(block)} ")],
                              capture_output=True,
                              cwd=project)
        out = proc.stdout.decode("utf-8")  # as bytes: text mode would turn a recalled "\r\n" into "\n"
        assert proc.returncode == 0, proc.stderr
        assert out == blocks[block]["text"]
        if blocks[block]["kind"] == "attachment":  # "[file] path ...": the line's strings, not a message's
            continue
        if block in calls:  # a tool call reads as name(arguments)
            assert out.startswith(f"{calls[block] or 'shell'}("), block
        else:
            text = out[len("[error] "):] if out.startswith("[error] ") else out  # is_error mark
            # The transcript's own text (a tool may print nothing; a reasoning item's summary parts
            # are joined by line breaks), or the reader's label of a part that has no text
            # ("[reasoning]" for an encrypted item, "[tool_reference: WebSearch]", a picture's size).
            assert all(any(piece in s for s in raw) or PART_LABEL.fullmatch(piece.strip())
                       for piece in text.split("\n") if piece.strip()), block
    return ids


# --- manifest, hooks file, versions ---

def test_versions_agree():
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    skill = re.search(r'^  version: "([^"]+)"$', (ROOT / "SKILL.md").read_text(encoding="utf-8"), re.M).group(1)
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = tomllib.loads(text)["project"]["version"] if tomllib else re.search(r'^version = "(.+)"$', text, re.M).group(1)
    mcp_source = (ROOT / "scripts" / "mcp_server.py").read_text(encoding="utf-8")
    assert '"version": engine.__version__' in mcp_source  # the MCP server reports the engine's version
    assert {manifest["version"], skill, pager.__version__} == {project}


def test_manifest_declares_the_skill_hooks_and_mcp_server():
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    assert manifest["name"] == "prosecode-context-pager"
    assert manifest["skills"] == ["./"] and (ROOT / "SKILL.md").is_file()
    server = manifest["mcpServers"]["prosecode-pager"]
    assert server["command"] == "python3" and server["args"] == ["${CLAUDE_PLUGIN_ROOT}/scripts/mcp_server.py"]
    hooks = json.loads(HOOKS.read_text(encoding="utf-8"))["hooks"]
    assert set(hooks) == {"PreCompact", "SessionStart"}
    assert hooks["SessionStart"][0]["matcher"] == "compact"
    assert "matcher" not in hooks["PreCompact"][0]  # manual and auto compactions alike
    for event, mode in (("PreCompact", "pre-compact"), ("SessionStart", "session-start")):
        assert hook_command(event) == f'python3 "${{CLAUDE_PLUGIN_ROOT}}/scripts/claude_hooks.py" {mode}'
    marketplace = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text(encoding="utf-8"))
    assert [(p["name"], p["source"]) for p in marketplace["plugins"]] == [("prosecode-context-pager", "./")]


# --- human requests ---

def test_human_requests_skip_harness_lines():
    """The hooks take the human's requests by the engine's rule (pager.human_requests): on the live
    branch only ("actually just use round() everywhere" was written on a branch the session left)."""
    assert claude_hooks.human_requests(str(FIXTURE)) == [
        "pytest fails on tests/test_totals.py::test_rounding, can you find out why?",
        "No, Decimal is right. Re-read and go ahead.",
        "Now run the whole test suite.",
    ]


def _session(tmp_path, *lines):
    """Write a Claude Code session: a human request, then ``lines`` (user lines' content or whole lines)."""
    records = [{"type": "user", "uuid": "u0", "parentUuid": None, "sessionId": "S", "message":
                {"role": "user", "content": "Fix the invoice rounding."}}]
    for k, line in enumerate(lines, 1):
        record = line if "type" in line else {"type": "user", "message": {"role": "user", "content": line["content"]}}
        record = {"uuid": f"u{k}", "parentUuid": f"u{k - 1}", "sessionId": "S", **record}
        record["message"] = {"role": "user", **record["message"]}
        records.append(record)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


@pytest.mark.parametrize("line", [
    {"content": "<task-notification>done</task-notification>"},
    {"content": "<command-name>/compact</command-name>"},
    {"content": "[Request interrupted by user for tool use]"},
    {"type": "user", "isCompactSummary": True, "message": {"content": "Summary: fix it"}},
    {"type": "user", "isMeta": True, "message": {"content": "Fix it"}},
    {"content": "<system-reminder>x</system-reminder>"},
])
def test_harness_lines_are_not_human_requests(line, tmp_path):
    assert claude_hooks.human_requests(_session(tmp_path, line)) == ["Fix the invoice rounding."]


# --- the hooks on real sessions ---

# Development files whose hook check is known to fail, with why (none today: an older Codex rollout's
# bare items were missing from transcript_strings until it read them).
_HOOK_GAPS: dict = {}


def _dev_sessions():
    """Return (harness, transcript) for every Claude Code session and Codex rollout of the development set."""
    return [pytest.param(harness, path, marks=pytest.mark.xfail(reason=_HOOK_GAPS[path.name], strict=True))
            if path.name in _HOOK_GAPS else (harness, path)
            for harness in ("claude-code", "codex")
            for path in sorted((DEV_SET / harness).glob("*.jsonl"))] if DEV_SET.is_dir() else []


@pytest.mark.skipif(not _dev_sessions(), reason=f"{DEV_SET} not found (development set not shipped)")
@pytest.mark.parametrize("harness, transcript", _dev_sessions(), ids=lambda v: getattr(v, "name", v))
def test_hooks_on_development_sessions(harness, transcript, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    probe = subprocess.run([sys.executable, str(ROOT / "scripts" / "pager.py"), "--history", str(transcript),
                            "--contract", str(tmp_path / "probe.limn"), "--dry-run"], capture_output=True, text=True)
    readable = probe.returncode == 0  # what the engine can read, the hooks page
    if not readable:  # a subagent's own log, a pre-hooks rollout layout: logged, nothing injected
        pre, start = events("dev", transcript, project, harness=harness)
        for name, event in (("PreCompact", pre), ("SessionStart", start)):
            proc = run_hook(name, event, project)
            assert (proc.returncode, proc.stdout) == (0, "")
        assert len((project / ".prosecode" / "hooks.log").read_text().splitlines()) == 2
        return
    context = context_of(compact("dev", transcript, project, harness=harness))
    assert pager.estimate_tokens(context) <= claude_hooks.DEFAULT_CONTEXT_TOKENS
    requests = claude_hooks.human_requests(str(transcript))
    # Verbatim; one longer than its share of the cap (a pasted log) keeps its start and says what was cut.
    # (A session of slash commands only has no request to show.)
    assert all(r in context or (r[:200] in context and "more characters not shown]" in context)
               for r in requests[:1] + requests[-1:])
    state = json.loads((project / ".prosecode" / "dev.hook.json").read_text())
    assert (state["task"], state["last_request"]) == ((requests[0], requests[-1]) if requests else (None, None))
    if state["pass"]["page"] == 0:  # nothing the compaction takes out: no index to recall from
        assert not indexed_ids(context)
        return
    check_recalls(context, transcript, project, fmt=harness)


@pytest.mark.skipif(not (DEV_SET / "claude-code" / "reliability-python-to-rust-port.jsonl").exists(),
                    reason="the development set is not shipped")
def test_readme_example_is_what_the_hook_injects(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    transcript = DEV_SET / "claude-code" / "reliability-python-to-rust-port.jsonl"
    context = context_of(compact("6c0ffee0-1a2b-4c3d-8e9f-0123456789ab", transcript, project,
                                 env={"PROSECODE_CONTEXT_TOKENS": "600"}))
    shown = context.replace(str(ROOT / "scripts" / "pager.py"), "/opt/prosecode-context-pager/scripts/pager.py")
    shown = shown.replace(str(project), "/home/me/rust-port")
    readme = (ROOT / "references" / "plugin.md").read_text(encoding="utf-8")
    example = readme.split("**What the model sees.**", 1)[1].split("```text\n", 1)[1].split("\n```", 1)[0]
    # The paths here are not the example's, and their length moves the cap by a few names: the text
    # down to the index's head line is the same, and the names one index shows are all in the other,
    # which shows a few more (a line holds the names of consecutive pages, so they may land in any line).
    mine, theirs = shown.splitlines(), example.splitlines()
    head = next(n for n, line in enumerate(theirs) if line.startswith("[prosecode context pager] ")) + 1
    assert mine[:head] == theirs[:head] and len(theirs) - head >= 3

    def names(lines):
        return [name for line in lines for name in line.split(": ", 2)[2].split(" ")]

    fewer, more = sorted((names(mine[head:]), names(theirs[head:])), key=len)
    assert set(fewer) <= set(more) and len(more) - len(fewer) <= 10
    assert pager.estimate_tokens(context) <= 600


def test_hooks_on_the_fixture_session_with_custom_instructions(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    context = context_of(compact("s1", FIXTURE, project, custom="Decimal rounding in line_total"))
    assert "pytest fails on tests/test_totals.py::test_rounding, can you find out why?" in context
    assert "Now run the whole test suite." in context
    state = json.loads((project / ".prosecode" / "s1.hook.json").read_text())
    assert (state["intent"], state["intent_from"]) == ("Decimal rounding in line_total", "custom_instructions")
    assert state["pass"]["intent_source"] == "--intent"
    check_recalls(context, FIXTURE, project)


def test_instructions_that_look_like_flags(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    context_of(compact("s5", FIXTURE, project, custom="--budget 5 -h"))
    state = json.loads((project / ".prosecode" / "s5.hook.json").read_text())
    assert state["intent"] == "--budget 5 -h" and "budget" not in state["pass"]


def test_second_compaction_extends_the_same_contract(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    transcript = tmp_path / "session.jsonl"
    lines = list(_benchmark().session_lines(1200))
    transcript.write_text("".join(json.dumps(o) + "\n" for o in lines[:700]), encoding="utf-8")
    first = context_of(compact("s2", transcript, project))
    contract = project / ".prosecode" / "s2.limn"
    before = contract.read_bytes()
    with transcript.open("a", encoding="utf-8") as fh:  # the session goes on after the first compaction
        fh.write("".join(json.dumps(o) + "\n" for o in lines[700:]))
    second = context_of(compact("s2", transcript, project))
    after = contract.read_bytes()
    assert after.startswith(before) and len(after) > len(before)
    assert after.count(b"remember a value called last-pager-pass") == 2
    assert sorted(p.name for p in (project / ".prosecode").iterdir()) == [
        ".gitignore", "s2.hook.json", "s2.limn", "s2.pages.sqlite3"]
    assert (project / ".prosecode" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert first != second and "Now look at the" in second  # the last request moved on
    check_recalls(second, transcript, project, limit=5)


def test_generated_50000_message_session(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    transcript = tmp_path / "long.jsonl"
    _benchmark().write_session(transcript, 50_000)
    context = context_of(compact("long", transcript, project))
    assert pager.estimate_tokens(context) <= claude_hooks.DEFAULT_CONTEXT_TOKENS
    state = json.loads((project / ".prosecode" / "long.hook.json").read_text())
    # (a generated session repeats a few dozen names, none rare: each is listed once, at its newest page)
    shown = [line.split(": ", 2)[2].split(" ") for line in context.splitlines() if INDEX_LINE.match(line)]
    assert state["pass"]["page"] > 1000 and indexed_ids(context) and len(set(sum(shown, []))) >= 20
    check_recalls(context, transcript, project, limit=3)


@pytest.mark.parametrize("variable, value, cap", [
    ("PROSECODE_CONTEXT_TOKENS", "250", 250),
    ("CLAUDE_PLUGIN_OPTION_CONTEXT_TOKENS", "300.0", 300),  # the plugin option context_tokens
])
def test_token_cap_from_the_environment(variable, value, cap, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    context = context_of(compact("cap", FIXTURE, project, env={variable: value}))
    assert cap - 40 < pager.estimate_tokens(context) <= cap
    assert "Now run the whole test suite." in context


def test_a_tight_cap_keeps_the_humans_words_and_the_search_and_recall_line(tmp_path):
    # A long project path (a deep clone, a long temporary folder) lengthens every command.
    project = tmp_path / ("deeply-nested-folder-" * 4) / "project"
    project.mkdir(parents=True)
    context = context_of(compact("cap", FIXTURE, project, env={"PROSECODE_CONTEXT_TOKENS": "250"}))
    assert pager.estimate_tokens(context) <= 250
    assert "pytest fails on tests/test_totals.py::test_rounding, can you find out why?" in context
    assert "Now run the whole test suite." in context
    assert " recall ID --contract " in recall_command(context)
    roomy = context_of(compact("roomy", FIXTURE, project, env={"PROSECODE_CONTEXT_TOKENS": "2000"}))
    assert len(indexed_ids(roomy)) > len(indexed_ids(context))


# --- failures: exit 0, nothing injected, one log line ---

@pytest.mark.parametrize("hook, stdin, expected", [
    ("PreCompact", "{not json", "hook input is not JSON"),
    ("SessionStart", "", "hook input is not JSON"),
    ("PreCompact", "UNSAFE_ID", "is not a safe file name"),
    ("PreCompact", "MISSING", "no such transcript"),
    ("SessionStart", "NEVER_PAGED", "no contract for this session"),
])
def test_hook_failures_exit_0_inject_nothing_and_log_one_line(hook, stdin, expected, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    pre, start = events("s3", tmp_path / "missing.jsonl", project)
    unsafe = dict(pre, session_id="../x", transcript_path=str(FIXTURE))
    stdin = {"MISSING": pre, "NEVER_PAGED": start, "UNSAFE_ID": unsafe}.get(stdin, stdin)
    proc = run_hook(hook, stdin, project)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    lines = (project / ".prosecode" / "hooks.log").read_text().splitlines()
    assert len(lines) == 1 and expected in lines[0]
    assert not list((project / ".prosecode").glob("*.limn"))


def test_bad_token_cap_is_logged_not_raised(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    pre, start = events("s4", FIXTURE, project)
    assert run_hook("PreCompact", pre, project).returncode == 0
    proc = run_hook("SessionStart", start, project, env={"PROSECODE_CONTEXT_TOKENS": "lots"})
    assert (proc.returncode, proc.stdout) == (0, "")
    assert "PROSECODE_CONTEXT_TOKENS must be a number of at least 200" in (project / ".prosecode" / "hooks.log").read_text()


# --- the real claude CLI ---

def claude_cli():
    """Return the claude binary: CLAUDE_CLI (set by .ci/run), else one on PATH; skip (fail in CI) when absent."""
    for candidate in filter(None, (os.environ.get("CLAUDE_CLI"), shutil.which("claude"))):
        try:
            proc = subprocess.run([candidate, "--version"], capture_output=True, text=True, timeout=60)
        except OSError:
            continue
        if proc.returncode == 0 and "Claude Code" in proc.stdout:
            return candidate
    if os.environ.get("CI"):
        pytest.fail("the claude CLI is missing: .ci/run installs @anthropic-ai/claude-code and sets CLAUDE_CLI")
    pytest.skip("the claude CLI is not installed (bash .ci/run installs it and sets CLAUDE_CLI)")


def run_claude(cli, *args, home, cwd=ROOT):
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1"}
    return subprocess.run([cli, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_claude_plugin_validate(tmp_path):
    cli = claude_cli()
    proc = run_claude(cli, "plugin", "validate", "--strict", str(ROOT), home=tmp_path / "home")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Validation passed" in proc.stdout
    broken = tmp_path / "broken"
    shutil.copytree(ROOT / ".claude-plugin", broken / ".claude-plugin")
    manifest = json.loads((broken / ".claude-plugin" / "plugin.json").read_text())
    (broken / ".claude-plugin" / "marketplace.json").unlink()
    manifest["name"] = "Not A Valid Name"
    (broken / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    assert run_claude(cli, "plugin", "validate", str(broken), home=tmp_path / "home").returncode != 0


def test_claude_plugin_install_and_details(tmp_path):
    cli = claude_cli()
    home = tmp_path / "home"
    install = run_claude(cli, "plugin", "install", "prosecode-context-pager", "--marketplace", str(ROOT),
                         home=home, cwd=tmp_path)
    assert install.returncode == 0, install.stdout + install.stderr
    details = run_claude(cli, "plugin", "details", "prosecode-context-pager@prosecode", home=home, cwd=tmp_path)
    assert details.returncode == 0, details.stdout + details.stderr
    assert "Skills (1)  prosecode-context-pager" in details.stdout
    assert "Hooks (2)  PreCompact, SessionStart" in details.stdout
    assert "MCP servers (1)  prosecode-pager" in details.stdout
    assert re.search(r"Always-on: +~\d+ tok", details.stdout)
    print(details.stdout)  # the projected token cost, for the CI log


def test_claude_mcp_list_connects_to_the_server_with_no_mcp_package(tmp_path):
    """Installed in a temporary HOME, offline, with a python3 that has nothing installed: claude sees it connected."""
    cli = claude_cli()
    home, project, bare = tmp_path / "home", tmp_path / "project", tmp_path / "bare-python"
    project.mkdir()
    bare.mkdir()
    python3 = bare / "python3"  # this Python without site-packages: no mcp, no anything
    python3.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    python3.chmod(0o755)
    assert subprocess.run([str(python3), "-c", "import mcp"], capture_output=True).returncode == 1
    install = run_claude(cli, "plugin", "install", "prosecode-context-pager", "--marketplace", str(ROOT),
                         home=home, cwd=project)
    assert install.returncode == 0, install.stdout + install.stderr
    env = {"HOME": str(home), "PATH": f"{bare}{os.pathsep}{os.environ.get('PATH', '')}",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
    listed = subprocess.run([cli, "mcp", "list"], capture_output=True, text=True, cwd=project, env=env, timeout=120)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    line = next(line for line in listed.stdout.splitlines() if "prosecode-pager" in line)
    assert line.startswith("plugin:prosecode-context-pager:prosecode-pager: python3 ")
    assert line.endswith("scripts/mcp_server.py - ✔ Connected"), line


def test_benchmark_hooks_times_a_real_log_in_place_against_the_targets(tmp_path, capsys):
    """--transcript runs both hooks on a given Claude Code log (left unchanged) and prints each hook's
    time against issue 28's targets."""
    log = tmp_path / "session.jsonl"
    shutil.copy(ROOT / "tests" / "fixtures" / "transcripts" / "claude_code_session.jsonl", log)
    before = log.read_bytes()
    assert _benchmark().main(["--transcript", str(log), "--repeats", "1"]) == 0
    printed = capsys.readouterr().out
    assert "session: session.jsonl" in printed and "a real log, read in place" in printed
    assert re.search(r"PreCompact: best [\d.]+ s.*target <= 2\.5 s: (met|MISSED)", printed)
    assert re.search(r"SessionStart: best [\d.]+ s.*target <= 0\.5 s: (met|MISSED)", printed)
    assert log.read_bytes() == before
    with pytest.raises(SystemExit) as exc:
        _benchmark().main(["--transcript", str(tmp_path / "missing.jsonl")])
    assert exc.value.code == 2
