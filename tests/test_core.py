"""The pure core: tokens, score, classification, planning. No files, no clock."""

import doctest
import math
import re

import pytest
from hypothesis import given, settings, strategies as st


def test_doctests_in_engine_pass(pager):
    failures, tried = doctest.testmod(pager, verbose=False)
    assert tried > 5 and failures == 0


def test_tokenize_splits_words_and_lowercases(pager):
    assert pager.tokenize("Fixed the OFF-by-one, block_index() 42") == [
        "fixed", "the", "off", "by", "one", "block_index", "42"]


def test_intent_keywords_tokenize_drop_stop_words_dedupe_and_keep_order(pager):
    assert pager.intent_keywords(["Score", "what is the pager retention", "score", "off-by-one"]) == [
        "score", "pager", "retention"]  # "what", "is", "the", "off", "by", "one" are stop words


@pytest.mark.parametrize("text, word, expected", [
    ("score", "score", True),
    ("re-score it", "score", True),
    ("scores", "score", False),
    ("underscore", "score", False),
    ("score_card", "score", False),
    ("a score.", "score", True),
    ("éscore", "score", False),
    ("scoreé score", "score", True),
])
def test_has_token_matches_whole_tokens_only(pager, text, word, expected):
    assert pager._has_token(text, word) is expected
    assert (word in pager.tokenize(text)) is expected


def test_recency_is_one_now_and_follows_the_formula(pager):
    assert pager.recency(0) == 1.0
    assert pager.recency(7) == pytest.approx(1 / (1 + math.log(8)))


@given(st.integers(min_value=0, max_value=10**6))
def test_recency_never_rises_with_age(delta):
    import pager
    assert pager.recency(delta + 1) <= pager.recency(delta)


@pytest.mark.parametrize("r, expected", [
    (0.55, "retain"), (0.5499999, "page"), (0.20, "page"), (0.1999999, "evict"), (1.0, "retain"), (0.0, "evict"),
])
def test_classify_uses_the_documented_cuts(pager, r, expected):
    assert pager.Params().classify(r) == expected


@given(st.floats(0, 1), st.floats(0, 1))
def test_a_higher_score_never_gets_a_lower_bucket(r1, r2):
    import pager
    rank = {"evict": 0, "page": 1, "retain": 2}
    params = pager.Params()
    lo, hi = sorted((r1, r2))
    assert rank[params.classify(lo)] <= rank[params.classify(hi)]


@pytest.mark.parametrize("params, message", [
    (dict(alpha=float("nan")), "--alpha must be a finite number"),
    (dict(beta=float("inf")), "--beta must be a finite number"),
    (dict(alpha=-0.1), "--alpha must not be negative"),
    (dict(retain_cut=1.5), "--retain-cut must lie in [0, 1]"),
    (dict(evict_cut=-0.1), "--evict-cut must lie in [0, 1]"),
    (dict(retain_cut=0.3, evict_cut=0.4), "must not exceed --retain-cut"),
])
def test_bad_params_are_refused(pager, params, message):
    with pytest.raises(pager.PagerError, match=re.escape(message)):
        pager.Params(**params).validate()


def _history(blocks, intent=("pager",), current=None):
    h = {"intent_ir": list(intent), "blocks": blocks}
    if current is not None:
        h["current_turn"] = current
    return h


def test_score_is_alpha_sim_plus_beta_recency(pager):
    plan = pager.plan_pass(_history([
        {"id": "a", "turn": 3, "role": "user", "text": "pager retention"},
        {"id": "b", "turn": 10, "role": "user", "text": "nothing here"}], intent=["pager", "score"]),
        pager.Params(alpha=0.6, beta=0.4, similarity="plain"))
    a, b = plan.decisions
    assert plan.current_turn == 10  # defaults to the largest turn
    assert a.similarity == 0.5 and a.delta_t == 7
    assert a.R == pytest.approx(0.6 * 0.5 + 0.4 / (1 + math.log(8)))
    assert b.similarity == 0.0 and b.delta_t == 0 and b.R == pytest.approx(0.4)
    assert a.matched == ("pager",) and b.matched == ()


def test_current_turn_from_history_sets_delta_t(pager):
    plan = pager.plan_pass(_history([{"id": "a", "turn": 3, "role": "user", "text": "x"}], current=9))
    assert plan.decisions[0].delta_t == 6


def test_pinned_block_is_retained_with_pinned_reason(pager):
    plan = pager.plan_pass(_history([
        {"id": "a", "turn": 1, "role": "system", "text": "be terse", "pinned": True},
        {"id": "b", "turn": 50, "role": "user", "text": "pager"}]))
    a = plan.decisions[0]
    assert a.action == "retain" and a.reason == "pinned"
    assert a.rationale().startswith("pinned; R=")


def test_tokens_field_is_used_else_estimated(pager):
    plan = pager.plan_pass(_history([
        {"id": "a", "turn": 1, "role": "user", "text": "x" * 41},
        {"id": "b", "turn": 1, "role": "user", "text": "x", "tokens": 7}]))
    assert [d.tokens for d in plan.decisions] == [11, 7]


