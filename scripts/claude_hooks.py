#!/usr/bin/env python3
"""Compaction hooks for the prosecode context pager (Claude Code, Codex): page before, index after.

The plugin (``hooks/hooks.json``) runs, with the hook's JSON on standard input:

    python3 "${CLAUDE_PLUGIN_ROOT}/scripts/claude_hooks.py" pre-compact     # PreCompact
    python3 "${CLAUDE_PLUGIN_ROOT}/scripts/claude_hooks.py" session-start   # SessionStart, matcher "compact"

``pre-compact`` runs one ``--before-compaction`` pass on the session transcript (``transcript_path``)
before Claude Code summarizes it: every block the compaction takes out of the model's context is
stored verbatim, whatever its score, and stays searchable and recallable. ``session-start`` runs
right after the compaction and returns, as ``additionalContext``, the task statement and the last
request verbatim, then the injected index (``pager.py index --tokens --intent``): how to search and
recall in one line, and the distinctive names most likely needed next (what the agent wrote and the
files its tool calls named first; the names the summary's pending work and the last request say are
left out), each line with a page id, within a token cap.

Files, one set per session, under the project (the hook's ``cwd``):

    .prosecode/<session_id>.limn            the session contract (Liminate), extended by every compaction
    .prosecode/<session_id>.pages.sqlite3   the page store: paged blocks' exact text
    .prosecode/<session_id>.hook.json       what the last pre-compact pass saw (requests, its summary)
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
from typing import Any, Dict, List, NamedTuple, NoReturn, Optional, Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))
if not __package__ and _HERE not in sys.path:  # installed, the package's own folder stays off the path
    sys.path.insert(0, _HERE)  # run as a bare script from the plugin: the engine sits beside it

try:  # inside the installed package
    from . import pager as engine  # type: ignore[no-redef]
except ImportError:  # a bare script: scripts/ is on sys.path
    import pager as engine  # type: ignore[no-redef]

__all__ = ["human_requests", "pre_compact", "session_start", "build_context", "compaction_summary", "pending_work",
           "main", "exit_now"]

STATE_DIR = ".prosecode"            # per-project folder holding every session's files
LOG_NAME = "hooks.log"              # one line per failed hook run, in STATE_DIR
STATE_SUFFIX = ".hook.json"         # what pre-compact hands to session-start
DEFAULT_CONTEXT_TOKENS = 2000       # cap on the injected additionalContext
MIN_CONTEXT_TOKENS = 200            # below this not even the requests and the recall command fit
TOKEN_ENV = ("PROSECODE_CONTEXT_TOKENS", "CLAUDE_PLUGIN_OPTION_CONTEXT_TOKENS")  # first set wins
SUMMARY_TAIL_BYTES = 1 << 20       # SessionStart looks for the compaction summary in this much of the transcript's end
PENDING = re.compile(r"(?im)^[\s#*\d.]*(?:pending tasks|current work|optional next step)\b")  # what comes next
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # a safe file name: no separators

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

class _Diagnostics(io.StringIO):
    """The engine's standard error as a hook keeps it: its ``pager:`` lines, not its per-block records.

    The engine writes the records in batches that start with "{" and each diagnostic line on its
    own; a pass over a long session writes tens of megabytes of records no hook reads.
    """

    def write(self, text: str) -> int:
        return super().write(text) if not text.startswith("{") else len(text)


def run_engine(argv: Sequence[str], records: Optional[io.TextIOBase] = None) -> str:
    """Run the engine's CLI in-process; return its standard output or raise HookError with its message.

    Per-block records (standard error) go to ``records`` when given, else are dropped.
    """
    out = io.StringIO()
    err = records if records is not None else _Diagnostics()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = engine.main(list(argv))
        except SystemExit as exc:  # argparse refusing a flag exits; a hook must not
            code = exc.code if isinstance(exc.code, int) else 2
    if code != 0:
        err.seek(0)
        lines = [line for line in err.read().splitlines() if line.startswith("pager: error:")]
        raise HookError(lines[-1] if lines else f"the pager exited with code {code}")
    return out.getvalue()


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
    """Store the whole transcript about to be compacted as pages; return the hook's output object.

    One pass (``--before-compaction``): every block the compaction takes out of the model's
    context is paged, whatever its score; the pass's summary names the human's first and last
    requests, read from the one load of the transcript.
    """
    paths = session_paths(event["cwd"], event["session_id"])
    transcript = event["transcript_path"]
    if not os.path.isfile(transcript):
        raise HookError(f"{transcript}: no such transcript")
    custom = event.get("custom_instructions")
    make_folder(paths.folder)
    # The flag=value form: a request or path starting with "-" must not read as a flag.
    # --work-steps=0: the scores (recorded, not deciding: every block is stored) read the human's
    # last request alone, not the tens of names of the agent's last steps. --quiet: no hook reads
    # the per-block records (tens of megabytes on a long session), so none are written.
    argv = [f"--history={transcript}", f"--contract={paths.contract}", "--json", "--before-compaction",
            "--work-steps=0", "--quiet"]
    if isinstance(custom, str) and custom.strip():
        argv.append(f"--intent={custom.strip()}")
        intent, intent_from = custom.strip(), "custom_instructions"
    else:
        intent, intent_from = None, None
    summary = json.loads(run_engine(argv))
    if intent_from is None:
        intent, intent_from = summary.get("last_request"), summary.get("intent_source")
    write_json(paths.state, {
        "session_id": event["session_id"], "transcript_path": transcript, "trigger": event.get("trigger"),
        "intent": intent, "intent_from": intent_from,
        "task": summary.get("task"), "last_request": summary.get("last_request"), "pass": summary})
    paged = summary.get("page", 0)
    where = os.path.relpath(paths.contract, event["cwd"])
    return {"systemMessage": f"prosecode pager: {paged} blocks stored before the compaction, searchable and "
                             f"recallable ({where})"}


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


def compaction_summary(path: str) -> str:
    """Return the text of the last compaction summary in the transcript's tail ('' if none there).

    Claude Code writes its summary as a user line marked ``isCompactSummary`` right after the
    compaction boundary, at the end of the file when SessionStart runs; only the last
    SUMMARY_TAIL_BYTES are read. Codex's summary is server-side (its ``compacted`` line's
    ``message`` is empty or a short text): that text, if any.
    """
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - SUMMARY_TAIL_BYTES))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    for line in reversed(tail.split("\n")):
        if '"isCompactSummary"' not in line and '"compacted"' not in line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if obj.get("isCompactSummary") is True and isinstance(obj.get("message"), dict):
            content = obj["message"].get("content")
            if isinstance(content, list):
                content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content if isinstance(content, str) else ""
        payload = obj.get("payload")
        if obj.get("type") == "compacted" and isinstance(payload, dict) and isinstance(payload.get("message"), str):
            return payload["message"]
    return ""


def pending_work(summary: str) -> str:
    r"""Return the part of a compaction summary that says what comes next (from "Pending Tasks" on), else all of it.

    Example:
        >>> pending_work("1. Primary Request: x\n7. Pending Tasks:\n- fix line_total")
        '7. Pending Tasks:\n- fix line_total'
    """
    found = PENDING.search(summary)
    return summary[found.start():] if found else summary


def build_context(task: Optional[str], last: Optional[str], index: str, cap: int) -> str:
    """Return the additionalContext text: the human's requests verbatim, then the injected page index; within ``cap``.

    The requests take at most half the cap (a longer one is cut, with a note saying so); the
    index (``pager.py index --tokens``) was made to fit what is left.
    """
    parts = request_parts(task, last, cap)
    text = "\n\n".join(parts + [index])
    while engine.estimate_tokens(text) > cap and "\n" in index:  # estimates are not additive: check the whole
        index = index[:index.rindex("\n")]
        text = "\n\n".join(parts + [index])
    return text


def request_parts(task: Optional[str], last: Optional[str], cap: int) -> List[str]:
    """Return the task statement and the last request, labelled, each within its share of half the cap."""
    requests = [("Task statement and last human request (verbatim)", task)] if task == last else [
        ("Task statement, the human's first request (verbatim)", task), ("The human's last request (verbatim)", last)]
    requests = [(label, text) for label, text in requests if text]
    share = cap // 2 // max(1, len(requests))
    return [f"{label}:\n{clip(text, share)}" for label, text in requests]


def session_start(event: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Return the SessionStart output that re-injects the requests and the page index after a compaction.

    The index is built for what comes next: the compaction summary's pending work and the
    human's last request. It reads the hook state, the transcript's tail and, through the
    engine, the contract once and the store in a few queries.
    """
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
    cap = context_tokens()
    task, last = state.get("task"), state.get("last_request")
    parts = request_parts(task, last, cap)
    summary = compaction_summary(event["transcript_path"])
    intent = "\n".join(text for text in (pending_work(summary), last or "") if text.strip())
    room = cap - (engine.estimate_tokens("\n\n".join(parts)) + 2 if parts else 0)
    argv = ["index", f"--contract={paths.contract}", f"--tokens={max(1, room)}"]
    if intent:
        argv.append(f"--intent={intent}")
    index = run_engine(argv).rstrip("\n")
    pager = f"python3 {shlex.quote(os.path.abspath(engine.__file__))}"
    index = index.replace(engine.RECALL_COMMAND.rsplit(" ", 1)[0] + " ", pager + " ")
    text = build_context(task, last, index, cap)
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


def exit_now(code: int) -> NoReturn:
    """End the hook's process with ``code`` once its output is flushed, skipping the interpreter's teardown.

    Everything the hook wrote is closed by then (the contract, the store, the state, the log); what
    is left is objects a long session's pass built and the interpreter would free one by one
    (about 0.1 s on the generated 50,000-message session), for a process that ends anyway.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # Claude Code stopped reading: nothing more can reach it
            pass
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
