"""The machinery that makes a 100,000-block pass fast and small: each fast path equals its reference.

The batch reader, the column-at-a-time scorer, the kept texts, the decision table,
the batch statement check and the batch records are all shortcuts; every test here
pins one of them to the plain, one-at-a-time behaviour it replaces.
"""

import io
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


def _reference(pager, keywords, params, blocks):
    """Decisions, kept texts and tokens from feeding the scorer one block at a time (the reference path)."""
    scorer = pager.Scorer(keywords, params)
    for index, raw in enumerate(blocks):
        scorer.add(index, raw)
    decisions = scorer.finish(None)
    return list(decisions), [scorer.texts.get(k) for k in range(len(decisions))], scorer.tokens_before


@settings(max_examples=120, deadline=None)
@given(st.lists(_BLOCK, max_size=14, unique_by=lambda b: b["id"]), st.sampled_from(["weighted", "plain"]),
       st.integers(1, 5))
def test_batch_scoring_equals_block_by_block_scoring(blocks, similarity, batch):
    """add_batch (tokens, matches and guards a column at a time) gives exactly what add gives, and
    on either path every paged block's text is kept from the read."""
    import pager
    keywords = ["pager", "retention", "score", "family"]
    params = pager.Params(similarity=similarity)
    scorer = pager.Scorer(keywords, params)
    for first in range(0, len(blocks), batch):
        scorer.add_batch(first, blocks[first: first + batch])
    decisions = scorer.finish(None)
    expected, texts, tokens = _reference(pager, keywords, params, blocks)
    assert list(decisions) == expected
    assert scorer.tokens_before == tokens
    for k, d in enumerate(expected):
        if d.action == "page":
            assert scorer.texts.get(k) == texts[k] == blocks[k]["text"]


def test_batch_hits_agree_with_block_hits(pager):
    """The batch keyword search finds a stem only at a token's start, as block_hits does."""
    texts = ["our retention of the families' scores", "underscore re-score", "PAGERS paging", "famili", "", "ß"]
    scorer = pager.Scorer(["retention", "score", "pager", "family"], pager.Params())
    got = scorer._batch_hits(texts)
    assert got == [pager.block_hits(t.lower(), scorer.terms) for t in texts]
    assert got[0] == ("retent", "scor", "famili") and got[1] == ("scor",) and got[2] == ("pager",)


def test_texts_are_kept_only_for_blocks_that_may_be_paged(pager):
    """A block with no match, no matching block just before it and an age that alone evicts keeps no text."""
    blocks = [{"id": f"b{i}", "turn": i, "role": "user", "text": t} for i, t in enumerate(
        ["noise", "noise", "the pager", "after it", "two after", "three after", "noise", "now"])]
    plan = pager.plan_pass({"intent_ir": ["pager"], "current_turn": 7, "blocks": blocks})
    kept = [plan.texts.get(k) is not None for k in range(len(blocks))]
    # b2 matches, b3 and b4 may borrow from it, b7 is too young to be evicted on age; the rest are not kept.
    assert kept == [False, False, True, True, True, False, False, True]
    for k, d in enumerate(plan.decisions):
        if d.action == "page":
            assert plan.texts.get(k) == blocks[k]["text"]


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


@given(st.lists(st.one_of(st.none(), st.text(max_size=30)), max_size=20), st.integers(1, 6))
def test_kept_texts_give_back_exactly_what_they_were_given(texts, seal_every):
    """Unicode, lone surrogates, empty strings and gaps survive the compressed store, in any batching."""
    import pager
    kept = pager.KeptTexts()
    for k, text in enumerate(texts):
        kept.append(text)
        if k % seal_every == 0:
            kept.seal()
    assert len(kept) == len(texts)
    assert [kept.get(k) for k in range(len(texts))] == texts
    assert [kept.get(k) for k in reversed(range(len(texts)))] == texts[::-1]
    kept.clear()
    assert len(kept) == 0


def test_kept_texts_handle_a_lone_surrogate(pager):
    kept = pager.KeptTexts()
    kept.extend(["a\ud800b", None, ""])
    kept.seal()
    assert [kept.get(0), kept.get(1), kept.get(2)] == ["a\ud800b", None, ""]


