"""The MCP server, driven over stdio by the official SDK's own client, as an MCP host launches it.

The server is launched with ``python -S`` (no site-packages): it needs nothing installed."""

import asyncio
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import NOW, ROOT, tool_chat

import pager  # noqa: E402  (conftest puts scripts/ on sys.path)

FIXTURE = ROOT / "tests" / "fixtures" / "transcripts" / "claude_code_session.jsonl"
SERVER = ROOT / "scripts" / "mcp_server.py"


def _sdk():
    """Return the mcp SDK; in CI (where the test extra installs it) its absence fails the test."""
    if sys.version_info < (3, 10):
        pytest.skip("the mcp SDK needs Python 3.10+")
    if os.environ.get("CI"):
        import mcp  # noqa: F401
        return mcp
    return pytest.importorskip("mcp")


def session(test):
    """Run ``test(client)`` against the server launched over stdio the way the plugin declares it."""
    mcp = _sdk()
    manifest = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text(encoding="utf-8"))
    declared = manifest["mcpServers"]["prosecode-pager"]
    args = [a.replace("${CLAUDE_PLUGIN_ROOT}", str(ROOT)) for a in declared["args"]]
    # The declared python3 (this one), without site-packages: the server must not need the mcp package.
    params = mcp.StdioServerParameters(command=sys.executable, args=["-S", *args])

    async def main():
        async with mcp.Client(params) as client:
            return await test(client)
    return asyncio.run(main())


def text_of(result):
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


def test_lists_four_tools_with_schemas():
    async def check(client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"page", "index", "search", "recall"}
        page = tools["page"].input_schema
        assert page["required"] == ["transcript", "contract"]
        assert set(page["properties"]) == {"transcript", "contract", "intent", "budget"}
        assert tools["recall"].input_schema["properties"]["ids"]["type"] == "array"
        assert tools["index"].input_schema["required"] == ["contract"]
        assert tools["search"].input_schema["required"] == ["query", "contract"]
        assert all(tool.description for tool in tools.values())
        return client.server_info  # what the server said of itself at initialization
    info = session(check)
    assert (info.name, info.version) == ("prosecode-pager", pager.__version__)


def test_page_then_recall_returns_the_exact_text(tmp_path):
    contract = str(tmp_path / "s.limn")
    conv = pager.load(FIXTURE.read_text(encoding="utf-8"), "claude-code")
    texts = {b["id"]: b["text"] for b in pager.conversation_blocks(conv)}

    async def check(client):
        budgeted = await client.call_tool("page", {"transcript": str(FIXTURE), "contract": str(tmp_path / "b.limn"),
                                                   "budget": 100})
        assert not budgeted.is_error, text_of(budgeted)
        fitted = budgeted.structured_content["result"]
        assert fitted["budget"] == 100 and fitted["tokens_after"] <= 100 < fitted["tokens_before"]  # the live context: after the compaction
        result = await client.call_tool("page", {"transcript": str(FIXTURE), "contract": contract,
                                                 "intent": "Decimal rounding in line_total"})
        assert not result.is_error, text_of(result)
        summary = result.structured_content["result"]
        assert summary["format"] == "claude-code" and summary["page"] > 0 and summary["intent_source"] == "--intent"
        listed = (await client.call_tool("index", {"contract": contract})).structured_content["result"]["paged"]
        assert len(listed) == summary["page"]
        block = listed[0]["block"]
        recalled = await client.call_tool("recall", {"ids": [block], "contract": contract})
        assert not recalled.is_error
        assert text_of(recalled) == texts[block]
        after = (await client.call_tool("index", {"contract": contract})).structured_content["result"]["paged"]
        assert block not in [p["block"] for p in after]  # the recall paged it in
        again = await client.call_tool("recall", {"ids": [block], "contract": contract})
        assert not again.is_error and text_of(again) == texts[block]  # recall is idempotent
    session(check)
    assert 'add "' in (tmp_path / "s.limn").read_text() and "because \"recalled\"" in (tmp_path / "s.limn").read_text()


