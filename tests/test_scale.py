"""The machinery that makes a 100,000-block pass fast and small, each piece pinned to its rule.

The batch JSON reader, the scorer's one-test fast path for blocks, the kept texts,
the decision table, the batch statement check and the column-at-a-time scores are
shortcuts; every test here pins one of them to the rule or formula it implements.
"""

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

# Words that stem to the intent's terms, near misses that must not match, and text outside ASCII.
_WORDS = ["pager", "pagers", "paging", "retention", "retained", "score", "scores", "scoring", "underscore",
          "re-score", "score_card", "pagerduty", "x", "the", "Pager", "RETENTION", "éscore", "scoreé", "naïve",
          "İstanbul", "famili", "family", "families", "{", "}", '"', ",", "\n", "ß"]
_TEXT = st.lists(st.sampled_from(_WORDS), max_size=12).map(" ".join)
_BLOCK = st.fixed_dictionaries({
    "id": st.text("abcdef0123-_ é", min_size=1, max_size=6),
    "turn": st.integers(0, 30),
    "role": st.sampled_from(["user", "assistant", "tool", "system"]),
    "text": _TEXT})


_ODD = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.just(1 << 64), st.text("ab\"\n", max_size=3),
                 st.lists(st.integers(), max_size=1))
_ANY_BLOCK = st.one_of(
    st.dictionaries(st.sampled_from(["id", "turn", "role", "text", "kind", "pinned", "tokens", "stub", "unit",
                                     "protected"]), _ODD, max_size=10),
    _BLOCK.flatmap(lambda b: st.dictionaries(st.sampled_from(["kind", "pinned", "tokens", "stub", "unit", "protected",
                                                              "turn", "id", "role"]), _ODD, max_size=2)
                   .map(lambda extra: {**b, **extra})),
    _ODD)


@settings(max_examples=400, deadline=None)
@given(_ANY_BLOCK)
def test_the_scorer_accepts_exactly_the_blocks_the_block_rule_accepts(raw):
    """Scorer.add's one-test fast path for the usual block agrees with _block_problem: the same blocks
    pass, and a refused block gets _block_problem's message."""
    import pager
    problem = pager._block_problem(0, raw)
    scorer = pager._Scorer(["pager"], pager.Params())
    if isinstance(raw, dict) and raw.get("stub") is True and problem is None:
        return  # a valid stub needs a page store: not this rule's business
    if problem is None:
        scorer.add(0, raw)
        assert len(scorer._ids) == 1
    else:
        with pytest.raises(pager.PagerError) as refused:
            scorer.add(0, raw)
        assert str(refused.value) == problem


def test_the_pager_format_reader_and_validator_use_the_block_rule(pager):
    """load(..., "pager") refuses, and validate("pager", ...) lists, exactly _block_problem's message."""
    bad = {"blocks": [{"id": "b1", "turn": 1, "role": "user", "text": "ok"},
                      {"id": "b2", "turn": -1, "role": "user", "text": "x"}]}
    expected = pager._block_problem(1, bad["blocks"][1])
    assert expected == "blocks[1].turn must not be negative (got -1)"
    with pytest.raises(pager.PagerError) as refused:
        pager.load(json.dumps(bad), "pager")
    assert str(refused.value) == expected
    assert pager.validate("pager", bad) == [expected]
    twice = {"blocks": [{"id": "b1", "turn": 1, "role": "user", "text": "ok"}] * 2}
    assert pager.validate("pager", twice) == ['blocks[1].id "b1" duplicates blocks[0].id']


