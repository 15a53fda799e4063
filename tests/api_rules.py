"""Independent validators of provider request bodies, written from each API's documentation.

One function per API; each returns a list of problem strings (empty when the body breaks no
rule checked here). They do not import the pager: tests use them to judge what the pager emits.

Sources, cited per rule with these tags (facts only; no text is copied):
  [AM-REF]   Anthropic Messages API reference, "Create a Message" (docs.claude.com/en/api/messages):
             roles, content as string or blocks, consecutive same-role turns are combined,
             a final assistant turn is a prefill, top-level `system`.
  [AM-TOOL]  Anthropic "Handle tool calls" (platform.claude.com/docs/en/agents-and-tools/tool-use/
             handle-tool-calls): results in the user turn right after the tool_use turn, nothing
             in between, tool_result blocks before any other block of that turn, ids matched.
  [AM-THINK] Anthropic "Building with extended thinking" (docs.anthropic.com/.../extended-thinking):
             thinking blocks carry a signature and are passed back unmodified; with thinking
             enabled, the assistant turn whose tool_use is being answered must start with a
             thinking or redacted_thinking block.
  [AM-ERR]   Anthropic 400 invalid_request_error texts as users report them (GitHub issues, e.g.
             anthropics/claude-code#3632): "tool_use ids were found without tool_result blocks
             immediately after", "unexpected tool_use_id found in tool_result blocks",
             "tool_result blocks can only be in user messages" (tghamm/Anthropic.SDK#128),
             "tool_use ids must be unique" (anthropics/claude-code#28515), "text content blocks
             must be non-empty" (anthropics/claude-code#59812), "messages.0.name: Extra inputs are
             not permitted" (microsoft/autogen#3034: a message holds role and content only), and the
             rule that only an optional final assistant message may have empty content; server
             tool results: "Each `advisor_tool_result` block must have a corresponding
             `server_tool_use` block before it" (anthropics/claude-code#80439); "If an assistant
             message contains any thinking blocks, the first block must be thinking or
             redacted_thinking" (lbjlaq/Antigravity-Manager#653, anthropics/claude-code#20705).
  [AM-CACHE] Anthropic prompt caching guide: at most 4 cache_control breakpoints per request.
  [AM-VISION] Anthropic vision guide: base64 image media types jpeg, png, gif, webp.
  [OC-SDK]   OpenAI Chat Completions request types (openai-python `types/chat/*_message_param.py`,
             generated from the API spec): roles, content-part types per role, assistant content
             optional only with tool_calls / function_call, tool_calls entry shapes.
  [OC-ERR]   OpenAI 400 texts (e.g. microsoft/promptflow#3130, miurla/morphic#136): "messages with
             role 'tool' must be a response to a preceding message with 'tool_calls'" and "an
             assistant message with 'tool_calls' must be followed by tool messages responding to
             each 'tool_call_id'", and "Additional properties are not allowed ('id' was unexpected)
             - 'messages.0'" (transitive-bullshit/agentic#531: message keys are the typed ones),
             "Invalid 'messages[1].tool_calls': empty array" (openai/openai-node#1341).
  [OR-SDK]   OpenAI Responses input item types (openai-python `types/responses/
             response_input_item_param.py`, `easy_input_message_param.py`,
             `response_output_message_param.py`, `response_input_content_param.py`).
  [OR-ERR]   OpenAI Responses 400 texts: "Item 'rs_…' of type 'reasoning' was provided without its
             required following item" (openai/openai-node#1567, continuedev/continue#8933,
             openai/openai-dotnet#1050), "No tool call found for function call output with
             call_id …" (microsoft/vscode#320060), "No tool output found for function call …"
             (Azure/azure-sdk-for-python#46092), "Unknown parameter: 'input[1].metadata'"
             (microsoft/agent-framework#2203: message items hold only their typed keys). Assistant message parts are output_text or
             refusal, as ResponseOutputMessageParam types them (input parts are for the other roles).
  [OR-PREV]  OpenAI conversation-state and function-calling guides: a body with
             `previous_response_id` (or a `conversation`) continues what the server holds, so its
             input holds only the new items; an output answering a call of the stored response has
             no call in the input (the guides' tool loop sends just the `function_call_output`).
             An `item_reference` names a stored item the same way (the call may be one).
  [OC-REC]   Chat Completions requests recorded with their 200 responses from api.openai.com
             (pydantic/logfire tests/otel_integrations/cassettes/test_litellm/
             test_litellm_instrumentation.yaml, sent by LiteLLM; Mirascope/mirascope
             python/tests/e2e/output/cassettes/test_call_with_tools/openai_gpt_5_mini_completions):
             an assistant message sent back with the response's `annotations` list, and a tool
             message with a `name`, are accepted, though the request types do not list them. An
             OpenAI-compatible server's own reasoning field goes back the same way: Moonshot's
             `reasoning_content` (tmc/langchaingo llms/openai/testdata/
             TestMoonshot_MultiTurnToolCallWithReasoning.httprr, answered 200).
  [OC-AUDIO] An assistant turn whose reply was spoken (audio output) goes back as the assistant
             message param's `audio: {"id": ...}` (openai-python `chat_completion_assistant_message_param.py`,
             "Data about a previous audio response from the model"), with no content: the API
             looks the reply up by that id (community.openai.com thread 1046769: a 400 "Assistant
             audio ... not found", param `messages[2].audio.id`, once the id expired).
  [ORT-DOC]  OpenRouter "Reasoning tokens" guide (openrouter.ai/docs/use-cases/reasoning-tokens,
             "preserving reasoning blocks"): an OpenAI-compatible Chat body sent to OpenRouter carries
             the model's `reasoning_details` (and `reasoning`) on assistant messages, passed back
             unmodified; a body sent there is valid with them.

  [GM-REF]   Gemini API reference, "Generating content" and "Caching"/Content types
             (ai.google.dev/api/generate-content, ai.google.dev/api/caching#Content): a request's
             `contents` is a list of Content `{role, parts}`, role `user` or `model`; a Part holds one
             datum (text, inlineData, fileData, functionCall, functionResponse, executableCode,
             codeExecutionResult); `systemInstruction` is a Content of text parts; FunctionCall and
             FunctionResponse carry `name` and an optional `id` the response must repeat.
  [GM-FC]    Gemini "Function calling" guide (ai.google.dev/gemini-api/docs/function-calling): the
             results of a model turn's calls go back in the next turn, a user turn of
             functionResponse parts, one per call, matched by id and name.
  [GM-ERR]   Gemini 400 INVALID_ARGUMENT texts users report: "Please ensure that the number of
             function response parts is equal to the number of function call parts of the function
             call turn." (google-gemini/gemini-cli#3814, #6418, #17208), "Please ensure that function
             response turn comes immediately after a function call turn.", "Unable to submit request
             because it has an empty text parameter" / "contents.parts must not be empty".

Known limits (documented, not checkable from the body alone): a signature is checked for
presence, not validity; "message provided without its required preceding reasoning item" needs
the server's record of which items a response produced; Anthropic's first-message role is not
checked (the reference no longer states a rule for it).
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple

# --- Anthropic Messages ---

ANTHROPIC_ROLES = ("user", "assistant")  # [AM-REF]
# Block types by the role that may hold them ([AM-REF], [AM-TOOL], [AM-THINK], [AM-ERR]).
USER_ONLY_BLOCKS = frozenset({"tool_result", "image", "document", "search_result"})
ASSISTANT_ONLY_BLOCKS = frozenset({"tool_use", "thinking", "redacted_thinking", "server_tool_use",
                                   "web_search_tool_result", "web_fetch_tool_result",
                                   "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
                                   "compaction"})
IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})  # [AM-VISION]
THINKING_BLOCKS = ("thinking", "redacted_thinking")  # [AM-THINK]
MAX_CACHE_BREAKPOINTS = 4  # [AM-CACHE]
ANTHROPIC_MESSAGE_KEYS = frozenset({"role", "content"})  # [AM-REF], [AM-ERR] extra inputs rejected
# The fields of a text and a thinking block [AM-REF]; any other is an extra input the API rejects
# [AM-ERR] (reported: "messages.1.reasoning_details: Extra inputs are not permitted", and the same for
# a tool_use block's stray "text" or "index").
ANTHROPIC_BLOCK_KEYS = {"text": frozenset({"type", "text", "cache_control", "citations"}),
                        "thinking": frozenset({"type", "thinking", "signature"})}


def _turns(messages: Sequence[Any]) -> List[Tuple[str, List[Tuple[int, int, Any]]]]:
    """Group consecutive same-role messages into turns, as the API combines them [AM-REF].

    Each turn is (role, [(message index, block index, block)]); string content counts as one
    text block.
    """
    turns: List[Tuple[str, List[Tuple[int, int, Any]]]] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ANTHROPIC_ROLES:
            continue
        content = msg.get("content")
        blocks = ([{"type": "text", "text": content}] if isinstance(content, str)
                  else content if isinstance(content, list) else [])
        entries = [(i, j, b) for j, b in enumerate(blocks)]
        if turns and turns[-1][0] == msg["role"]:
            turns[-1][1].extend(entries)
        else:
            turns.append((msg["role"], entries))
    return turns


def _count_cache_control(value: Any) -> int:
    """Count cache_control markers anywhere in a request part [AM-CACHE]."""
    if isinstance(value, dict):
        return (1 if value.get("cache_control") else 0) + sum(_count_cache_control(v) for k, v in value.items()
                                                            if k != "cache_control")
    if isinstance(value, list):
        return sum(_count_cache_control(v) for v in value)
    return 0


def _anthropic_message_problems(i: int, msg: Any, last: bool) -> List[str]:
    """Shape rules of one message: role, content type, block shapes and their role [AM-*]."""
    where = f"messages[{i}]"
    if not isinstance(msg, dict):
        return [f"{where}: not an object"]
    role, content = msg.get("role"), msg.get("content")
    if role not in ANTHROPIC_ROLES:  # [AM-REF] only user and assistant; system is top-level
        return [f"{where}: role {role!r} is not user or assistant"]
    extra = sorted(set(msg) - ANTHROPIC_MESSAGE_KEYS)
    if extra:  # [AM-ERR] extra inputs are not permitted
        return [f"{where}: keys {extra} are not message fields (role, content)"]
    if isinstance(content, str):
        if not content and not (last and role == "assistant"):  # [AM-ERR] non-empty content
            return [f"{where}: empty content (only a final assistant message may be empty)"]
        return []
    if not isinstance(content, list):
        return [f"{where}: content must be a string or a list of blocks"]
    if not content and not (last and role == "assistant"):  # [AM-ERR]
        return [f"{where}: empty content list (only a final assistant message may be empty)"]
    out = []
    for j, block in enumerate(content):
        bw = f"{where}.content[{j}]"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            out.append(f"{bw}: block without a type")
            continue
        t = block["type"]
        stray = sorted(set(block) - ANTHROPIC_BLOCK_KEYS[t]) if t in ANTHROPIC_BLOCK_KEYS else []
        if stray:  # [AM-ERR] extra inputs are not permitted
            out.append(f"{bw}: keys {stray} are not {t} block fields")
        if t in USER_ONLY_BLOCKS and role != "user":  # [AM-ERR] tool_result only in user messages
            out.append(f"{bw}: {t} block in a {role} message")
        if t in ASSISTANT_ONLY_BLOCKS and role != "assistant":  # [AM-TOOL], [AM-THINK]
            out.append(f"{bw}: {t} block in a {role} message")
        if t == "text" and (not isinstance(block.get("text"), str) or not block["text"]):
            out.append(f"{bw}: text block with empty or missing text")  # [AM-ERR]
        elif t in ("tool_use", "server_tool_use"):
            if not isinstance(block.get("id"), str) or not block["id"]:
                out.append(f"{bw}: {t} without an id")
            if not isinstance(block.get("name"), str):
                out.append(f"{bw}: {t} without a name")
            if not isinstance(block.get("input"), dict):
                out.append(f"{bw}: {t} input must be an object")  # [AM-REF]
        elif t == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                out.append(f"{bw}: tool_result without tool_use_id")
            inner = block.get("content")
            if inner is not None and not isinstance(inner, (str, list)):
                out.append(f"{bw}: tool_result content must be a string or a list of blocks")
        elif t == "thinking":  # [AM-THINK] text and signature both present
            if not isinstance(block.get("thinking"), str):
                out.append(f"{bw}: thinking block without thinking text")
            if not isinstance(block.get("signature"), str) or not block["signature"]:
                out.append(f"{bw}: thinking block without its signature")
        elif t == "redacted_thinking" and not isinstance(block.get("data"), str):
            out.append(f"{bw}: redacted_thinking block without data")  # [AM-THINK]
        elif t == "image":
            src = block.get("source")
            if not isinstance(src, dict):
                out.append(f"{bw}: image without a source")
            elif src.get("type") == "base64":
                if src.get("media_type") not in IMAGE_MEDIA_TYPES:  # [AM-VISION]
                    out.append(f"{bw}: image media_type {src.get('media_type')!r} not jpeg/png/gif/webp")
                if not isinstance(src.get("data"), str) or not src["data"]:
                    out.append(f"{bw}: base64 image without data")
    return out


def problems_anthropic(body: Any) -> List[str]:
    """Return the rule breaks in an Anthropic Messages request body (empty list = valid)."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return ["body: not an object with a messages list"]  # [AM-REF]
    out: List[str] = []
    system = body.get("system")
    if system is not None:  # [AM-REF] a string or a list of text blocks
        if isinstance(system, list):
            for j, b in enumerate(system):
                if not isinstance(b, dict) or b.get("type") != "text" or not isinstance(b.get("text"), str):
                    out.append(f"system[{j}]: system blocks must be text blocks")
        elif not isinstance(system, str):
            out.append("system: must be a string or a list of text blocks")
    messages = body["messages"]
    for i, msg in enumerate(messages):
        out.extend(_anthropic_message_problems(i, msg, i == len(messages) - 1))
    breakpoints = _count_cache_control([system, messages, body.get("tools")])
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        out.append(f"request: {breakpoints} cache_control breakpoints, more than {MAX_CACHE_BREAKPOINTS}")

    seen_use: Dict[str, str] = {}
    turns = _turns(messages)
    for k, (role, entries) in enumerate(turns):
        kinds = [b.get("type") if isinstance(b, dict) else None for _, _, b in entries]
        if role == "assistant" and any(t in THINKING_BLOCKS for t in kinds) and kinds[0] not in THINKING_BLOCKS:
            # [AM-ERR] "If an assistant message contains any thinking blocks, the first block must be
            # thinking or redacted_thinking" (judged on the turn: consecutive messages are combined)
            i, j = entries[0][0], entries[0][1]
            out.append(f"messages[{i}].content[{j}]: an assistant turn holding thinking must start with it (found {kinds[0]})")
        if role == "assistant":
            uses = [(i, j, b["id"]) for i, j, b in entries if isinstance(b, dict)
                    and b.get("type") == "tool_use" and isinstance(b.get("id"), str)]
            for i, j, uid in uses:
                if uid in seen_use:  # [AM-ERR] tool_use ids must be unique
                    out.append(f"messages[{i}].content[{j}]: tool_use id {uid} repeats {seen_use[uid]}")
                seen_use.setdefault(uid, f"messages[{i}].content[{j}]")
            if not uses or k == len(turns) - 1:
                continue  # a trailing assistant turn is a prefill: no next turn to check
            nxt = turns[k + 1][1]
            answered = {b.get("tool_use_id") for _, _, b in nxt
                        if isinstance(b, dict) and b.get("type") == "tool_result"}
            for i, j, uid in uses:  # [AM-TOOL], [AM-ERR]: each answered in the very next turn
                if uid not in answered:
                    out.append(f"messages[{i}].content[{j}]: tool_use {uid} has no tool_result in the next user turn")
            continue
        prev_uses = set()
        if k > 0:
            prev_uses = {b.get("id") for _, _, b in turns[k - 1][1]
                         if isinstance(b, dict) and b.get("type") == "tool_use"}
        other_seen = False
        answered_here: Dict[str, str] = {}
        for i, j, b in entries:
            if not isinstance(b, dict):
                continue
            if b.get("type") != "tool_result":
                other_seen = True
                continue
            where = f"messages[{i}].content[{j}]"
            rid = b.get("tool_use_id")
            if other_seen:  # [AM-TOOL] tool_result blocks come first in their user turn
                out.append(f"{where}: tool_result after another block of the same user turn")
            if rid not in prev_uses:  # [AM-ERR] must answer a tool_use of the previous turn
                out.append(f"{where}: tool_result {rid} answers no tool_use of the assistant turn before it")
            if rid in answered_here:
                out.append(f"{where}: second tool_result for {rid} (first at {answered_here[rid]})")
            answered_here.setdefault(rid, where)

    # [AM-ERR] a server tool's *_tool_result block needs its server_tool_use (or mcp_tool_use) before it
    server_uses: set = set()
    for i, msg in enumerate(messages):
        content = msg.get("content") if isinstance(msg, dict) else None
        for j, b in enumerate(content if isinstance(content, list) else []):
            t = b.get("type") if isinstance(b, dict) else None
            if t in ("server_tool_use", "mcp_tool_use"):
                server_uses.add(b.get("id"))
            elif isinstance(t, str) and t.endswith("_tool_result") and t != "tool_result" \
                    and b.get("tool_use_id") not in server_uses:
                out.append(f"messages[{i}].content[{j}]: {t} {b.get('tool_use_id')!r} has no "
                           "server_tool_use before it")

    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        assistant_turns = [entries for role, entries in turns if role == "assistant"]
        if assistant_turns:  # [AM-THINK] the tool-loop turn being answered starts with thinking
            last = assistant_turns[-1]
            has_use = any(isinstance(b, dict) and b.get("type") == "tool_use" for _, _, b in last)
            first = last[0][2] if last else None
            if has_use and not (isinstance(first, dict) and first.get("type") in ("thinking", "redacted_thinking")):
                i = last[0][0] if last else "?"
                out.append(f"messages[{i}]: thinking is enabled and the last assistant turn uses a tool "
                           "but does not start with a thinking or redacted_thinking block")
    return out


