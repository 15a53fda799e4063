"""Reliability (issue 11): bad input is exit 2 with one line and no file touched; no race loses
a page; evicted text leaves the store's bytes; no link is followed; contract reading agrees
with Liminate or refuses."""

import json
import os
import random
import sqlite3
import subprocess
import sys

import pytest

from conftest import ASSET, NOW, PAGER, liminate_module, replay, tree_snapshot

PAGE_ALL = ["--evict-cut", "0.0", "--retain-cut", "0.99"]    # page everything not protected
EVICT_ALL = ["--evict-cut", "0.99", "--retain-cut", "1.0"]   # evict everything not protected


_CONNECT = sqlite3.connect  # tests below replace sqlite3.connect for the pager


def _store_ids(path):
    with _CONNECT(path) as db:
        return {row[0] for row in db.execute("SELECT block FROM pages")}


def _assert_refused(result, *needles):
    """Exit 2, exactly one stderr line (as str.splitlines sees it), naming the problem."""
    assert result.code == 2, (result.code, result.err[-2000:])
    assert "Traceback" not in result.err
    assert len(result.err.splitlines()) == 1 and result.err.startswith("pager: error: "), result.err
    for needle in needles:
        assert needle in result.err, result.err


def _deep(depth):
    return "[" * depth + "]" * depth


def _bad_history_cases():
    """(name, history file text, flags, words the error line must hold)."""
    pager_block = '{"id": "b1", "turn": 1, "role": "user", "text": "hello pager"}'
    return [
        ("deep-blocks", '{"intent_ir": ["x"], "blocks": [' + _deep(1000) + "]}", [], "nested too deeply"),
        ("deep-header", '{"intent_ir": ' + _deep(1000) + ', "blocks": []}', ["--format", "pager"], "nested too deeply"),
        ("deep-auto", _deep(1200), [], "nested too deeply"),
        ("deep-chat", '[{"role": "user", "content": ' + _deep(1000) + "}]", ["--format", "openai"], "nested too deeply"),
        ("long-int-header", '{"current_turn": ' + "9" * 5000 + ', "blocks": []}', ["--format", "pager"], "4300 digits"),
        ("long-int-block", '{"intent_ir": ["x"], "blocks": [{"id": "b", "turn": ' + "1" * 4400 + "}]}", [], "4300 digits"),
        ("long-int-auto", '{"messages": [{"role": "user", "content": ' + "9" * 5000 + "}]}", [], "4300 digits"),
        ("type-object", '{"type": {"a": 1}, "uuid": "x", "payload": {}}\n{"type": ["b"], "sessionId": "y"}\n', [],
         "not a known history format"),
        ("current-turn-2-64", '{"current_turn": 18446744073709551616, "intent_ir": ["x"], "blocks": [' + pager_block + "]}",
         [], "current_turn must be at most"),
    ]


@pytest.mark.parametrize("name, text, flags, needle", _bad_history_cases(), ids=[c[0] for c in _bad_history_cases()])
def test_bad_history_is_exit_2_with_one_line_and_no_file(cli, tmp_path, name, text, flags, needle):
    history = tmp_path / "h.json"
    history.write_text(text)
    before = tree_snapshot(tmp_path)
    result = cli("--history", history, "--contract", tmp_path / "c.limn", "--now", NOW,
                 "--emit", tmp_path / "out.json", *flags)
    _assert_refused(result, str(history), needle)
    assert tree_snapshot(tmp_path) == before


@pytest.mark.parametrize("flags, needle", [
    (["--now", "9999-12-31T23:59:59-23:59"], "--now is out of range"),
    (["--emit", "nodir/out.json"], "does not exist"),
    (["--emit", "."], "--emit names a directory"),
    (["--store", 'S"x.sqlite3'], "--store holds a double quote"),
    (["--store", "S\nx.sqlite3"], "--store holds a line break"),
    (["--store", "S\u2028x.sqlite3"], "--store holds a line break"),
])
def test_bad_flags_are_exit_2_before_any_file_is_made(tmp_path, monkeypatch, cli, flags, needle):
    monkeypatch.chdir(tmp_path)
    result = cli("--history", ASSET, "--contract", "c.limn", *flags)
    _assert_refused(result, needle)
    assert os.listdir(tmp_path) == [], "nothing may be created on exit 2"