def test_search_finds_a_paged_block_by_a_name_it_holds_then_recall_returns_it(tmp_path):
    contract = str(tmp_path / "s.limn")
    conv = pager.load(FIXTURE.read_text(encoding="utf-8"), "claude-code")
    texts = {b["id"]: b["text"] for b in pager.conversation_blocks(conv)}

    async def check(client):
        done = await client.call_tool("page", {"transcript": str(FIXTURE), "contract": contract,
                                               "intent": "Decimal rounding in line_total"})
        assert not done.is_error, text_of(done)
        listed = (await client.call_tool("index", {"contract": contract})).structured_content["result"]["paged"]
        paged = [p["block"] for p in listed]
        # A word the first paged block holds and search must find: its longest word.
        word = max(pager.tokenize(texts[paged[0]]), key=len)
        found = await client.call_tool("search", {"query": word, "contract": contract, "limit": 5})
        assert not found.is_error, text_of(found)
        hits = found.structured_content["result"]
        assert hits and all(hit["id"] in paged for hit in hits)
        assert any(word.lower() in texts[hit["id"]].lower() for hit in hits)
        assert set(hits[0]) >= {"id", "turn", "kind", "role", "line", "score"}
        none = await client.call_tool("search", {"query": "zzqxnotawordanywhere", "contract": contract})
        assert not none.is_error and none.structured_content["result"] == []
        bad = await client.call_tool("search", {"query": "x", "contract": contract, "limit": 0})
        assert bad.is_error  # limit below the schema's minimum: a tool error, the server keeps serving
    session(check)


def test_errors_are_tool_results_and_the_server_keeps_serving(tmp_path):
    contract = str(tmp_path / "s.limn")

    async def check(client):
        missing = await client.call_tool("page", {"transcript": str(tmp_path / "nope.jsonl"), "contract": contract})
        assert missing.is_error and "nope.jsonl: no such file" in text_of(missing)
        assert not (tmp_path / "s.limn").exists()
        no_contract = await client.call_tool("index", {"contract": contract})
        assert no_contract.is_error and "no such contract" in text_of(no_contract)
        flags = await client.call_tool("page", {"transcript": str(FIXTURE), "contract": str(tmp_path / "f.limn"),
                                                "intent": "-h --budget"})  # an intent, not flags
        assert not flags.is_error and flags.structured_content["result"]["intent_source"] == "--intent"
        # A tight budget pages (it never evicts); a block kept verbatim is not recallable.
        ok = await client.call_tool("page", {"transcript": str(FIXTURE), "contract": contract, "budget": 60})
        assert not ok.is_error
        unknown = await client.call_tool("recall", {"ids": ["no-such-block"], "contract": contract})
        assert unknown.is_error and 'block "no-such-block" is not paged (it was never seen by the pager)' in text_of(unknown)
        kept = next(b for b, a in pager.contract_state(contract).directives.items() if a == "retain")
        gone = await client.call_tool("recall", {"ids": [kept], "contract": contract})
        assert gone.is_error and f'block "{kept}" is not paged (it is retained)' in text_of(gone)
        empty = await client.call_tool("recall", {"ids": [], "contract": contract})
        assert empty.is_error and "at least one block id" in text_of(empty)
        again = await client.call_tool("index", {"contract": contract})  # still serving
        assert not again.is_error and again.structured_content["result"]["paged"]
    session(check)


def test_arguments_that_do_not_fit_the_schema_are_tool_errors(tmp_path):
    contract = str(tmp_path / "s.limn")

    async def check(client):
        cases = [
            ("page", {"contract": contract}, "page needs the argument 'transcript'"),
            ("page", {"transcript": str(FIXTURE), "contract": contract, "budget": "lots"},
             'budget must be an integer (got "lots")'),
            ("page", {"transcript": str(FIXTURE), "contract": contract, "budget": 0}, "budget must be at least 1"),
            ("recall", {"ids": "m-1", "contract": contract}, "ids must be an array"),
            ("recall", {"ids": [3], "contract": contract}, "ids[0] must be a string"),
            ("index", {"contract": contract, "store": "x"}, "index takes no argument 'store'"),
        ]
        for name, arguments, message in cases:
            result = await client.call_tool(name, arguments)
            assert result.is_error and message in text_of(result), (name, arguments, text_of(result))
        assert not (tmp_path / "s.limn").exists()
    session(check)


def test_a_contract_that_is_not_liminate_is_a_tool_error(tmp_path):
    emitted = tmp_path / "emitted.json"
    emitted.write_text('{"messages": []}\n')

    async def check(client):
        result = await client.call_tool("page", {"transcript": str(FIXTURE), "contract": str(emitted)})
        assert result.is_error and "not a Liminate contract" in text_of(result)
    session(check)
    assert emitted.read_text() == '{"messages": []}\n' and sorted(os.listdir(tmp_path)) == ["emitted.json"]


