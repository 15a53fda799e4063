"""The library: compact() on in-memory messages, the Pager across calls, the recall tool."""

import copy
import json
import os

import pytest

from conftest import ASSET, NOW, SCRIPTS, replay

INTENT = "fix the invoice rounding in billing"


def tool_conversation(rounds=12, pending=False):
    """Return a Chat Completions conversation: rounds of ask, tool call, tool result, answer."""
    msgs = [{"role": "system", "content": "You are a coding agent. Use the tools."}]
    topics = ["invoice rounding", "parser cache", "billing export", "queue retry", "logger format"]
    for i in range(rounds):
        topic = topics[i % len(topics)]
        call = f"call_{i}"
        msgs.append({"role": "user", "content": f"Look at the {topic} module, step {i}."})
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call, "type": "function", "function": {"name": "read_file",
                                                          "arguments": json.dumps({"path": f"src/{i}.py"})}}]})
        body = "\n".join(f"def {topic.split()[0]}_{i}_{j}(x):\n    return round(x, {j})  # {topic}"
                         for j in range(48))
        msgs.append({"role": "tool", "tool_call_id": call, "content": body})
        msgs.append({"role": "assistant", "content": f"The {topic} code at step {i} rounds with round(); "
                                                     f"it looks fine apart from the {topic} edge cases."})
    msgs.append({"role": "user", "content": "Now fix the invoice rounding in billing."})
    if pending:
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_last", "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}]})
    return msgs


def cli_pass(cli, tmp_path, value, *flags, fmt="openai"):
    """Run the CLI on ``value`` written to a file; return (records by block, emitted object, contract)."""
    history = tmp_path / f"history-{fmt}.json"
    history.write_text(json.dumps(value), encoding="utf-8")
    contract = tmp_path / f"cli-{fmt}.limn"
    out = tmp_path / f"out-{fmt}.json"
    result = cli("--history", history, "--contract", contract, "--format", fmt, "--now", NOW,
                 "--emit", out, *flags)
    assert result.code == 0, result.err
    # the blocks' records (a range page's own record, after them: tests/test_ranges.py)
    return {r["block"]: r for r in result.records if r["kind"] != "range"}, json.loads(out.read_text(encoding="utf-8")), str(contract)


def test_compact_makes_the_cli_decisions_and_output_on_an_openai_list(pager, cli, tmp_path):
    msgs = tool_conversation()
    for flags in ((), ("--budget", "900")):
        fresh = tmp_path / ("budget" if flags else "plain")  # a first pass each, as compact() is
        fresh.mkdir()
        records, emitted, contract = cli_pass(cli, fresh, msgs, "--intent", INTENT, *flags)
        budget = int(flags[1]) if flags else None
        result = pager.compact(msgs, budget=budget, intent=INTENT,
                               hint=lambda block, c=contract: pager._recall_hint(block, c, None))
        ours = {d.block: d.to_dict() for d in result.report.decisions}
        assert ours == records
        assert result.messages == emitted
        assert result.report.counts["page"] > 0
        # the score evicts noise; under a budget a history with tool work loses nothing to it (all is paged)
        assert result.report.counts["evict"] == (0 if budget else result.report.counts["evict"]) and \
            (budget or result.report.counts["evict"] > 0)
        if budget:
            assert result.report.tokens_after <= budget < result.report.tokens_before


def test_compact_on_the_pager_format_matches_the_cli(pager, cli, tmp_path):
    history = json.loads(ASSET.read_text(encoding="utf-8"))
    records, emitted, contract = cli_pass(cli, tmp_path, history, "--budget", "300", fmt="pager")
    result = pager.compact(history, budget=300, hint=lambda block: pager._recall_hint(block, contract, None))
    assert {d.block: d.to_dict() for d in result.report.decisions} == records
    assert result.messages == emitted


def test_shapes_and_types_come_back_as_they_went_in(pager):
    anthropic = {"system": "Be brief.", "model": "m", "messages": [
        {"role": "user", "content": "Tell me about the invoice rounding."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {"p": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "round(x, 2)"}]},
        {"role": "assistant", "content": "It rounds to cents."}]}
    body = pager.compact(anthropic).messages
    assert isinstance(body, dict) and body["system"] == "Be brief." and body["model"] == "m"
    bare = pager.compact(anthropic["messages"], format="anthropic").messages
    assert isinstance(bare, list) and bare == body["messages"]
    assert pager.validate("anthropic", {"messages": bare}) == []
    responses = [{"role": "user", "content": "Fix the invoice rounding."},
                 {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "c1", "output": "round(x, 2)"}]
    out = pager.compact(responses)
    assert out.report.format == "responses" and isinstance(out.messages, list)
    assert out.messages == responses
    assert pager.compact({"model": "m", "messages": tool_conversation(2)}).messages["model"] == "m"


