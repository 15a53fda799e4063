"""Paging made real: the page store, stubs, --emit, the page index, recall, crash consistency."""

import json
import os
import sqlite3
import stat
import subprocess
import sys

import pytest

from conftest import ASSET, NOW, ROOT, replay, run_script

SECRET = "sk-live-PASTED-BY-MISTAKE-7f3a9c"


def _history(blocks, intent, current=None):
    h = {"intent_ir": intent, "blocks": blocks}
    if current is not None:
        h["current_turn"] = current
    return h


def _write(path, history):
    path.write_text(json.dumps(history, ensure_ascii=False))
    return path


def _store_ids(path):
    if not path.exists():
        return set()
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT block FROM pages")}


def _agree(pager, contract, store):
    """The store holds exactly the blocks the contract lists as paged, and replay equals the state."""
    state = pager.contract_state(str(contract))
    paged = {b for b, a in state.directives.items() if a == "page"}
    assert _store_ids(store) == paged
    _, values = replay(contract.read_text())
    for action, name in pager.LIST_OF_ACTION.items():
        assert values[name] == [b for b, a in state.directives.items() if a == action]
    return state


def test_paged_blocks_go_to_an_owner_only_store_beside_the_contract(cli, pager, tmp_path):
    contract = tmp_path / "c.limn"
    result = cli("--history", ASSET, "--contract", contract, "--now", NOW)
    assert result.code == 0
    store = tmp_path / "c.pages.sqlite3"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    paged = {r["block"] for r in result.records if r["action"] == "page"}
    assert _store_ids(store) == paged and len(paged) == 5
    page = pager.PageStore.open(str(store), create=False).get("block-0x05")
    original = next(b for b in json.loads(ASSET.read_text())["blocks"] if b["id"] == "block-0x05")
    assert page.text == original["text"] and page.turn == 7 and page.role == "user"
    assert page.sha256 == pager._text_sha256(original["text"])
    assert page.keywords == ("retent", "contract") and page.paged_at == NOW  # matched stems
    assert page.tokens == pager.estimate_tokens(original["text"])
    _agree(pager, contract, store)


def test_store_flag_overrides_the_path_and_is_recorded(cli, tmp_path):
    contract, store = tmp_path / "c.limn", tmp_path / "elsewhere.db"
    assert cli("--history", ASSET, "--contract", contract, "--store", store, "--now", NOW).code == 0
    assert store.exists() and not (tmp_path / "c.pages.sqlite3").exists()
    assert f'remember a value called pager-store with "{store}"' in contract.read_text()
    index = cli("index", "--contract", contract)  # finds the store through the contract
    assert index.code == 0 and "block-0x05 | turn 7" in index.out


def test_evicted_text_never_reaches_the_store(cli, tmp_path):
    history = _write(tmp_path / "h.json", _history([
        {"id": "paste", "turn": 1, "role": "user", "text": f"oops {SECRET}"},
        {"id": "task", "turn": 9, "role": "user", "text": "fix the parser"}], ["parser"]))
    assert cli("--history", history, "--contract", tmp_path / "c.limn", "--now", NOW).code == 0
    store = tmp_path / "c.pages.sqlite3"
    assert not store.exists() or SECRET.encode() not in store.read_bytes()


def test_evict_deletes_a_paged_block_from_the_store_bytes(cli, pager, tmp_path):
    contract, store = tmp_path / "c.limn", tmp_path / "c.pages.sqlite3"
    blocks = [{"id": "paste", "turn": 1, "role": "user", "text": f"parser config {SECRET}"},
              {"id": "task", "turn": 2, "role": "user", "text": "fix the parser"}]
    # Paged first: it matches half the intent.
    history = _write(tmp_path / "h.json", _history(blocks, ["parser", "tokens"], current=2))
    first = cli("--history", history, "--contract", contract, "--now", NOW, "--similarity", "plain")
    assert {r["block"]: r["action"] for r in first.records}["paste"] == "page"
    assert SECRET.encode() in store.read_bytes()
    # Then evicted by a pass that no longer cares about it.
    history = _write(tmp_path / "h.json", _history(blocks, ["deploy"], current=40))
    second = cli("--history", history, "--contract", contract, "--now", "2026-05-17T04:00:00+00:00",
                 "--similarity", "plain")
    assert {r["block"]: r["action"] for r in second.records}["paste"] == "evict"
    assert SECRET.encode() not in store.read_bytes()
    assert not (tmp_path / "c.pages.sqlite3-journal").exists()
    _agree(pager, contract, store)


