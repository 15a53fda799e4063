"""The coding-session measure of scripts/benchmark-quality.py, on small sessions built here."""

import json

import pytest

from conftest import ROOT, load_script


@pytest.fixture(scope="module")
def bq():
    return load_script("benchmark-quality")


def session(*pairs):
    """Return pager blocks for (role, text) pairs, one turn each."""
    return [{"id": f"b{i}", "turn": i + 1, "role": role, "text": text, "tokens": None, "pinned": False,
             "protected": "system" if role == "system" else None, "unit": None, "stub": False}
            for i, (role, text) in enumerate(pairs)]


def _history_file(bq, blocks, folder):
    """Write blocks as the pager's own history JSON in folder; return the path."""
    path = folder / "history.json"
    path.write_text(json.dumps(bq.pager_history(blocks)))
    return path


FILLER = "looks fine so far"  # no distinctive token: short words only


# Room for a range page's line here (its recall command names a contract under /tmp)
LINE = 50


def coding_session():
    """A session whose step at block 22 names tokens held by 1, 3 and 4 earlier blocks.

    parse_total: block 5 only; shared_helper: blocks 6-9 (four); three_way: blocks 11-13
    (three); customer_ledger: block 10 and the last user message (block 21); future_name
    appears only after the cut.
    """
    pairs = [("user", "fix the bug")]
    for i in range(1, 21):
        pairs.append(("assistant" if i % 2 else "tool", FILLER))
    pairs[5] = ("tool", "def parse_total(lines): return sum(lines)")
    for i in (6, 7, 8, 9):
        pairs[i] = (pairs[i][0], "calls shared_helper here")
    pairs[10] = ("tool", "customer_ledger rows: 12")
    for i in (11, 12, 13):
        pairs[i] = (pairs[i][0], "three_way merge seen")
    pairs.append(("user", "look at customer_ledger"))                                     # 21
    pairs.append(("assistant", "Edit parse_total, shared_helper, three_way, customer_ledger, future_name"))  # 22
    pairs.append(("tool", FILLER))                                                         # 23
    pairs.append(("assistant", FILLER))                                                    # 24
    return session(*pairs)


def test_distinctive_tokens_keep_code_shapes_and_drop_common_words(bq):
    tokens = bq.distinctive_tokens('Read({"file_path":"src/billing/totals.py"})\\nTypeError at line 20461 '
                                   "and the rounding was wrong")
    assert {"src/billing/totals.py", "totals.py", "totals", "billing", "file_path", "typeerror", "20461",
            "rounding"} <= tokens
    # short words, stop words, short numbers and plain words under PLAIN_WORD_MIN letters are not distinctive
    assert not {"read", "line", "the", "was", "wrong", "20", "src", "ntypeerror"} & tokens


def test_assistant_steps_and_cut_points(bq):
    blocks = coding_session()
    steps = bq.assistant_steps(blocks)
    assert steps[0] == (1, 2) and (22, 23) in steps and steps[-1] == (24, 25)
    cuts = bq.cut_steps(steps)
    assert [steps[k][0] for k in cuts] == [22, 24]  # only steps starting at block 20 or later
    many = [(i, i + 1) for i in range(0, 200, 2)]
    picked = bq.cut_steps(many, max_cuts=5)
    assert len(picked) == 5 and picked == bq.cut_steps(many, max_cuts=5)
    assert many[picked[0]][0] == 20 and picked[-1] == len(many) - 1


def test_needed_blocks_follow_the_definition(bq):
    blocks = coding_session()
    index = bq.TokenIndex(blocks)
    steps = bq.assistant_steps(blocks)
    k = steps.index((22, 23))
    needed = bq.needed_blocks(blocks, index, steps, k)
    # parse_total (one holder) and three_way (three holders) make their blocks needed;
    # shared_helper (four holders) does not; customer_ledger is in the last user message.
    assert needed == {5, 11, 12, 13}


