"""The session contract: statement checks, golden files, replay in Liminate, incremental passes."""

import json
import multiprocessing
import os
import re

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ASSET, NOW, ROOT, liminate_module, replay

GOLDEN = ROOT / "tests" / "golden"


# --- the vocabulary and the statement forms ---

def test_vocabulary_has_exactly_35_words(pager):
    assert len(pager.LIMN_VOCAB) == 35
    assert all(re.fullmatch(r"[a-z][a-z0-9-]*", w) for w in pager.LIMN_VOCAB)


@pytest.mark.parametrize("statement, form", [
    ('about "prosecode context pager session contract"', "about"),
    ("remember a list called paged-blocks", "declare"),
    ('add "b1" to retained-blocks because "R=0.600 sim=1.000 rec=0.200 dt=5"', "add"),
    ('remove "b1" from evicted-blocks because "recalled"', "remove"),
    ('remember a value called last-pager-pass with "2026-05-17T03:08:12+00:00"', "text"),
    ("remember a number called pager-alpha with 0.7", "number"),
    ("remember a number called tokens-after with 1200", "number"),
])
def test_documented_forms_pass_the_check(pager, statement, form):
    assert pager.check_statement(statement) == form


@pytest.mark.parametrize("statement, problem", [
    ('add "b1" to todo-list because "x"', "not in the pager vocabulary"),
    ('set last-pager-pass to "x"', "not in the pager vocabulary"),
    ('add "b1" to paged-blocks', "no documented form"),
    ('add "b1" to paged-blocks because "x" ', "stray space"),
    ('add  "b1" to paged-blocks because "x"', "stray space"),
    ('add "b1"to paged-blocks because "x"', "space after a quoted value"),
    ('add "b1 to paged-blocks because "x"', "unclosed quote"),
    ('add "" to paged-blocks because "x"', "empty or unwritable"),
    ('add "a\u2029b" to paged-blocks because "x"', "empty or unwritable"),
    ("remember a number called pager-alpha with 1e-3", "not in the pager vocabulary"),
    ('remember a value called pager-alpha with "0.7"', "no documented form"),
    ("remember a number called last-pager-pass with 3", "no documented form"),
    ("# a comment", "character outside the vocabulary"),
    ("Add \"b\" to paged-blocks because \"x\"", "character outside the vocabulary"),
])
def test_slips_fail_the_check(pager, statement, problem):
    with pytest.raises(pager.PagerError, match=re.escape(problem)):
        pager.check_statement(statement)


def test_every_rendered_word_is_in_the_vocabulary(pager):
    plan = pager.plan_pass(json.loads(ASSET.read_text()))
    for statement in pager.render_pass(plan, pager.ContractState(), NOW):
        words = " ".join(statement.split('"')[0::2]).split()
        assert all(w in pager.LIMN_VOCAB or re.fullmatch(r"-?\d+(\.\d+)?", w) for w in words), statement


# --- golden contracts, byte for byte ---

def _golden_cases():
    return sorted(p.stem for p in GOLDEN.glob("*.json"))


@pytest.mark.parametrize("case", _golden_cases())
def test_golden_contract(cli, tmp_path, case):
    contract = tmp_path / "c.limn"
    before = GOLDEN / f"{case}.before.limn"
    if before.exists():
        contract.write_bytes(before.read_bytes())
    args_file = GOLDEN / f"{case}.args"
    extra = args_file.read_text().split() if args_file.exists() else []
    result = cli("--history", GOLDEN / f"{case}.json", "--contract", contract, "--now", NOW, *extra)
    assert result.code == 0, result.err
    assert contract.read_bytes() == (GOLDEN / f"{case}.limn").read_bytes()


def test_golden_cases_exist():
    assert {"asset", "foreign", "moved", "pinned"} <= set(_golden_cases())


def test_golden_asset_case_is_the_shipped_asset():
    assert json.loads((GOLDEN / "asset.json").read_text()) == json.loads(ASSET.read_text())


@pytest.mark.parametrize("case", _golden_cases())
def test_golden_contract_replays_in_liminate(case):
    text = (GOLDEN / f"{case}.limn").read_text()
    _, values = replay(text)
    assert values["last-pager-pass"] == NOW


# --- replay equals the pager's state ---

