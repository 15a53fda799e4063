"""The OpenAI Agents SDK adapter in a real Runner loop with a scripted Model (no network)."""

import asyncio
import json
import os
import sys

import pytest

from test_library import INTENT, tool_conversation

if sys.version_info < (3, 10):
    pytest.skip("the pinned openai-agents needs Python 3.10", allow_module_level=True)
if os.environ.get("CI"):
    import agents  # noqa: F401  (ImportError fails the test in CI)
else:
    agents = pytest.importorskip("agents")

import agents_adapter  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402


def responses_items():
    """Return the long tool-using conversation as Responses input items."""
    items = []
    for msg in tool_conversation():
        if msg["role"] == "system":
            continue  # the agent's instructions carry it
        if msg["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": msg["tool_call_id"], "output": msg["content"]})
        elif msg.get("tool_calls"):
            for call in msg["tool_calls"]:
                items.append({"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                              "arguments": call["function"]["arguments"]})
        else:
            items.append({"role": msg["role"], "content": msg["content"]})
    return items


class ScriptedModel(Model):
    """A Model that answers from a script and records the input of every call."""

    def __init__(self, outputs):
        self.outputs, self.inputs = list(outputs), []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        self.inputs.append(json.loads(json.dumps(input, default=str)))
        return ModelResponse(output=[self.outputs.pop(0)], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the test runs without streaming")


def call(call_id, ids):
    return ResponseFunctionToolCall(type="function_call", call_id=call_id, name="recall_pages",
                                    arguments=json.dumps({"ids": ids}), id=f"fc_{call_id}", status="completed")


def answer(text):
    return ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_runner_sends_the_model_the_compacted_input_and_recall_returns_the_original(pager, mode):
    items = responses_items()
    probe = pager.Pager(900, intent=INTENT).compact(items, format="responses")
    paged = probe.report.paged[0]
    original = probe.recall(paged)[paged]
    engine = pager.Pager(900, intent=INTENT)
    make = agents_adapter.call_model_input_filter if mode == "sync" else agents_adapter.acall_model_input_filter
    input_filter = make(engine)
    model = ScriptedModel([call("r1", [paged]), call("r2", ["no-such-block"]), answer("Fixed the rounding.")])
    agent = agents.Agent(name="coder", instructions="You fix code.", model=model,
                         tools=[agents_adapter.recall_tool(engine)])
    config = agents.RunConfig(call_model_input_filter=input_filter, tracing_disabled=True)
    if mode == "sync":
        result = agents.Runner.run_sync(agent, items, run_config=config)
    else:
        result = asyncio.run(agents.Runner.run(agent, items, run_config=config))
    assert result.final_output == "Fixed the rounding."
    assert len(model.inputs) == 3
    first = model.inputs[0]
    assert first == json.loads(json.dumps(probe.messages))  # exactly the pager's pass on the same items
    assert len(first) < len(items) and pager.validate("responses", first) == []
    assert any("recall_pages tool with ids" in json.dumps(item) for item in first)
    outputs = {i["call_id"]: i["output"] for i in result.to_input_list() if i.get("type") == "function_call_output"}
    assert outputs["r1"] == original
    assert outputs["r2"].startswith("error: ") and "never seen" in outputs["r2"]
    assert len(result.to_input_list()) == len(items) + 5  # the run's history keeps every item


@pytest.mark.parametrize("held", ["previous_response_id", "conversation_id"])
def test_a_run_whose_conversation_the_server_holds_keeps_its_tool_outputs(pager, held):
    """With conversation_id or previous_response_id the SDK sends the model only the new items: on
    the call after a tool call, just its output.  The filter keeps that output (it answers the
    stored response's call; dropping it as an orphan would leave the call unanswered) and, with
    no user message in the input, keeps the last call's intent instead of failing."""
    engine = pager.Pager(900)
    model = ScriptedModel([call("r1", ["no-such-block"]), answer("Done.")])
    agent = agents.Agent(name="coder", instructions="You fix code.", model=model,
                         tools=[agents_adapter.recall_tool(engine)])
    config = agents.RunConfig(call_model_input_filter=agents_adapter.call_model_input_filter(engine),
                              tracing_disabled=True)
    result = agents.Runner.run_sync(agent, "Fix the invoice rounding.", run_config=config, **{held: "resp_0"})
    assert result.final_output == "Done."
    second = model.inputs[1]
    assert [(item["type"], item["call_id"]) for item in second] == [("function_call_output", "r1")]
    assert second[0]["output"].startswith("error: ")


def test_the_recall_tool_is_strict_and_gives_a_range_back_in_parts_through_the_runner(pager):
    items = responses_items()
    engine = pager.Pager(600, intent=INTENT)
    tool = agents_adapter.recall_tool(engine)
    # strict, as the SDK sends it: every field required, the bound's fields nullable (null: left out)
    schema = tool.params_json_schema
    assert tool.strict_json_schema and sorted(schema["required"]) == ["from", "ids", "max_tokens"]
    assert schema["properties"]["max_tokens"]["type"] == ["integer", "null"]
    assert schema["properties"]["from"]["type"] == ["string", "null"]
    range_id = next(p for p in engine.compact(items, format="responses").report.paged if p.startswith("r-"))
    whole = engine.recall_text([range_id])[0]

    def bounded(call_id, start):
        return ResponseFunctionToolCall(type="function_call", call_id=call_id, name="recall_pages", id=f"fc_{call_id}",
                                        arguments=json.dumps({"ids": [range_id], "max_tokens": 60, "from": start}),
                                        status="completed")

    first = agents.Runner.run_sync(
        agents.Agent(name="coder", instructions="You fix code.", model=ScriptedModel([bounded("r1", None), answer("ok")]),
                     tools=[tool]),
        items, run_config=agents.RunConfig(call_model_input_filter=agents_adapter.call_model_input_filter(engine),
                                           tracing_disabled=True))
    part = next(i["output"] for i in first.to_input_list() if i.get("call_id") == "r1" and "output" in i)
    start = part.rstrip().rsplit("--from ", 1)[1].rstrip("]")  # the first part ends saying where to go on
    assert part.startswith("==> ") and len(part) < len(whole) and start in whole
    rest = asyncio.run(tool.on_invoke_tool(None, bounded("r2", start).arguments))
    assert rest.split("\n", 1)[0] == f"==> {start} <=="  # the next part starts where the first said