def test_stub_shape_and_word_cap(pager):
    page = pager.StoredPage("block-0x04", 8, "assistant", None, 19, (), "", NOW,
                            pager.stub_summary("word " * 100, [], 40), "")
    stub = pager.make_stub(page, pager._recall_hint("block-0x04", "C.limn", None))
    assert stub.startswith("[paged block-0x04 | turn 8 | assistant | 19 tokens] word word")
    assert stub.endswith(f"word... (recall: {pager.RECALL_COMMAND} block-0x04 --contract C.limn)")
    assert page.summary.count("word") == 40


def test_stub_prefers_the_best_matching_sentence(pager):
    text = "We set up the repo. Then the pager retention score broke on turn 12. Lunch was late."
    assert pager.stub_summary(text, ["retention", "score"], 6) == "Then the pager retention score broke..."
    assert pager.stub_summary(text, ["nothing"], 4) == "We set up the..."


def test_recall_hint_quotes_awkward_ids(pager):
    assert pager._recall_hint("it's a b", "my c.limn", None) == \
        f"{pager.RECALL_COMMAND} 'it'\\''s a b' --contract 'my c.limn'"


def test_emit_writes_the_compacted_history(cli, pager, tmp_path):
    contract, out = tmp_path / "c.limn", tmp_path / "out.json"
    result = cli("--history", ASSET, "--contract", contract, "--now", NOW, "--emit", out)
    assert result.code == 0 and f"wrote {out}" in result.out
    emitted = json.loads(out.read_text())
    original = json.loads(ASSET.read_text())
    assert emitted["intent_ir"] == original["intent_ir"] and emitted["current_turn"] == 15
    actions = {r["block"]: r["action"] for r in result.records}
    by_id = {b["id"]: b for b in emitted["blocks"]}
    for block in original["blocks"]:
        if actions[block["id"]] == "retain":
            assert by_id[block["id"]] == block
        elif actions[block["id"]] == "page":
            stub = by_id[block["id"]]
            assert stub["stub"] is True and stub["text"].startswith(f"[paged {block['id']} | turn {block['turn']} |")
            assert f"recall {block['id']} --contract {contract}" in stub["text"]
        else:
            assert block["id"] not in by_id
    assert [b["id"] for b in emitted["blocks"]] == [b["id"] for b in original["blocks"] if actions[b["id"]] != "evict"]


def test_without_emit_no_history_is_written(cli, tmp_path):
    before = sorted(os.listdir(tmp_path))
    assert cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--now", NOW).code == 0
    assert sorted(set(os.listdir(tmp_path)) - set(before)) == ["c.limn", "c.pages.sqlite3"]


def test_round_trip_page_emit_then_intent_turns_back(cli, pager, tmp_path):
    contract, store = tmp_path / "c.limn", tmp_path / "c.pages.sqlite3"
    original = json.loads(ASSET.read_text())
    target = next(b for b in original["blocks"] if b["id"] == "block-0x05")
    step1 = tmp_path / "step1.json"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW, "--emit", step1).code == 0
    _agree(pager, contract, store)
    compacted = json.loads(step1.read_text())
    stub = next(b for b in compacted["blocks"] if b["id"] == "block-0x05")
    assert stub["stub"] is True and stub["text"] != target["text"]

    # Next pass, same intent: the stub is scored on its stored text and stays a stub.
    step2 = tmp_path / "step2.json"
    again = cli("--history", step1, "--contract", contract, "--now", "2026-05-17T03:10:00+00:00", "--emit", step2)
    assert again.code == 0
    record = next(r for r in again.records if r["block"] == "block-0x05")
    assert record["stub"] is True and record["action"] == "page" and record["matched"] == ["retent", "contract"]
    assert next(b for b in json.loads(step2.read_text())["blocks"] if b["id"] == "block-0x05") == stub
    assert "0 new" in again.out and len(again.records) == 8  # the evicted blocks are gone from the history
    _agree(pager, contract, store)

    # The conversation turns back to the list declarations: the block comes back verbatim.
    turned = dict(json.loads(step2.read_text()), intent_ir=["list", "declarations", "replay"])
    step3_in = _write(tmp_path / "step3-in.json", turned)
    step3 = tmp_path / "step3.json"
    back = cli("--history", step3_in, "--contract", contract, "--now", "2026-05-17T03:20:00+00:00", "--emit", step3)
    assert back.code == 0
    assert next(r for r in back.records if r["block"] == "block-0x05")["action"] == "retain"
    restored = next(b for b in json.loads(step3.read_text())["blocks"] if b["id"] == "block-0x05")
    assert restored == target
    state = _agree(pager, contract, store)
    assert state.directives["block-0x05"] == "retain"
    assert 'remove "block-0x05" from paged-blocks' in contract.read_text()


