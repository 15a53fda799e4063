"""A running Pager keeps the range pages it built (_RangeMemory, issue 28 item 2): a later plan or call
over the same blocks is served them, and never one a change has made stale."""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pager as engine
from conftest import tool_chat

BUDGET = 2000
NEWEST = 36  # the unit of the newest range page under BUDGET (the units after it are the current work)


def _range_lines(messages):
    return [m["content"] for m in messages if isinstance(m.get("content"), str) and "| range |" in m["content"]]


@pytest.fixture
def rankings(monkeypatch):
    """Count the topic rankings (the work a kept build saves)."""
    calls = []
    real = engine._ranked_names
    monkeypatch.setattr(engine, "_ranked_names", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


@pytest.fixture
def plans(monkeypatch):
    """Count the range plans (_Scorer._plan_range_pages), each by the room it was given."""
    calls = []
    real = engine._Scorer._plan_range_pages
    monkeypatch.setattr(engine._Scorer, "_plan_range_pages",
                        lambda self, decisions, room: calls.append(room) or real(self, decisions, room))
    return calls


def _with_memory_of(agent):
    """Return a new Pager (no earlier call: every range is built) holding ``agent``'s kept builds."""
    warm = engine.Pager(BUDGET)
    warm._range_memory = agent._range_memory
    return warm


def test_a_pager_serves_its_kept_range_builds_when_nothing_they_read_changed(rankings):
    msgs = tool_chat(40)
    agent = engine.Pager(BUDGET)
    first = agent.compact(msgs)
    assert len(_range_lines(first.messages)) == 2 and rankings
    rankings.clear()
    # another plan over the same blocks (a new Pager: no line of an earlier pass to keep) ranks nothing
    warm = _with_memory_of(agent).compact(copy.deepcopy(msgs))
    assert rankings == [] and warm.messages == first.messages
    rankings.clear()
    cold = engine.Pager(BUDGET).compact(copy.deepcopy(msgs))
    assert rankings and cold.messages == first.messages


def _result(msgs, unit):
    """Return the tool result message of round trip ``unit`` (a system prompt and a request come first)."""
    return msgs[3 + 2 * unit]


def _edit_text(msgs):  # the newest range's tool result (its id, the call's, stays) names another function
    newest = _result(msgs, NEWEST)
    newest["content"] = newest["content"].replace(f"def helper_{NEWEST}", f"def quokka_{NEWEST}")  # (its size kept)


def _edit_swap(msgs):  # two results trade a name: every holder count stays, the newest range's names do not
    older, newest = _result(msgs, 20), _result(msgs, NEWEST)  # unit 20's result (in the oldest range), the newest's
    older["content"], newest["content"] = (older["content"].replace("def helper_20", f"def helper_{NEWEST}"),
                                           newest["content"].replace(f"def helper_{NEWEST}", "def helper_20"))


def _edit_counts(msgs):  # older ranged results name the newest range's path: its holders pass RARE_HOLDERS
    for i in range(12, 17):
        _result(msgs, i)["content"] += f"see src/mod_{NEWEST}.py\n"


def _edit_shown(msgs):  # the kept system prompt names the newest range's topic: the line no longer lists it
    msgs[0]["content"] += f" Prefer helper_{NEWEST}."


def _edit_shown_and_counts(msgs):  # the kept names change, and the counts (of a name the newest range lacks)
    _edit_shown(msgs)
    _result(msgs, 12)["content"] += "see unrelated_zebra_total\n"


N = NEWEST


@pytest.mark.parametrize("edit, before, after", [  # how the newest range page's line ends, before and after
    (_edit_text, f"topics: src/mod_{N}.py, helper_{N}", f"topics: src/mod_{N}.py, helper_{N}, quokka_{N}"),
    (_edit_swap, f"topics: src/mod_{N}.py, helper_{N}", f"topics: src/mod_{N}.py, helper_{N}, helper_20"),
    (_edit_counts, f"topics: src/mod_{N}.py, helper_{N}", f"topics: helper_{N}, src/mod_{N}.py"),
    (_edit_shown, f"topics: src/mod_{N}.py, helper_{N}", f"topics: src/mod_{N}.py"),
    (_edit_shown_and_counts, f"topics: src/mod_{N}.py, helper_{N}", f"topics: src/mod_{N}.py"),
], ids=["its-block-text", "names-traded", "holder-counts", "kept-names", "kept-names-and-counts"])
def test_a_kept_range_build_is_never_served_after_a_change_it_depends_on(edit, before, after):
    msgs = tool_chat(40)
    agent = engine.Pager(BUDGET)
    newest = _range_lines(agent.compact(msgs).messages)[-1]
    assert newest.endswith(before)
    changed = copy.deepcopy(msgs)
    edit(changed)
    cold = engine.Pager(BUDGET).compact(copy.deepcopy(changed))
    assert _range_lines(cold.messages)[-1].endswith(after)  # the change shows in the newest range's line...
    # ...whose blocks (the same ids) the kept build was made of: it must be built again
    assert _with_memory_of(agent).compact(changed).messages == cold.messages


def test_a_running_pager_matches_one_that_keeps_no_builds_call_after_call():
    msgs = tool_chat(60)
    kept, forgetful = engine.Pager(BUDGET), engine.Pager(BUDGET)
    for step in range(4):
        msgs = msgs + [{"role": "assistant", "content": f"Step {step}: helper_{step} rounds per line."}]
        if step == 2:
            msgs[20]["content"] = "edited in place: src/ledger/quokka.py holds the rounding"
        forgetful._range_memory = engine._RangeMemory()
        assert kept.compact(msgs).messages == forgetful.compact(msgs).messages


def test_a_new_recall_hint_forgets_the_kept_builds():
    memory = engine._RangeMemory()
    memory.start(str)
    memory.used_builds[((1,), None)] = ["page"]
    memory.settle()
    memory.start(str)
    assert memory.builds == {((1,), None): ["page"]}
    memory.start(repr)  # a line holds the hint: its cost changes with it
    assert memory.builds == {} and memory.serials == {}


def test_a_kept_build_is_served_only_with_the_line_an_earlier_pass_gave_its_blocks():
    memory = engine._RangeMemory()
    shown, held = set(), {"alpha_1": 1}
    names_of = lambda i: ("alpha_1",)  # noqa: E731
    serials = lambda members: tuple(members)  # noqa: E731

    def builds(known):
        return engine._RangeBuilds(memory, serials, names_of, shown, held, known)
    ranked = engine.RangePage("r-1", ("b1",), (0,), 1, 1, 10, "topics: alpha_1", 5)
    builds({})[((0,), None)] = ranked  # its topics ranked: no earlier line for r-1
    assert builds({}).get(((0,), None)) == ranked
    assert builds({"r-1": "topics: alpha_1"}).get(((0,), None)) == ranked  # the same line kept
    assert builds({"r-1": "an earlier pass's other line"}).get(((0,), None)) is None  # that line stands
    builds({})[((0,), 2)] = ranked  # a line listing fewer topics is ranked whatever an earlier pass said
    assert builds({"r-1": "an earlier pass's other line"}).get(((0,), 2)) == ranked
    # a build whose line was an earlier pass's serves only while that pass's line stands
    kept = engine.RangePage("r-2", ("b2",), (1,), 1, 1, 10, "an earlier line", 5)
    builds({"r-2": "an earlier line"})[((1,), None)] = kept
    assert builds({"r-2": "an earlier line"}).get(((1,), None)) == kept
    assert builds({}).get(((1,), None)) is None
    # the same blocks at other positions: the page says where they are now
    moved = builds({}).get(((0,), None))
    assert moved == ranked
    assert engine._RangeBuilds(memory, lambda members: (0,), names_of, shown, held, {}).get(((7,), None)) \
        == ranked._replace(positions=(7,))


def test_a_ranking_goes_on_from_the_rows_read_before_and_never_from_changed_ones(monkeypatch):
    monkeypatch.setattr(engine, "READ_STEP", 2)
    monkeypatch.setattr(engine, "_ROWS_READ", [([], [])])
    read = []
    real = engine._tiers_of
    monkeypatch.setattr(engine, "_tiers_of", lambda rows: read.append(len(rows)) or real(rows))
    # newest first: the oldest row is the agent's call naming src/ledger.py; newer rows only read names
    rows = [("tool", False, (f"helper_{i}", f"value_{i}")) for i in range(8, 0, -1)]
    rows.append(("assistant", True, ("src/ledger.py", "quokka_total")))

    def fresh(some, limit=3):
        engine._ROWS_READ[0] = ([], [])
        return engine._ranked_names(some, (), None, limit)
    whole = fresh(rows)
    assert whole[0] == ("src/ledger.py", engine.TIER_AGENT, 8)
    read.clear()
    shorter = engine._ranked_names(rows[3:], (), None, 3)  # the oldest six rows: read before
    assert sum(read) <= 2 and shorter == fresh(rows[3:])  # at most the rows past the last state kept
    # the same oldest row, the agent's call now a tool's output: its names' tiers change
    changed = rows[:-1] + [("tool", False, ("src/ledger.py", "quokka_total"))]
    engine._ranked_names(rows, (), None, 3)
    served = engine._ranked_names(changed, (), None, 3)
    assert served == fresh(changed) != whole
    assert served[0][1] == engine.TIER_READ
    # a name traded for another in an old row is read anew too
    traded = rows[:-1] + [("assistant", True, ("src/ledger.py", "wombat_total"))]
    engine._ranked_names(rows, (), None, 9)
    served = engine._ranked_names(traded, (), None, 9)
    assert served == fresh(traded, 9) and "wombat_total" in [name for name, _, _ in served]


def test_the_kept_holder_counts_lose_the_blocks_that_went():
    common = tool_chat(40)
    _edit_counts(common)  # five older results name the newest range's path: it is no rare name
    agent = engine.Pager(BUDGET)
    assert _range_lines(agent.compact(common).messages)[-1].endswith(f"topics: helper_{N}, src/mod_{N}.py")
    msgs = tool_chat(40)  # those results as they were: the path is rare again
    cold = engine.Pager(BUDGET).compact(copy.deepcopy(msgs))
    assert _range_lines(cold.messages)[-1].endswith(f"topics: src/mod_{N}.py, helper_{N}")
    assert _with_memory_of(agent).compact(msgs).messages == cold.messages


def test_a_ranking_reads_the_common_names_only_when_the_rare_ones_do_not_fill_it():
    rows = [("tool", False, ("rare_one", "common_one", "src/common/path.py")),
            ("assistant", False, ("rare_two", "common_two"))]
    held = {"rare_one": 1, "rare_two": 2, "common_one": 9, "common_two": 9, "src/common/path.py": 9,
            "src": 9, "common": 9, "path": 9}
    # two rare names fill two places: the common ones are never ranked before them
    assert [n for n, _, _ in engine._ranked_names(rows, (), held, 2)] == ["rare_two", "rare_one"]
    # four places: the common names follow, the agent's words and the newest first
    assert [n for n, _, _ in engine._ranked_names(rows, (), held, 4)] == \
        ["rare_two", "rare_one", "common_two", "src/common/path.py"]
    # a compound the counts do not hold is as rare as its rarest part
    del held["src/common/path.py"]
    held["path"] = 1
    assert [n for n, _, _ in engine._ranked_names(rows, (), held, 3)] == ["rare_two", "src/common/path.py", "rare_one"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcXY_/.-:\\n 0123456789é", max_size=120))
def test_a_blocks_names_with_compounds_read_from_its_plain_names_are_the_names_read_anew(text):
    # a budget pass reads each block's names once as it comes in; range planning adds only the compounds
    engine._names_of.cache_clear()
    assert set(engine._names_with_compounds(text, engine._names_of(text))) == set(engine._names_of(text, compounds=True))


def test_a_call_between_compactions_sends_the_range_lines_it_sent_without_planning_them(plans, monkeypatch):
    """A pass that keeps its last directives keeps their range pages as the agent was sent them
    (_ranges_kept: planned anew in the whole index room, the oldest runs could merge otherwise);
    where it cannot, _make_ranges plans them once for the trial of their size and the pass alike."""
    msgs = tool_chat(60)
    grown = msgs + [{"role": "assistant", "content": "helper_3 rounds half up."}]
    more = grown + [{"role": "assistant", "content": "Now helper_4."}]

    def calls():
        agent = engine.Pager(BUDGET)
        agent.compact(msgs)
        sent = agent.compact(grown).messages  # the first call filled the budget: this one compacts
        plans.clear()
        return sent, agent.compact(more).messages

    sent, kept = calls()
    assert kept[:len(sent)] == sent  # between compactions: what was sent stays
    assert plans == [] and _range_lines(kept) == _range_lines(sent)
    # the earlier ranges set aside: planned once (the trial's plan serves the pass), the same request
    monkeypatch.setattr(engine._Scorer, "_ranges_kept", lambda self, decisions: None)
    assert calls()[1] == kept and len(plans) == 1

    # and planned at each ask (no two asks read alike): twice, the same request
    class Never(dict):
        def get(self, key, default=None):
            return object()
    monkeypatch.setattr(engine, "_REASONS_RANGES_READ", Never())
    assert calls()[1] == kept and len(plans) == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["tool", "assistant", "user"]), st.booleans(),
                          st.lists(st.sampled_from(["src/totals.py", "totals", "py", "quantize", "line_total",
                                                    "the", "rounding_mode", "1042", "a.b", "decimal"]),
                                   max_size=5, unique=True).map(tuple)), max_size=12),
       st.sampled_from([None, 3, 8]))
