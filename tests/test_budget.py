"""Issue 5: the token estimate, the weighted similarity, the budget and context pressure."""

import json
import math
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ASSET, NOW, ROOT, load_script, replay


# --- tokens ---

@pytest.mark.parametrize("text, expected", [
    ("", 0),
    ("abcd", 1),
    ("abcde", 2),
    ("The pager keeps what matters.", 8),                      # prose: 29 chars / 4
    ('{"a": [1, 2], "b": {"c": null}}', 10),                   # JSON: 31 chars / 3.4
    ("контекст", 8),                                           # Cyrillic: a token a character
    ("上下文窗口", 5),                                          # CJK: a token a character
    ("café au lait", 3),                                       # Latin with accents: 12 chars / 4
])
def test_estimate_tokens(pager, text, expected):
    assert pager.estimate_tokens(text) == expected


def test_tokens_field_wins_over_the_estimate(pager):
    plan = pager.plan_pass({"intent_ir": ["x"], "blocks": [
        {"id": "a", "turn": 1, "role": "user", "text": "x" * 400, "tokens": 3}]})
    assert plan.decisions[0].tokens == 3 and plan.tokens_before == 3


# --- stems and the matcher ---

@pytest.mark.parametrize("word, expected", [
    ("retained", "retain"), ("retaining", "retain"), ("retains", "retain"), ("retain", "retain"),
    ("families", "famili"), ("family", "famili"), ("stopped", "stop"), ("running", "run"),
    ("class", "class"), ("bus", "bus"), ("agreed", "agreed"), ("api", "api"), ("v2_cache", "v2_cache"),
])
def test_stem(pager, word, expected):
    assert pager._stem(word) == expected


_WORDS = ["retain", "retained", "retaining", "family", "families", "score", "scores", "re-score",
          "underscore", "pager", "paged", "paging", "café", "cafés", "x_retained", "retained2", "studies",
          "famil", "scor", "stud"]  # the last three: a stem's needle as a token of its own (_Needle.whole)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_WORDS + [" ", ", ", ". ", "-", "_", "(", "é"]), max_size=20),
       st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4))
def test_block_hits_equals_tokenizing_and_stemming(parts, keywords):
    import pager
    text = "".join(parts).lower()
    stems = pager._keyword_stems(keywords)
    tokens = pager.tokenize(text)
    expected = {pager._stem(t) for t in tokens}
    # An identifier (a keyword with "_") is met by a token holding its parts as a "_"-separated run.
    for s in stems:
        if "_" in s and any(f"_{s}_" in f"_{t}_" for t in tokens):
            expected.add(s)
    assert pager._block_hits(text, stems) == tuple(s for s in stems if s in expected)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["line_total", "test_line_total", "line_total_v2", "linetotal", "lineTotal",
                                 "line_totals", "line", "total", "a_b_c", "abc", "b_c", "_", " ", ".", "x", "é"]),
                max_size=12))
def test_an_identifiers_hit_is_identifier_in(parts):
    """_hits looks for an identifier's forms in the text before it applies _identifier_in's rule to
    each (_Needle.forms): whether a block names the identifier is _identifier_in's answer."""
    import pager
    text = "".join(parts).lower()
    for name in ("line_total", "test_line_total", "a_b_c"):
        assert bool(pager._hits(text, pager._needles([name]))) == pager._identifier_in(text, name)


# --- the weighted similarity ---

def _plan(pager, texts, intent, roles=None, **params):
    blocks = [{"id": f"b{i}", "turn": i + 1, "role": (roles or ["user"] * len(texts))[i], "text": t}
              for i, t in enumerate(texts)]
    return pager.plan_pass({"intent_ir": intent, "blocks": blocks}, pager.Params(**params)).decisions


def test_rare_keywords_weigh_more(pager):
    texts = ["invoice invoice"] * 8 + ["the rounding bug", "invoice issue", "filler text here"]
    d = {x.block: x for x in _plan(pager, texts, ["invoice", "rounding"])}
    assert d["b8"].own > d["b9"].own  # "rounding" is in one block, "invoice" in nine


def test_stems_match_word_forms(pager):
    d = _plan(pager, ["we retained the blocks", "nothing relevant"], ["retain", "block"])
    assert d[0].matched == ("retain", "block") and d[0].own > 0.9 and d[1].own == 0.0