def _pass(pager, tmp_path, history, contract, now=NOW, params=None):
    path = tmp_path / "h.json"
    path.write_text(json.dumps(history))
    plan = pager._load_and_plan(str(path), params or pager.Params())
    pager._append_to_contract(str(contract), lambda s: pager._encode_batches(
        s, pager._statement_batches(plan, s, now)))
    return plan


def _lists_of(decisions_by_block):
    lists = {"retained-blocks": set(), "paged-blocks": set(), "evicted-blocks": set()}
    for block, action in decisions_by_block.items():
        lists[{"retain": "retained-blocks", "page": "paged-blocks", "evict": "evicted-blocks"}[action]].add(block)
    return lists


def test_incremental_passes_replay_to_the_last_pass(pager, tmp_path):
    contract = tmp_path / "c.limn"
    base = json.loads(ASSET.read_text())
    intents = [["pager", "retention", "score", "contract"], ["coffee", "lunch", "pizza"],
               ["npm", "deprecated", "ls"], ["pager", "retention", "score", "contract"]]
    seen = {}
    sizes = []
    for step, intent in enumerate(intents):
        history = dict(base, intent_ir=intent, current_turn=15 + 3 * step)
        history["blocks"] = base["blocks"] + [
            {"id": f"new-{step}", "turn": 15 + 3 * step, "role": "user", "text": " ".join(intent)}]
        plan = _pass(pager, tmp_path, history, contract, now=f"2026-05-17T0{step}:00:00+00:00")
        seen.update({d.block: d.action for d in plan.decisions})
        topic, values = replay(contract.read_text())
        assert topic == pager.CONTRACT_TOPIC
        assert {k: set(values[k]) for k in _lists_of(seen)} == _lists_of(seen)
        assert values["last-pager-pass"] == f"2026-05-17T0{step}:00:00+00:00"
        assert pager.contract_state(str(contract)).directives == seen
        sizes.append(len(contract.read_text().splitlines()))
    assert any(set(a.items()) != set(b.items()) for a, b in [(seen, {})])  # something was decided
    moved = contract.read_text().count("\nremove ")
    assert moved > 0, "the changed intents must move some blocks"


def test_unchanged_passes_add_only_the_marker(pager, tmp_path):
    contract = tmp_path / "c.limn"
    history = json.loads(ASSET.read_text())
    _pass(pager, tmp_path, history, contract, now="2026-05-17T00:00:00+00:00")
    first = contract.read_text()
    for i in range(1, 6):
        _pass(pager, tmp_path, history, contract, now=f"2026-05-17T00:00:0{i}+00:00")
    lines = contract.read_text()[len(first):].splitlines()
    assert lines == [f'remember a value called last-pager-pass with "2026-05-17T00:00:0{i}+00:00"'
                     for i in range(1, 6)]


def test_changed_flags_are_remembered_once(pager, tmp_path):
    contract = tmp_path / "c.limn"
    history = json.loads(ASSET.read_text())
    _pass(pager, tmp_path, history, contract)
    _pass(pager, tmp_path, history, contract, params=pager.Params(alpha=0.9, beta=0.1))
    _, values = replay(contract.read_text())
    assert values["pager-alpha"] == 0.9 and values["pager-beta"] == 0.1
    assert contract.read_text().count("called pager-retain-cut") == 1


def test_foreign_contract_is_appended_to_untouched(pager, tmp_path):
    contract = tmp_path / "c.limn"
    foreign = ('about "team session for the billing service"\n'
               'remember a list called open-questions\n'
               'add "why does the invoice total drift" to open-questions\n'
               'remember a value called owner with "ana"\n')
    contract.write_text(foreign)
    plan = _pass(pager, tmp_path, json.loads(ASSET.read_text()), contract)
    text = contract.read_text()
    assert text.startswith(foreign)
    assert text.count("about ") == 1
    topic, values = replay(text)
    assert topic == "team session for the billing service"
    assert values["open-questions"] == ["why does the invoice total drift"]
    assert values["owner"] == "ana"
    assert set(values["paged-blocks"]) == {d.block for d in plan.decisions if d.action == "page"}