def test_ranking_names_already_distinct_is_ranking_the_names(rows, limit):
    """Range planning hands _ranked_names each block's distinctive names, read once a pass
    (_BlockNames.distinctive): the ranking is the one of the names themselves."""
    distinct = [(role, call, engine._distinctive_names(names)) for role, call, names in rows]
    held = {"totals": 1, "quantize": 9, "line_total": 2}
    assert engine._ranked_names(distinct, (), held, limit, distinct=True) == engine._ranked_names(rows, (), held, limit)
    names = engine._BlockNames([" ".join(n) for _, _, n in rows], None, (), [f"b{i}" for i in range(len(rows))])
    assert all(names.distinctive(i) == engine._distinctive_names(names[i]) for i in range(len(rows)))


def test_range_pages_no_longer_whole_are_planned_anew_between_compactions(plans, monkeypatch):
    """_ranges_kept keeps the earlier range pages only while they hold exactly the ranged blocks:
    a round trip taken out of one of them (a history edited by its agent) gets a new plan, the
    same request as a pass that never keeps them."""
    msgs = tool_chat(60)
    grown = msgs + [{"role": "assistant", "content": "helper_3 rounds half up."}]
    agent = engine.Pager(BUDGET)
    agent.compact(msgs)
    agent.compact(grown)
    oldest = max(agent._ranges.values(), key=lambda range_: len(range_[0]))[0]
    assert {"call_20", "call_20:result"} <= set(oldest)
    cut = grown[:42] + grown[44:] + [{"role": "assistant", "content": "Now helper_4."}]  # call_20's round trip out
    assert cut[41]["tool_call_id"] == "call_19" and cut[42]["tool_calls"][0]["id"] == "call_21"
    plans.clear()
    edited = agent.compact(cut).messages
    assert plans  # planned anew
    monkeypatch.setattr(engine._Scorer, "_ranges_kept", lambda self, decisions: None)
    never = engine.Pager(BUDGET)
    never.compact(msgs)
    never.compact(grown)
    assert never.compact(cut).messages == edited


def test_a_first_call_whose_kept_blocks_show_no_names_plans_its_ranges():
    """The first plan of a Pager's call builds its ranges even when the kept context shows no name at
    all (its builds were once looked up as if made before, and the call failed with AttributeError)."""
    messages = [{"role": "system", "content": "be"}]
    for i in range(30):
        messages += [{"role": "user", "content": f"a {i}"}, {"role": "assistant", "content": "ok " * 40}]
    messages.append({"role": "user", "content": "go"})
    report = engine.Pager(40).compact(messages).report
    assert report.tokens_after <= 40 and sum(report.counts.values()) == len(messages)