def test_needed_blocks_count_tokens_of_the_next_three_steps_only(bq):
    pairs = [("user", "start")] + [("tool" if i % 2 else "assistant", FILLER) for i in range(1, 22)]
    pairs[3] = ("tool", "first_token here")
    pairs[7] = ("tool", "fourth_token here")
    pairs += [("assistant", FILLER), ("tool", FILLER), ("assistant", FILLER), ("tool", FILLER),
              ("assistant", "first_token"), ("tool", FILLER), ("assistant", "fourth_token")]
    blocks = session(*pairs)
    steps = bq.assistant_steps(blocks)
    k = next(k for k, (first, _) in enumerate(steps) if first == 22)
    assert bq.needed_blocks(blocks, bq.TokenIndex(blocks), steps, k) == {3}


def test_window_respects_the_budget_and_keeps_a_recent_run(bq):
    blocks = session(("system", "x" * 40), *[("tool" if i % 2 else "assistant", "y" * (20 * i)) for i in range(1, 12)])
    costs = [bq.block_cost(b["text"]) for b in blocks]
    for budget in (10, 60, 200, 400, 10_000):
        kept = bq.window_kept(blocks, budget)
        assert sum(costs[i] for i in kept) <= budget
        rest = sorted(kept - {0})
        assert rest == list(range(len(blocks) - len(rest), len(blocks)))  # a run ending at the latest block
        if rest and rest[0] > 1:
            assert sum(costs[i] for i in kept) + costs[rest[0] - 1] > budget  # the next older one would not fit
    assert bq.window_kept(blocks, 200) >= {0}  # the system block stays


def test_masking_replaces_old_tool_results_and_respects_the_budget(bq):
    pairs = []
    for i in range(10):
        pairs += [("assistant", f"call number {i}"), ("tool", "output line\n" * 40)]
    blocks = session(*pairs)
    tools = [i for i, b in enumerate(blocks) if b["role"] == "tool"]
    everything = bq.masking_kept(blocks, 100_000)
    assert everything == set(range(len(blocks))) - set(tools[:-bq.MASK_KEEP_OBSERVATIONS])
    placeholder = bq.mask_placeholder(blocks[tools[0]]["text"])
    assert placeholder == "[old tool output: 41 lines omitted]"
    for budget in (50, 300, 700, 1500):
        kept = bq.masking_kept(blocks, budget)
        masked = set(tools[:-bq.MASK_KEEP_OBSERVATIONS])
        assert not kept & masked
        sent = [i for i in range(len(blocks)) if i in kept or (i in masked and i > min(kept, default=len(blocks)))]
        cost = sum(bq.block_cost(placeholder if i in masked else blocks[i]["text"]) for i in sent)
        assert cost <= budget
    # at 700 tokens the window holds the last five calls and results; masking adds five older calls
    assert len(bq.window_kept(blocks, 700)) == 10 and len(bq.masking_kept(blocks, 700)) == 15


def test_upper_bound_fits_as_many_needed_blocks_as_the_budget_allows(bq):
    blocks = session(*[("tool", "z" * n) for n in (400, 40, 80, 4000)])
    assert bq.upper_kept(blocks, {0, 1, 2, 3}, 40) == {1, 2}   # 10 + 20 tokens fit 40; 100 does not
    assert bq.upper_kept(blocks, {0, 3}, 99) == set()


def one_pass(bq, blocks, budget, flags, tmp_path):
    """Return (indices retained, over budget) of a single replay pass over ``blocks``."""
    [run] = bq.replay_pager(blocks, [len(blocks)], budget, flags, tmp_path)
    return {i for i, b in enumerate(blocks) if b["id"] in run.retained}, run.over