@pytest.mark.parametrize("echoed", ["a\u2028b", "a\x85b", "a\u2029b", "a\rb", "a\x1cb", "a\x0bb"])
def test_error_lines_are_never_split(tmp_path, echoed):
    """Run as a user would (a real stderr): an echoed line break is never a line break."""
    history = tmp_path / "h.json"
    history.write_text(json.dumps({"blocks": [{"id": "b1", "turn": echoed, "role": "user", "text": "x"}]}))
    for args in ([str(PAGER), "--history", str(history), "--contract", str(tmp_path / "c.limn")],
                 [str(PAGER), "--history", str(tmp_path / f"missing{echoed}.json"), "--contract", str(tmp_path / "c.limn")],
                 [str(PAGER), "recall", echoed, "--contract", str(tmp_path / "c.limn")]):
        proc = subprocess.run([sys.executable, *args], capture_output=True)
        err = proc.stderr.decode("utf-8")
        assert proc.returncode == 2 and len(err.splitlines()) == 1 and err.endswith("\n"), err
    assert sorted(os.listdir(tmp_path)) == ["h.json"]


# --- item 6 and 7: links and same-file mistakes ---

@pytest.mark.parametrize("target", ["target.limn", "dangling/none.limn"])
def test_a_contract_link_is_refused(cli, tmp_path, target):
    (tmp_path / "target.limn").write_text("-- someone else's file\n")
    (tmp_path / "c.limn").symlink_to(tmp_path / target)
    before = tree_snapshot(tmp_path)
    for args in (["--history", ASSET, "--contract", tmp_path / "c.limn", "--now", NOW],
                 ["index", "--contract", tmp_path / "c.limn"],
                 ["recall", "b1", "--contract", tmp_path / "c.limn"]):
        _assert_refused(cli(*args), "symbolic link")
    assert tree_snapshot(tmp_path) == before


def test_a_store_link_is_refused_and_the_other_database_untouched(cli, tmp_path):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE accounts (name TEXT)")
    (tmp_path / "c.pages.sqlite3").symlink_to(other)
    before = tree_snapshot(tmp_path)
    _assert_refused(cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--now", NOW), "symbolic link")
    _assert_refused(cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--store", other, "--now", NOW),
                    "not the pager's page store")
    assert tree_snapshot(tmp_path) == before


def test_an_emit_link_is_refused(cli, tmp_path):
    (tmp_path / "out.json").symlink_to(tmp_path / "elsewhere.json")
    before = tree_snapshot(tmp_path)
    _assert_refused(cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--now", NOW,
                        "--emit", tmp_path / "out.json"), "symbolic link")
    assert tree_snapshot(tmp_path) == before


@pytest.mark.parametrize("contract, store, emit", [
    ("h.json", None, None),             # the contract is the history
    ("c.limn", "h.json", None),         # the store is the history
    ("c.limn", None, "h.json"),         # the compacted history overwrites its input
    ("c.limn", "c.limn", None),         # the store is the contract
    ("c.limn", None, "c.limn"),         # the emitted history is the contract
    ("c.limn", "s.db", "s.db"),         # the emitted history is the store
    ("c.limn", "hard.db", None),        # a hard link to the history
])
def test_same_file_mistakes_are_refused(cli, tmp_path, monkeypatch, contract, store, emit):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h.json").write_bytes(ASSET.read_bytes())
    os.link(tmp_path / "h.json", tmp_path / "hard.db")
    (tmp_path / "c.limn").write_text("-- notes\n")
    before = tree_snapshot(tmp_path)
    args = ["--history", "h.json", "--contract", contract, "--now", NOW]
    args += ["--store", store] if store else []
    args += ["--emit", emit] if emit else []
    _assert_refused(cli(*args), "name the same file")
    assert tree_snapshot(tmp_path) == before