# --- OpenAI Chat Completions ---

CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")  # [OC-SDK]
# Content-part types each role may hold when content is a list [OC-SDK].
CHAT_PARTS = {"system": frozenset({"text"}), "developer": frozenset({"text"}), "tool": frozenset({"text"}),
              "user": frozenset({"text", "image_url", "input_audio", "file"}),
              "assistant": frozenset({"text", "refusal"})}
# Keys each role's message may carry [OC-SDK], [OC-ERR] additional properties rejected.
CHAT_KEYS = {"system": frozenset({"role", "content", "name"}), "developer": frozenset({"role", "content", "name"}),
             "user": frozenset({"role", "content", "name"}), "function": frozenset({"role", "content", "name"}),
             "tool": frozenset({"role", "content", "tool_call_id", "name"}),  # name: [OC-REC]
             "assistant": frozenset({"role", "content", "name", "tool_calls", "function_call", "refusal", "audio"})
             | {"reasoning", "reasoning_details"}  # [ORT-DOC]: what OpenRouter's clients send back
             | {"annotations", "reasoning_content"}}  # [OC-REC]: what the response carried, sent back


def _chat_messages(value: Any) -> Optional[List[Any]]:
    """Accept a messages list or a request body holding one."""
    if isinstance(value, dict):
        value = value.get("messages")
    return value if isinstance(value, list) else None


