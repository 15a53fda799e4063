"""The LangChain / LangGraph adapter in real agent loops, driven by LangChain's own fake chat model."""

import asyncio
import json
import os
import sys

import pytest

from test_library import INTENT, tool_conversation


if sys.version_info < (3, 10):
    pytest.skip("LangChain 1.x needs Python 3.10", allow_module_level=True)


def _framework(name):
    """Import a framework module; in CI its absence fails the test instead of skipping it."""
    if os.environ.get("CI"):
        return __import__(name, fromlist=["_"])
    return pytest.importorskip(name)


messages_mod = _framework("langchain_core.messages")
fake_models = _framework("langchain_core.language_models.fake_chat_models")
callbacks = _framework("langchain_core.callbacks")
langchain_adapter = pytest.importorskip("langchain_adapter") if not os.environ.get("CI") else __import__("langchain_adapter")

AIMessage, ToolMessage = messages_mod.AIMessage, messages_mod.ToolMessage


class ScriptedModel(fake_models.GenericFakeChatModel):
    """LangChain's GenericFakeChatModel, which agents may bind tools to (the fake ignores them)."""

    def bind_tools(self, tools, **kwargs):
        return self


class Recorder(callbacks.BaseCallbackHandler):
    """Keeps the messages every chat model call was given."""

    def __init__(self):
        self.calls = []

    def on_chat_model_start(self, serialized, messages, **kwargs):
        self.calls.append(list(messages[0]))


def history():
    """Return the long tool-using conversation as LangChain messages."""
    return messages_mod.convert_to_messages(tool_conversation())


def originals(pager):
    """Return block id -> text of the conversation's blocks."""
    conv = pager.load(json.dumps(tool_conversation()), "openai")
    return {b["id"]: b["text"] for b in pager.conversation_blocks(conv)}


def check_model_input(pager, sent, full):
    """The model got a shorter, valid Chat Completions history holding stubs that name the recall tool."""
    as_dicts = messages_mod.convert_to_openai_messages(sent)
    assert pager.validate("openai", as_dicts) == []
    assert len(sent) < len(full)
    assert "recall_pages tool with ids" in json.dumps(as_dicts)
    assert sent[-1].content == full[-1].content  # the task statement is kept


def script(paged):
    return ScriptedModel(messages=iter([
        AIMessage("", tool_calls=[{"name": "recall_pages", "args": {"ids": [paged]}, "id": "r1"}]),
        AIMessage("", tool_calls=[{"name": "recall_pages", "args": {"ids": ["no-such-block"]}, "id": "r2"}]),
        AIMessage("Fixed the rounding.")]))


def test_compact_messages_keeps_untouched_messages_as_the_same_objects(pager):
    full = history()
    out, report = langchain_adapter.compact_messages(pager.Pager(900, intent=INTENT), full)
    kept = [m for m in out if any(m is f for f in full)]
    assert kept and report.counts["page"] > 0
    assert len(out) < len(full)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_middleware_in_a_real_agent_loop(pager, mode):
    agents = _framework("langchain.agents")
    engine = pager.Pager(900, intent=INTENT)
    paged = langchain_adapter.compact_messages(pager.Pager(900, intent=INTENT), history())[1].paged[0]
    middleware = langchain_adapter.pager_middleware(engine)
    agent = agents.create_agent(model=script(paged), tools=[], middleware=[middleware])
    recorder = Recorder()
    state = {"messages": history()}
    config = {"callbacks": [recorder]}
    result = agent.invoke(state, config) if mode == "sync" else asyncio.run(agent.ainvoke(state, config))
    assert len(recorder.calls) == 3
    check_model_input(pager, recorder.calls[0], history())
    tool_messages = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert tool_messages["r1"].content == originals(pager)[paged]
    assert tool_messages["r2"].status == "error" and "never seen" in tool_messages["r2"].content
    assert result["messages"][-1].content == "Fixed the rounding."
    assert len(result["messages"]) == len(history()) + 5  # the state kept every message
    last = middleware.last_report  # the last model call was trimmed too, within the budget
    assert last.counts["retain"] < len(last.decisions) and last.tokens_after <= 900


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_pre_model_hook_in_a_langgraph_react_agent(pager, mode):
    prebuilt = _framework("langgraph.prebuilt")
    engine = pager.Pager(900, intent=INTENT)
    hook = langchain_adapter.pre_model_hook(engine)
    paged = langchain_adapter.compact_messages(pager.Pager(900, intent=INTENT), history())[1].paged[0]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of create_agent
        agent = prebuilt.create_react_agent(script(paged), [langchain_adapter.recall_tool(engine)],
                                            pre_model_hook=hook)
    recorder = Recorder()
    state = {"messages": history()}
    config = {"callbacks": [recorder]}
    result = agent.invoke(state, config) if mode == "sync" else asyncio.run(agent.ainvoke(state, config))
    model_calls = [c for c in recorder.calls if c]
    assert len(model_calls) == 3
    check_model_input(pager, model_calls[0], history())
    tool_messages = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert tool_messages["r1"].content == originals(pager)[paged]
    assert tool_messages["r2"].status == "error"
    assert len(result["messages"]) == len(history()) + 5


def test_the_recall_tool_takes_the_bound_and_gives_a_range_back_in_parts_in_an_agent_loop(pager):
    agents = _framework("langchain.agents")
    engine = pager.Pager(600, intent=INTENT)
    range_id = next(p for p in langchain_adapter.compact_messages(engine, history())[1].paged if p.startswith("r-"))
    tool = langchain_adapter.recall_tool(engine)
    assert set(tool.args) == {"ids", "max_tokens", "from"}  # the model is offered the bound it is told about
    whole = engine.recall_text([range_id])[0]
    model = ScriptedModel(messages=iter([
        AIMessage("", tool_calls=[{"name": "recall_pages", "args": {"ids": [range_id], "max_tokens": 60}, "id": "r1"}]),
        AIMessage("Read the first part.")]))
    agent = agents.create_agent(model=model, tools=[], middleware=[langchain_adapter.pager_middleware(engine)])
    result = agent.invoke({"messages": history()})
    part = next(m.content for m in result["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    start = part.rstrip().rsplit("--from ", 1)[1].rstrip("]")  # the part ends saying where to go on
    assert part.startswith("==> ") and len(part) < len(whole) and start in whole
    rest = tool.invoke({"name": "recall_pages", "args": {"ids": [range_id], "max_tokens": 60, "from": start},
                        "id": "r2", "type": "tool_call"})
    assert rest.content.split("\n", 1)[0] == f"==> {start} <=="  # the next part starts where the first said
