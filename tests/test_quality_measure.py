"""The coding-session measure of scripts/benchmark-quality.py, on small sessions built here."""

import importlib.util
import json

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def bq():
    spec = importlib.util.spec_from_file_location("benchmark_quality", ROOT / "scripts" / "benchmark-quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    # 40 tokens for the blocks, and room for the line of the range page that holds the rest
    budget = 40 + LINE
    kept, over = one_pass(bq, blocks, budget, [], tmp_path)
    assert not over and kept and kept != everything
    assert sum(bq.block_cost(blocks[i]["text"]) for i in kept) <= 40
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
    with pytest.raises(SystemExit) as exc:
        bq.main(["--coding", str(folder), str(folder)])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        bq.main(["--coding", str(folder), "--variant", "pager=--alpha 1"])  # a taken name