def test_lists_declared_by_another_tool_are_not_declared_again(pager, tmp_path):
    contract = tmp_path / "c.limn"
    contract.write_text("remember a list called retained-blocks\nremember a list called paged-blocks\n")
    _pass(pager, tmp_path, json.loads(ASSET.read_text()), contract)
    text = contract.read_text()
    assert text.count("remember a list called retained-blocks") == 1
    assert text.count("remember a list called evicted-blocks") == 1
    assert "about " not in text  # about may only open a file; this one already had statements
    replay(text)


def test_unterminated_foreign_last_line_gets_its_line_end(pager, tmp_path):
    contract = tmp_path / "c.limn"
    contract.write_text('remember a value called owner with "ana"')
    _pass(pager, tmp_path, json.loads(ASSET.read_text()), contract)
    text = contract.read_text()
    assert text.startswith('remember a value called owner with "ana"\nremember a list called')
    assert replay(text)[1]["owner"] == "ana"


def test_redeclared_list_resets_like_liminate(pager):
    text = ("remember a list called paged-blocks\nadd \"a\" to paged-blocks because \"x\"\n"
            "remember a list called paged-blocks\n")
    assert pager.read_contract_state(text).directives == {}
    assert replay(text)[1]["paged-blocks"] == []


@pytest.mark.parametrize("text, message", [
    ('remember a list called paged-blocks\nadd "a" to paged-blocks becaus "x"\n',
     "line 2: can't read back pager statement"),
    ('remember a list called paged-blocks\nremove "a" from paged-blocks because "x"\n',
     'line 2: can\'t read back pager statement: block "a" is not in paged-blocks'),
    ('add "a" to paged-blocks because "x"\n', "line 1: can't read back pager statement: adds to paged-blocks before it is declared"),
    ('remember a list called paged-blocks\nremember a list called evicted-blocks\n'
     'add "a" to paged-blocks because "x"\nadd "a" to evicted-blocks because "x"\n',
     'line 4: can\'t read back pager statement: block "a" is already in paged-blocks'),
    ('remember a list called paged-blocks\nadd "a" to paged-blocks because "R=0.4',
     "line 2: can't read back pager statement (no line end: cut short?)"),
    ('remember a list called paged-blocks\nadd "a" to paged-bl', "line 2 looks cut short (no line end)"),
    ('remember a list called paged-blocks\nremember a value called owner with "an', "line 2 looks cut short"),
])
def test_unreadable_contract_is_refused_naming_the_line(pager, text, message):
    with pytest.raises(pager.PagerError, match=re.escape(message)):
        pager.read_contract_state(text)


def test_refused_contract_is_left_byte_identical(pager, cli, tmp_path):
    contract = tmp_path / "c.limn"
    damaged = b'remember a list called paged-blocks\nadd "a" to paged-blocks because "R=0.4'
    contract.write_bytes(damaged)
    result = cli("--history", ASSET, "--contract", contract, "--now", NOW)
    assert result.code == 2
    assert result.err.startswith(f"pager: error: {contract}: line 2: ")
    assert len(result.err.splitlines()) == 1
    assert contract.read_bytes() == damaged


# --- ids: anything but a quote, a line break or the one word Liminate lists as nothing ---

_LINE_BREAKS = '"\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029'


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=_LINE_BREAKS),
                        min_size=1, max_size=30).filter(lambda i: i != "none"), min_size=1, max_size=6, unique=True))
def test_arbitrary_unicode_ids_pass_the_check_and_replay(ids):
    import pager
    history = {"intent_ir": ["pager"], "blocks": [
        {"id": block, "turn": i, "role": "user", "text": "pager" if i % 2 else "other"} for i, block in enumerate(ids)]}
    plan = pager.plan_pass(history)
    text = "".join(s + "\n" for s in pager.render_pass(plan, pager.ContractState(), NOW))
    _, values = replay(text)
    for d in plan.decisions:
        assert d.block in values[pager.LIST_OF_ACTION[d.action]]


