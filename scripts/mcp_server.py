#!/usr/bin/env python3
"""MCP server for the prosecode context pager: page, index and recall as tools, over stdio.

    python3 scripts/mcp_server.py          # what an MCP client (Claude Code, Codex, ...) launches

Tools (JSON schemas from the signatures below):

- ``page``: run a paging pass over a transcript or history file; returns the pass summary.
- ``index``: list the paged blocks of a contract (id, turn, role, tokens, summary).
- ``recall``: return paged blocks' exact text, checked against their SHA-256, and record the page-in.

Every tool calls the engine's CLI in-process. A failure the engine reports (a missing file, an
unknown or evicted id, bad input) comes back as a tool error result naming the problem; the server
keeps running. Needs the official ``mcp`` SDK (2.x, Python 3.10+): ``pip install "mcp>=2.3,<3"``,
or the project's ``mcp`` extra. The engine itself stays standard library only.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import sys
import threading
from typing import Any, Dict, List, Optional

_HERE = os.path.dirname(os.path.abspath(__file__))
if not __package__ and _HERE not in sys.path:  # installed, the package's own folder stays off the path
    sys.path.insert(0, _HERE)  # run as a bare script from the plugin: the engine sits beside it

try:  # inside the installed package
    from . import pager as engine  # type: ignore[no-redef]
except ImportError:  # a bare script: scripts/ is on sys.path
    import pager as engine  # type: ignore[no-redef]

__all__ = ["SERVER_NAME", "PagerToolError", "run_engine", "page", "index", "recall", "build_server", "main"]

SERVER_NAME = "prosecode-pager"  # the name the plugin's manifest gives this server
INSTRUCTIONS = (
    "Deterministic context paging. `page` scores every block of a transcript against an intent and "
    "stores the blocks it pages in a page store beside the contract; `index` lists what is paged; "
    "`recall` returns a paged block's exact text by id. Use absolute paths."
)
_ENGINE_LOCK = threading.Lock()  # the CLI writes to sys.stdout/sys.stderr, which are process-wide


class PagerToolError(Exception):
    """A failure the engine reported: its one-line message, for the tool error result."""


def run_engine(argv: List[str]) -> str:
    """Run the engine's CLI in-process; return its standard output or raise PagerToolError."""
    out, err = io.StringIO(), io.StringIO()
    with _ENGINE_LOCK, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = engine.main(argv)
        except SystemExit as exc:  # argparse refusing an argument exits; the server must not
            code = exc.code if isinstance(exc.code, int) else 2
    if code != 0:
        lines = [line for line in err.getvalue().splitlines() if line.startswith("pager: ")]
        raise PagerToolError(lines[-1] if lines else f"pager: exited with code {code}")
    return out.getvalue()


def page(transcript: str, contract: str, intent: Optional[str] = None,
         budget: Optional[int] = None) -> Dict[str, Any]:
    """Run a paging pass over a transcript and return its summary."""
    # The flag=value form: an intent or path starting with "-" must not read as a flag.
    argv = [f"--history={transcript}", f"--contract={contract}", "--json"]
    if intent:
        argv.append(f"--intent={intent}")
    if budget is not None:
        argv.append(f"--budget={budget}")
    return json.loads(run_engine(argv))


def index(contract: str) -> Dict[str, Any]:
    """Return the page index of a contract."""
    return json.loads(run_engine(["index", f"--contract={contract}", "--json"]))


def recall(ids: List[str], contract: str) -> str:
    """Return the exact text of paged blocks (one block: its text alone) and record the page-in."""
    if not ids:
        raise PagerToolError("pager: error: recall needs at least one block id")
    return run_engine(["recall", f"--contract={contract}", "--", *ids])  # "--": an id may start with "-"


def build_server():
    """Return the MCPServer with the three tools; imports the mcp SDK here, so the module loads without it."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    def tool_errors(fn):
        """Wrap ``fn`` so an engine failure becomes a ToolError (an is_error result the model reads)."""
        @functools.wraps(fn)  # keeps the signature the SDK builds the JSON schema from
        def wrapped(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except PagerToolError as exc:
                raise ToolError(str(exc)) from None
        return wrapped

    server = MCPServer(SERVER_NAME, version=engine.__version__, instructions=INSTRUCTIONS)
    server.add_tool(tool_errors(page), name="page", description=(
        "Run a deterministic paging pass over a transcript (Claude Code session JSONL, Codex rollout, "
        "OpenAI / Anthropic / Responses messages JSON, or the pager's own JSON). Each block is retained, "
        "paged (its exact text stored, recallable by id) or evicted; the decisions are appended to the "
        "contract (.limn). intent: what you are doing now (default: the last user message). budget: "
        "tokens the kept history may take. Returns the pass summary."))
    server.add_tool(tool_errors(index), name="index", description=(
        "List the paged blocks of a contract: id, turn, role, tokens, a short summary and the recall "
        "command of each."))
    server.add_tool(tool_errors(recall), name="recall", description=(
        "Return the exact original text of paged blocks by id (checked against its SHA-256) and record "
        "the page-in in the contract. One id returns its text alone; several are separated by "
        "'==> id <==' headers. An id that is not paged (unknown, retained or evicted) is an error."))
    return server


def main(argv: Optional[List[str]] = None) -> int:
    """Serve the tools over stdio until the client closes the connection."""
    try:
        server = build_server()
    except ImportError as exc:
        sys.stderr.write(f"{SERVER_NAME}: needs the mcp SDK 2.x ({exc}); "
                         "install it with: python3 -m pip install \"mcp>=2.3,<3\"\n")
        return 1
    server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