def test_decision_table_is_a_sequence_of_decisions(pager):
    plan = pager.plan_pass({"intent_ir": ["pager"], "blocks": [
        {"id": f"b{i}", "turn": i, "role": "user", "text": "pager" if i % 2 else "noise"} for i in range(5)]})
    table = plan.decisions
    rows = list(table)
    assert isinstance(table, pager.DecisionTable) and len(table) == 5
    assert all(isinstance(d, pager.Decision) for d in rows)
    assert table[1] == rows[1] and table[-1] == rows[-1] and table[1:3] == rows[1:3]
    assert table == rows and rows == table and table == pager.DecisionTable.of(rows)
    table[0] = rows[0]._replace(action="page", reason="budget-paged")
    assert table[0].action == "page" and table.action[0] == "page" and table != rows
    assert pager.DecisionTable.of([]) == []


def test_checking_a_list_of_statements_is_checking_each(pager):
    good = ['add "b1" to paged-blocks because "R=0.4"', "remember a number called pager-alpha with 0.7",
            'remember a value called last-pager-pass with "2026-05-17T03:08:12+00:00"']
    pager.check_statements(good)  # the number form has no fixed segments: checked alone, and passes
    for bad in ['add "b1" to paged-blocks because ""', 'add "b\u2028" to paged-blocks because "x"',
                'add "b1\nadd" to paged-blocks because "x"', 'add "b1" to lost-blocks because "x"',
                'add "b1" to paged-blocks because "x\r"', "remember a number called pager-alpha with 1e3"]:
        with pytest.raises(pager.PagerError) as single:
            pager.check_statement(bad)
        with pytest.raises(pager.PagerError) as batch:
            pager.check_statements(good + [bad])
        assert str(batch.value) == str(single.value)


def test_records_from_the_table_are_the_json_of_each_decision(pager):
    """The batch writer's lines parse to Decision.to_dict, and equal record_line, line for line."""
    blocks = [{"id": f"b\"{i}é", "turn": i, "role": "user" if i % 3 else "system", "kind": "active",
               "text": "pager retention" if i % 2 else "noise " * i} for i in range(40)]
    plan = pager.plan_pass({"intent_ir": ["pager", "retention"], "blocks": [dict(b, id=f"b{i}") for i, b in
                                                                          enumerate(blocks)]})
    out = io.StringIO()
    pager._write_records(out, plan.decisions)
    lines = out.getvalue().splitlines()
    assert lines == [pager.record_line(d) for d in plan.decisions]
    assert [json.loads(line) for line in lines] == [d.to_dict() for d in plan.decisions]


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
    monkeypatch.setattr(pager.KeptTexts, "get", lambda self, k: None)  # as if nothing had been kept
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


# --- helper processes (large passes) ---

def _big_history(tmp_path, n=400):
    history = tmp_path / "h.json"
    blocks = [{"id": f"b{i}", "turn": i // 2, "role": ("user", "assistant", "tool")[i % 3],
               "text": ("the pager keeps score" if i % 4 == 0 else "unrelated chatter é") + f" #{i}"}
              for i in range(n)]
    history.write_text(json.dumps({"intent_ir": ["pager", "score"], "blocks": blocks}), encoding="utf-8")
    return history


def _pass(cli, folder, history):
    """Run a pass into ``folder``; return everything it wrote, with the folder's name taken out."""
    import sqlite3
    folder.mkdir()
    result = cli("--history", history, "--contract", folder / "c.limn", "--now", "2026-01-01T00:00:00Z")
    store = folder / "c.pages.sqlite3"
    rows = sqlite3.connect(store).execute("SELECT * FROM pages ORDER BY block").fetchall() if store.exists() else []
    return result.code, result.out.replace(str(folder), "F"), result.err, (folder / "c.limn").read_bytes(), rows


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="helpers need fork")
def test_helpers_change_nothing_but_speed(tmp_path, monkeypatch, cli):
    """With helper processes the pass writes the same contract, records, summary and store, byte for byte."""
    import pager
    history = _big_history(tmp_path)
    monkeypatch.setattr(pager, "HELPER_MIN_BLOCKS", 10 ** 9)
    alone = _pass(cli, tmp_path / "alone", history)
    started = []
    real = pager._Helper.__init__

    def counting(self, work, close=()):
        started.append(work)
        real(self, work, close)

    monkeypatch.setattr(pager, "HELPER_MIN_BLOCKS", 1)
    monkeypatch.setattr(pager._Helper, "__init__", counting)
    helped = _pass(cli, tmp_path / "helped", history)
    assert len(started) == 2 or not pager._can_help()  # records and contract statements
    assert helped == alone
    assert alone[0] == 0 and alone[2].count("\n") == 400


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="helpers need fork")
def test_a_failing_helper_is_replaced_by_the_pass_itself(tmp_path, monkeypatch, cli):
    import os
    import pager
    history = _big_history(tmp_path)
    monkeypatch.setattr(pager, "HELPER_MIN_BLOCKS", 10 ** 9)
    alone = _pass(cli, tmp_path / "alone", history)
    parent = os.getpid()
    real_records, real_batches = pager._write_records, pager.statement_batches

    def records_failing_in_helper(stream, decisions):
        if os.getpid() != parent:
            raise RuntimeError("helper broke")
        return real_records(stream, decisions)

    def batches_failing_in_helper(*args, **kwargs):
        if os.getpid() != parent:
            os._exit(3)
        return real_batches(*args, **kwargs)

    monkeypatch.setattr(pager, "HELPER_MIN_BLOCKS", 1)
    monkeypatch.setattr(pager, "_write_records", records_failing_in_helper)
    monkeypatch.setattr(pager, "statement_batches", batches_failing_in_helper)
    assert _pass(cli, tmp_path / "again", history) == alone  # the same bytes, done in the pass itself


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="helpers need fork")
def test_a_pass_that_fails_after_helpers_started_prints_one_line(tmp_path, monkeypatch, cli):
    """A write failure after the helpers started: one error line, no records, contract unchanged."""
    import pager
    history = _big_history(tmp_path)
    monkeypatch.setattr(pager, "HELPER_MIN_BLOCKS", 1)

    def refuse(self, payload):
        raise pager.PagerError(f"{self.path}: write failed (No space left on device); contract left as it was")

    monkeypatch.setattr(pager.LockedContract, "append", refuse)
    result = cli("--history", history, "--contract", tmp_path / "c.limn")
    assert result.code == 2
    assert result.err.count("\n") == 1 and result.err.startswith("pager: error: ") and "No space" in result.err
    assert not (tmp_path / "c.limn").exists()