def test_index_never_writes_into_a_database_the_contract_names(cli, tmp_path):
    """A hostile pager-store line points index and recall at another SQLite file: refused, untouched."""
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE accounts (name TEXT)")
    contract = tmp_path / "c.limn"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    with open(contract, "a") as fh:
        fh.write(f'remember a value called pager-store with "{other}"\n')
    before = tree_snapshot(tmp_path)
    _assert_refused(cli("index", "--contract", contract), "not the pager's page store")
    _assert_refused(cli("recall", "block-0x05", "--contract", contract), "not the pager's page store")
    assert tree_snapshot(tmp_path) == before


# --- item 4: the race between a pass's reads and another pass ---

def test_a_pass_reads_stub_texts_under_the_lock(cli, pager, tmp_path, monkeypatch):
    """Forced interleaving: pass B evicts a block (deleting its row) after pass A starts, before A locks.

    A's history holds the block as a stub. Before this fix A read the stub's stored
    text before taking the lock and then recorded the block as paged with no row; now
    A reads it under the lock, sees the row gone and refuses; nothing is lost.
    """
    contract, store = tmp_path / "c.limn", tmp_path / "c.pages.sqlite3"
    compact = tmp_path / "h1.json"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW, "--emit", compact).code == 0
    stubs = [b["id"] for b in json.loads(compact.read_text())["blocks"] if b.get("stub")]
    assert stubs and set(stubs) <= _store_ids(store)

    real_enter = pager._LockedContract.__enter__
    ran = []

    def enter_after_another_pass(self):
        if not ran:  # once: pass B runs to completion in its own process, then A goes on
            ran.append(subprocess.run([sys.executable, str(PAGER), "--history", str(ASSET), "--contract",
                                       str(contract), "--now", NOW, *EVICT_ALL], capture_output=True))
        return real_enter(self)

    monkeypatch.setattr(pager._LockedContract, "__enter__", enter_after_another_pass)
    for flags in ([], ["--emit", str(tmp_path / "h2.json")]):
        result = cli("--history", compact, "--contract", contract, "--now", NOW, *flags)
        assert ran and ran[0].returncode == 0, ran[0].stderr
        _assert_refused(result, "the page store holds no text for it")
    state = pager.contract_state(str(contract))
    paged = {b for b, a in state.directives.items() if a == "page"}
    assert paged <= _store_ids(store)
    assert cli("index", "--contract", contract).code == 0