def test_the_id_none_is_refused_because_the_interpreter_lists_it_as_nothing(cli, tmp_path):
    """The real interpreter reads a list holding only "none" as empty (the next add replaces it) and
    fails ``remove "none"``: a block with that id could not be recorded, so the pass refuses it with
    one line, writing nothing."""
    import pager
    result = liminate_module().run('about "t"\nremember a list called retained-blocks\n'
                                   'add "none" to retained-blocks because "x"\nadd "b" to retained-blocks because "x"\n')
    assert result.symbol_table["retained-blocks"].value == ["b"]
    history = tmp_path / "h.json"
    history.write_text(json.dumps({"intent_ir": ["x"], "blocks": [
        {"id": "b1", "turn": 1, "role": "user", "text": "x"}, {"id": "none", "turn": 1, "role": "user", "text": "y"}]}))
    done = cli("--history", history, "--contract", tmp_path / "c.limn", "--now", NOW)
    assert done.code == 2 and not (tmp_path / "c.limn").exists()
    assert done.err.strip().splitlines() == [f'pager: error: {history}: blocks[1].id "none" is the word Liminate '
                                             "reads as no entry: a contract can't list it"]
    with pytest.raises(pager.PagerError, match="blocks\\[0\\].id"):
        pager.plan_pass({"blocks": [{"id": "none", "turn": 0, "role": "user", "text": "t"}]})


@pytest.mark.parametrize("bad", ['a"b', "a\nb", "a\rb", "a\x0bb", "a\x0cb", "a\x1cb", "a\x85b", "a\u2028b"])
def test_ids_with_quotes_or_line_breaks_are_refused_and_nothing_written(cli, tmp_path, bad):
    history = tmp_path / "h.json"
    history.write_text(json.dumps({"intent_ir": ["x"], "blocks": [{"id": bad, "turn": 1, "role": "user", "text": "x"}]}))
    contract = tmp_path / "c.limn"
    result = cli("--history", history, "--contract", contract)
    assert result.code == 2
    assert re.fullmatch(rf"pager: error: {re.escape(str(history))}: blocks\[0\]\.id holds (a double quote|a line break \(U\+[0-9A-F]{{4}}\)), .*\n", result.err)
    assert not contract.exists()


# --- safe writes ---

def _concurrent_pass(args):
    import subprocess
    import sys
    history, contract, now = args
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "pager.py"), "--history", history,
                           "--contract", contract, "--now", now], capture_output=True, text=True).returncode


def test_concurrent_passes_never_interleave(pager, tmp_path):
    contract = tmp_path / "c.limn"
    jobs = []
    for worker in range(6):
        history = tmp_path / f"h{worker}.json"
        history.write_text(json.dumps({"intent_ir": ["pager"], "blocks": [
            {"id": f"w{worker}-b{i}", "turn": i, "role": "user", "text": "pager" if i % 3 else "noise"}
            for i in range(300)]}))
        jobs.append((str(history), str(contract), f"2026-05-17T03:00:0{worker}+00:00"))
    with multiprocessing.Pool(6) as pool:
        assert pool.map(_concurrent_pass, jobs) == [0] * 6
    text = contract.read_text()
    state = pager.read_contract_state(text)  # raises if any line is torn or repeated
    assert len(state.directives) == 6 * 300
    assert text.count('called last-pager-pass with') == 6
    assert text.count("about ") == 1 and text.count("remember a list called paged-blocks") == 1
    _, values = replay(text)
    assert sum(len(values[name]) for name in pager.LIST_OF_ACTION.values()) == 6 * 300


def test_failed_write_truncates_back(pager, tmp_path, monkeypatch):
    contract = tmp_path / "c.limn"
    contract.write_bytes(b'remember a value called owner with "ana"\n')
    before = contract.read_bytes()
    real_write = os.write
    calls = {"n": 0}

    def flaky_writev(fd, pieces):
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(pieces[0][:10]))  # a partial write...
        raise OSError(28, "No space left on device")  # ...then the disk fills up

    monkeypatch.setattr(pager.os, "writev", flaky_writev)
    plan = pager.plan_pass(json.loads(ASSET.read_text()))
    with pytest.raises(pager.PagerError, match="no space left while writing the contract; contract left as it was"):
        pager._append_to_contract(str(contract), lambda s: pager._encode_batches(
            s, pager._statement_batches(plan, s, NOW)))
    assert contract.read_bytes() == before


def test_error_while_rendering_leaves_no_new_file(pager, tmp_path):
    contract = tmp_path / "c.limn"

    def render(state):
        raise pager.PagerError("boom")

    with pytest.raises(pager.PagerError, match="boom"):
        pager._append_to_contract(str(contract), render)
    assert not contract.exists()
