#!/usr/bin/env python3
"""MCP server for the prosecode context pager: page, index and recall as tools, over stdio.

    python3 scripts/mcp_server.py          # what an MCP client (Claude Code, Codex, ...) launches

Standard library only, Python 3.9+: nothing to install. It speaks the part of the Model Context
Protocol the tools need, over stdio (one JSON-RPC 2.0 message per line on stdin and stdout; stderr
for diagnostics): the ``initialize`` handshake with protocol version negotiation,
``notifications/initialized``, ``ping``, ``tools/list`` and ``tools/call``. Any other request gets
JSON-RPC's "method not found" (a client probing the 2026 ``server/discover`` then falls back to the
handshake, as the specification says); notifications it does not use are ignored.

Tools, one row each in TOOLS (add a tool by adding a row):

- ``page``: run a paging pass over a transcript or history file; returns the pass summary.
- ``index``: list the paged blocks of a contract (id, turn, role, tokens, summary).
- ``recall``: return paged blocks' exact text, checked against their SHA-256, and record the page-in.

Every tool calls the engine's public API (its command line, ``main``, in-process). A failure the
engine reports (a missing file, an unknown or evicted id, bad input) and arguments that do not
fit the tool's input schema come back as a tool result with ``isError`` true, naming the problem,
so the model can correct itself; the server keeps running. An unknown tool name is a protocol
error (invalid params), as the specification says.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import threading
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))
if not __package__ and _HERE not in sys.path:  # installed, the package's own folder stays off the path
    sys.path.insert(0, _HERE)  # run as a bare script from the plugin: the engine sits beside it

try:  # inside the installed package
    from . import pager as engine  # type: ignore[no-redef]
except ImportError:  # a bare script: scripts/ is on sys.path
    import pager as engine  # type: ignore[no-redef]

__all__ = ["SERVER_NAME", "PROTOCOL_VERSIONS", "Tool", "TOOLS", "PagerToolError", "run_engine", "page", "index",
           "search", "recall", "handle", "serve", "main"]

SERVER_NAME = "prosecode-pager"  # the name the plugin's manifest gives this server
SERVER_INFO = {"name": SERVER_NAME, "version": engine.__version__}  # the engine's version
# The handshake-era protocol revisions this server speaks, newest first: a client asking for one
# of them gets it; any other request gets the newest (the client then decides whether to go on).
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
INSTRUCTIONS = (
    "Deterministic context paging. `page` scores every block of a transcript against an intent and "
    "stores the blocks it pages in a page store beside the contract; `index` lists what is paged; "
    "`search` finds paged blocks by words or names; `recall` returns a paged block's exact text by id. "
    "Use absolute paths."
)
# JSON-RPC 2.0 error codes.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
_ENGINE_LOCK = threading.Lock()  # the CLI writes to sys.stdout/sys.stderr, which are process-wide


class PagerToolError(Exception):
    """A failure the engine reported, or arguments that do not fit a tool: its one line, for the error result."""


# ===== The engine behind the tools =====


def run_engine(argv: List[str]) -> str:
    """Run the engine's CLI in-process; return its standard output or raise PagerToolError."""
    out, err = io.StringIO(), io.StringIO()
    with _ENGINE_LOCK, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = engine.main(argv)
        except SystemExit as exc:  # argparse's --help or --version exit; the server must not
            code = exc.code if isinstance(exc.code, int) else 2
    if code != 0:
        lines = [line for line in err.getvalue().splitlines() if line.startswith("pager: ")]
        raise PagerToolError(lines[-1] if lines else f"pager: exited with code {code}")
    return out.getvalue()


def page(transcript: str, contract: str, intent: Optional[str] = None,
         budget: Optional[int] = None) -> Dict[str, Any]:
    """Run a paging pass over a transcript and return its summary."""
    # The flag=value form: an intent or path starting with "-" must not read as a flag.
    argv = [f"--history={transcript}", f"--contract={contract}", "--json", "--quiet"]
    if intent:
        argv.append(f"--intent={intent}")
    if budget is not None:
        argv.append(f"--budget={budget}")
    return json.loads(run_engine(argv))


def index(contract: str) -> Dict[str, Any]:
    """Return the page index of a contract."""
    return json.loads(run_engine(["index", f"--contract={contract}", "--json"]))


def search(query: str, contract: str, limit: int = 10) -> List[Dict[str, Any]]:
    """Return the paged blocks holding the query's words or names, best first (id, turn, kind, role, line, score)."""
    return json.loads(run_engine(["search", f"--contract={contract}", f"--limit={limit}", "--json", "--", query]))