def test_concurrent_passes_and_recalls_never_lose_a_page(tmp_path):
    """Passes that page, evict and re-read stubs run at once with recalls; every paged block keeps its row."""
    contract, store = tmp_path / "c.limn", tmp_path / "c.pages.sqlite3"
    compact = tmp_path / "h1.json"
    base = [sys.executable, str(PAGER), "--contract", str(contract), "--now", NOW]
    assert subprocess.run(base + ["--history", str(ASSET), "--emit", str(compact)], capture_output=True).returncode == 0
    stub_ids = [b["id"] for b in json.loads(compact.read_text())["blocks"] if b.get("stub")]
    for round_ in range(3):
        procs = [subprocess.Popen(base + ["--history", str(ASSET), *EVICT_ALL], stderr=subprocess.PIPE),
                 subprocess.Popen(base + ["--history", str(compact), "--emit", str(tmp_path / f"o{round_}.json")],
                                  stderr=subprocess.PIPE),
                 subprocess.Popen(base + ["--history", str(ASSET), *PAGE_ALL], stderr=subprocess.PIPE),
                 subprocess.Popen([sys.executable, str(PAGER), "recall", stub_ids[0], "--contract", str(contract)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)]
        for proc in procs:
            err = proc.communicate()[1].decode()
            assert proc.returncode in (0, 2) and "Traceback" not in err, err
        text = contract.read_text()
        lists = replay(text)[1]
        assert set(lists["paged-blocks"]) <= _store_ids(store)
        index = subprocess.run([sys.executable, str(PAGER), "index", "--contract", str(contract)], capture_output=True)
        assert index.returncode == 0, index.stderr


# --- item 5: evicted text leaves the store's bytes ---

def _store_bytes(store):
    data = b""
    for suffix in ("", "-journal", "-wal", "-shm"):
        path = str(store) + suffix
        if os.path.exists(path):
            with open(path, "rb") as fh:
                data += fh.read()
    return data


def test_evicted_text_is_nowhere_in_the_store_files_after_a_sequence_of_passes(cli, tmp_path):
    """Pages stored, re-stored with new text and evicted over eight passes: no evicted text stays on disk.

    A seeded sequence (seed 4 left an evicted text in free space at pass 7 with
    secure_delete alone: SQLite had moved the row before deleting it).
    """
    rng = random.Random(4)
    history, contract, store = tmp_path / "h.json", tmp_path / "c.limn", tmp_path / "c.pages.sqlite3"
    live, gone = {}, set()  # block -> marker of its stored text; markers of texts no row holds
    for step in range(8):
        texts = {}
        for _ in range(rng.randrange(20, 200)):
            block = f"b{rng.randrange(1000):04d}"
            texts[block] = f"M{block}v{step}M " + "pager " * rng.choice([8, 60, 250, 800])
        evict = rng.sample(sorted(set(live) - set(texts)), k=len(live) // 3)
        for block in evict:
            texts[block] = f"gone {block} " + "other " * 5
        blocks = [{"id": b, "turn": 1, "role": "user", "text": t} for b, t in texts.items()]
        history.write_text(json.dumps({"intent_ir": ["pager", "zzzq"], "current_turn": 1, "blocks": blocks}))
        result = cli("--history", history, "--contract", contract, "--now", NOW, "--keep-recent", "0",
                     "--similarity", "plain", "--evict-cut", "0.5", "--retain-cut", "0.99")
        assert result.code == 0, result.err[-500:]
        actions = {r["block"]: r["action"] for r in result.records}
        for block, text in texts.items():
            assert actions[block] == ("evict" if block in evict else "page")
            if block in evict:
                gone.add(live.pop(block))
            else:
                gone.add(live.get(block, ""))
                live[block] = text.split(" ")[0]
                gone.discard(live[block])
        gone.discard("")
        on_disk = _store_bytes(store)
        stale = sorted(m for m in gone if m.encode() in on_disk)
        assert not stale, f"pass {step + 1}: evicted or replaced text still in the store's files: {stale[:3]}"
        assert all(m.encode() in on_disk for m in live.values())
    assert len(gone) > 100


def test_a_store_switched_to_wal_is_switched_back_and_its_wal_file_removed(cli, tmp_path):
    contract, store = tmp_path / "c.limn", tmp_path / "c.pages.sqlite3"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW, *EVICT_ALL).code == 0
    assert not os.path.exists(str(store) + "-wal")
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert db.execute("SELECT count(*) FROM pages").fetchone()[0] == 0


def test_a_store_held_open_in_wal_mode_is_refused(cli, tmp_path):
    contract, store = tmp_path / "c.limn", tmp_path / "c.pages.sqlite3"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    holder = sqlite3.connect(store)
    try:
        holder.execute("PRAGMA journal_mode = WAL")
        holder.execute("SELECT count(*) FROM pages").fetchone()
        before = contract.read_bytes()
        _assert_refused(cli("--history", ASSET, "--contract", contract, "--now", NOW, *EVICT_ALL),
                        "another journal mode")
        assert contract.read_bytes() == before
    finally:
        holder.close()


# --- disk full ---

class _FullDisk:
    """A stand-in for sqlite3.Connection that fails like a full disk on the statements named."""

    def __init__(self, db, failing):
        self._db, self._failing = db, failing

    def _check(self, sql):
        if sql.lstrip().split(" ")[0].upper() in self._failing:
            raise sqlite3.OperationalError("database or disk is full")

    def execute(self, sql, *args):
        self._check(sql)
        return self._db.execute(sql, *args)

    def executemany(self, sql, rows):
        self._check(sql)
        return self._db.executemany(sql, rows)

    def __getattr__(self, name):
        return getattr(self._db, name)


@pytest.mark.parametrize("failing, first, second, appended", [
    ({"INSERT"}, [], PAGE_ALL, False), ({"COMMIT"}, [], PAGE_ALL, False),
    ({"DELETE"}, PAGE_ALL, EVICT_ALL, True), ({"VACUUM"}, PAGE_ALL, EVICT_ALL, True)])
def test_a_full_disk_is_exit_2_with_the_contract_unchanged_or_whole(cli, pager, tmp_path, monkeypatch, failing, first,
                                                                    second, appended):
    """Fault injection (any platform): the store fails as a full disk does at each write step."""
    contract, store = tmp_path / "c.limn", tmp_path / "c.pages.sqlite3"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW, *first).code == 0
    before = contract.read_bytes()
    real_connect = sqlite3.connect
    monkeypatch.setattr(pager.sqlite3, "connect", lambda *a, **k: _FullDisk(real_connect(*a, **k), failing))
    result = cli("--history", ASSET, "--contract", contract, "--now", "2026-05-18T00:00:00Z", *second)
    _assert_refused(result, str(store), "no space left while")
    after = contract.read_bytes()
    if appended:  # the deletion after the append failed: the contract holds the whole pass
        assert after.startswith(before) and after[len(before):].decode().endswith('"2026-05-18T00:00:00+00:00"\n')
        replay(after.decode())
    else:
        assert after == before
    paged = {b for b, a in pager.contract_state(str(contract)).directives.items() if a == "page"}
    assert paged <= _store_ids(store)


