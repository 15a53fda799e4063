"""OpenAI Agents SDK adapter: page the input items before each model call, recall as a tool.

* ``call_model_input_filter(pager)``: for ``RunConfig(call_model_input_filter=...)``.  The SDK
  calls it right before every model call with the Responses input items; it returns them
  compacted (an item the pass kept untouched is the very object that came in, which the SDK
  uses to track what it sent).  The run's own history is left whole.  A run whose conversation
  the server holds (``conversation_id``, ``previous_response_id``) sends only the new items: the
  outputs of the stored response's calls stay, and the intent carries over from the last call.
  ``acall_model_input_filter``
  is the same as a coroutine function; the SDK accepts either from ``Runner.run`` and
  ``Runner.run_sync``.
* ``recall_tool(pager)``: the recall tool as an Agents SDK ``FunctionTool`` over the pager's
  pages; a bad id is an ``error: ...`` tool output, never an exception in the run.

Requires the ``[agents]`` extra; the SDK is imported when a function here is first called.
"""

import json
from typing import Any, Optional

try:  # installed: prosecode_pager.agents_adapter beside prosecode_pager.pager
    from . import pager as _pager
except ImportError:  # run from scripts/ with nothing installed
    import pager as _pager  # type: ignore[no-redef]

__all__ = ["call_model_input_filter", "acall_model_input_filter", "recall_tool", "compact_input"]


def compact_input(pager: "_pager.Pager", data: Any) -> Any:
    """Return the SDK's ModelInputData with its input items compacted by ``pager``."""
    from agents.run import ModelInputData

    items = list(data.model_data.input)
    if not items:
        return data.model_data
    # The SDK's own history never holds an output without its call: one that does comes from a run
    # whose conversation the server holds (conversation_id, previous_response_id), where the SDK
    # sends only the new items; it answers the stored response's call, so it stays (server_state).
    result = pager.compact(items, format="responses", server_state=True)  # role messages would read as Chat
    return ModelInputData(input=list(result.messages), instructions=data.model_data.instructions)


def _owner(pager: Optional["_pager.Pager"], options: Any) -> "_pager.Pager":
    if pager is not None and options:
        raise _pager.PagerError("give a Pager or its options, not both")
    return pager if pager is not None else _pager.Pager(**options)


def call_model_input_filter(pager: Optional["_pager.Pager"] = None, **options: Any) -> Any:
    """Return a ``call_model_input_filter`` that compacts every model call's input with ``pager``.

    ``options`` make a new Pager (``budget=8000``, ``intent=...``) when none is given; the
    filter's ``pager`` attribute is the one in use (give its ``recall_tool`` to the agent).
    """
    owner = _owner(pager, options)

    def input_filter(data: Any) -> Any:
        return compact_input(owner, data)

    input_filter.pager = owner  # type: ignore[attr-defined]
    return input_filter


def acall_model_input_filter(pager: Optional["_pager.Pager"] = None, **options: Any) -> Any:
    """Return ``call_model_input_filter`` as a coroutine function (the work itself is CPU-bound)."""
    owner = _owner(pager, options)

    async def input_filter(data: Any) -> Any:
        return compact_input(owner, data)

    input_filter.pager = owner  # type: ignore[attr-defined]
    return input_filter


def recall_tool(pager: "_pager.Pager") -> Any:
    """Return the recall tool as an Agents SDK FunctionTool over ``pager``'s pages."""
    from agents import FunctionTool

    async def invoke(_context: Any, arguments: str) -> str:
        try:
            given = json.loads(arguments or "{}")
            ids = given.get("ids")
        except (ValueError, AttributeError):
            return f"error: the arguments are not a JSON object (got {arguments[:60]!r})"
        return pager.recall_text(ids, given.get("max_tokens"), given.get("from"))[0]

    schema = _pager.recall_tool("responses")["parameters"]
    return FunctionTool(name=_pager.RECALL_TOOL_NAME, description=_pager.RECALL_TOOL_DESCRIPTION,
                        params_json_schema=schema, on_invoke_tool=invoke, strict_json_schema=True)