def test_texts_are_kept_only_for_blocks_that_may_be_paged(pager):
    """A block with no match, no matching block just before it and an age that alone evicts keeps no text."""
    blocks = [{"id": f"b{i}", "turn": i, "role": "user", "text": t} for i, t in enumerate(
        ["noise", "noise", "the pager", "after it", "two after", "three after", "noise", "now"])]
    plan = pager.plan_pass({"intent_ir": ["pager"], "current_turn": 7, "blocks": blocks})
    kept = [plan.texts[k] is not None for k in range(len(blocks))]
    # b2 matches, b3 and b4 may borrow from it, b7 is too young to be evicted on age; the rest are not kept.
    assert kept == [False, False, True, True, True, False, False, True]
    for k, d in enumerate(plan.decisions):
        if d.action == "page":
            assert plan.texts[k] == blocks[k]["text"]
    # Neighbour credit flows only between dialogue blocks outside units: a tool block after a
    # match borrows none, and a matching tool block lends none.
    roles = ["user", "user", "user", "tool", "assistant", "user", "tool", "user", "assistant"]
    texts = ["noise", "the pager", "after it", "after it", "two after", "noise", "the pager", "after a tool", "now"]
    blocks = [{"id": f"b{i}", "turn": i, "role": r, "text": t} for i, (r, t) in enumerate(zip(roles, texts))]
    plan = pager.plan_pass({"intent_ir": ["pager"], "current_turn": 8, "blocks": blocks})
    kept = [plan.texts[k] is not None for k in range(len(blocks))]
    assert kept == [False, True, True, False, False, False, True, False, True]


_DIALOGUE_BLOCK = st.fixed_dictionaries({
    "turn": st.integers(0, 12),
    "role": st.sampled_from(["user", "assistant", "tool", "system"]),
    "text": st.sampled_from(["the pager", "scores", "pager score families", "unrelated chatter", "more noise", ""])},
    optional={"unit": st.sampled_from(["u1", "u2"])})


@settings(max_examples=300, deadline=None)
@given(st.lists(_DIALOGUE_BLOCK, min_size=1, max_size=14),
       st.sampled_from([(0.7, 0.3, None), (0.9, 0.1, None), (0.5, 0.5, 60), (0.7, 0.3, 25)]),
       st.sampled_from(["weighted", "plain"]))
def test_every_paged_block_had_its_text_kept(blocks, weights, similarity):
    """The kept texts cover every block a pass pages, whatever the roles, units, weights and budget."""
    import pager
    alpha, beta, budget = weights
    history = [dict(b, id=f"b{i}") for i, b in enumerate(blocks)]
    current = max(b["turn"] for b in history)
    plan = pager.plan_pass({"intent_ir": ["pager", "score", "family"], "current_turn": current, "blocks": history},
                           pager.Params(alpha=alpha, beta=beta, similarity=similarity, budget=budget))
    for k, d in enumerate(plan.decisions):
        if d.action == "page":
            assert plan.texts[k] == history[k]["text"]


@pytest.mark.parametrize("alpha, beta, retain_cut, evict_cut", [
    (0.7, 0.3, 0.55, 0.2), (0.9, 0.1, 0.55, 0.2), (0.3, 0.7, 0.55, 0.2), (0.5, 0.5, 0.9, 0.5),
    (0.7, 0.3, 0.55, 0.0), (0.7, 0.0, 0.55, 0.2), (0.0, 1.0, 1.0, 1.0), (0.5, 2.0, 0.6, 0.25),
    (0.5, 50.0, 1.0, 0.9)])
def test_evicting_age_is_the_first_age_whose_recency_alone_evicts(pager, alpha, beta, retain_cut, evict_cut):
    params = pager.Params(alpha, beta, retain_cut, evict_cut)
    age = pager._evicting_age(params)
    evicted = [beta * pager.recency(dt) < evict_cut for dt in range(0, 5000)]
    if age is None:
        assert not any(evicted)
    else:
        assert not any(evicted[:age]) and evicted[age]
        assert all(evicted[age:])  # recency never rises with age