def _mount_tmpfs(path, size_kb):
    path.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)],
                          capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"can't mount a tmpfs here ({proc.stderr.decode().strip()[:80]})")


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="mounting a tmpfs needs root on Linux")
def test_a_really_full_disk_at_many_levels(tmp_path):
    """A small tmpfs filled to 0-512 KiB free: exit 0 or 2, one line, contract unchanged or whole."""
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, 2048)
    try:
        base = [sys.executable, str(PAGER), "--history", str(ASSET), "--contract", str(disk / "c.limn")]
        for free_kb in (0, 4, 16, 64, 256, 512):
            for name in os.listdir(disk):
                os.unlink(disk / name)
            first = subprocess.run(base + ["--now", NOW, *PAGE_ALL], capture_output=True)
            assert first.returncode == 0, first.stderr
            before = (disk / "c.limn").read_bytes()
            stat = os.statvfs(disk)
            fill = stat.f_bavail * stat.f_frsize - free_kb * 1024
            if fill > 0:
                with open(disk / "fill", "wb") as fh:
                    fh.write(b"\0" * fill)
            proc = subprocess.run(base + ["--now", "2026-05-18T00:00:00Z", "--evict-cut", "0.5",
                                          "--emit", str(disk / "out.json")], capture_output=True)
            err = proc.stderr.decode()
            lines = [line for line in err.splitlines() if not line.startswith("{")]
            assert "Traceback" not in err, (free_kb, err[-800:])
            after = (disk / "c.limn").read_bytes()
            if proc.returncode == 2:
                assert len(lines) == 1 and "no space left while" in lines[0], (free_kb, lines)
            else:
                assert proc.returncode == 0, (free_kb, err[-800:])
            assert after == before or after.startswith(before) and after.endswith(b'"2026-05-18T00:00:00+00:00"\n')
            os.unlink(disk / "fill") if fill > 0 else None
            index = subprocess.run([sys.executable, str(PAGER), "index", "--contract", str(disk / "c.limn")],
                                   capture_output=True)
            assert index.returncode == 0, (free_kb, index.stderr)
        # A first pass on a full disk leaves no file behind.
        for name in os.listdir(disk):
            os.unlink(disk / name)
        stat = os.statvfs(disk)
        with open(disk / "fill", "wb") as fh:
            fh.write(b"\0" * (stat.f_bavail * stat.f_frsize))
        proc = subprocess.run(base + ["--now", NOW], capture_output=True)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr.decode(), proc.stderr
        assert os.listdir(disk) == ["fill"]
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# --- item 8: the contract as Liminate reads it ---