def _chat_message_problems(i: int, msg: Any) -> List[str]:
    """Shape rules of one chat message [OC-SDK]."""
    where = f"messages[{i}]"
    if not isinstance(msg, dict):
        return [f"{where}: not an object"]
    role = msg.get("role")
    if role not in CHAT_ROLES:
        return [f"{where}: unknown role {role!r}"]
    out = []
    extra = sorted(set(msg) - CHAT_KEYS[role])
    if extra:
        out.append(f"{where}: keys {extra} are not {role} message fields")
    content = msg.get("content")
    if role == "assistant":
        audio = msg.get("audio")  # [OC-AUDIO]
        if audio is not None and not (isinstance(audio, dict) and isinstance(audio.get("id"), str)):
            out.append(f"{where}: audio must be an object with the id of an earlier audio reply")
        if content is None and not msg.get("tool_calls") and not msg.get("function_call") and not audio:
            out.append(f"{where}: assistant message without content, tool_calls, function_call or audio")
    elif role == "function":
        if not isinstance(msg.get("name"), str):
            out.append(f"{where}: function message without a name")
    elif content is None:
        out.append(f"{where}: {role} message without content")
    if content is not None and not isinstance(content, (str, list)):
        out.append(f"{where}: content must be a string or a list of parts")
    if isinstance(content, list) and role in CHAT_PARTS:
        for j, part in enumerate(content):
            t = part.get("type") if isinstance(part, dict) else None
            if t not in CHAT_PARTS[role]:
                out.append(f"{where}.content[{j}]: part type {t!r} not allowed in a {role} message")
            elif t == "text" and not isinstance(part.get("text"), str):
                out.append(f"{where}.content[{j}]: text part without text")
            elif t == "image_url" and not isinstance((part.get("image_url") or {}).get("url"), str):
                out.append(f"{where}.content[{j}]: image_url part without a url")
    if role == "tool" and not isinstance(msg.get("tool_call_id"), str):
        out.append(f"{where}: tool message without tool_call_id")  # [OC-SDK]
    calls = msg.get("tool_calls")
    if calls is not None:
        if role != "assistant":
            out.append(f"{where}: tool_calls on a {role} message")
        elif not isinstance(calls, list) or not calls:  # [OC-ERR] empty array rejected
            out.append(f"{where}: tool_calls must be a non-empty list")
        else:
            for j, call in enumerate(calls):
                cw = f"{where}.tool_calls[{j}]"
                if not isinstance(call, dict) or not isinstance(call.get("id"), str):
                    out.append(f"{cw}: tool call without an id")
                    continue
                kind = call.get("type")
                if kind == "function":
                    fn = call.get("function")
                    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) \
                            or not isinstance(fn.get("arguments"), str):
                        out.append(f"{cw}: function call needs function.name and function.arguments (a string)")
                elif kind == "custom":
                    custom = call.get("custom")
                    if not isinstance(custom, dict) or not isinstance(custom.get("name"), str) \
                            or not isinstance(custom.get("input"), str):
                        out.append(f"{cw}: custom call needs custom.name and custom.input (a string)")
                else:
                    out.append(f"{cw}: tool call type {kind!r} is not function or custom")
    return out