def test_decision_table_is_a_sequence_of_decisions(pager):
    plan = pager.plan_pass({"intent_ir": ["pager"], "blocks": [
        {"id": f"b{i}", "turn": i, "role": "user", "text": "pager" if i % 2 else "noise"} for i in range(5)]})
    table = plan.decisions
    rows = list(table)
    assert isinstance(table, pager._DecisionTable) and len(table) == 5
    assert all(isinstance(d, pager.Decision) for d in rows)
    assert table[1] == rows[1] and table[-1] == rows[-1] and table[1:3] == rows[1:3]
    assert table == rows and rows == table and table == pager._DecisionTable.of(rows)
    table[0] = rows[0]._replace(action="page", reason="budget-paged")
    assert table[0].action == "page" and table.action[0] == "page" and table != rows
    assert pager._DecisionTable.of([]) == []


def test_checking_a_list_of_statements_is_checking_each(pager):
    good = ['add "b1" to paged-blocks because "R=0.4"', "remember a number called pager-alpha with 0.7",
            'remember a value called last-pager-pass with "2026-05-17T03:08:12+00:00"']
    pager._check_statements(good)  # the number form has no fixed segments: checked alone, and passes
    for bad in ['add "b1" to paged-blocks because ""', 'add "b\u2028" to paged-blocks because "x"',
                'add "b1\nadd" to paged-blocks because "x"', 'add "b1" to lost-blocks because "x"',
                'add "b1" to paged-blocks because "x\r"', "remember a number called pager-alpha with 1e3"]:
        with pytest.raises(pager.PagerError) as single:
            pager.check_statement(bad)
        with pytest.raises(pager.PagerError) as batch:
            pager._check_statements(good + [bad])
        assert str(batch.value) == str(single.value)


def test_records_are_the_json_of_each_decision(pager):
    """record_line, formatted by hand for speed, parses to Decision.to_dict for every decision."""
    blocks = [{"id": f"b\"{i}é", "turn": i, "role": "user" if i % 3 else "system", "kind": "active",
               "text": "pager retention" if i % 2 else "noise " * i} for i in range(40)]
    plan = pager.plan_pass({"intent_ir": ["pager", "retention"], "blocks": [dict(b, id=f"b{i}") for i, b in
                                                                          enumerate(blocks)]})
    lines = [pager._record_line(d) for d in plan.decisions]
    assert all("\n" not in line for line in lines)
    assert [json.loads(line) for line in lines] == [d.to_dict() for d in plan.decisions]


def test_written_records_are_one_line_per_decision_across_batches(pager, monkeypatch):
    """_write_records writes _PAYLOAD_PIECE lines per write: every decision's record, in order, each ending its line."""
    import io
    plan = pager.plan_pass({"intent_ir": ["pager"], "blocks": [
        {"id": f"b{i}", "turn": i, "role": "user", "text": "pager" if i % 3 else "noise"} for i in range(10)]})
    for batch in (3, 5, 10, 4096):
        monkeypatch.setattr(pager, "_PAYLOAD_PIECE", batch)
        out = io.StringIO()
        pager._write_records(out, plan.decisions)
        assert out.getvalue().endswith("\n")
        assert [json.loads(line) for line in out.getvalue().splitlines()] == [d.to_dict() for d in plan.decisions]
    out = io.StringIO()
    pager._write_records(out, [])
    assert out.getvalue() == ""


def test_formatted_equals_percent_formatting_whether_values_repeat_or_not(pager):
    repeated = [0.0, 0.5, 0.0, 1 / 3, 0.0, 0.5] * 10
    distinct = [i / 7 for i in range(40)]
    for values in (repeated, distinct, [], [math.pi]):
        assert pager._formatted(values, "%.6f") == ["%.6f" % v for v in values]
        assert pager._formatted(values, "%.3f") == ["%.3f" % v for v in values]


