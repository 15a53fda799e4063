"""LangChain and LangGraph adapter: page an agent's messages before each model call.

Three ways in, one Pager behind each (its pages back the recall tool):

* ``pager_middleware(pager)``: LangChain agent middleware (``create_agent(middleware=[...])``).
  Its ``wrap_model_call`` / ``awrap_model_call`` hand the model the compacted messages and leave
  the agent's state whole; it registers the recall tool with the agent.
* ``pre_model_hook(pager)``: LangGraph's ``create_react_agent(pre_model_hook=...)``; returns
  ``{"llm_input_messages": compacted}``, so the state keeps every message.
* ``compact_messages(pager, messages)``: the conversion alone, for any other loop.

Messages go to Chat Completions dicts with LangChain's ``convert_to_openai_messages`` and come
back with ``convert_to_messages``; a message the pass kept untouched comes back as the very
object that went in (ids and metadata intact).  Requires the ``[langchain]`` extra; LangChain is
imported when a function here is first called, not when this module is imported.
"""

from typing import Any, Dict, List, Optional, Tuple

try:  # installed: prosecode_pager.langchain_adapter beside prosecode_pager.pager
    from . import pager as _pager
except ImportError:  # run from scripts/ with nothing installed
    import pager as _pager  # type: ignore[no-redef]

__all__ = ["compact_messages", "acompact_messages", "recall_tool", "pager_middleware", "pre_model_hook"]


def _pager_of(pager: Optional["_pager.Pager"], options: Dict[str, Any]) -> "_pager.Pager":
    """Return ``pager``, or a new Pager made from ``options`` (budget, intent, ...)."""
    if pager is not None and options:
        raise _pager.PagerError("give a Pager or its options, not both")
    return pager if pager is not None else _pager.Pager(**options)


def compact_messages(pager: "_pager.Pager", messages: List[Any]) -> Tuple[List[Any], "_pager.CompactReport"]:
    """Return (LangChain messages compacted by ``pager``, the pass's report)."""
    from langchain_core.messages import convert_to_messages, convert_to_openai_messages

    messages = list(messages)
    if not messages:
        return [], None  # type: ignore[return-value]
    dicts = convert_to_openai_messages(messages)
    originals = {id(d): m for d, m in zip(dicts, messages)} if len(dicts) == len(messages) else {}
    result = pager.compact(dicts)
    out = []
    for d in result.messages:
        same = originals.get(id(d))
        out.append(same if same is not None else convert_to_messages([d])[0])
    return out, result.report


async def acompact_messages(pager: "_pager.Pager", messages: List[Any]) -> Tuple[List[Any], "_pager.CompactReport"]:
    """``compact_messages`` for async callers (CPU work, run inline)."""
    return compact_messages(pager, messages)


def recall_tool(pager: "_pager.Pager") -> Any:
    """Return the recall tool as a LangChain tool over ``pager``'s pages.

    It returns a page's exact text; a bad id becomes an error ToolMessage (status "error"),
    never an exception in the agent loop.
    """
    from langchain_core.tools import StructuredTool, ToolException

    def recall_pages(ids: List[str], max_tokens: Optional[int] = None, **more: Any) -> str:
        # (``from``, where a bounded recall goes on, is a Python keyword: it comes in ``more``)
        text, failed = pager.recall_text(ids, max_tokens, more.get("from"))
        if failed:
            raise ToolException(text)
        return text

    schema = _pager.recall_tool("openai")["function"]["parameters"]  # ids, and max_tokens and from for a range
    return StructuredTool(name=_pager.RECALL_TOOL_NAME, description=_pager.RECALL_TOOL_DESCRIPTION,
                          args_schema=schema, func=recall_pages, handle_tool_error=True)


def pager_middleware(pager: Optional["_pager.Pager"] = None, *, with_tool: bool = True, **options: Any) -> Any:
    """Return LangChain agent middleware that compacts the model's messages on every call.

    ``options`` make a new Pager (``budget=8000``, ``intent=...``) when none is given. With
    ``with_tool`` (default) the recall tool is registered with the agent. The latest report
    is kept on the middleware as ``last_report``.
    """
    from langchain.agents.middleware import AgentMiddleware

    owner = _pager_of(pager, options)

    class PagerMiddleware(AgentMiddleware):
        """Hands the model the paged conversation; the agent's state keeps every message."""

        def __init__(self) -> None:
            super().__init__()
            self.pager = owner
            self.tools = [recall_tool(owner)] if with_tool else []
            self.last_report: Optional["_pager.CompactReport"] = None

        def _request(self, request: Any) -> Any:
            messages, self.last_report = compact_messages(self.pager, request.messages)
            return request.override(messages=messages)

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(self._request(request))

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(self._request(request))

    return PagerMiddleware()


def pre_model_hook(pager: Optional["_pager.Pager"] = None, **options: Any) -> Any:
    """Return a LangGraph ``pre_model_hook`` (sync and async) giving the model the paged messages.

    It returns ``{"llm_input_messages": ...}``, so the graph state is left as it was. Offer
    the model ``recall_tool(hook.pager)`` among the agent's tools.
    """
    from langchain_core.runnables import RunnableLambda

    owner = _pager_of(pager, options)

    def hook(state: Dict[str, Any]) -> Dict[str, Any]:
        messages, _ = compact_messages(owner, state["messages"])
        return {"llm_input_messages": messages}

    async def ahook(state: Dict[str, Any]) -> Dict[str, Any]:
        messages, _ = await acompact_messages(owner, state["messages"])
        return {"llm_input_messages": messages}

    runnable = RunnableLambda(hook, afunc=ahook, name="prosecode_pager")
    runnable.pager = owner  # type: ignore[attr-defined]
    return runnable