def test_longer_blocks_are_discounted(pager):
    d = _plan(pager, ["pager", "pager " + "filler " * 40, "noise"], ["pager"])
    assert d[0].own == 1.0 and d[0].own > d[1].own > 0


def test_keywords_found_nowhere_do_not_dilute(pager):
    d = _plan(pager, ["pager here", "other text"], ["pager", "zebra"])
    assert d[0].own == pytest.approx(1.0)


def test_neighbour_credit_flows_forward_between_dialogue_turns(pager):
    texts = ["before", "the pager retention score", "an answer", "a second answer", "too far"]
    d = _plan(pager, texts, ["pager", "retention", "score"], roles=["user", "user", "assistant", "user", "user"])
    lent = d[1].own ** pager.NEIGHBOUR_POWER
    assert d[0].neighbour == 0.0  # credit never flows backwards
    assert d[2].neighbour == pytest.approx(pager.NEIGHBOUR_DECAY * lent)
    assert d[3].neighbour == pytest.approx(pager.NEIGHBOUR_DECAY ** 2 * lent)
    assert d[4].neighbour == 0.0  # beyond the window
    assert d[2].similarity == max(d[2].own, d[2].neighbour)


def test_tool_blocks_neither_lend_nor_borrow_credit(pager):
    d = _plan(pager, ["the pager score", "tool output", "reply", "pager score in a tool", "after the tool"],
              ["pager", "score"], roles=["user", "tool", "assistant", "tool", "assistant"])
    assert d[1].neighbour == 0.0  # a tool block borrows nothing
    assert d[2].neighbour == pytest.approx(pager.NEIGHBOUR_DECAY ** 2 * d[0].own ** pager.NEIGHBOUR_POWER)
    assert d[4].neighbour == pytest.approx(pager.NEIGHBOUR_DECAY ** 2 * d[2].own ** pager.NEIGHBOUR_POWER)  # not lent by d[3]


def test_plain_similarity_is_the_share_of_keywords_present(pager):
    d = _plan(pager, ["pager retention", "pager", "retained"], ["pager", "retention"], similarity="plain")
    assert [x.similarity for x in d] == [1.0, 0.5, 0.0] and all(x.neighbour == 0.0 for x in d)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool"]),
                          st.lists(st.sampled_from(_WORDS + ["noise", "words"]), max_size=12)), max_size=20),
       st.lists(st.sampled_from(_WORDS), max_size=4))
def test_similarity_stays_in_the_unit_interval(blocks, intent):
    import pager
    d = _plan(pager, [" ".join(w) for _, w in blocks], intent, roles=[r for r, _ in blocks])
    assert all(0.0 <= x.similarity <= 1.0 and 0.0 <= x.own <= 1.0 and 0.0 <= x.neighbour <= 1.0 for x in d)


def test_the_record_and_the_rationale_show_the_parts(cli, tmp_path):
    result = cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--now", NOW)
    record = next(r for r in result.records if r["block"] == "block-0x08")
    assert record["own"] == 0.0 and record["neighbour"] > 0 and record["similarity"] == record["neighbour"]
    text = (tmp_path / "c.limn").read_text()
    assert re.search(r'add "block-0x08" to evicted-blocks because "R=0\.\d{3} sim=0\.\d{3} \(nb; own=0\.000\) '
                     r'rec=0\.\d{3} dt=5"', text)  # sim came from the neighbour
    assert re.search(r'add "block-0x05" to paged-blocks because "R=0\.\d{3} sim=0\.\d{3} rec=0\.\d{3} dt=8"', text)


# --- the budget ---

def _budget_history():
    return {"current_turn": 10, "intent_ir": ["invoice", "rounding"], "blocks": [
        {"id": "sys", "turn": 0, "role": "system", "text": "Be terse.", "pinned": True, "tokens": 5},
        {"id": "old", "turn": 1, "role": "user", "text": "Invoice rounding drifts per line item.", "tokens": 40},
        {"id": "mid", "turn": 5, "role": "assistant", "text": "Summing rounded lines loses a cent on invoices.", "tokens": 40},
        {"id": "noise", "turn": 6, "role": "user", "text": "Lunch at noon.", "tokens": 30},
        {"id": "now", "turn": 10, "role": "user", "text": "Fix the invoice rounding now.", "tokens": 40}]}


