#!/usr/bin/env python3
"""Compaction hooks for the prosecode context pager (Claude Code, Codex): page before, index after.

The plugin (``hooks/hooks.json``) runs, with the hook's JSON on standard input:

    python3 "${CLAUDE_PLUGIN_ROOT}/scripts/claude_hooks.py" pre-compact     # PreCompact
    python3 "${CLAUDE_PLUGIN_ROOT}/scripts/claude_hooks.py" session-start   # SessionStart, matcher "compact"

``pre-compact`` runs a paging pass on the session transcript (``transcript_path``) before Claude
Code summarizes it. The intent is the compaction's ``custom_instructions`` when given, else the
human's last request. Every block the pass pages is stored verbatim and stays recallable.
``session-start`` runs right after the compaction and returns, as ``additionalContext``, the task
statement and the last request verbatim, the page index (most relevant first) and the exact recall
command, within a token cap.

Files, one set per session, under the project (the hook's ``cwd``):

    .prosecode/<session_id>.limn            the session contract (Liminate), extended by every compaction
    .prosecode/<session_id>.pages.sqlite3   the page store: paged blocks' exact text
    .prosecode/<session_id>.hook.json       what the last pre-compact pass saw (requests, relevance)
    .prosecode/hooks.log                    one line per hook failure
    .prosecode/.gitignore                   "*": none of it goes into a commit

The token cap of the injected context is 2,000 by default; ``PROSECODE_CONTEXT_TOKENS`` or the
plugin option ``context_tokens`` (``CLAUDE_PLUGIN_OPTION_CONTEXT_TOKENS``) changes it.

Codex CLI (0.129 and later) sends the same hook input (without ``custom_instructions``) and reads
the same output, so the same two commands serve it from ``~/.codex/hooks.json``; the transcript is
then a Codex rollout.

A hook never blocks or breaks the session: on any failure it exits 0, prints nothing, and appends
one line to ``hooks.log``. Standard library only; it calls the engine's CLI in-process.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import re
import shlex
import sys
import tempfile
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))
if not __package__ and _HERE not in sys.path:  # installed, the package's own folder stays off the path
    sys.path.insert(0, _HERE)  # run as a bare script from the plugin: the engine sits beside it

try:  # inside the installed package
    from . import pager as engine  # type: ignore[no-redef]
except ImportError:  # a bare script: scripts/ is on sys.path
    import pager as engine  # type: ignore[no-redef]

__all__ = ["human_requests", "pre_compact", "session_start", "build_context", "main"]

STATE_DIR = ".prosecode"            # per-project folder holding every session's files
LOG_NAME = "hooks.log"              # one line per failed hook run, in STATE_DIR
STATE_SUFFIX = ".hook.json"         # what pre-compact hands to session-start
DEFAULT_CONTEXT_TOKENS = 2000       # cap on the injected additionalContext
MIN_CONTEXT_TOKENS = 200            # below this not even the requests and the recall command fit
TOKEN_ENV = ("PROSECODE_CONTEXT_TOKENS", "CLAUDE_PLUGIN_OPTION_CONTEXT_TOKENS")  # first set wins
SUMMARY_WORDS = 12                  # words of a page's summary on its index line...
SUMMARY_CHARS = 100                 # ...and characters (a tool call's JSON has few spaces)
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # a safe file name: no separators
MCP_SERVER = "prosecode-pager"      # the plugin's MCP server name (.mcp.json)

class HookError(Exception):
    """An expected failure of a hook run: bad input, a missing file, a pass the engine refused."""


class SessionPaths(NamedTuple):
    """Where one session's files live under the project (the engine puts the page store beside the contract)."""

    folder: str
    contract: str
    state: str
    log: str


def session_paths(cwd: str, session_id: str) -> SessionPaths:
    """Return the paths of ``session_id``'s files under the project folder ``cwd``."""
    folder = os.path.join(cwd, STATE_DIR)
    return SessionPaths(folder, os.path.join(folder, f"{session_id}.limn"),
                        os.path.join(folder, session_id + STATE_SUFFIX), os.path.join(folder, LOG_NAME))


# --- reading the hook input and the transcript ---