def test_pager_policy_reads_retain_records_and_stays_in_budget(bq, tmp_path):
    blocks = coding_session()[:22]
    everything, over = one_pass(bq, blocks, 100_000, [], tmp_path)
    assert everything == set(range(len(blocks))) and not over
    # 40 tokens and the room of one range page's line: blocks that cost no more verbatim than that
    # line take its room (the range stays only where the blocks cannot fit without it)
    budget = 40 + LINE
    kept, over = one_pass(bq, blocks, budget, [], tmp_path)
    assert not over and kept and kept != everything
    assert 40 < sum(bq.block_cost(blocks[i]["text"]) for i in kept) <= budget
    assert 21 in kept  # the current turn (the last user message) always stays
    # extra flags reach the pass: keeping the last 22 blocks protects them all, over the budget
    assert one_pass(bq, blocks, 40, ["--keep-recent", "22"], tmp_path) == (everything, True)


def test_pager_policy_does_not_count_a_paged_block_as_kept(bq, tmp_path):
    blocks = coding_session()[:22]
    blocks[10] = dict(blocks[10], text="customer_ledger rows:\n" + "row data\n" * 200)  # 456 tokens
    # 300 tokens: the rest fits verbatim, block 10 only as a stub (--evict-cut 0: nothing is evicted)
    summary, actions = bq.run_pager(_history_file(bq, blocks, tmp_path), tmp_path / "c.limn", 300,
                                    ["--evict-cut", "0"])
    assert actions["b10"] == "page" and summary["page"] == 1
    kept, over = one_pass(bq, blocks, 300, ["--evict-cut", "0"], tmp_path)
    assert kept == set(range(22)) - {10} and not over


def test_the_pager_policy_is_a_replay_with_sticky_directives(bq, tmp_path):
    blocks = coding_session()
    cuts = [first for first, _ in bq.assistant_steps(blocks) if first > 0]
    sticky = bq.replay_pager(blocks, cuts, 60 + LINE, [], tmp_path)  # and room for a range page's line
    refit = bq.replay_pager(blocks, cuts, 60 + LINE, ["--target", "none"], tmp_path)
    assert len(sticky) == len(refit) == len(cuts) and not any(p.over for p in sticky + refit)
    # with the watermarks (the default) some pass keeps the previous output as its prefix and
    # only adds the new blocks; the refit passes re-decide everything
    grew = [bq.prefix_kept(a.emitted, b.emitted, {x["id"] for x in a.history}) for a, b in zip(sticky, sticky[1:])]
    assert any(grew)
    assert bq.cache_figures([(p.history, p.emitted) for p in sticky], 60 + LINE)["prefix_kept"] \
        >= bq.cache_figures([(p.history, p.emitted) for p in refit], 60 + LINE)["prefix_kept"]