def test_pages_come_from_the_kept_texts_or_from_a_second_read_alike(tmp_path, monkeypatch, cli):
    """A page whose text the first read did not keep is read again: the store holds the same rows."""
    import sqlite3
    import pager
    history = tmp_path / "h.json"
    blocks = [{"id": f"b{i}", "turn": i // 2, "role": ("user", "assistant")[i % 2],
               "text": ("the pager keeps score" if i % 5 == 0 else "unrelated chatter") + f" #{i}"} for i in range(300)]
    history.write_text(json.dumps({"intent_ir": ["pager", "score"], "blocks": blocks}))

    def rows(name):
        db = sqlite3.connect(tmp_path / f"{name}.pages.sqlite3")
        return db.execute("SELECT block, turn, role, tokens, keywords, sha256, text FROM pages ORDER BY block").fetchall()

    assert cli("--history", history, "--contract", tmp_path / "kept.limn", "--now", "2026-01-01T00:00:00Z").code == 0
    monkeypatch.setattr(pager._Scorer, "_keep_text", lambda self, *a: None)  # as if nothing had been kept
    assert cli("--history", history, "--contract", tmp_path / "reread.limn", "--now", "2026-01-01T00:00:00Z").code == 0
    assert rows("kept") and rows("kept") == rows("reread")
    assert (tmp_path / "kept.limn").read_text() == (tmp_path / "reread.limn").read_text()


def test_invalid_json_deep_in_a_large_history_is_placed_exactly(tmp_path, cli):
    """A syntax error far past the first batch still gets json's own line and column."""
    blocks = [{"id": f"b{i}", "turn": i, "role": "user", "text": "x" * 50} for i in range(30000)]
    text = json.dumps({"intent_ir": ["x"], "blocks": blocks}, indent=1)
    broken = text.replace('"id": "b25000"', '"id": "b25000" "oops"', 1)
    (tmp_path / "h.json").write_text(broken)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(broken)
    result = cli("--history", tmp_path / "h.json", "--contract", tmp_path / "c.limn")
    assert result.code == 2
    assert f"line {expected.value.lineno}, column {expected.value.colno}" in result.err
    assert not (tmp_path / "c.limn").exists()


@settings(max_examples=80, deadline=None)
@given(st.lists(_BLOCK, min_size=1, max_size=14, unique_by=lambda b: b["id"]),
       st.sampled_from([(0.7, 0.3), (1, 0), (0, 1), (0.5, 0.5), (2, 1)]), st.sampled_from(["weighted", "plain"]))
def test_column_scores_follow_the_formula_block_by_block(blocks, weights, similarity):
    """The column-at-a-time scores equal R = alpha * sim + beta * recency worked out for each block alone,
    int weights included."""
    import pager
    params = pager.Params(alpha=weights[0], beta=weights[1], similarity=similarity, retain_cut=1.0, evict_cut=0.0)
    plan = pager.plan_pass({"intent_ir": ["pager", "score", "family"], "blocks": blocks}, params)
    scorer = pager._Scorer(["pager", "score", "family"], params)
    for block in blocks:
        scorer.add(0, dict(block, id=block["id"]))
    n = len(blocks)
    terms = scorer.terms
    lengths = [len(b["text"]) for b in blocks]
    matched = scorer._matched
    if similarity == "plain":
        own = [len(m) / len(terms) for m in matched]
        near = [0.0] * n
    else:
        df = {t: sum(t in m for m in matched) for t in terms}
        idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        total = sum(idf[t] for t, d in df.items() if d)
        mean = sum(lengths) / n or 1.0
        own = [min(1.0, sum(idf[t] for t in m) / total / (1 - 0.25 + 0.25 * length / mean)) if m else 0.0
               for m, length in zip(matched, lengths)]
        talk = [b["role"] in ("user", "assistant") for b in blocks]
        near = [max([0.0] + [own[j - d] ** 1.5 * 0.7 ** d for d in (1, 2) if j - d >= 0 and talk[j - d]])
                if talk[j] else 0.0 for j in range(n)]
    current = max(b["turn"] for b in blocks)
    for d, mine, borrowed, b in zip(plan.decisions, own, near, blocks):
        sim = max(mine, borrowed)
        assert d.own == pytest.approx(mine) and d.neighbour == pytest.approx(borrowed)
        assert d.R == pytest.approx(weights[0] * sim + weights[1] * pager.recency(current - b["turn"]))