def problems_chat(messages: Any) -> List[str]:
    """Return the rule breaks in Chat Completions messages (a list, or a body with `messages`)."""
    msgs = _chat_messages(messages)
    if msgs is None:
        return ["messages: not a list"]
    out: List[str] = []
    for i, msg in enumerate(msgs):
        out.extend(_chat_message_problems(i, msg))
    i = 0
    while i < len(msgs):
        msg = msgs[i]
        role = msg.get("role") if isinstance(msg, dict) else None
        if role == "tool":  # a tool message with no assistant tool_calls right before its run
            out.append(f"messages[{i}]: tool message is not a response to a preceding message with tool_calls")  # [OC-ERR]
            i += 1
            continue
        calls = msg.get("tool_calls") if role == "assistant" else None
        if not calls or not isinstance(calls, list):
            i += 1
            continue
        ids = [c.get("id") for c in calls if isinstance(c, dict)]
        dupes = sorted({x for x in ids if ids.count(x) > 1 and x is not None})
        if dupes:
            out.append(f"messages[{i}]: tool_calls repeat ids {dupes}")
        j = i + 1
        answered: Dict[Any, int] = {}
        while j < len(msgs) and isinstance(msgs[j], dict) and msgs[j].get("role") == "tool":
            tid = msgs[j].get("tool_call_id")
            if tid not in ids:  # [OC-ERR] must answer one of the calls right before it
                out.append(f"messages[{j}]: tool_call_id {tid!r} answers no tool call of messages[{i}]")
            elif tid in answered:
                out.append(f"messages[{j}]: second response to tool_call_id {tid!r} (first at messages[{answered[tid]}])")
            answered.setdefault(tid, j)
            j += 1
        missing = [x for x in ids if x not in answered]
        if missing:  # [OC-ERR] every id answered by the tool messages that follow
            out.append(f"messages[{i}]: tool_calls not followed by tool messages for {missing}")
        i = j
    return out