# --- the split read (large history files) ---

_FORKS = pytest.mark.skipif(not __import__("pager")._can_help(),
                            reason="the split read needs fork and two cores")


def _write_history(path, blocks, after=None):
    doc = {"intent_ir": ["pager", "score"], "blocks": blocks}
    doc.update(after or {})
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def _many(n, **extra):
    return [dict({"id": f"b{i}", "turn": i // 2, "role": ("user", "assistant", "tool")[i % 3],
                  "text": ("the pager keeps score ✓ " if i % 4 == 0 else "chatter é😀 ") + "x" * (i % 13)}, **extra)
            for i in range(n)]


def _plans(pager, monkeypatch, path, **kwargs):
    """Plan the history with the split read and without; return both outcomes and whether the split joined."""
    joins = []
    real_join = pager._SplitRead.join

    def join(self, index, runs):
        result = real_join(self, index, runs)
        joins.append(result is not None)
        return result

    monkeypatch.setattr(pager._SplitRead, "join", join)
    outcomes = []
    for least in (1, 10 ** 12):
        monkeypatch.setattr(pager, "SPLIT_MIN_BYTES", least)
        source = pager.HistorySource(str(path))
        try:
            plan = pager.load_and_plan(source, pager.Params(), **kwargs)
            pages = [k for k, d in enumerate(plan.decisions) if d.action == "page"]
            outcomes.append((list(plan.decisions), plan.header, [plan.texts.get(k) for k in pages],
                             [raw for _, raw in source.blocks_at(range(0, len(plan.decisions), 37))]))
        except pager.PagerError as exc:
            outcomes.append(str(exc))
    return outcomes[0], outcomes[1], joins


@_FORKS
def test_split_read_equals_one_read(pager, tmp_path, monkeypatch):
    """Decisions, header, kept texts and later reads of single blocks agree, multi-byte text included."""
    blocks = _many(3000)
    path = _write_history(tmp_path / "h.json", blocks, after={"current_turn": 2000, "note": "after the list"})
    split, alone, joins = _plans(pager, monkeypatch, path)
    assert joins == [True]
    assert split == alone
    assert split[1] == {"intent_ir": ["pager", "score"], "current_turn": 2000, "note": "after the list"}
    assert split[3] == blocks[::37]


@_FORKS
def test_split_read_reports_a_duplicate_across_halves_as_one_read_does(pager, tmp_path, monkeypatch):
    blocks = _many(3000)
    blocks[2900]["id"] = "b10"
    split, alone, joins = _plans(pager, monkeypatch, _write_history(tmp_path / "h.json", blocks))
    assert split == alone and "blocks[2900].id \"b10\" duplicates blocks[10].id" in split