def read_event(text: str) -> Dict[str, Any]:
    """Return the hook input, checked: an object with a safe session_id, a transcript_path and a cwd."""
    try:
        event = json.loads(text)
    except ValueError as exc:
        raise HookError(f"hook input is not JSON ({exc})") from None
    if not isinstance(event, dict):
        raise HookError("hook input is not a JSON object")
    for key in ("session_id", "transcript_path", "cwd"):
        if not isinstance(event.get(key), str) or not event[key]:
            raise HookError(f"hook input has no {key} string")
    if not SESSION_ID.fullmatch(event["session_id"]):
        raise HookError(f"session_id {json.dumps(event['session_id'])} is not a safe file name")
    if not os.path.isabs(event["cwd"]) or not os.path.isdir(event["cwd"]):
        raise HookError(f"cwd {event['cwd']} is not an absolute path to a folder")
    return event


def human_requests(path: str) -> List[str]:
    """Return the human's own requests in the transcript at ``path``, in order, by the engine's rule.

    The engine reads the transcript (Claude Code session or subagent log, Codex rollout) and
    ``human_requests`` tells a person's message from the harness's (task notifications, system
    reminders, command echoes, compaction summaries, meta lines, tool results...): one rule, in
    the engine, for the pass's intent and for what these hooks re-inject.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise HookError(f"{path}: no such transcript") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HookError(f"{path}: can't read the transcript ({exc})") from None
    try:
        conv = engine.load(text, engine.detect_format(text))
    except engine.PagerError as exc:
        raise HookError(f"{path}: {exc}") from None
    return [request["text"].strip() for request in engine.human_requests(conv) if request["text"].strip()]


# --- running the engine in-process ---

def run_engine(argv: Sequence[str], records: Optional[io.TextIOBase] = None) -> str:
    """Run the engine's CLI in-process; return its standard output or raise HookError with its message.

    Per-block records (standard error) go to ``records`` when given, else are dropped.
    """
    out = io.StringIO()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as err:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(records or err):
            try:
                code = engine.main(list(argv))
            except SystemExit as exc:  # argparse refusing a flag exits; a hook must not
                code = exc.code if isinstance(exc.code, int) else 2
        if code != 0:
            source = records or err
            source.seek(0)
            lines = [line for line in source.read().splitlines() if line.startswith("pager: error:")]
            raise HookError(lines[-1] if lines else f"the pager exited with code {code}")
    return out.getvalue()


def paged_relevance(records: io.TextIOBase) -> Dict[str, float]:
    """Return block id -> R for every block a pass's stderr records say it paged."""
    records.seek(0)
    relevance = {}
    for line in records:
        if not line.startswith("{") or '"page"' not in line:  # page records only; skip parsing the rest
            continue
        record = json.loads(line)
        if record.get("action") == "page":
            relevance[record["block"]] = record["R"]
    return relevance


def make_folder(folder: str) -> None:
    """Create the per-project folder, with a .gitignore that keeps its files out of commits.

    The page store holds session text verbatim, secrets pasted into the session included.
    """
    os.makedirs(folder, exist_ok=True)
    ignore = os.path.join(folder, ".gitignore")
    if not os.path.exists(ignore):
        with open(ignore, "w", encoding="utf-8") as fh:
            fh.write("# prosecode context pager: session contracts and page stores, not for commits\n*\n")


def write_json(path: str, value: Any) -> None:
    """Write ``value`` as JSON beside ``path``, then move it into place (never a half-written file)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(value, fh, ensure_ascii=False, indent=1)
    os.replace(tmp, path)


# --- the two hooks ---

def pre_compact(event: Dict[str, Any]) -> Dict[str, Any]:
    """Run a paging pass over the transcript about to be compacted; return the hook's output object."""
    paths = session_paths(event["cwd"], event["session_id"])
    transcript = event["transcript_path"]
    requests = human_requests(transcript)
    custom = event.get("custom_instructions")
    if isinstance(custom, str) and custom.strip():
        intent, intent_from = custom.strip(), "custom_instructions"
    elif requests:
        intent, intent_from = requests[-1], "last human request"
    else:
        intent, intent_from = None, "the pager's default (last user message)"
    make_folder(paths.folder)
    # The flag=value form: a request or path starting with "-" must not read as a flag.
    # --page-small: every block it pages is recallable after the compaction, short ones too.
    argv = [f"--history={transcript}", f"--contract={paths.contract}", "--json", "--page-small"]
    if intent:
        argv.append(f"--intent={intent}")
    with tempfile.TemporaryFile("w+", encoding="utf-8") as records:
        summary = json.loads(run_engine(argv, records))
        relevance = paged_relevance(records)
    write_json(paths.state, {
        "session_id": event["session_id"], "transcript_path": transcript, "trigger": event.get("trigger"),
        "intent": intent, "intent_from": intent_from,
        "task": requests[0] if requests else None, "last_request": requests[-1] if requests else None,
        "pass": summary, "relevance": relevance})
    paged = summary.get("page", 0)
    where = os.path.relpath(paths.contract, event["cwd"])
    return {"systemMessage": f"prosecode pager: {paged} blocks paged and recallable ({where})"}