def test_stub_is_scored_on_the_stored_text_not_the_stub(cli, pager, tmp_path):
    contract = tmp_path / "c.limn"
    blocks = [{"id": "b1", "turn": 1, "role": "user", "text": "The retention cut was wrong."},
              {"id": "b2", "turn": 30, "role": "user", "text": "retention score pager"}]
    out = tmp_path / "out.json"
    assert cli("--history", _write(tmp_path / "h.json", _history(blocks, ["retention", "score"])),
               "--contract", contract, "--now", NOW, "--emit", out).code == 0
    emitted = json.loads(out.read_text())
    stub = emitted["blocks"][0]
    assert stub["stub"] is True
    # Make the stub text itself match nothing: the score must not change.
    stub["text"] = "[paged b1] nothing to see"
    result = cli("--history", _write(tmp_path / "h2.json", emitted), "--contract", contract, "--now", NOW)
    assert result.code == 0
    assert result.records[0]["matched"] == ["retent"] and result.records[0]["stub"] is True


def test_a_stub_with_nothing_stored_is_refused(cli, tmp_path):
    history = _write(tmp_path / "h.json", _history([
        {"id": "ghost", "turn": 1, "role": "user", "text": "[paged ghost]", "stub": True}], ["x"]))
    result = cli("--history", history, "--contract", tmp_path / "c.limn")
    assert result.code == 2
    assert result.err == (f'pager: error: {history}: blocks[0] is the stub of "ghost", but the page store '
                          "holds no text for it (evicted since? pass the latest --emit output)\n")
    assert not (tmp_path / "c.limn").exists()


def test_index_lists_every_paged_block(cli, pager, tmp_path):
    contract = tmp_path / "c.limn"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    result = cli("index", "--contract", contract)
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == f"Paged blocks: 5 (recall one with: {pager.RECALL_COMMAND} ID --contract {contract})"
    assert lines[1] == "block-0x02 | turn 3 | 20 tokens | Set up the repository layout: scripts, tests and assets folders for the..."
    assert [line.split(" | ")[0] for line in lines[1:]] == [
        "block-0x02", "block-0x04", "block-0x05", "block-0x07", "block-0x09"]
    as_json = json.loads(cli("index", "--contract", contract, "--json").out)
    assert [p["block"] for p in as_json["paged"]] == ["block-0x02", "block-0x04", "block-0x05", "block-0x07", "block-0x09"]
    assert as_json["paged"][0]["recall"] == f"{pager.RECALL_COMMAND} block-0x02 --contract {contract}"


def test_emit_with_index_prepends_it_and_the_next_pass_skips_it(cli, tmp_path):
    contract, out = tmp_path / "c.limn", tmp_path / "out.json"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW, "--emit", out, "--with-index").code == 0
    blocks = json.loads(out.read_text())["blocks"]
    assert blocks[0]["pager_index"] is True and blocks[0]["role"] == "system"
    assert blocks[0]["text"].splitlines()[0].startswith("Paged blocks: 5 (recall one with:")
    assert len(blocks[0]["text"].splitlines()) == 6
    again = cli("--history", out, "--contract", contract, "--now", NOW)
    assert again.code == 0 and "pager-index" not in contract.read_text()
    assert len(again.records) == 8


def test_with_index_needs_emit(cli, tmp_path):
    result = cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--with-index")
    assert (result.code, result.err) == (2, "pager: error: --with-index needs --emit\n")


def test_recall_prints_the_exact_text_and_records_the_page_in(cli, pager, tmp_path):
    contract = tmp_path / "c.limn"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    original = next(b for b in json.loads(ASSET.read_text())["blocks"] if b["id"] == "block-0x05")
    result = cli("recall", "block-0x05", "--contract", contract, "--now", "2026-05-17T05:00:00Z")
    assert result.code == 0 and result.out == original["text"]
    tail = contract.read_text().splitlines()[-3:]
    assert tail == ['remove "block-0x05" from paged-blocks because "recalled"',
                    'add "block-0x05" to retained-blocks because "recalled"',
                    'remember a value called last-recall with "2026-05-17T05:00:00+00:00"']
    _, values = replay(contract.read_text())
    assert "block-0x05" in values["retained-blocks"] and "block-0x05" not in values["paged-blocks"]
    assert values["last-recall"] == "2026-05-17T05:00:00+00:00"
    # The next pass cleans the row the page-in left behind.
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    _agree(pager, contract, tmp_path / "c.pages.sqlite3")


def test_recall_several_as_json(cli, tmp_path):
    contract = tmp_path / "c.limn"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    result = cli("recall", "block-0x02", "block-0x04", "--contract", contract, "--json", "--now", NOW)
    data = json.loads(result.out)
    originals = {b["id"]: b["text"] for b in json.loads(ASSET.read_text())["blocks"]}
    assert [(r["block"], r["text"]) for r in data["recalled"]] == [
        ("block-0x02", originals["block-0x02"]), ("block-0x04", originals["block-0x04"])]