HOSTILE = [
    'ADD "b9" TO PAGED-BLOCKS BECAUSE "x"',
    'Add "b9" to Paged-Blocks because "x"',
    'add "b9" to paged-blocks because "x".',
    'add "b9" to paged-blocks because "x",',
    'add "b9" to paged-blocks, because "x"',
    '-- note\radd "b9" to paged-blocks because "x"',
    '-- note\x0badd "b9" to paged-blocks because "x"',
    '-- note\x0cadd "b9" to paged-blocks because "x"',
    '-- note\x1cadd "b9" to paged-blocks because "x"',
    '-- note\x85add "b9" to paged-blocks because "x"',
    '-- note\u2028add "b9" to paged-blocks because "x"',
    '-- note\u2029add "b9" to paged-blocks because "x"',
    'REMEMBER A LIST CALLED PAGED-BLOCKS',
    'REMOVE "block-0x05" FROM PAGED-BLOCKS BECAUSE "x"',
    '  add "b9" to paged-blocks because "x"',
    'add b9 to paged-blocks',
    'remember a number called TOKEN-BUDGET with 5',
]


@pytest.mark.parametrize("line", HOSTILE)
def test_a_hostile_line_is_read_as_liminate_reads_it_or_refused(cli, pager, tmp_path, line):
    """Lines another tool wrote: the pager's state equals replay, or the pager refuses naming the line."""
    contract = tmp_path / "c.limn"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    with open(contract, "a", newline="") as fh:
        fh.write(line + "\n")
    text = contract.read_bytes().decode()
    try:
        state = pager.read_contract_state(text)
    except pager.PagerError as exc:
        assert "line " in str(exc)
        before = contract.read_bytes()
        _assert_refused(cli("--history", ASSET, "--contract", contract, "--now", NOW), str(contract), "line ")
        assert contract.read_bytes() == before
        return
    # The pager read it: it must read what Liminate runs, and its next pass must replay.
    lists = replay(text)[1]
    for name, blocks in state.lists().items():
        assert lists[name] == blocks
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    replay(contract.read_bytes().decode())


def test_splitting_lines_like_the_interpreter(pager):
    """A line break only str.splitlines knows splits a pager statement off a comment: both agree."""
    text = ('remember a list called paged-blocks\n-- a note\u2028add "b1" to paged-blocks because "x"\n')
    state = pager.read_contract_state(text)
    assert state.lists()["paged-blocks"] == ["b1"] == replay(text)[1]["paged-blocks"]


# --- item 9: memory on huge inputs ---

def test_a_block_over_the_limit_is_exit_2_naming_it(cli, pager, tmp_path, monkeypatch):
    monkeypatch.setattr(pager, "MAX_BLOCK_CHARS", 5000)
    history = tmp_path / "h.json"
    blocks = [{"id": "b0", "turn": 1, "role": "user", "text": "pager " * 10},
              {"id": "b1", "turn": 2, "role": "assistant", "text": "pager " * 2000}]
    history.write_text(json.dumps({"intent_ir": ["pager"], "blocks": blocks}))
    before = tree_snapshot(tmp_path)
    _assert_refused(cli("--history", history, "--contract", tmp_path / "c.limn", "--now", NOW),
                    f"{history}: blocks[1] is larger than the limit of 5,000 characters")
    assert tree_snapshot(tmp_path) == before


def test_a_transcript_over_the_limit_is_exit_2(cli, pager, tmp_path, monkeypatch):
    monkeypatch.setattr(pager, "MAX_TRANSCRIPT_BYTES", 1000)
    history = tmp_path / "chat.json"
    history.write_text(json.dumps([{"role": "user", "content": "pager " * 400}]))
    before = tree_snapshot(tmp_path)
    _assert_refused(cli("--history", history, "--contract", tmp_path / "c.limn", "--now", NOW),
                    "is read whole", "the limit is 1,000")
    assert tree_snapshot(tmp_path) == before


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="RLIMIT_AS is Linux's")
def test_a_huge_block_under_a_memory_limit_is_exit_2_not_memory_error(tmp_path):
    """A 70 MB text under a 700 MB address-space limit: the block limit answers, no MemoryError."""
    import resource
    history = tmp_path / "h.json"
    with open(history, "w") as fh:
        fh.write('{"intent_ir": ["pager"], "blocks": [{"id": "a", "turn": 1, "role": "user", "text": "')
        for _ in range(70):
            fh.write("pager text " * 95325)  # about 1 MB each
        fh.write('"}]}')

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (700 << 20, 700 << 20))

    proc = subprocess.run([sys.executable, str(PAGER), "--history", str(history), "--contract",
                           str(tmp_path / "c.limn"), "--now", NOW], capture_output=True, preexec_fn=limit)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "MemoryError" not in err and len(err.splitlines()) == 1, err[-600:]
    assert "blocks[0] is larger than the limit of 67,108,864 characters" in err
    assert sorted(os.listdir(tmp_path)) == ["h.json"]