def recall(ids: List[str], contract: str, max_tokens: Optional[int] = None, start: Optional[str] = None) -> str:
    """Return the exact text of paged blocks (one block: its text alone) and record the page-in;
    within ``max_tokens`` (the rest stays paged: the last line says where ``start`` goes on)."""
    if not ids:
        raise PagerToolError("pager: error: recall needs at least one block id")
    flags = ([f"--max-tokens={max_tokens}"] if max_tokens is not None else []) + \
        ([f"--from={start}"] if start is not None else [])
    return run_engine(["recall", f"--contract={contract}", *flags, "--", *ids])  # "--": an id may start with "-"


# ===== The tools: one row each =====


class Tool(NamedTuple):
    """One MCP tool: its name, what the model reads of it, its input schema and the call behind it.

    ``call(arguments)`` gets the arguments checked against ``schema``; a text it returns is the
    result's text, any other value is sent as JSON text and as ``structuredContent`` ``{"result": ...}``.
    """

    name: str
    description: str
    schema: Dict[str, Any]
    call: Callable[[Dict[str, Any]], Any]


def _schema(required: Dict[str, Dict[str, Any]], optional: Optional[Dict[str, Dict[str, Any]]] = None
            ) -> Dict[str, Any]:
    """Return an object schema with these properties (``required`` ones first), no others allowed."""
    return {"type": "object", "properties": {**required, **(optional or {})}, "required": list(required),
            "additionalProperties": False}


_TEXT = {"type": "string"}
_CONTRACT = {"type": "string", "description": "the session contract (.limn); its page store sits beside it"}

TOOLS: Tuple[Tool, ...] = (
    Tool("page", (
        "Run a deterministic paging pass over a transcript (Claude Code session JSONL, Codex rollout, "
        "OpenAI / Anthropic / Responses messages JSON, or the pager's own JSON). Each block is retained, "
        "paged (its exact text stored, recallable by id) or evicted; the decisions are appended to the "
        "contract (.limn). intent: what you are doing now (default: the last user message). budget: "
        "tokens the kept history may take. Returns the pass summary."),
        _schema({"transcript": {"type": "string", "description": "the transcript or history file"},
                 "contract": _CONTRACT},
                {"intent": _TEXT, "budget": {"type": "integer", "minimum": 1}}),
        lambda a: page(a["transcript"], a["contract"], a.get("intent"), a.get("budget"))),
    Tool("index", (
        "List the paged blocks of a contract: id, turn, role, tokens, a short summary and the recall "
        "command of each."),
        _schema({"contract": _CONTRACT}),
        lambda a: index(a["contract"])),
    Tool("search", (
        "Find paged blocks by words or names (files, functions, commands, errors, numbers), best first, "
        "each with id, turn, kind, role and the matching line; then recall one by id. Names match as a "
        "programmer reads them: line_total finds test_line_total, a path finds its file name."),
        _schema({"query": _TEXT, "contract": _CONTRACT}, {"limit": {"type": "integer", "minimum": 1}}),
        lambda a: search(a["query"], a["contract"], a.get("limit", 10))),
    Tool("recall", (
        "Return the exact original text of paged blocks by id (checked against its SHA-256) and record "
        "the page-in in the contract. One id returns its text alone; several are separated by "
        "'==> id <==' headers. Recalling a block that is already back returns its text again. An id "
        "that was never paged (unknown, retained or evicted) is an error. A range page's id (r-...) "
        "gives all its blocks, which can be long: max_tokens gives them in parts (the last line says "
        "which block 'from' goes on at)."),
        _schema({"ids": {"type": "array", "items": _TEXT, "description": "block ids from the index"},
                 "contract": _CONTRACT},
                {"max_tokens": {"type": "integer", "minimum": 1}, "from": _TEXT}),
        lambda a: recall(a["ids"], a["contract"], a.get("max_tokens"), a.get("from"))),
)

_JSON_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
               "array": (list,), "object": (dict,)}


def _check_value(value: Any, schema: Dict[str, Any], where: str) -> None:
    """Raise PagerToolError unless ``value`` fits ``schema`` (type, minimum, items: what TOOLS use)."""
    kind = schema.get("type")
    if kind is not None:
        fits = isinstance(value, _JSON_TYPES[kind]) and not (kind in ("integer", "number") and isinstance(value, bool))
        if not fits:
            raise PagerToolError(f"pager: error: {where} must be {'an' if kind[0] in 'aeiou' else 'a'} {kind} "
                                 f"(got {json.dumps(value)[:60]})")
    if "minimum" in schema and value < schema["minimum"]:
        raise PagerToolError(f"pager: error: {where} must be at least {schema['minimum']} (got {value})")
    if "items" in schema:
        for i, item in enumerate(value):
            _check_value(item, schema["items"], f"{where}[{i}]")