def test_a_compacted_session_is_measured_as_the_contexts_its_agent_had(bq):
    path = ROOT / "tests" / "fixtures" / "transcripts" / "claude_code_session.jsonl"
    contexts = bq.read_session(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(contexts) == 1 + sum(bq._is_compaction(line) for line in lines) == 2
    (first, before), (second, after) = contexts
    assert (first, second) == ("#1", "#2")
    # before the boundary: the session as it stood (nothing archived); after it: the live part only
    assert before and all(b["protected"] != "archived" for b in before + after)
    assert not {b["id"] for b in before} & {b["id"] for b in after}
    assert after[0]["kind"] == "summary"


def test_a_range_page_line_sent_again_keeps_the_prefix(bq):
    # A range page's line is a block of the emitted request but no block of the history (its id
    # is r-...): sent again byte for byte it is part of the kept prefix; rewritten or gone it is not.
    line = {"id": "r-0123456789ab", "role": "user", "text": "[paged r-0123456789ab | turns 1-4 | topics: a.py]"}
    a, b, c = ({"id": n, "role": "tool", "text": n * 8} for n in "abc")
    assert bq.prefix_kept([line, a, b], [line, a, b, c], {"a", "b", "x"})
    assert not bq.prefix_kept([line, a, b], [dict(line, text=line["text"] + " b.py"), a, b, c], {"a", "b", "x"})
    assert not bq.prefix_kept([line, a, b], [a, b, c], {"a", "b", "x"})
    figures = bq.cache_figures([([a, b], [line, a, b]), ([a, b, c], [line, a, b, c])], budget=5)
    assert figures["prefix_kept"] == 1.0


def test_common_prefix_and_cache_figures(bq):
    a, b, c, d = ({"id": n, "role": "tool", "text": n * 8} for n in "abcd")
    changed_a = dict(a, text="[stub a]")  # same size, other bytes
    assert bq.common_prefix([a, b], [a, b, c]) == 2 and bq.common_prefix([a, b], [changed_a, b]) == 0
    assert bq.prefix_kept([a, b], [a, b, c], {"a", "b"})
    assert not bq.prefix_kept([a, b], [a, c], {"a", "b"})            # b dropped
    assert not bq.prefix_kept([a, b], [changed_a, b, c], {"a", "b"})  # a rewritten
    passes = [([a, b], [a, b]), ([a, b, c], [a, b, c]), ([a, b, c, d], [changed_a, c, d])]
    figures = bq.cache_figures(passes, budget=5)
    assert figures["prefix_kept"] == 0.5 and figures["passes"] == 3
    # 2 + 2 sent whole, then c alone after the prefix, then all three blocks of the last pass
    assert figures["uncached_tokens"] == 4 + 2 + 6 and figures["new_tokens"] == 4 + 2 + 2
    assert figures["sent_tokens"] == 4 + 6 + 6
    assert figures["pressured_passes"] == 2 and figures["prefix_kept_pressured"] == 0.5


def test_cache_replay_of_window_and_pager(bq, tmp_path):
    blocks = coding_session()
    roomy = bq.measure_cache(blocks, budget=100_000, workdir=tmp_path)
    assert roomy["window"]["prefix_kept"] == 1.0 and roomy["pager"]["prefix_kept"] == 1.0
    assert roomy["pager"]["uncached_tokens"] == roomy["pager"]["new_tokens"]
    tight = bq.measure_cache(blocks, budget=30, workdir=tmp_path)
    assert tight["window"]["prefix_kept"] < 1.0
    assert tight["window"]["uncached_tokens"] > tight["window"]["new_tokens"]


def test_coding_cli_reads_a_folder_and_skips_short_files(bq, tmp_path, capsys):
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "long.json").write_text(json.dumps({"blocks": coding_session()}))
    (folder / "short.json").write_text(json.dumps({"blocks": coding_session()[:5]}))
    (folder / "bad.json").write_text("{not json")
    (folder / "empty.traj").write_text("[]")
    out = tmp_path / "coding.json"
    assert bq.main(["--coding", str(folder), "--json", str(out), "--variant", "plain=--similarity plain"]) == 0
    printed = capsys.readouterr().out
    assert "skipped short.json: 5 blocks" in printed and "skipped bad.json: not read" in printed
    assert "skipped empty.traj: not read: a .traj file needs a history list" in printed
    figures = json.loads(out.read_text())
    assert figures["policies"] == ["window", "masking", "pager", "refit", "plain", "upper"]
    assert figures["cuts"] == 1 and figures["needed"] == 4
    assert figures["recall"]["upper"]["16000"] == 1.0 and figures["recall"]["window"]["16000"] == 1.0
    for b in ("4000", "8000", "16000"):  # verbatim is reachable and findable; the window stores nothing
        assert figures["recall"]["pager"][b] <= figures["findable"]["pager"][b] <= figures["reachable"]["pager"][b]
        assert figures["recall"]["window"][b] == figures["findable"]["window"][b] == figures["reachable"]["window"][b]
    assert list(figures["kinds"]) == ["other"] and figures["kinds"]["other"]["needed"] == 4
    assert "by session kind" in printed and "issue 31 targets" in printed and "all at 8000: recall >= window" in printed
    assert figures["cache"] and "Cache stability at" in printed
    quick = tmp_path / "quick.json"
    assert bq.main(["--coding", str(folder), "--json", str(quick), "--no-cache"]) == 0
    printed = capsys.readouterr().out
    assert "Cache stability: not measured (--no-cache)" in printed and "Cache stability at" not in printed
    fast = json.loads(quick.read_text())
    assert fast["cache"] == {} and fast["recall"]["pager"] == figures["recall"]["pager"]  # the recall is the same
    with pytest.raises(SystemExit) as exc:
        bq.main(["--coding", str(folder), str(folder)])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        bq.main(["--coding", str(folder), "--variant", "pager=--alpha 1"])  # a taken name