def context_tokens() -> int:
    """Return the token cap of the injected context, from the environment or the default."""
    for name in TOKEN_ENV:
        value = os.environ.get(name, "").strip()
        if value:
            try:
                tokens = int(float(value))  # the plugin option arrives as the text of a number
            except (ValueError, OverflowError):
                tokens = 0
            if tokens < MIN_CONTEXT_TOKENS:
                raise HookError(f"{name} must be a number of at least {MIN_CONTEXT_TOKENS} (got {value!r})")
            return tokens
    return DEFAULT_CONTEXT_TOKENS


def clip(text: str, tokens: int) -> str:
    """Return ``text``, or its start and a note of what was cut, within ``tokens`` estimated tokens."""
    if engine.estimate_tokens(text) <= tokens:
        return text
    keep = max(0, tokens * 3)
    while keep > 0:
        note = f" [... {len(text) - keep} more characters not shown]"
        if engine.estimate_tokens(text[:keep] + note) <= tokens:
            return text[:keep] + note
        keep = keep * 9 // 10
    return f"[{len(text)} characters not shown]"


def one_line(summary: str, words: int = SUMMARY_WORDS, chars: int = SUMMARY_CHARS) -> str:
    """Return the start of a page summary on one line: at most ``words`` words and ``chars`` characters."""
    chosen = summary.split()
    line = " ".join(chosen[:words])
    if len(line) > chars:
        return line[:chars].rstrip() + "..."
    return line + ("..." if len(chosen) > words else "")