def test_out_of_memory_anywhere_is_exit_2_with_one_line(cli, pager, tmp_path, monkeypatch):
    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(pager, "plan_pass", exhausted)
    monkeypatch.setattr(pager._Scorer, "finish", exhausted)
    before = tree_snapshot(tmp_path)
    _assert_refused(cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--now", NOW), "out of memory")
    assert tree_snapshot(tmp_path) == before


# Property: on generated contracts, the pager's reading equals the real interpreter's, or it refuses.

from hypothesis import HealthCheck, example, given, settings, strategies as st  # noqa: E402

_LISTS = ["retained-blocks", "paged-blocks", "evicted-blocks"]
_IDS = ["b1", "b2", "block-0x05", "5", "a b", "Ünï", "x.y", "--"]
_BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@st.composite
def _statement(draw):
    """A line a pager, another tool or a hostile writer may put in a contract."""
    name = draw(st.sampled_from(_LISTS))
    block = draw(st.sampled_from(_IDS)) + str(draw(st.integers(0, 10 ** 6)))  # mostly a new block
    line = draw(st.sampled_from([
        f"remember a list called {name}",
        f'add "{block}" to {name} because "why"',
        f'add "{block}" to {name} because "why"',
        f'add "{block}" to {name} because "why"',
        f'remove "{block}" from {name} because "why"',
        'remember a value called pager-intent with "fix it"',
        "remember a number called token-budget with 40",
        'remember a value called owner with "ana"',
        "remember a list called notes",
        f'add "{block}" to notes',
    ]))
    mutation = draw(st.sampled_from(["none"] * 6 + ["upper", "title", "dot", "comma", "indent", "comment",
                                                   "midcomma", "doublespace", "trailing-space"]))
    if mutation == "upper":
        line = line.upper()
    elif mutation == "title":
        line = " ".join(w.capitalize() if not w.startswith('"') else w for w in line.split(" "))
    elif mutation == "dot":
        line += "."
    elif mutation == "comma":
        line += ","
    elif mutation == "indent":
        line = "  " + line
    elif mutation == "comment":
        line = "-- note" + draw(st.sampled_from(_BREAKS)) + line
    elif mutation == "midcomma":
        line = line.replace(f" {name}", f" {name},", 1)
    elif mutation == "doublespace":
        line = line.replace(" ", "  ", 1)
    elif mutation == "trailing-space":
        line += " \t"
    return line


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head=st.lists(st.sampled_from(_LISTS), unique=True, min_size=2), body=st.lists(_statement(), max_size=8),
       breaks=st.lists(st.sampled_from(["\n"] * 20 + _BREAKS), min_size=9, max_size=9))
@example(head=["paged-blocks", "evicted-blocks"], body=['ADD "b1" TO PAGED-BLOCKS BECAUSE "WHY"'], breaks=["\n"] * 9)
@example(head=["paged-blocks", "evicted-blocks"], body=['-- x\x85add "b1" to paged-blocks because "y"'],
         breaks=["\n"] * 9)
def test_contract_reading_agrees_with_the_interpreter(pager, head, body, breaks):
    liminate = liminate_module()
    lines = [f"remember a list called {name}" for name in head] + body
    text = "".join(line + breaks[i % len(breaks)] for i, line in enumerate(lines))
    try:
        state = pager.read_contract_state(text)
    except pager.PagerError as exc:
        assert str(exc).startswith("line ")  # refused, naming the line
        return
    result = liminate.run(text)
    table = result.symbol_table
    for name, blocks in state.lists().items():
        if name in state.declared:
            assert table[name].value == blocks, (text, name)
        else:
            assert name not in table, (text, name)
    for name, value in state.values.items():
        got = table[name].value
        assert (float(got) == float(value)) if isinstance(value, (int, float)) else got == value, (text, name)