def test_coding_budgets_and_no_refit_narrow_the_run_to_what_is_asked(bq, tmp_path, capsys):
    """--budgets measures only the budgets named; --no-refit leaves the refit policy out (CI's sample)."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "long.json").write_text(json.dumps({"blocks": coding_session()}))
    whole, narrow = tmp_path / "whole.json", tmp_path / "narrow.json"
    assert bq.main(["--coding", str(folder), "--json", str(whole), "--no-cache"]) == 0
    capsys.readouterr()
    assert bq.main(["--coding", str(folder), "--json", str(narrow), "--no-cache", "--budgets", "8000",
                    "--no-refit"]) == 0
    printed = capsys.readouterr().out
    full, sample = json.loads(whole.read_text()), json.loads(narrow.read_text())
    assert sample["policies"] == ["window", "masking", "pager", "upper"] and "refit" in full["policies"]
    assert sample["budgets"] == [8000] and list(sample["recall"]["pager"]) == ["8000"]
    assert sample["recall"]["pager"]["8000"] == full["recall"]["pager"]["8000"]  # the same passes at 8000
    assert "all at 8000: recall >= window" in printed and "all at 4000" not in printed
    sparse = tmp_path / "sparse.json"
    assert bq.main(["--coding", str(folder), "--json", str(sparse), "--no-cache", "--budgets", "8000",
                    "--no-refit", "--every", "2"]) == 0
    assert "the pager run before 1 assistant step in 2" in capsys.readouterr().out
    steps = bq.assistant_steps(coding_session())
    assert json.loads(sparse.read_text())["cuts"] <= len(bq.cut_steps(steps, 0, 2)) <= (len(steps) + 1) // 2
    assert all(k % 2 == 0 for k in bq.cut_steps(steps, 0, 2)) and bq.cut_steps(steps, 0, 1) == bq.cut_steps(steps)
    with pytest.raises(SystemExit) as exc:
        bq.main(["--coding", str(folder), "--every", "0"])
    assert exc.value.code == 2
    for bad in ("8000,4000", "0", "x", "8000,8000"):
        with pytest.raises(SystemExit) as exc:
            bq.main(["--coding", str(folder), "--budgets", bad])
        assert exc.value.code == 2


# --- reachable and findable (issue 31 item 5) ---

def _paged_ledger_pass(bq, tmp_path):
    """One pass over a session whose block 10 (customer_ledger, 456 tokens) is paged at 300 tokens.

    Returns (history, emitted blocks, contract, retained ids).
    """
    blocks = coding_session()[:22]
    blocks[10] = dict(blocks[10], text="customer_ledger rows:\n" + "row data\n" * 200)
    contract, out = tmp_path / "c.limn", tmp_path / "emitted.json"
    _, actions = bq.run_pager(_history_file(bq, blocks, tmp_path), contract, 300, ["--evict-cut", "0"], emit=out)
    assert actions["b10"] == "page"
    retained = frozenset(b for b, a in actions.items() if a == "retain")
    return blocks, json.loads(out.read_text())["blocks"], contract, retained


def test_a_paged_block_is_reachable_not_verbatim_and_findable_by_its_stub(bq, tmp_path):
    blocks, emitted, contract, retained = _paged_ledger_pass(bq, tmp_path)
    stub = next(b["text"] for b in emitted if b["id"] == "b10")
    assert stub.startswith("[paged b10") and "customer_ledger" in stub
    wanted = {10: frozenset({"customer_ledger"}), 5: frozenset({"parse_total"})}
    reachable, findable = bq.paged_reach(blocks, emitted, contract, wanted, retained)
    assert "b10" not in retained and "b5" in retained
    assert reachable == {"b10", "b5"} and findable == {"b10", "b5"}
    # the page holds the text, but its stub does not name what the next steps use
    reachable, findable = bq.paged_reach(blocks, emitted, contract, {10: frozenset({"invoice_total"})}, retained)
    assert reachable == {"b10"} and findable == set()
    # a block neither kept nor stored (as if evicted) is not reachable
    assert bq.paged_reach(blocks, emitted, contract, {5: frozenset({"parse_total"})}, frozenset()) == (set(), set())


def test_findable_through_an_index_line_and_never_through_the_recall_command(bq, tmp_path):
    blocks, emitted, contract, retained = _paged_ledger_pass(bq, tmp_path)
    rest = [b for b in emitted if b["id"] != "b10"]
    wanted = {10: frozenset({"customer_ledger"})}
    index = {"id": "pager-index", "turn": 0, "role": "system",
             "text": "Paged blocks: 1 (recall one with: python3 scripts/pager.py recall ID --contract C)\n"
                     "b10 | turn 11 | 456 tokens | customer_ledger rows: row data"}
    assert bq.paged_reach(blocks, [index] + rest, contract, wanted, retained) == ({"b10"}, {"b10"})
    silent = dict(index, text="b10 | turn 11 | 456 tokens | rows of data")
    assert bq.paged_reach(blocks, [silent] + rest, contract, wanted, retained) == ({"b10"}, set())
    # the recall command on a stub line is the engine's, on every line: its words name no page
    hinted = dict(index, text="b10 | rows (recall: python3 scripts/pager.py recall b10 --contract /x/customer_ledger.limn)")
    assert "customer_ledger" not in bq.line_names(hinted["text"])
    assert bq.paged_reach(blocks, [hinted] + rest, contract, wanted, retained) == ({"b10"}, set())


def test_a_block_inside_a_range_page_is_reached_through_the_range_line(bq, tmp_path, monkeypatch):
    blocks, emitted, contract, retained = _paged_ledger_pass(bq, tmp_path)
    rest = [b for b in emitted if b["id"] != "b10"]
    line = {"id": "pager-index", "turn": 0, "role": "system",
            "text": "r-0123456789ab | turns 4-11 | 7 blocks | 500 tokens | customer_ledger, parse_total"}
    wanted = {10: frozenset({"customer_ledger"}), 5: frozenset({"parse_total"})}
    # today's engine has no range r-0123456789ab: its recall refuses, so the range holds nothing
    assert bq.recall_range(contract, "r-0123456789ab", tmp_path) == []
    assert bq.paged_reach(blocks, [line] + rest, contract, wanted, frozenset()) == ({"b10"}, set())
    # the budget stream's PageStore.range_members: the range's line stands for its blocks
    members = {"r-0123456789ab": ["b5", "b10"]}
    monkeypatch.setattr(bq.pager.PageStore, "range_members", lambda self, rid: members.get(rid, []), raising=False)
    assert bq.paged_reach(blocks, [line] + rest, contract, wanted, frozenset()) == ({"b5", "b10"}, {"b5", "b10"})
    other = dict(line, text="r-0123456789ab | turns 4-11 | 7 blocks | 500 tokens | ledger rows")
    assert bq.paged_reach(blocks, [other] + rest, contract, wanted, frozenset()) == ({"b5", "b10"}, set())


def test_needed_names_give_each_needed_block_the_names_that_make_it_needed(bq):
    blocks = coding_session()
    steps = bq.assistant_steps(blocks)
    k = steps.index((22, 23))
    names = bq.needed_names(blocks, bq.TokenIndex(blocks), steps, k)
    assert names == {5: {"parse_total"}, 11: {"three_way"}, 12: {"three_way"}, 13: {"three_way"}}


def test_session_kinds_and_the_targets_of_issue_31(bq, tmp_path):
    fixtures = ROOT / "tests" / "fixtures" / "transcripts"
    assert bq.session_kind(fixtures / "claude_code_session.jsonl") == "Claude Code"
    assert bq.session_kind(fixtures / "codex_rollout.jsonl") == "Codex"
    assert bq.session_kind(tmp_path / "run.traj") == "SWE-agent"
    assert bq.session_kind(fixtures / "pager_history.json") == "other"
    shares = {"recall": {"window": {4000: 0.40, 16000: 0.95}, "pager": {4000: 0.41, 16000: 0.90}},
              "reachable": {"pager": {4000: 1.0, 16000: 0.99}},
              "findable": {"pager": {4000: 0.54, 16000: 0.99}}}
    checks = {(b, what): holds for b, what, _, _, holds in bq.coding_targets(shares, [4000, 16000])}
    assert checks == {(4000, "recall >= window"): True, (4000, "reachable = 1.0"): True,
                      (4000, "findable >= window + 0.15"): False,  # 0.54 < 0.40 + 0.15
                      (16000, "recall >= window"): False, (16000, "reachable = 1.0"): False}
    # a window that keeps everything leaves findable a bound of 1.0, not 1.15
    full = {"recall": {"window": {8000: 1.0}, "pager": {8000: 1.0}}, "reachable": {"pager": {8000: 1.0}},
            "findable": {"pager": {8000: 1.0}}}
    assert all(holds for *_, holds in bq.coding_targets(full, [8000]))


# --- compaction events (issue 32 item 5) ---

def _block(i, role, text, kind=None):
    return {"id": f"x{i}", "turn": i, "role": role, "text": text, "kind": kind}


def test_needed_names_after_a_compaction_are_computed_as_defined(bq):
    before = [_block(0, "user", "start the billing work"),
              _block(1, "tool", "def parse_total(x) in src/billing/totals.py"),
              *[_block(2 + n, "tool", "calls shared_helper") for n in range(4)],   # four holders: not rare
              _block(6, "tool", "customer_ledger rows"),
              _block(7, "assistant", "planning the secret_plan")]
    after = [_block(8, "user", "Summary: parse_total is wrong", kind="summary"),
             _block(9, "assistant", "Edit src/billing/totals.py"),                  # step 1
             _block(10, "tool", "customer_ledger shown again"),
             _block(11, "assistant", "thinking of secret_plan"),                      # step 2: thinking
             _block(12, "assistant", "use customer_ledger, shared_helper, parse_total, brand_new_name")]
    needed = bq.needed_after(before, after, thinking={"thinking of secret_plan"})
    # step 1: the path and its parts ("src" is too short), held by block 1 only; step 2: parse_total
    # (the summary does not count as shown); customer_ledger was shown by a tool result after the
    # boundary, shared_helper has four holders, brand_new_name none, secret_plan only in thinking
    assert needed == ["billing", "src/billing/totals.py", "totals", "totals.py", "parse_total"]
    assert "secret_plan" in bq.needed_after(before, after)  # without the thinking set it would count
    assert bq.needed_after(before, after, steps=1, thinking={"thinking of secret_plan"}) == needed[:4]
    # a file the harness re-attached after the boundary shows its names again
    assert bq.needed_after(before, after, thinking={"thinking of secret_plan"}, shown="re-read parse_total") == needed[:4]
    figures = bq.measure_event(before, after, "parse_total is wrong", "see totals.py",
                               {"p1": {"parse_total", "billing"}}, None, {"thinking of secret_plan"})
    assert figures["found"] == {"summary": ["parse_total"], "injected": ["totals", "totals.py"],
                                "either": ["totals", "totals.py", "parse_total"], "recallable": ["billing", "parse_total"],
                                "search": None}
    assert figures["summary_tokens"] == 5 and figures["injected_tokens"] == 4
    pooled = bq.pool_events([figures, dict(figures, found=dict(figures["found"], search=[]))])
    assert pooled["needed"] == 10 and pooled["shares"]["recallable"] == 0.4 and pooled["shares"]["search"] is None


def test_files_claude_code_reattaches_after_the_boundary_are_read(bq):
    lines = [{"type": "system", "subtype": "compact_boundary"},
             {"type": "user", "message": {"role": "user", "content": "summary"}, "isCompactSummary": True},
             {"type": "attachment", "attachment": {"type": "file", "filename": "/src/ledger.py",
                                                   "content": {"file": {"content": "def post_entry(): ..."}}}},
             {"type": "assistant", "message": {"role": "assistant", "content": "ok"}},
             {"type": "attachment", "attachment": {"type": "queued_command", "prompt": "later_name"}}]
    text = "\n".join(json.dumps(line) for line in lines)
    shown = bq.reattached(text, 0)
    assert "/src/ledger.py" in shown and "def post_entry(): ..." in shown and "later_name" not in shown


def test_compaction_events_of_a_session_are_found_and_split_at_the_boundary(bq):
    path = ROOT / "tests" / "fixtures" / "transcripts" / "claude_code_session.jsonl"
    text = path.read_text(encoding="utf-8")
    [line] = bq.boundary_lines(text)
    before, after, summary = bq.event_sides(text, line)
    assert before and after and summary
    assert after[0]["kind"] == "summary" and after[0]["text"] == summary
    assert all(b.get("protected") != "archived" for b in after)
    assert not {b["id"] for b in after[1:]} & {b["id"] for b in before}


def test_compaction_cli_runs_the_plugin_hooks_on_each_event(bq, tmp_path, capsys):
    folder = tmp_path / "sessions"
    folder.mkdir()
    fixture = ROOT / "tests" / "fixtures" / "transcripts" / "claude_code_session.jsonl"
    (folder / "session.jsonl").write_text(fixture.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "plain.jsonl").write_text('{"type": "note", "text": "no compaction here"}\n', encoding="utf-8")
    out = tmp_path / "compaction.json"
    assert bq.main(["--compaction", str(folder), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    figures = json.loads(out.read_text())
    [event] = figures["events"]
    assert event["file"] == "session.jsonl" and event["kind"] == "Claude Code" and event["event"] == 1
    assert event["pages"] > 0 and 0 < event["injected_estimate"] <= bq.INJECT_TOKENS
    assert set(event["found"]["recallable"]) <= set(event["needed"])
    assert "recallable >= 0.97 on all events" in printed and "injected >= 0.3 on Claude Code events" in printed
    if figures["features"]["search"]:
        assert event["found"]["search"] is not None
    else:
        assert event["found"]["search"] is None and "search: not available" in printed
    with pytest.raises(SystemExit):
        bq.main(["--compaction", str(folder), "--coding", str(folder)])


def _features(bq):
    return bq.engine_features()


def test_search_finds_a_name_in_a_top_hit_once_the_engine_has_search(bq, tmp_path):
    if not _features(bq).search:
        pytest.skip("this engine's pager.py --help lists no search command (branch compaction builds it)")
    blocks, _, contract, _ = _paged_ledger_pass(bq, tmp_path)
    pages = {}
    assert bq.search_finds("customer_ledger", contract, pages)  # b10, read from the store on the way
    assert "customer_ledger" in pages["b10"]
    assert not bq.search_finds("nowhere_to_be_found", contract, pages)


def test_codex_events_use_the_before_compaction_pass_and_the_bounded_index(bq, tmp_path):
    features = _features(bq)
    if not features.before_compaction:
        pytest.skip("this engine's pager.py --help lists no --before-compaction (branch compaction builds it)")
    text = (ROOT / "tests" / "fixtures" / "transcripts" / "codex_rollout.jsonl").read_text(encoding="utf-8")
    [line] = bq.boundary_lines(text)
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text("".join(text.splitlines(keepends=True)[:line]), encoding="utf-8")
    contract, injected = bq.inject_after("Codex", rollout, tmp_path, "s1", "auto", features)
    assert contract.exists() and injected.strip()
    assert bq.pager.estimate_tokens(injected) <= bq.INJECT_TOKENS
    assert bq.store_names(contract)  # every block before the boundary is a page