def _check_arguments(tool: Tool, arguments: Dict[str, Any]) -> None:
    """Raise PagerToolError unless ``arguments`` fit the tool's input schema."""
    properties = tool.schema["properties"]
    for name in tool.schema["required"]:
        if name not in arguments:
            raise PagerToolError(f"pager: error: {tool.name} needs the argument {name!r}")
    for name, value in arguments.items():
        if name not in properties:
            raise PagerToolError(f"pager: error: {tool.name} takes no argument {name!r} "
                                 f"(it takes {', '.join(properties)})")
        if value is not None or name in tool.schema["required"]:
            _check_value(value, properties[name], name)


def _tool_result(tool: Tool, arguments: Dict[str, Any]) -> Dict[str, Any]:
    """Return the ``tools/call`` result of ``tool`` on ``arguments``: its output, or an error result."""
    try:
        _check_arguments(tool, arguments)
        value = tool.call(arguments)
    except PagerToolError as exc:
        return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}], "isError": False}
    return {"content": [{"type": "text", "text": json.dumps(value, ensure_ascii=False)}],
            "structuredContent": {"result": value}, "isError": False}


# ===== The protocol =====


class _ProtocolError(Exception):
    """A request the server answers with a JSON-RPC error (code, message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _initialize(params: Dict[str, Any]) -> Dict[str, Any]:
    asked = params.get("protocolVersion")
    version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
    return {"protocolVersion": version, "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO, "instructions": INSTRUCTIONS}


def _list_tools(params: Dict[str, Any]) -> Dict[str, Any]:
    return {"tools": [{"name": t.name, "description": t.description, "inputSchema": t.schema} for t in TOOLS]}


def _call_tool(params: Dict[str, Any]) -> Dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments", {})
    tool = next((t for t in TOOLS if t.name == name), None)
    if tool is None:
        raise _ProtocolError(INVALID_PARAMS, f"Unknown tool: {name!r} (tools: {', '.join(t.name for t in TOOLS)})")
    if not isinstance(arguments, dict):
        raise _ProtocolError(INVALID_PARAMS, "tools/call arguments must be an object")
    return _tool_result(tool, arguments)


_METHODS: Dict[str, Callable[[Dict[str, Any]], Dict[str, Any]]] = {
    "initialize": _initialize,
    "ping": lambda params: {},
    "tools/list": _list_tools,
    "tools/call": _call_tool,
}


def _error(id_: Any, code: int, message: str) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _answer(message: Any) -> Optional[Dict[str, Any]]:
    """Return the response to one JSON-RPC message, or None for a notification or a response."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return _error(message.get("id") if isinstance(message, dict) else None, INVALID_REQUEST,
                      "not a JSON-RPC 2.0 message")
    method = message.get("method")
    if "id" not in message or ("method" not in message and ("result" in message or "error" in message)):
        return None  # a notification (notifications/initialized, cancelled, ...), or a response to no request of ours
    id_ = message["id"]
    if not isinstance(method, str):
        return _error(id_, INVALID_REQUEST, "a request needs a method")
    params = message.get("params", {})
    if not isinstance(params, dict):
        return _error(id_, INVALID_PARAMS, "params must be an object")
    handler = _METHODS.get(method)
    if handler is None:
        return _error(id_, METHOD_NOT_FOUND, f"Method not found: {method}")
    try:
        return {"jsonrpc": "2.0", "id": id_, "result": handler(params)}
    except _ProtocolError as exc:
        return _error(id_, exc.code, str(exc))
    except Exception as exc:  # a bug in a tool: the client hears of it, the server goes on
        sys.stderr.write(f"{SERVER_NAME}: internal error in {method}: {exc!r}\n")
        return _error(id_, INTERNAL_ERROR, f"internal error: {exc}")


def handle(line: str) -> Optional[str]:
    """Return the response line to one received line (a message or a batch), or None if none is due."""
    try:
        message = json.loads(line)
    except ValueError:
        return json.dumps(_error(None, PARSE_ERROR, "Parse error: not JSON"))
    if isinstance(message, list):  # a batch (protocol 2025-03-26)
        answers = [a for a in map(_answer, message) if a is not None] if message else \
            [_error(None, INVALID_REQUEST, "an empty batch")]
        return json.dumps(answers, ensure_ascii=False) if answers else None
    answer = _answer(message)
    return json.dumps(answer, ensure_ascii=False) if answer is not None else None


def serve(stdin: io.BufferedIOBase, stdout: io.BufferedIOBase) -> None:
    """Answer each line of ``stdin`` on ``stdout`` until it closes."""
    for raw in stdin:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            continue
        response = handle(line)
        if response is not None:
            stdout.write(response.encode("utf-8") + b"\n")
            stdout.flush()


def main(argv: Optional[List[str]] = None) -> int:
    """Serve the tools over stdio until the client closes the connection."""
    serve(sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