# --- OpenAI Responses ---

RESPONSES_ROLES = ("user", "assistant", "system", "developer")  # [OR-SDK] EasyInputMessage
INPUT_PARTS = frozenset({"input_text", "input_image", "input_file"})  # [OR-SDK] ResponseInputContent
OUTPUT_PARTS = frozenset({"output_text", "refusal"})  # [OR-SDK] ResponseOutputMessage, [OR-ERR]
MESSAGE_KEYS = frozenset({"type", "role", "content", "id", "status", "phase"})  # [OR-SDK], [OR-ERR]
# Client-executed calls (answered by the caller) -> the output item types that answer them [OR-SDK].
# Codex answers its local_shell_call with a function_call_output (seen in rollouts), so both count.
CALL_OUTPUTS = {"function_call": ("function_call_output",),
                "custom_tool_call": ("custom_tool_call_output",),
                "computer_call": ("computer_call_output",),
                "local_shell_call": ("local_shell_call_output", "function_call_output"),
                "shell_call": ("shell_call_output",),
                "apply_patch_call": ("apply_patch_call_output",)}
OUTPUT_TYPES = frozenset(t for outs in CALL_OUTPUTS.values() for t in outs)
# Items the model produces, which may follow a reasoning item [OR-SDK], [OR-ERR].
MODEL_ITEMS = frozenset(CALL_OUTPUTS) | frozenset({
    "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
    "mcp_call", "mcp_list_tools", "mcp_approval_request", "tool_search_call"})