_VALID = ['add "b1" to paged-blocks because "R=0.4"', 'remove "b é" from retained-blocks because "x"',
          "remember a number called pager-alpha with 0.7", "remember a number called tokens-after with 12",
          'remember a value called pager-intent-source with "intent_ir"', "remember a list called evicted-blocks",
          'about "prosecode context pager session contract"']
_PIECES = ['add', 'remove', 'to', 'from', 'paged-blocks', 'lost-blocks', 'because', '"', '""', ' ', '  ', '\n', '\r',
           '\u2028', 'x', 'remember', 'a', 'number', 'called', 'pager-alpha', 'with', '0.7', '1e3', '-0', '07',
           'value', 'last-pager-pass', 'about']


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_VALID), st.lists(st.sampled_from(_PIECES), max_size=9).map("".join),
                          st.lists(st.sampled_from(_PIECES), max_size=9).map(" ".join)), max_size=6))
def test_the_batch_check_accepts_exactly_what_check_statement_accepts(statements):
    import pager
    errors = []
    for statement in statements:
        try:
            pager.check_statement(statement)
        except pager.PagerError as exc:
            errors.append(str(exc))
    if errors:
        with pytest.raises(pager.PagerError) as batch:
            pager._check_statements(statements)
        assert str(batch.value) == errors[0]
    else:
        pager._check_statements(statements)


_PRICED_BLOCK = st.fixed_dictionaries({
    "turn": st.integers(0, 12),
    "role": st.sampled_from(["user", "assistant", "tool"]),
    "text": st.sampled_from(["the pager", "pager score families. Then more.", "unrelated chatter", "",
                             "pager log line\n" * 700, "x~y|z " * 50])},
    optional={"unit": st.sampled_from(["tool:u1", "u2"]), "kind": st.sampled_from(["human", "media"]),
              "protected": st.sampled_from(["human", "task"]), "tokens": st.integers(0, 900)})


@settings(max_examples=300, deadline=None)
@given(st.lists(_PRICED_BLOCK, min_size=1, max_size=14), st.sampled_from([40, 300, 2500, 12000]),
       st.booleans(), st.sampled_from(["b", "m-0f~t2.", "a b"]))
def test_stubs_priced_when_asked_decide_as_stubs_priced_up_front(blocks, budget, apart, prefix):
    """A budget pass prices a stub only when fit_budget asks, after a cheaper lower bound: the
    decisions and tokens kept are those of pricing every block as it arrives, and every bound is
    at most the price."""
    import pager
    history = {"intent_ir": ["pager", "score"], "current_turn": 12,
               "blocks": [dict(b, id=f"{prefix}{i}") for i, b in enumerate(blocks)]}
    params = pager.Params(budget=budget, results_apart=apart)
    lazy = pager.plan_pass(history, params)
    add = pager._Scorer.add

    def priced_up_front(self, index, raw):
        add(self, index, raw)
        for position in range(len(self._ids)):
            self._stub_cost_at(position)

    try:
        pager._Scorer.add = priced_up_front
        eager = pager.plan_pass(history, params)
    finally:
        pager._Scorer.add = add
    assert list(lazy.decisions) == list(eager.decisions) and lazy.tokens_after == eager.tokens_after
    scorer = pager._Scorer(["pager", "score"], params, current_turn=12)
    scorer.add_all(0, history["blocks"])
    for position in range(len(scorer._ids)):
        assert scorer._stub_floor(position) <= scorer._stub_cost_at(position)


