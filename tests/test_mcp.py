"""The MCP server, driven over stdio by the official SDK's own client, as an MCP host launches it."""

import asyncio
import json
import os
import sys

import pytest

from conftest import ROOT

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
    params = mcp.StdioServerParameters(command=sys.executable, args=args)  # the declared python3, this one

    async def main():
        async with mcp.Client(params) as client:
            return await test(client)
    return asyncio.run(main())


def text_of(result):
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


def test_lists_three_tools_with_schemas():
    async def check(client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"page", "index", "recall"}
        page = tools["page"].input_schema
        assert page["required"] == ["transcript", "contract"]
        assert set(page["properties"]) == {"transcript", "contract", "intent", "budget"}
        assert tools["recall"].input_schema["properties"]["ids"]["type"] == "array"
        assert tools["index"].input_schema["required"] == ["contract"]
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
    session(check)
    assert 'add "' in (tmp_path / "s.limn").read_text() and "because \"recalled\"" in (tmp_path / "s.limn").read_text()


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