def _responses_items(value: Any) -> Optional[List[Any]]:
    """Accept an input list or a request body holding one (a string input has no items)."""
    if isinstance(value, dict):
        value = value.get("input")
        if isinstance(value, str):
            return []
    return value if isinstance(value, list) else None


def _item_kind(item: Any) -> Optional[str]:
    """Return 'message' for a message (type optional when a role is given) or the item type."""
    if not isinstance(item, dict):
        return None
    if item.get("type") in (None, "message") and "role" in item:
        return "message"
    return item.get("type") if isinstance(item.get("type"), str) else None


def _call_key(item: Dict[str, Any]) -> Optional[str]:
    """The id an output item answers: call_id, or `id` for local_shell_call_output [OR-SDK]."""
    if item.get("type") == "local_shell_call_output" and "call_id" not in item:
        return item.get("id")
    return item.get("call_id")


def _responses_message_problems(k: int, item: Dict[str, Any]) -> List[str]:
    where = f"input[{k}]"
    role = item.get("role")
    if role not in RESPONSES_ROLES:
        return [f"{where}: message role {role!r} is not user, assistant, system or developer"]
    extra = sorted(set(item) - MESSAGE_KEYS)
    if extra:  # [OR-ERR] unknown parameter
        return [f"{where}: keys {extra} are not message item fields"]
    content = item.get("content")
    if isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [f"{where}: message content must be a string or a list of parts"]
    allowed = OUTPUT_PARTS if role == "assistant" else INPUT_PARTS
    out = []
    for j, part in enumerate(content):
        t = part.get("type") if isinstance(part, dict) else None
        if t not in allowed:
            out.append(f"{where}.content[{j}]: part type {t!r} not allowed in a {role} message "
                       f"(allowed: {sorted(allowed)})")
        elif t in ("input_text", "output_text") and not isinstance(part.get("text"), str):
            out.append(f"{where}.content[{j}]: {t} part without text")
    return out