# --- the protocol, message by message (raw JSON-RPC lines, as any client sends them) ---

def converse(*messages):
    """Send each message (a dict, or a raw line) to a fresh server; return its response lines, parsed."""
    lines = "".join((m if isinstance(m, str) else json.dumps(m)) + "\n" for m in messages)
    proc = subprocess.run([sys.executable, "-S", str(SERVER)], input=lines, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def initialize(version, id_=1):
    return {"jsonrpc": "2.0", "id": id_, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


@pytest.mark.parametrize("asked, agreed", [
    ("2024-11-05", "2024-11-05"), ("2025-03-26", "2025-03-26"), ("2025-06-18", "2025-06-18"),
    ("2025-11-25", "2025-11-25"), ("2099-01-01", "2025-11-25"), ("2026-07-28", "2025-11-25"),
])
def test_protocol_version_negotiation(asked, agreed):
    (answer,) = converse(initialize(asked))
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == agreed
    assert answer["result"]["capabilities"] == {"tools": {"listChanged": False}}
    assert answer["result"]["serverInfo"] == {"name": "prosecode-pager", "version": pager.__version__}


def test_lifecycle_ping_notifications_and_protocol_errors():
    answers = converse(
        initialize("2025-06-18"),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},  # a notification: no answer
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": "s", "method": "server/discover", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
        "{not json",
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}},
        [{"jsonrpc": "2.0", "id": 4, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/x"}],
        {"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
    )
    assert [a.get("id") if isinstance(a, dict) else "batch" for a in answers] == [1, 2, "s", 3, None, "batch", 5]
    assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert answers[2]["error"]["code"] == -32601  # method not found: a 2026 client falls back to initialize
    assert answers[3]["error"]["code"] == -32602 and "Unknown tool: 'nope'" in answers[3]["error"]["message"]
    assert answers[4]["error"]["code"] == -32700
    assert answers[5] == [{"jsonrpc": "2.0", "id": 4, "result": {}}]
    tools = answers[6]["result"]["tools"]
    assert [t["name"] for t in tools] == ["page", "index", "search", "recall"]
    assert all(t["inputSchema"]["type"] == "object" and t["description"] for t in tools)


def test_every_tool_is_one_row_calling_the_engine():
    """The tool list is a table: name, description, schema, call; the server lists exactly its rows."""
    import mcp_server
    assert [t.name for t in mcp_server.TOOLS] == ["page", "index", "search", "recall"]
    for tool in mcp_server.TOOLS:
        assert set(tool.schema["required"]) <= set(tool.schema["properties"])
    assert mcp_server._list_tools({})["tools"][0]["inputSchema"] is mcp_server.TOOLS[0].schema


def test_recall_of_a_long_range_in_parts_through_the_server(tmp_path, cli):
    history, contract, out = tmp_path / "chat.json", tmp_path / "c.limn", tmp_path / "out.json"
    history.write_text(json.dumps(tool_chat(120)))
    done = cli("--history", history, "--contract", contract, "--budget", "2000", "--emit", out, "--now", NOW)
    assert done.code == 0, done.err
    rid = re.search(r"r-[0-9a-f]{12}", out.read_text()).group()

    async def check(client):
        part = await client.call_tool("recall", {"ids": [rid], "contract": str(contract), "max_tokens": 300})
        assert not part.is_error, text_of(part)
        last = text_of(part).rstrip().splitlines()[-1]
        start = re.fullmatch(r"\[recall stopped within 300 tokens: \d+ more blocks \(\d+ tokens\) are still paged; "
                             r"go on with --from (\S+)\]", last).group(1)
        rest = await client.call_tool("recall", {"ids": [rid], "contract": str(contract), "from": start})
        assert not rest.is_error and "stopped" not in text_of(rest) and f"==> {start} <==" in text_of(rest)
        bad = await client.call_tool("recall", {"ids": [rid], "contract": str(contract), "max_tokens": 0})
        assert bad.is_error  # below the schema's minimum
    session(check)
    assert pager.contract_state(str(contract)).directives[rid] == "retain"  # every block back: the range too