@_FORKS
def test_split_read_reports_bad_json_in_the_second_half_as_one_read_does(pager, tmp_path, monkeypatch):
    path = _write_history(tmp_path / "h.json", _many(3000))
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"id": "b2800"', '"id": "b2800",,', 1), encoding="utf-8")
    split, alone, joins = _plans(pager, monkeypatch, path)
    assert split == alone and "invalid JSON at line 1, column" in split
    assert joins == [False]  # the helper failed on the bad JSON; the pass read on and met it itself


@_FORKS
def test_split_read_leaves_stubs_to_the_pass(pager, tmp_path, monkeypatch):
    """A stub in the second half needs the page store, which a helper never opens: the pass reads on."""
    blocks = _many(3000)
    blocks[2500] = {"id": "b2500", "turn": 1250, "role": "user", "text": "[paged b2500]", "stub": True}
    page = pager.StoredPage("b2500", 1250, "user", None, 9, ("pager",), "", "", "", "the pager was here")
    split, alone, joins = _plans(pager, monkeypatch, _write_history(tmp_path / "h.json", blocks),
                                 pages=lambda block: page if block == "b2500" else None)
    assert joins == [False] and split == alone


@_FORKS
def test_split_read_falls_back_when_its_start_is_inside_a_block(pager, tmp_path, monkeypatch):
    """Blocks full of nested objects: a break near the middle may lie inside one; the result is the same."""
    meta = [{"a": i, "b": "x"} for i in range(40)]
    cancels = []
    real_cancel = pager._SplitRead.cancel
    monkeypatch.setattr(pager._SplitRead, "cancel", lambda self: (cancels.append(self.helper is not None),
                                                                  real_cancel(self)))
    split, alone, joins = _plans(pager, monkeypatch, _write_history(tmp_path / "h.json", _many(800, meta=meta)))
    assert split == alone
    assert joins == [] and True in cancels  # passed its start mid-block: the helper was stopped


@settings(max_examples=80, deadline=None)
@given(st.lists(_BLOCK, min_size=1, max_size=14, unique_by=lambda b: b["id"]),
       st.sampled_from([(0.7, 0.3), (1, 0), (0, 1), (0.5, 0.5), (2, 1)]), st.sampled_from(["weighted", "plain"]))
def test_column_scores_follow_the_formula_block_by_block(blocks, weights, similarity):
    """The column-at-a-time scores equal R = alpha * sim + beta * recency worked out for each block alone,
    int weights included."""
    import pager
    params = pager.Params(alpha=weights[0], beta=weights[1], similarity=similarity, retain_cut=1.0, evict_cut=0.0)
    plan = pager.plan_pass({"intent_ir": ["pager", "score", "family"], "blocks": blocks}, params)
    scorer = pager.Scorer(["pager", "score", "family"], params)
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


def test_one_usable_core_means_no_helpers(tmp_path, monkeypatch, cli):
    """A process pinned to one core (taskset, a cpuset) or without fork runs the whole pass itself."""
    import os
    import pager
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert not pager._can_help()
    monkeypatch.setattr(pager, "HELPER_MIN_BLOCKS", 1)
    monkeypatch.setattr(pager, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(pager._Helper, "__init__", lambda self, work, close=(): pytest.fail("a helper started"))
    assert _pass(cli, tmp_path / "one", _big_history(tmp_path))[0] == 0
    monkeypatch.delattr(os, "fork", raising=False)
    assert not pager._can_help()


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="helpers need fork")
def test_the_contract_helper_lets_go_of_the_locked_contract(tmp_path, monkeypatch, cli):
    """The helper rendering statements closes its copy of the contract's descriptor at once, so the
    lock ends with the pass even if the pass is killed while the helper still runs."""
    import os
    import pager
    seen = tmp_path / "seen"
    fds = []
    real_fileno, real_batches = pager.LockedContract.fileno, pager.statement_batches
    parent = os.getpid()

    def fileno(self):
        fds.append(real_fileno(self))
        return fds[-1]

    def batches(*args, **kwargs):
        if os.getpid() != parent:
            try:
                os.fstat(fds[-1])
                seen.write_text("open")
            except OSError:
                seen.write_text("closed")
        return real_batches(*args, **kwargs)

    monkeypatch.setattr(pager, "HELPER_MIN_BLOCKS", 1)
    monkeypatch.setattr(pager.LockedContract, "fileno", fileno)
    monkeypatch.setattr(pager, "statement_batches", batches)
    assert _pass(cli, tmp_path / "p", _big_history(tmp_path))[0] == 0
    if pager._can_help():
        assert seen.read_text() == "closed"


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
            pager.check_statements(statements)
        assert str(batch.value) == errors[0]
    else:
        pager.check_statements(statements)