def test_nothing_is_written_and_the_input_is_not_changed(pager, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    msgs = tool_conversation()
    before = copy.deepcopy(msgs)
    result = pager.compact(msgs, budget=900, intent=INTENT)
    assert msgs == before
    assert list(tmp_path.iterdir()) == []
    assert result.report.paged


def test_stubs_name_the_recall_tool_and_recall_gives_the_exact_text(pager):
    msgs = tool_conversation()
    result = pager.compact(msgs, budget=900, intent=INTENT)
    # a block with a stub of its own (the others are in a range page's line)
    block = next(d.block for d in result.report.decisions if d.action == "page" and d.reason != pager.RANGED)
    original = next(b["text"] for b in pager.conversation_blocks(pager.load(json.dumps(msgs), "openai"))
                    if b["id"] == block)
    contents = [m["content"] for m in result.messages if isinstance(m["content"], str)]
    contents += [p["text"] for m in result.messages if isinstance(m["content"], list) for p in m["content"]]
    assert any(f'(recall: the recall_pages tool with ids ["{block}"])' in c for c in contents)
    assert result.recall([block]) == {block: original}
    args = json.dumps({"ids": [block]})
    assert pager.run_recall_tool(result, {"id": "c9", "type": "function",
                                          "function": {"name": "recall_pages", "arguments": args}}) == \
        {"role": "tool", "tool_call_id": "c9", "content": original}
    assert result.run_tool_call({"type": "function_call", "call_id": "c9", "name": "recall_pages",
                                 "arguments": args}) == \
        {"type": "function_call_output", "call_id": "c9", "output": original}
    assert result.run_tool_call({"type": "tool_use", "id": "t9", "name": "recall_pages",
                                 "input": {"ids": [block]}}) == \
        {"type": "tool_result", "tool_use_id": "t9", "content": original}


def test_the_page_index_names_the_recall_tool(pager):
    agent = pager.Pager(900, intent=INTENT)
    report = agent.compact(tool_conversation()).report
    # the blocks with stubs of their own, then the range pages, each listing its blocks by one line
    listed = [d.block for d in report.decisions if d.action == "page" and d.reason != pager.RANGED]
    listed += [b for b in report.paged if b.startswith(pager.RANGE_PREFIX)]
    lines = agent.index().splitlines()
    assert lines[0] == f'Paged blocks: {len(listed)} (recall one with: the recall_pages tool with ids ["ID"])'
    assert [line.split(" | ")[0] for line in lines[1:]] == listed


def test_a_bad_recall_call_is_an_error_result_never_an_exception(pager):
    result = pager.compact(tool_conversation(), intent=INTENT)  # no budget: the score evicts, so one is evicted
    evicted = next(d.block for d in result.report.decisions if d.action == "evict")
    retained = next(d.block for d in result.report.decisions if d.action == "retain")
    cases = [({"ids": ["no-such-block"]}, "was never seen"), ({"ids": [evicted]}, "is evicted"),
             ({"ids": [retained]}, "is retained"), ({"ids": []}, "non-empty list"), ({}, "non-empty list")]
    for arguments, why in cases:
        out = result.run_tool_call({"type": "tool_use", "id": "t1", "name": "recall_pages", "input": arguments})
        assert out["is_error"] is True and why in out["content"], out
        out = result.run_tool_call({"id": "c1", "function": {"name": "recall_pages",
                                                             "arguments": json.dumps(arguments)}})
        assert out["content"].startswith("error: ") and why in out["content"]
    assert result.run_tool_call({"id": "c1", "function": {"name": "recall_pages", "arguments": "{oops"}}
                                )["content"].startswith("error: the arguments are not JSON")
    assert "unknown tool" in result.run_tool_call({"type": "function_call", "call_id": "c", "name": "x"})["output"]
    assert result.run_tool_call("not a call")["content"].startswith("error: ")


def test_tool_definitions_for_the_three_apis(pager):
    chat, responses, anthropic = (pager.recall_tool(api) for api in ("openai", "responses", "anthropic"))
    assert chat["type"] == "function" and chat["function"]["name"] == "recall_pages"
    assert chat["function"]["parameters"]["properties"]["ids"]["type"] == "array"
    assert responses["type"] == "function" and responses["name"] == "recall_pages" and "parameters" in responses
    assert anthropic["name"] == "recall_pages" and anthropic["input_schema"]["required"] == ["ids"]
    # The Responses API checks a function's parameters strictly by default: every field is required,
    # a field the tools may go without takes null, and the definition says strict.
    for tool in (responses, pager._search_tool("responses")):
        params = tool["parameters"]
        assert tool["strict"] is True and params["required"] == list(params["properties"])
        assert params["additionalProperties"] is False
    assert responses["parameters"]["properties"]["max_tokens"]["type"] == ["integer", "null"]
    assert pager._search_tool("responses")["parameters"]["properties"]["limit"]["type"] == ["integer", "null"]
    with pytest.raises(pager.PagerError, match="api must be one of"):
        pager.recall_tool("gemini")


def test_token_counter_replaces_the_estimate(pager):
    msgs = tool_conversation(4)
    words = lambda text: len(text.split())  # noqa: E731
    report = pager.compact(msgs, intent=INTENT, token_counter=words).report
    blocks = pager.conversation_blocks(pager.load(json.dumps(msgs), "openai"))
    # The counter counts the text; a call or result keeps the estimate of the call id it sends.
    expected = [words(b["text"]) + (b["tokens"] - pager.estimate_tokens(b["text"]) if b["tokens"] else 0)
                for b in blocks]
    assert [d.tokens for d in report.decisions] == expected
    assert any(b["tokens"] for b in blocks) and report.tokens_before == sum(expected)
    fitted = pager.compact(msgs, budget=150, intent=INTENT, token_counter=words).report
    assert fitted.tokens_before == report.tokens_before and fitted.tokens_after <= 150
    with pytest.raises(pager.PagerError, match="token_counter must return"):
        pager.compact(msgs, token_counter=lambda text: -1)


def test_the_pager_reuses_unchanged_blocks_and_rescores_changed_ones(pager):
    msgs = tool_conversation(pending=True)
    # No watermarks: every call re-fits the budget, so a cached pass must equal a fresh one.
    agent = pager.Pager(900, intent=INTENT, target=None)
    first = agent.compact(msgs).report
    assert first.cached == 0
    grown = msgs + [{"role": "tool", "tool_call_id": "call_last", "content": "3 passed"}]
    again = agent.compact(grown).report
    assert again.cached == len(first.decisions)  # every earlier block from the cache; the new one scored
    fresh = pager.Pager(900, intent=INTENT, target=None).compact(grown).report
    assert list(again.decisions) == list(fresh.decisions)
    # A block whose text changed under the same id is scored afresh, never served from the cache.
    edited = copy.deepcopy(grown)
    assert "invoice rounding" in edited[3]["content"]
    edited[3]["content"] = "No match here at all."
    third = agent.compact(edited).report
    assert third.cached == len(again.decisions) - 1
    assert list(third.decisions) == list(pager.Pager(900, intent=INTENT).compact(edited).report.decisions)
    before = next(d for d in again.decisions if d.block == "call_0:result")
    after = next(d for d in third.decisions if d.block == "call_0:result")
    assert before.matched and not after.matched and after.tokens < before.tokens


def test_compacted_output_fed_back_keeps_its_stubs_recallable(pager):
    msgs = tool_conversation()
    agent = pager.Pager(900, intent=INTENT)
    first = agent.compact(msgs)
    own = [d.block for d in first.report.decisions if d.action == "page" and d.reason != pager.RANGED]
    ranges = [b for b in first.report.paged if b.startswith(pager.RANGE_PREFIX)]
    originals = first.recall(own)
    blocks_of = {rid: first.recall([rid]) for rid in ranges}  # a range page gives its blocks, in order
    second = agent.compact(first.messages)
    stubs = [d for d in second.report.decisions if d.stub]
    assert sorted(d.block for d in stubs) == sorted(own + ranges)
    text = json.dumps(second.messages)
    for d in stubs:  # each stub is paged again (recallable) or brought back verbatim
        wanted = blocks_of[d.block] if d.block in blocks_of else {d.block: originals[d.block]}
        if d.action == "page":
            assert agent.recall([d.block]) == wanted
        elif d.action == "retain":
            assert all(json.dumps(t)[1:-1] in text for t in wanted.values())


def test_contract_mode_records_the_pass_and_the_recall(pager, tmp_path):
    contract = tmp_path / "session.limn"
    agent = pager.Pager(900, intent=INTENT, contract=str(contract), now=NOW)
    result = agent.compact(tool_conversation())
    assert (tmp_path / "session.pages.sqlite3").exists()
    _, values = replay(contract.read_text(encoding="utf-8"))
    assert sorted(values["paged-blocks"]) == sorted(result.report.paged)
    block = result.report.paged[0]
    out = agent.run_tool_call({"type": "tool_use", "id": "t1", "name": "recall_pages", "input": {"ids": [block]}})
    assert "is_error" not in out and out["content"]
    _, values = replay(contract.read_text(encoding="utf-8"))
    assert block in values["retained-blocks"] and block not in values["paged-blocks"]


def test_store_mode_keeps_pages_in_sqlite_only(pager, tmp_path):
    store = tmp_path / "pages.sqlite3"
    agent = pager.Pager(900, intent=INTENT, store=str(store))
    result = agent.compact(tool_conversation())
    assert sorted(os.listdir(tmp_path)) == ["pages.sqlite3"]
    block = result.report.paged[0]
    fresh = pager.compact(tool_conversation(), budget=900, intent=INTENT)
    assert agent.recall(block) == fresh.recall(block)


def test_bad_input_is_one_clear_error(pager):
    with pytest.raises(pager.PagerError, match="messages must be a message list"):
        pager.compact("hello")
    with pytest.raises(pager.PagerError, match=r"openai messages: messages\[0\].role"):
        pager.compact([{"role": "robot", "content": "x"}], format="openai")
    with pytest.raises(pager.PagerError, match="unknown parameter 'alhpa'"):
        pager.compact([], alhpa=1)
    with pytest.raises(pager.PagerError, match="--budget must be a positive integer"):
        pager.Pager(0)


def test_report_to_dict_is_json(pager):
    report = pager.compact(tool_conversation(), budget=900, intent=INTENT).report
    data = json.loads(json.dumps(report.to_dict()))
    assert data["budget"] == 900 and data["blocks"] == len(data["decisions"])
    assert data["retain"] + data["page"] + data["evict"] == data["blocks"]
    assert data["pressure_after"] == round(report.tokens_after / 900, 4)


def test_recall_command_follows_how_the_pager_was_run(pager):
    assert pager._recall_command("/venv/bin/prosecode-pager") == "prosecode-pager recall"
    # Any other way (a script path, -m, in-process): RECALL_COMMAND, this file's absolute path, which runs
    # from any folder (conftest fixes it for in-process runs; test_first_use runs the real one).
    assert pager.SCRIPT_PATH == str(SCRIPTS / "pager.py") and os.path.isabs(pager.SCRIPT_PATH)
    assert pager._recall_command("scripts/pager.py") == pager.RECALL_COMMAND
    assert pager._recall_command("/site-packages/prosecode_pager/pager.py") == pager.RECALL_COMMAND


def test_library_benchmark_runs_and_prints_its_ratios():
    import subprocess
    import sys
    from conftest import ROOT
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark-library.py"), "--messages", "200",
                           "--budget", "2000", "--repeats", "1"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "200 messages" in proc.stdout and "200 blocks from the cache" in proc.stdout
    # the call after the repeat is timed too, between compactions (the benchmark checks it kept its request)
    assert proc.stdout.count("next (+1 more)") == 2 and proc.stdout.count("the request it sent kept") == 2
    try:
        import langchain_core  # noqa: F401
    except ImportError:
        return
    assert "ratios: repeat/trim " in proc.stdout and ", next/trim " in proc.stdout


@pytest.mark.parametrize("name,fmt", [("openai_parallel.json", "openai"), ("anthropic_thinking.json", "anthropic"),
                                      ("anthropic_alternation.json", "anthropic"),
                                      ("responses_session.json", "responses"), ("pager_history.json", "pager")])
@pytest.mark.parametrize("options", [{}, {"budget": 60}, {"evict_cut": 0.0}, {"budget": 40, "evict_cut": 0.0}])
def test_compact_matches_the_cli_on_every_format_fixture(pager, cli, tmp_path, name, fmt, options):
    from conftest import ROOT
    value = json.loads((ROOT / "tests" / "fixtures" / "transcripts" / name).read_text(encoding="utf-8"))
    flags = [part for key, val in options.items() for part in ("--" + key.replace("_", "-"), val)]
    records, emitted, contract = cli_pass(cli, tmp_path, value, *flags, fmt=fmt)
    # the library reads the last user message alone unless told (work_steps); the CLI's default is 3
    result = pager.compact(value, format=fmt, hint=lambda block: pager._recall_hint(block, contract, None),
                           work_steps=pager.DEFAULT_WORK_STEPS, **options)
    assert {d.block: d.to_dict() for d in result.report.decisions} == records
    assert result.messages == emitted
    if options == {"evict_cut": 0.0}:  # nothing is evicted by score and no budget: the pass pages
        # (a transcript's block its stub would not shorten stays, reason "small")
        assert sum(d.action == "page" or d.reason == pager.SMALL for d in result.report.decisions) > 0


def test_keep_small_false_is_page_small(pager):
    messages = [{"role": "user", "content": "Sort the invoices by date."},
                {"role": "assistant", "content": "Done."},
                {"role": "user", "content": "Now group them by customer."}]
    kept = {d.block: (d.action, d.reason) for d in pager.compact(messages, evict_cut=0.0).report.decisions}
    paged = {d.block: d.action for d in pager.compact(messages, evict_cut=0.0, keep_small=False).report.decisions}
    [short] = [block for block, why in kept.items() if why == ("retain", pager.SMALL)]  # "Done.": 2 tokens
    assert paged[short] == "page"


def test_server_state_keeps_an_output_of_a_stored_call_and_the_intent_carries_over(pager):
    """A Responses conversation the server holds (previous_response_id) sends only new items: an
    output whose call is not among them answers a stored call.  ``server_state=True`` keeps it
    pinned; without it the output is an orphan and repaired away.  A call with no user message
    keeps the intent of the Pager's last call."""
    engine = pager.Pager(200)
    first = engine.compact([{"role": "user", "content": "Fix the invoice rounding in totals.py"}], format="responses")
    assert first.report.intent_source == "last human message"
    items = [{"type": "function_call_output", "call_id": "call_9", "output": "totals.py: rounding fixed " * 40}]
    kept = engine.compact(items, format="responses", server_state=True)
    assert kept.messages == items and kept.report.repairs == []
    assert kept.report.decisions[0].reason == "pinned"  # kept whole, over the budget share too
    assert kept.report.intent_source == "last human message (the last call's)"
    assert "rounding" in kept.report.intent
    alone = pager.Pager(200, intent="rounding").compact(items, format="responses")
    assert alone.report.repairs == ['input[0].call_id "call_9" has no matching earlier call; dropped']
    with pytest.raises(pager.PagerError, match="no intent"):
        pager.Pager(200).compact(items, format="responses", server_state=True)  # nothing to carry over


def test_a_live_mini_swe_agent_message_list_compacts_as_chat_messages(pager):
    """A file holding mini-swe-agent's messages is a saved run (format swe-agent); handed to the
    library live, the same list is the agent's Chat messages: compact reads and returns it as such."""
    msgs = [{"role": "system", "content": "You run one bash command per reply."},
            {"role": "user", "content": "Please solve this issue: export rounds -0.5 up."}]
    for n in range(10):
        msgs += [{"role": "assistant", "content": f"THOUGHT: step {n}.\n```bash\ncat export_{n}.py\n```"},
                 {"role": "user", "content": "<returncode>0</returncode>\n<output>\n"
                  + f"def export_{n}(rows):\n    return round(sum(rows))\n" * 30 + "</output>"}]
    assert pager.detect_format(json.dumps(msgs)) == "swe-agent"
    out, report = pager.compact(copy.deepcopy(msgs), budget=1200)
    assert isinstance(out, list) and out[0] == msgs[0] and out[-1] == msgs[-1]
    # what does not fit is paged (into range pages), never evicted for the budget
    assert report.format == "openai" and report.tokens_after <= 1200 and report.counts["page"] > 0
    assert not any(d.action == "evict" and d.reason.startswith("budget") for d in report.decisions)


def test_a_strict_call_with_null_for_the_fields_it_leaves_out_recalls_and_searches(pager):
    agent = pager.Pager(900, intent=INTENT)
    paged = agent.compact(tool_conversation()).report.paged[0]
    recalled = agent.run_tool_call({"type": "function_call", "call_id": "c1", "name": "recall_pages",
                                    "arguments": json.dumps({"ids": [paged], "max_tokens": None, "from": None})})
    assert recalled == {"type": "function_call_output", "call_id": "c1", "output": agent.recall(paged)[paged]}
    found = agent.run_tool_call({"type": "function_call", "call_id": "c2", "name": "search_pages",
                                 "arguments": json.dumps({"query": "rounding", "limit": None})})
    assert not found["output"].startswith("error") and found["output"].count("\n") < pager.SEARCH_LIMIT