def problems_responses(items: Any) -> List[str]:
    """Return the rule breaks in a Responses `input` (a list, or a body with `input`)."""
    seq = _responses_items(items)
    if seq is None:
        return ["input: not a list"]
    out: List[str] = []
    calls: Dict[str, Tuple[int, str]] = {}
    answered: Dict[str, int] = {}
    approvals: set = set()
    stored = (isinstance(items, dict) and any(items.get(k) for k in ("previous_response_id", "conversation"))) \
        or any(isinstance(i, dict) and i.get("type") == "item_reference" for i in seq)  # [OR-PREV]
    for k, item in enumerate(seq):
        kind = _item_kind(item)
        where = f"input[{k}]"
        if kind is None:
            out.append(f"{where}: item with neither a role nor a type")
            continue
        if kind == "message":
            out.extend(_responses_message_problems(k, item))
        elif kind in CALL_OUTPUTS:
            cid = item.get("call_id")
            if not isinstance(cid, str):
                out.append(f"{where}: {kind} without call_id")
            elif cid in calls:
                out.append(f"{where}: {kind} repeats call_id {cid} of input[{calls[cid][0]}]")
            else:
                calls[cid] = (k, kind)
            if kind == "function_call" and not isinstance(item.get("arguments"), str):
                out.append(f"{where}: function_call arguments must be a string")
        elif kind in OUTPUT_TYPES:
            cid = _call_key(item)
            call = calls.get(cid) if isinstance(cid, str) else None
            if call is None and not stored:  # [OR-ERR] no tool call found for this output (earlier in the list)
                out.append(f"{where}: {kind} {cid!r} has no earlier call with that call_id")
            elif call is None:
                pass  # [OR-PREV] it answers a call of the stored response
            elif kind not in CALL_OUTPUTS[call[1]]:
                out.append(f"{where}: {kind} answers a {call[1]} (input[{call[0]}])")
            if cid in answered:
                out.append(f"{where}: second output for call_id {cid} (first at input[{answered[cid]}])")
            elif isinstance(cid, str):
                answered[cid] = k
            if "output" not in item:
                out.append(f"{where}: {kind} without output")
        elif kind == "reasoning":
            if not isinstance(item.get("summary"), list):
                out.append(f"{where}: reasoning item without a summary list")  # [OR-SDK]
            # [OR-ERR] followed by the item it produced; a run of reasoning items is judged by
            # what ends the run (recorded real inputs show reasoning -> call -> reasoning -> message).
            m = k + 1
            while m < len(seq) and _item_kind(seq[m]) == "reasoning":
                m += 1
            nxt = seq[m] if m < len(seq) else None
            nkind = _item_kind(nxt)
            produced = nkind in MODEL_ITEMS or (nkind == "message" and nxt.get("role") == "assistant")
            if not produced:
                what = "the end of the input" if nxt is None else f"a {nkind or 'malformed'} item" + (
                    f" ({nxt.get('role')})" if nkind == "message" else "")
                out.append(f"{where}: reasoning item without its required following item (followed by {what})")
        elif kind == "mcp_approval_request":
            approvals.add(item.get("id"))
        elif kind == "mcp_approval_response" and item.get("approval_request_id") not in approvals and not stored:
            # [OR-SDK] it answers the approval request whose id it names
            out.append(f"{where}: mcp_approval_response answers no earlier mcp_approval_request "
                       f"({item.get('approval_request_id')!r})")
        elif kind == "item_reference" and not isinstance(item.get("id"), str):
            out.append(f"{where}: item_reference without id")
    for cid, (k, kind) in calls.items():
        if cid not in answered:  # [OR-ERR] no tool output found for the call
            out.append(f"input[{k}]: {kind} {cid} has no output item")
    return out