def build_context(task: Optional[str], last: Optional[str], pages: List[Dict[str, Any]],
                  relevance: Dict[str, float], recall: str, index: str, contract: str, cap: int) -> str:
    """Return the additionalContext text: requests verbatim, recall command, index; within ``cap`` tokens.

    The index lists as many pages as fit, most relevant first (highest R of the last pass, then the
    latest turn). Requests too long for their share of the cap are cut, with a note saying so. Under
    a cap too small for everything (long paths in the commands), the line offering the MCP tool and
    then the index command go before any of the human's words do.
    """
    head = ("[prosecode context pager] This session was just compacted. Before the summary was written, "
            f"the pager stored {len(pages)} blocks of the earlier conversation verbatim; recall any of them by id.")
    requests = [("Task statement and last human request (verbatim)", task)] if task == last else [
        ("Task statement, the human's first request (verbatim)", task), ("The human's last request (verbatim)", last)]
    requests = [(label, text) for label, text in requests if text]
    recall_line = f"Recall a block's exact text: {recall}"
    mcp_line = (f'Or call the MCP tool "recall" (server {MCP_SERVER}) with {{"ids": ["BLOCK_ID"], '
                f'"contract": {json.dumps(contract)}}}.')
    ranked = sorted(pages, key=lambda p: (-relevance.get(p["block"], -1.0), -p["turn"]))
    entries = [f"{p['block']} | turn {p['turn']} | {p['role']} | {p['tokens']} tokens | {one_line(p['summary'])}"
               for p in ranked]
    header = "Paged blocks, most relevant first (id | turn | role | tokens | summary):"

    def render(share: int, listed: int, level: int = 2) -> str:
        """Render with ``listed`` index lines; ``level`` 2 has everything, 1 no MCP line, 0 no index command."""
        tail = f"{recall_line}\n{mcp_line}" if level >= 2 else recall_line
        parts = [head] + [f"{label}:\n{clip(text, share)}" for label, text in requests] + [tail]
        if entries:
            where = f"; all of them: {index}" if level >= 1 else ""
            more = [] if listed == len(entries) else [f"({len(entries) - listed} more paged blocks not listed{where})"]
            parts.append("\n".join([header] + entries[:listed] + more))
        return "\n\n".join(parts)

    # Estimates are not additive (the code-mark share of the whole text sets its rate), so every
    # candidate is measured whole: first the requests' share, then as many index lines as fit.
    share = min(max((engine.estimate_tokens(text) for _, text in requests), default=0),
                cap // 2 // max(1, len(requests)))  # verbatim when they fit in half the cap
    # The most that fits with the requests whole: the MCP line goes first, then the index command.
    level = next((n for n in (2, 1) if engine.estimate_tokens(render(share, 0, n)) <= cap), 0)
    while engine.estimate_tokens(render(share, 0, level)) > cap and share > 0:
        share = share * 3 // 4
    low, high = 0, len(entries)
    while low < high:  # the most index lines that still fit
        middle = (low + high + 1) // 2
        if engine.estimate_tokens(render(share, middle, level)) <= cap:
            low = middle
        else:
            high = middle - 1
    return render(share, low, level)


def session_start(event: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Return the SessionStart output that re-injects requests and page index after a compaction."""
    if event.get("source", "compact") != "compact":
        return None  # the plugin matches "compact" only; any other start has nothing to restore
    paths = session_paths(event["cwd"], event["session_id"])
    if not os.path.exists(paths.contract):
        raise HookError(f"{paths.contract}: no contract for this session (did the pre-compact hook run?)")
    try:
        with open(paths.state, encoding="utf-8") as fh:
            state = json.load(fh)
    except (OSError, ValueError) as exc:
        raise HookError(f"{paths.state}: can't read the pre-compact state ({exc})") from None
    paged = json.loads(run_engine(["index", f"--contract={paths.contract}", "--json"]))["paged"]
    pager = shlex.quote(os.path.abspath(engine.__file__))
    contract = shlex.quote(paths.contract)
    recall = f"python3 {pager} recall BLOCK_ID --contract {contract}"
    index = f"python3 {pager} index --contract {contract}"
    text = build_context(state.get("task"), state.get("last_request"), paged, state.get("relevance", {}),
                         recall, index, paths.contract, context_tokens())
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}


HOOKS = {"pre-compact": pre_compact, "session-start": session_start}


def log_failure(command: str, event_text: str, exc: BaseException) -> None:
    """Append one line naming the failure to the project's hooks.log; never raise."""
    try:
        try:
            event = json.loads(event_text)
        except ValueError:
            event = {}
        cwd = event.get("cwd") if isinstance(event, dict) and isinstance(event.get("cwd"), str) else os.getcwd()
        session = event.get("session_id") if isinstance(event, dict) else None
        session = " ".join(str(session).split()) if session else "?"  # one line, whatever it held
        folder = os.path.join(cwd if os.path.isdir(cwd) else os.getcwd(), STATE_DIR)
        make_folder(folder)
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        what = " ".join(str(exc).split()) or type(exc).__name__
        if not isinstance(exc, HookError):
            what = f"{type(exc).__name__}: {what}"
        with open(os.path.join(folder, LOG_NAME), "a", encoding="utf-8") as fh:
            fh.write(f"{now} {command} session={session} error: {what}\n")
    except Exception:  # noqa: BLE001 - a hook must not fail, not even while logging
        pass


def main(argv: Optional[List[str]] = None) -> int:
    """Run one hook: read its JSON from stdin, print its output JSON; always return 0."""
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv else ""
    text = ""
    try:
        if command not in HOOKS:
            raise HookError(f"unknown hook {command!r} (expected one of: {', '.join(HOOKS)})")
        text = sys.stdin.read()
        output = HOOKS[command](read_event(text))
    except Exception as exc:  # noqa: BLE001 - never block the session: log it, inject nothing
        log_failure(command or "?", text, exc)
        return 0
    if output:
        sys.stdout.write(json.dumps(output, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