def test_without_budget_nothing_changes(pager):
    history = _budget_history()
    plain = pager.plan_pass(history)
    assert all(d.reason in ("score",) + pager.PROTECTIONS for d in plain.decisions)
    assert plain.pressure() is None and plain.budget_values() == {}
    assert "token-budget" not in " ".join(pager.render_pass(plain, pager.ContractState(), NOW))


def test_budget_keeps_the_best_verbatim_and_fits(pager):
    plan = pager.plan_pass(_budget_history(), pager.Params(budget=90))
    actions = {d.block: (d.action, d.reason) for d in plan.decisions}
    assert actions["sys"] == ("retain", "pinned")
    assert actions["now"][0] == "retain"
    kept_verbatim = [d for d in plan.decisions if d.action == "retain"]
    assert sum(d.tokens for d in kept_verbatim) <= 90 and plan.tokens_after <= 90
    assert plan.tokens_before == 155


def test_budget_demotes_the_lowest_r_first(pager):
    plan = pager.plan_pass(_budget_history(), pager.Params(budget=50))
    by_r = sorted((d for d in plan.decisions if d.reason != "pinned"), key=lambda d: -d.R)
    ranks = {"retain": 2, "page": 1, "evict": 0}
    # a block never ends in a better bucket than a higher-R block of the same size or smaller
    for high, low in zip(by_r, by_r[1:]):
        if low.tokens >= high.tokens:
            assert ranks[high.action] >= ranks[low.action]
    assert any(d.reason.startswith("budget-") for d in plan.decisions)


def test_budget_promotes_when_there_is_room(pager):
    plan = pager.plan_pass(_budget_history(), pager.Params(budget=10_000))
    assert all(d.action == "retain" for d in plan.decisions)
    assert {d.block for d in plan.decisions if d.reason == "budget-kept"} >= {"noise"}
    assert plan.tokens_after == 155


def test_budget_ties_break_deterministically(pager):
    history = {"current_turn": 3, "intent_ir": ["x"], "blocks": [
        {"id": f"b{i}", "turn": 1, "role": "tool", "text": "same", "tokens": 10} for i in range(5)]}
    plans = [pager.plan_pass(history, pager.Params(budget=25)) for _ in range(3)]
    assert plans[0].decisions == plans[1].decisions == plans[2].decisions
    kept = [d.block for d in plans[0].decisions if d.action == "retain"]
    assert kept == ["b3", "b4"]  # equal R and turn: the later position wins


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 200), st.booleans()), min_size=1, max_size=25),
       st.integers(1, 2000))
def test_what_is_kept_fits_the_budget(blocks, budget):
    import pager
    history = {"intent_ir": ["pager", "score"], "blocks": [
        {"id": f"b{i}", "turn": t, "role": "user", "text": ("pager score " if pick else "noise ") * 3,
         "tokens": size} for i, (t, size, pick) in enumerate(blocks)]}
    plan = pager.plan_pass(history, pager.Params(budget=budget))
    protected = sum(d.tokens for d in plan.decisions if d.reason in pager.PROTECTIONS)
    # What the budget never removes: protected blocks, and one range page's line for what it pages
    line = pager._Scorer([], pager.Params(budget=budget))._least_range_line() if plan.ranges else 0
    assert plan.tokens_after <= max(budget, protected + line)
    if protected + line <= budget:
        assert plan.tokens_after <= budget
    assert not any(d.action == "evict" and d.reason.startswith("budget") for d in plan.decisions)


def test_protected_blocks_over_budget_warn_and_complete(cli, tmp_path):
    history = tmp_path / "h.json"
    history.write_text(json.dumps(_budget_history()))
    result = cli("--history", history, "--contract", tmp_path / "c.limn", "--budget", "3", "--json", "--now", NOW)
    assert result.code == 0
    warning = [line for line in result.err.splitlines() if line.startswith("pager: warning:")]
    summary = json.loads(result.out)
    # the fixed costs: the pinned and recent blocks (45 tokens) and the range page's line for the rest
    line = summary["tokens_after"] - 45
    assert line > 0 and summary["fixed_tokens"] == summary["tokens_after"] and summary["over_by"] == 42 + line
    assert warning == [f"pager: warning: fixed costs and floors take {45 + line} tokens, over the budget of 3 "
                       f"by {42 + line}; everything else was paged"]
    assert summary["over_budget"] is True
    *blocks, ranged = result.records  # the range page holding the three paged blocks: its record comes last
    assert {r["block"]: (r["action"], r["reason"]) for r in blocks} == {
        "sys": ("retain", "pinned"), "old": ("page", "budget-ranged"), "mid": ("page", "budget-ranged"),
        "noise": ("page", "budget-ranged"), "now": ("retain", "recent")}
    assert (ranged["kind"], ranged["action"], ranged["reason"]) == ("range", "page", "range")