@pytest.mark.parametrize("block, message", [
    ("block-0x0c", 'block "block-0x0c" is not paged (it is retained)'),
    ("block-0x01", 'block "block-0x01" is not paged (it is evicted)'),
    ("nope", 'block "nope" is not paged (it was never seen by the pager)'),
])
def test_recall_of_a_block_that_is_not_paged(cli, tmp_path, block, message):
    contract = tmp_path / "c.limn"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    before = contract.read_bytes()
    result = cli("recall", block, "--contract", contract)
    assert (result.code, result.err) == (2, f"pager: error: {contract}: {message}\n")
    assert contract.read_bytes() == before


def test_recall_with_the_store_missing(cli, tmp_path):
    contract = tmp_path / "c.limn"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    (tmp_path / "c.pages.sqlite3").unlink()
    before = contract.read_bytes()
    result = cli("recall", "block-0x05", "--contract", contract)
    assert (result.code, result.err) == (2, f"pager: error: {tmp_path / 'c.pages.sqlite3'}: the page store does not exist\n")
    assert contract.read_bytes() == before


def test_recall_refuses_text_that_fails_its_hash(cli, tmp_path):
    contract, store = tmp_path / "c.limn", tmp_path / "c.pages.sqlite3"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    with sqlite3.connect(store) as db:
        db.execute("UPDATE pages SET text = 'tampered' WHERE block = 'block-0x05'")
    before = contract.read_bytes()
    result = cli("recall", "block-0x05", "--contract", contract)
    assert result.code == 2
    assert result.err == f'pager: error: {store}: the text of "block-0x05" fails its SHA-256 check (the store was altered)\n'
    assert contract.read_bytes() == before


def test_recall_and_index_need_an_existing_contract(cli, tmp_path):
    for args in (["recall", "x"], ["index"]):
        result = cli(*args, "--contract", tmp_path / "none.limn")
        assert (result.code, result.err) == (2, f"pager: error: {tmp_path / 'none.limn'}: no such contract\n")
        assert not (tmp_path / "none.limn").exists()


def test_a_stray_store_row_is_removed_by_the_next_pass(cli, pager, tmp_path):
    contract, store = tmp_path / "c.limn", tmp_path / "c.pages.sqlite3"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    with sqlite3.connect(store) as db:
        db.execute("INSERT INTO pages VALUES ('stray', 1, 'user', NULL, 3, '[]', 'x', 'x', 'x', 'stray text')")
    assert "stray" in _store_ids(store)
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    _agree(pager, contract, store)


_CRASH = """
import os, sys
sys.path.insert(0, {scripts!r})
import pager
def crash(self, payload):
    os._exit(9)  # killed after the store commit, before the contract append
pager._LockedContract.append = crash
sys.exit(pager.main(sys.argv[1:]))
"""


def test_a_pass_killed_between_store_commit_and_contract_append_recovers(cli, pager, tmp_path):
    contract, store = tmp_path / "c.limn", tmp_path / "c.pages.sqlite3"
    script = tmp_path / "crash.py"
    script.write_text(_CRASH.format(scripts=str(ROOT / "scripts")))
    killed = subprocess.run([sys.executable, str(script), "--history", str(ASSET), "--contract", str(contract),
                             "--now", NOW], capture_output=True, text=True)
    assert killed.returncode == 9
    assert len(_store_ids(store)) == 5  # the store committed...
    assert contract.read_bytes() == b""  # ...the contract append never happened (the file exists, empty)
    recovered = cli("--history", ASSET, "--contract", contract, "--now", NOW)
    assert recovered.code == 0
    state = _agree(pager, contract, store)
    assert sorted(b for b, a in state.directives.items() if a == "page") == [
        "block-0x02", "block-0x04", "block-0x05", "block-0x07", "block-0x09"]
    assert contract.read_bytes() == (ROOT / "tests" / "golden" / "asset.limn").read_bytes()
    for block in ("block-0x02", "block-0x09"):
        assert cli("recall", block, "--contract", contract, "--now", NOW).code == 0


def test_dry_run_touches_no_store(cli, tmp_path):
    result = cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--dry-run", "--emit", tmp_path / "o.json")
    assert result.code == 0
    assert os.listdir(tmp_path) == []


def test_index_subprocess_session(tmp_path):
    contract = tmp_path / "c.limn"
    assert run_script("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    result = run_script("index", "--contract", contract)
    assert result.code == 0 and result.out.count("\n") == 6