def test_empty_intent_scores_by_recency_only(pager):
    plan = pager.plan_pass(_history([{"id": "a", "turn": 1, "role": "user", "text": "pager"}], intent=[]))
    assert plan.decisions[0].similarity == 0.0


@pytest.mark.parametrize("blocks, message", [
    ([{"turn": 1, "role": "user", "text": "x"}], "blocks[0].id is missing"),
    ([{"id": 5, "turn": 1, "role": "user", "text": "x"}], "blocks[0].id must be a string (got 5)"),
    ([{"id": "a", "turn": "7a", "role": "user", "text": "x"}], 'blocks[0].turn must be an integer (got "7a")'),
    ([{"id": "a", "turn": 1.0, "role": "user", "text": "x"}], "blocks[0].turn must be an integer (got 1.0)"),
    ([{"id": "a", "turn": True, "role": "user", "text": "x"}], "blocks[0].turn must be an integer (got true)"),
    ([{"id": "a", "turn": -1, "role": "user", "text": "x"}], "blocks[0].turn must not be negative (got -1)"),
    ([{"id": "a", "turn": 1, "text": "x"}], "blocks[0].role is missing"),
    ([{"id": "a", "turn": 1, "role": "", "text": "x"}], "blocks[0].role must be a non-empty string"),
    ([{"id": "a", "turn": 1, "role": "user"}], "blocks[0].text is missing"),
    ([{"id": "a", "turn": 1, "role": "user", "text": ["x"]}], 'blocks[0].text must be a string (got ["x"])'),
    ([{"id": "a", "turn": 1, "role": "user", "text": "x", "pinned": "yes"}], "blocks[0].pinned must be true or false"),
    ([{"id": "a", "turn": 1, "role": "user", "text": "x", "tokens": -3}], "blocks[0].tokens must be a non-negative integer"),
    ([{"id": "a", "turn": 1, "role": "user", "text": "x", "kind": 3}], "blocks[0].kind must be a string"),
    (["x"], 'blocks[0] must be an object (got "x")'),
    ([{"id": "a", "turn": 1, "role": "user", "text": "x"}, {"id": "a", "turn": 2, "role": "user", "text": "y"}],
     'blocks[1].id "a" duplicates blocks[0].id'),
    ([{"id": 'a"b', "turn": 1, "role": "user", "text": "x"}], "blocks[0].id holds a double quote"),
    ([{"id": "a\nb", "turn": 1, "role": "user", "text": "x"}], "blocks[0].id holds a line break (U+000A)"),
    ([{"id": "a\u2028b", "turn": 1, "role": "user", "text": "x"}], "blocks[0].id holds a line break (U+2028)"),
    ([{"id": "", "turn": 1, "role": "user", "text": "x"}], "blocks[0].id must not be empty"),
    ([{"id": "a\ud800", "turn": 1, "role": "user", "text": "x"}], "blocks[0].id holds an unpaired surrogate"),
])
def test_bad_blocks_are_refused_with_their_place(pager, blocks, message):
    with pytest.raises(pager.PagerError, match=re.escape(message)):
        pager.plan_pass(_history(blocks))


def test_turn_after_current_turn_is_refused(pager):
    with pytest.raises(pager.PagerError, match=r"blocks\[0\].turn \(9\) lies after current_turn \(5\)"):
        pager.plan_pass(_history([{"id": "a", "turn": 9, "role": "user", "text": "x"}], current=5))


@pytest.mark.parametrize("history, message", [
    ({"blocks": []}, "no intent: pass --intent"),
    ({"intent_ir": "pager", "blocks": []}, "intent_ir must be a list of keywords or a prosecode.intent.v0 object"),
    ({"intent_ir": ["a", 3], "blocks": []}, r"intent_ir\[1\] must be a string"),
    ({"intent_ir": []}, "blocks is missing"),
    ({"intent_ir": [], "blocks": {}}, "blocks must be a list"),
    ({"intent_ir": [], "blocks": [], "current_turn": "9"}, 'current_turn must be an integer'),
])
def test_bad_header_is_refused(pager, history, message):
    with pytest.raises(pager.PagerError, match=message):
        pager.plan_pass(history)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.sampled_from(["pager retention", "score", "noise", "pager"])),
                max_size=25),
       st.lists(st.sampled_from(["pager", "retention", "score", "contract"]), max_size=4))
def test_same_input_same_decisions(blocks, intent):
    import pager
    history = {"intent_ir": intent, "blocks": [
        {"id": f"b{i}", "turn": t, "role": "user", "text": text} for i, (t, text) in enumerate(blocks)]}
    assert pager.plan_pass(history).decisions == pager.plan_pass(history).decisions


def test_record_line_is_the_json_of_to_dict(pager):
    import json
    plan = pager.plan_pass(_history([
        {"id": "блок \\ 1", "turn": 1, "role": "user", "text": "pager", "kind": "active"},
        {"id": "b2", "turn": 4, "role": "tool", "text": "x"}], intent=["pager", "score", "retention"]))
    for d in plan.decisions:
        assert json.loads(pager._record_line(d)) == d.to_dict()