def test_pressure_in_summary_json_and_contract(cli, tmp_path, monkeypatch):
    # A short contract path: the range page's line names it, and 100 tokens must hold that line
    monkeypatch.chdir(tmp_path)
    history = tmp_path / "h.json"
    history.write_text(json.dumps(_budget_history()))
    contract = "c.limn"
    line = cli("--history", history, "--contract", contract, "--budget", "100", "--now", NOW)
    assert line.code == 0
    plan_after = re.search(r"pressure 1\.55 -> (\d\.\d\d) of 100 tokens \(155 -> (\d+)\)", line.out)
    assert plan_after, line.out
    _, values = replay((tmp_path / contract).read_text())
    assert values["token-budget"] == 100 and values["tokens-before"] == 155
    assert values["pressure-before"] == 1.55
    assert values["tokens-after"] == int(plan_after.group(2)) <= 100
    assert values["pressure-after"] == pytest.approx(values["tokens-after"] / 100)
    as_json = json.loads(cli("--history", history, "--contract", contract, "--budget", "100", "--json",
                             "--now", NOW).out)
    assert as_json["pressure_before"] == 1.55 and as_json["budget"] == 100 and not as_json["over_budget"]


def test_emitted_history_costs_what_the_budget_counted(cli, pager, tmp_path):
    contract, out = tmp_path / "c.limn", tmp_path / "out.json"
    history = json.loads(ASSET.read_text())
    for block in history["blocks"]:
        block["text"] = (block["text"] + " ") * 25  # about 600 tokens a block: paging saves room
    path = tmp_path / "h.json"
    path.write_text(json.dumps(history))
    result = cli("--history", path, "--contract", contract, "--budget", "900", "--emit", out, "--json",
                 "--with-index", "--now", NOW)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    emitted = json.loads(out.read_text())["blocks"]
    spent = sum(pager.estimate_tokens(b["text"]) for b in emitted[1:]) + pager.estimate_tokens(emitted[0]["text"])
    assert spent <= summary["tokens_after"] <= 900
    assert any(b.get("stub") for b in emitted) and any(not b.get("stub") for b in emitted[1:])


@pytest.mark.parametrize("flags, expected", [
    (["--budget", "0"], 'argument --budget: --budget must be a positive integer (got "0")'),
    (["--budget", "lots"], 'argument --budget: --budget must be a positive integer (got "lots")'),
    (["--similarity", "cosine"], "argument --similarity: invalid choice: 'cosine' (choose from 'weighted', 'plain')"),
])
def test_bad_budget_flags(cli, tmp_path, flags, expected):
    result = cli("--history", ASSET, "--contract", tmp_path / "c.limn", *flags)
    assert (result.code, result.err) == (2, f"pager: error: {expected}\n")


# --- the quality benchmark, on a conversation small enough to check by hand ---

def _locomo(tmp_path):
    folder = tmp_path / "locomo"
    folder.mkdir()
    turns = [("Ann", "D1:1", "I adopted a puppy named Biscuit last week!"),
             ("Bob", "D1:2", "That is lovely. What breed is it?"),
             ("Ann", "D1:3", "A beagle. She chews everything."),
             ("Bob", "D1:4", "I started pottery classes on Tuesday."),
             ("Ann", "D1:5", "Pottery sounds relaxing, show me a bowl sometime.")]
    (folder / "tiny.json").write_text(json.dumps({
        "speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1 May 2023",
        "session_1": [{"speaker": s, "dia_id": i, "text": t} for s, i, t in turns],
        "qa": [{"question": "What is the name of Ann's puppy?", "answer": "Biscuit", "evidence": ["D1:1"],
                "category": 4},
               {"question": "When did Bob start pottery?", "answer": "Tuesday", "evidence": ["D1:4", "D9:9"],
                "category": 2},
               {"question": "Ignored: no valid evidence", "answer": "", "evidence": ["D7"], "category": 5}]}))
    return folder


def test_quality_benchmark_measures_recall(tmp_path):
    folder = _locomo(tmp_path)
    out = tmp_path / "q.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark-quality.py"), str(folder),
                           "--json", str(out), "--floor", "0.5"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert data["questions"] == 2
    # Budgets of 1024+ tokens hold this whole conversation: every method keeps every turn.
    assert data["recall"]["window"]["2048"] == 1.0 and data["recall"]["pager"]["2048"] == 1.0