# --- Gemini generateContent ---

GEMINI_ROLES = ("user", "model")  # [GM-REF]
GEMINI_PART_DATA = ("text", "inlineData", "fileData", "functionCall", "functionResponse",
                    "executableCode", "codeExecutionResult")  # [GM-REF] the one datum of a Part


def _gemini_part_problems(where: str, role: str, part: Any) -> List[str]:
    """Return the rule breaks of one Part of a Content of ``role``."""
    if not isinstance(part, dict):
        return [f"{where}: a part must be an object"]
    data = [key for key in GEMINI_PART_DATA if key in part]
    if len(data) != 1:  # [GM-REF]
        return [f"{where}: a part holds exactly one datum (found {data or 'none'})"]
    key = data[0]
    if key == "text" and not (isinstance(part["text"], str) and part["text"]):  # [GM-ERR] empty text
        return [f"{where}: empty text parameter"]
    if key in ("functionCall", "functionResponse"):
        value = part[key]
        if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
            return [f"{where}: {key} needs a name"]  # [GM-REF]
        wanted = "model" if key == "functionCall" else "user"
        if role != wanted:  # [GM-FC] calls come from the model, responses go back as the user
            return [f"{where}: {key} in a {role} turn"]
        if key == "functionCall" and not isinstance(value.get("args", {}), dict):
            return [f"{where}: functionCall args must be an object"]
    return []


def _gemini_pairs(parts: List[Any], key: str) -> List[Tuple[Any, str]]:
    """Return (id, name) of the function calls or responses among a turn's parts."""
    found = []
    for part in parts:
        value = part.get(key) if isinstance(part, dict) else None
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            found.append((value.get("id"), value["name"]))
    return found


def problems_gemini(body: Any) -> List[str]:
    """Return the rule breaks in a Gemini generateContent request body."""
    if not isinstance(body, dict) or not isinstance(body.get("contents"), list):
        return ["contents: not a list"]
    contents = body["contents"]
    out: List[str] = []
    if not contents:
        out.append("contents: empty")  # [GM-ERR]
    system = body.get("systemInstruction", body.get("system_instruction"))
    if system is not None:
        parts = system.get("parts") if isinstance(system, dict) else None
        if not isinstance(parts, list) or not parts:
            out.append("systemInstruction: parts must be a non-empty list")
        else:
            for j, part in enumerate(parts):
                if not (isinstance(part, dict) and isinstance(part.get("text"), str) and part["text"]):
                    out.append(f"systemInstruction.parts[{j}]: must be a non-empty text part")  # [GM-REF]
    for i, turn in enumerate(contents):
        role = turn.get("role") if isinstance(turn, dict) else None
        if role not in GEMINI_ROLES:
            out.append(f"contents[{i}]: role must be user or model (got {role!r})")  # [GM-REF]
            continue
        parts = turn.get("parts")
        if not isinstance(parts, list) or not parts:
            out.append(f"contents[{i}]: parts must not be empty")  # [GM-ERR]
            continue
        for j, part in enumerate(parts):
            out.extend(_gemini_part_problems(f"contents[{i}].parts[{j}]", role, part))
    for i, turn in enumerate(contents):
        if not isinstance(turn, dict) or not isinstance(turn.get("parts"), list):
            continue
        responses = _gemini_pairs(turn["parts"], "functionResponse")
        before = contents[i - 1] if i else None
        calls = _gemini_pairs(before["parts"], "functionCall") \
            if isinstance(before, dict) and before.get("role") == "model" and isinstance(before.get("parts"), list) else []
        if responses and not calls:  # [GM-ERR] the response turn comes right after the call turn
            out.append(f"contents[{i}]: function response turn does not come right after a function call turn")
            continue
        if calls and len(responses) != len(calls):  # [GM-ERR] one response part per call part
            out.append(f"contents[{i}]: {len(responses)} function response parts for the {len(calls)} "
                       f"function call parts of contents[{i - 1}]")
        if calls and sorted(map(repr, responses)) != sorted(map(repr, calls)):  # [GM-FC] ids and names match
            out.append(f"contents[{i}]: function responses {responses} do not answer the calls {calls}")
    # A model turn of calls that ends the body awaits its results [GM-FC]: the history's open end.
    return out