def test_a_transcript_s_blocks_stream_as_their_pager_json_would(pager):
    """_HistorySource.from_blocks hands the scorer what reading {"blocks": blocks} as JSON hands it,
    in the same order, and gives the same blocks back by position."""
    conv = pager.load(json.dumps([{"role": "user", "content": f"step {i}: the pager " + "é" * (i % 3)}
                                  if i % 2 == 0 else {"role": "assistant", "content": f"done {i}"}
                                  for i in range(3000)]), "openai")
    blocks = pager.conversation_blocks(conv)
    for block in blocks:
        if block["tokens"] is None:
            del block["tokens"]
    streamed = {}
    for name, source in (("json", pager._HistorySource.from_text("h", json.dumps({"blocks": blocks}))),
                         ("held", pager._HistorySource.from_blocks("h", blocks))):
        seen = []
        header, handed = source.stream(lambda header: lambda first, batch: seen.extend(enumerate(batch, first)))
        assert header == {} and handed
        streamed[name] = (seen, list(source.blocks_at([0, 5, 2999])))
    assert streamed["json"] == streamed["held"]
    assert [block for _, block in streamed["held"][0]] == blocks


def test_a_held_block_over_the_limit_is_refused_as_reading_it_would_be(pager, monkeypatch):
    monkeypatch.setattr(pager, "MAX_BLOCK_CHARS", 5000)
    blocks = [{"id": "b0", "turn": 1, "role": "user", "text": "pager " * 10},
              {"id": "b1", "turn": 2, "role": "assistant", "text": "\x01" * 900}]  # 5,400 characters as JSON
    for source in (pager._HistorySource.from_text("h.json", json.dumps({"blocks": blocks})),
                   pager._HistorySource.from_blocks("h.json", blocks)):
        with pytest.raises(pager.PagerError) as refused:
            source.stream(lambda header: lambda first, batch: None)
        assert str(refused.value).startswith("h.json: blocks[1] is larger than the limit of 5,000 characters")


def test_the_locked_contract_reuses_a_known_state_only_for_the_same_text(pager, tmp_path):
    """A pass reads the contract before the lock and again under it: the second read parses the
    text only if it changed in between."""
    contract = tmp_path / "c.limn"
    contract.write_text('remember a list called paged-blocks\nadd "b1" to paged-blocks because "x"\n')
    text = pager._contract_text(str(contract))
    known = pager._state_of(str(contract), text)
    with pager._LockedContract(str(contract), (text, known)) as locked:
        assert locked.state is known
    with contract.open("a") as fh:  # another pass appended in between
        fh.write('add "b2" to paged-blocks because "y"\n')
    with pager._LockedContract(str(contract), (text, known)) as locked:
        assert locked.state is not known and locked.state.directives == {"b1": "page", "b2": "page"}


def _summary_by_the_rule(pager, text, keywords, words):
    """stub_summary's rule, read literally: every sentence scored, the first with the most keywords."""
    wanted = list(keywords)
    if wanted:
        starts = [0] + [m.end() for m in pager._SENTENCE_BREAK.finditer(text)]
        if len(starts) > 1:
            scored = [(len(pager._keyword_hits(text[b:e].lower(), wanted)), -b)
                      for b, e in zip(starts, starts[1:] + [len(text)])]
            hits, start = max(scored)
            text = text[-start:] if hits else text
    chosen = text.split(None, words)
    if not chosen:
        return "(empty)"
    return " ".join(chosen[:words]) + ("..." if len(chosen) > words else "")


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_WORDS + [".", ". ", "! ", "?\n", "\n\n", "\n \n", "end.", "a. b"]), max_size=30)
       .map("".join), st.lists(st.sampled_from(["pager", "score", "famili", "retent", "x"]), max_size=3),
       st.integers(1, 8))
def test_stub_summaries_follow_their_rule(text, keywords, words):
    """Sentences found as they are read (and none looked for in a text without a break character)
    give the summary of scoring every sentence."""
    import pager
    assert pager.stub_summary(text, keywords, words) == _summary_by_the_rule(pager, text, keywords, words)