def test_quality_benchmark_window_and_floor(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    bq = load_script("benchmark-quality")
    turns, questions = bq.load_conversation(_locomo(tmp_path) / "tiny.json")
    assert [t["tokens"] for t in turns] == [math.ceil(len(t["text"]) / 4) for t in turns]
    assert turns[0]["text"] == "Ann: I adopted a puppy named Biscuit last week!" and turns[1]["role"] == "assistant"
    assert [q["evidence"] for q in questions] == [["D1:1"], ["D1:4"]]
    assert bq.question_keywords("What is the name of Ann's puppy?") == ["name", "ann", "puppy"]
    last_two = turns[-1]["tokens"] + turns[-2]["tokens"]
    assert bq.kept_by_window(turns, last_two) == {"D1:4", "D1:5"}
    # room for one turn, and for the one range page's line that holds the rest
    import pager
    line = pager._Scorer([], pager.Params(budget=1000))._least_range_line()
    assert "D1:1" in bq.kept_by_pager(turns, ["name", "ann", "puppy"], turns[0]["tokens"] + line, "weighted")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark-quality.py"), str(tmp_path / "locomo"),
                           "--floor", "1.01"], capture_output=True, text=True)
    assert proc.returncode == 1 and "below the floor 1.01" in proc.stdout


def test_an_old_system_block_paged_under_a_budget_keeps_its_text_for_the_store(pager):
    """A system block too old to score (its text would be let go) is paged when it does not fit: its text is kept."""
    history = {"intent_ir": ["pager"], "current_turn": 5000, "blocks": [
        {"id": "rules", "turn": 0, "role": "system", "text": "unrelated chatter " * 40},
        {"id": "now", "turn": 5000, "role": "user", "text": "the pager"}]}
    plan = pager.plan_pass(history, pager.Params(budget=150))  # the block is 180 tokens, its stub under 150
    by_id = {d.block: (d.action, d.reason) for d in plan.decisions}
    assert by_id["rules"][0] == "page" and by_id["rules"][1] in ("budget-paged", pager.RANGED)
    assert plan.tokens_after <= 150
    assert plan.texts[0] == history["blocks"][0]["text"]


def test_a_system_block_whose_stub_does_not_fit_either_is_paged_into_a_range_and_the_budget_holds(pager):
    history = {"intent_ir": ["pager"], "current_turn": 2, "blocks": [
        {"id": "rules", "turn": 0, "role": "system", "text": "unrelated chatter " * 40},  # 180 tokens, stub ~119
        {"id": "tone", "turn": 0, "role": "system", "text": "Answer briefly."},
        {"id": "now", "turn": 2, "role": "user", "text": "the pager"}]}
    plan = pager.plan_pass(history, pager.Params(budget=60))
    by_id = {d.block: (d.action, d.reason) for d in plan.decisions}
    assert by_id["rules"] == ("page", pager.RANGED) and by_id["tone"] == ("retain", "system")
    assert [r.members for r in plan.ranges] == [("rules",)]
    assert plan.tokens_after <= 60


def test_no_stub_is_priced_once_not_even_the_shortest_stub_there_could_be_fits():
    """_StubCosts.least is a lower bound of every stub (checked on real stubs), and _stubs_within
    answers None from it alone when room is below it: a tight budget over a long history prices no
    stub it cannot place (a 50,000-message session would otherwise render tens of thousands)."""
    import pager
    blocks = [{"id": f"block-{i}", "turn": i, "role": "assistant" if i % 2 else "user",
               "text": f"step {i} of the parser work " * (1 + i % 7)} for i in range(40)]
    scorer = pager._Scorer(["parser"], pager.Params(budget=500))
    scorer.add_all(0, blocks)
    least = scorer._least_stub()
    assert least > 0
    assert all(scorer._stub_size(i) >= least for i in range(len(blocks)))
    priced = []
    costs = pager._StubCosts(lambda i: priced.append(i) or 99, lambda i: priced.append(i) or 1, 3, least)
    assert pager._stubs_within(costs, [0, 1], 2 * least - 1) is None and priced == []
    assert pager._stubs_within(costs, [0, 1], 2 * least) is None and priced == [0, 1, 0, 1]
