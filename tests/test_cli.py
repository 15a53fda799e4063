"""The command line: summary, records, flags, and one clear line for every bad input."""

import json
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ASSET, NOW, PAGER, run_script

ASSET_IDS = [b["id"] for b in json.loads(ASSET.read_text())["blocks"]]


def test_summary_line_counts_each_directive(cli, tmp_path):
    result = cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--now", NOW)
    assert result.code == 0
    assert result.out == (f"pager: 12 blocks (pager format, detected; intent from intent_ir): retain 3, page 5, "
                          f"evict 4 (12 new, 0 moved, 0 unchanged); appended 27 statements to {tmp_path / 'c.limn'}; "
                          f"stored 5 pages in {tmp_path / 'c.pages.sqlite3'}\n")


def test_one_record_per_block_in_input_order(cli, tmp_path):
    result = cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--now", NOW)
    records = result.records
    assert [r["block"] for r in records] == ASSET_IDS
    assert len(result.err.splitlines()) == 12
    for r in records:
        assert {"block", "kind", "similarity", "delta_t", "R", "action"} <= set(r)
        assert r["action"] in ("retain", "page", "evict")
    by_kind = {}
    for r in records:
        by_kind.setdefault(r["kind"], set()).add(r["action"])
    assert by_kind == {"active": {"retain"}, "resolved": {"page"}, "noise": {"evict"}}


def test_json_summary(cli, tmp_path):
    result = cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--now", NOW, "--json")
    summary = json.loads(result.out)
    assert summary == {"blocks": 12, "format": "pager", "format_detected": True, "intent_source": "intent_ir",
                       "intent": ["pager", "retention", "score", "contract"],
                       "retain": 3, "page": 5, "evict": 4, "new": 12, "moved": 0,
                       "unchanged": 0, "statements": 27, "contract": str(tmp_path / "c.limn"),
                       "written": True, "pass": NOW, "stored": 5, "store": str(tmp_path / "c.pages.sqlite3"),
                       "emitted": None, "skipped_lines": 0, "repairs": [],
                       "intent_block": None, "intent_turn": None, "estimated_context_tokens": 265}


def test_dry_run_prints_statements_and_writes_nothing(cli, tmp_path):
    contract = tmp_path / "c.limn"
    result = cli("--history", ASSET, "--contract", contract, "--now", NOW, "--dry-run")
    assert result.code == 0
    assert not contract.exists() and not (tmp_path / "c.pages.sqlite3").exists()
    lines = result.out.splitlines()
    assert lines[0] == 'about "prosecode context pager session contract"'
    assert lines[-2] == f'remember a value called last-pager-pass with "{NOW}"'
    assert lines[-1].startswith("pager: 12 blocks (pager format, detected;")
    assert lines[-1].endswith("would append 27 statements to " + str(contract))
    real = cli("--history", ASSET, "--contract", contract, "--now", NOW)
    assert real.code == 0
    assert contract.read_text().splitlines() == lines[:-1]


def test_same_input_same_bytes(cli, tmp_path):
    for name in ("a.limn", "b.limn"):
        assert cli("--history", ASSET, "--contract", tmp_path / name, "--now", NOW).code == 0
    assert (tmp_path / "a.limn").read_bytes() == (tmp_path / "b.limn").read_bytes()


@pytest.mark.parametrize("given_now, stored", [
    ("2026-05-17T03:08:12Z", "2026-05-17T03:08:12+00:00"),
    ("2026-05-17T05:08:12+02:00", "2026-05-17T03:08:12+00:00"),
    ("2026-05-17T03:08:12", "2026-05-17T03:08:12+00:00"),
])
def test_now_is_normalised_to_utc(cli, tmp_path, given_now, stored):
    contract = tmp_path / "c.limn"
    assert cli("--history", ASSET, "--contract", contract, "--now", given_now).code == 0
    assert contract.read_text().splitlines()[-1] == f'remember a value called last-pager-pass with "{stored}"'


def test_history_from_standard_input(tmp_path):
    contract = tmp_path / "c.limn"
    result = run_script("--history", "-", "--contract", contract, "--now", NOW, "--emit", tmp_path / "out.json",
                        stdin=ASSET.read_text())
    assert result.code == 0, result.err
    assert contract.read_text() == (ASSET.parent.parent / "tests" / "golden" / "asset.limn").read_text()
    assert len(json.loads((tmp_path / "out.json").read_text())["blocks"]) == 8  # read twice from one stdin


def test_intent_after_blocks_is_read(cli, tmp_path):
    data = json.loads(ASSET.read_text())
    reordered = {"blocks": data["blocks"], "intent_ir": data["intent_ir"], "current_turn": data["current_turn"]}
    history = tmp_path / "h.json"
    history.write_text(json.dumps(reordered))
    a = cli("--history", history, "--contract", tmp_path / "a.limn", "--now", NOW)
    b = cli("--history", ASSET, "--contract", tmp_path / "b.limn", "--now", NOW)
    assert a.code == b.code == 0
    assert (tmp_path / "a.limn").read_bytes() == (tmp_path / "b.limn").read_bytes()


# Texts full of what a batch boundary looks like ('}, {"'), so the batch reader must
# reject look-alikes inside strings and fall back to reading value by value.
_TRICKY_TEXT = st.text(st.sampled_from(list('}{,"[] :\\n\u00e9x')), max_size=40)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "id": st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters='"\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029'),
                  min_size=1, max_size=12),
    "turn": st.integers(0, 50), "role": st.sampled_from(["user", "assistant"]),
    "text": st.one_of(st.text(max_size=80), _TRICKY_TEXT)},
    optional={"meta": st.lists(st.fixed_dictionaries({"a": _TRICKY_TEXT}), max_size=2)}),
    max_size=12, unique_by=lambda b: b["id"]),
    st.integers(1, 90), st.booleans())
def test_streaming_reader_agrees_with_json_loads(blocks, chunk, indent):
    """The batched reader hands over exactly the blocks json.loads sees, in order and in batches
    that start where the previous one ended, and the batches it notes can be decoded again."""
    import array
    import io
    import pager
    doc = json.dumps({"current_turn": 60, "intent_ir": ["x"], "blocks": blocks, "after": 1},
                     indent=1 if indent else None)
    got, firsts, runs = [], [], array.array("q")
    header, handed = pager._stream_history(io.StringIO(doc), "h.json",
                                           lambda h: (lambda i, bs: (firsts.append(i), got.extend(bs))),
                                           chunk=chunk, runs=runs)
    assert handed and header == {"current_turn": 60, "intent_ir": ["x"], "after": 1}
    assert got == blocks
    assert firsts == [sum(runs[4 * r + 3] for r in range(k)) for k in range(len(firsts))]
    for r in range(len(runs) // 4):
        start, end, first, count = runs[4 * r: 4 * r + 4]
        assert json.loads("[" + doc[start:end] + "]") == blocks[first: first + count]


def test_batched_reader_reads_a_large_history_in_few_batches(tmp_path):
    """A history of plain blocks is decoded a batch at a time, not value by value."""
    import array
    import io
    import pager
    blocks = [{"id": f"b{i}", "turn": i, "role": "user", "text": "x}, {\"y" * (i % 7)} for i in range(20000)]
    doc = json.dumps({"blocks": blocks})
    sizes, runs = [], array.array("q")
    pager._stream_history(io.StringIO(doc), "h.json", lambda h: (lambda i, bs: sizes.append(len(bs))),
                          chunk=1 << 16, runs=runs)
    assert sum(sizes) == 20000
    assert len(sizes) < 100 and sorted(sizes)[len(sizes) // 2] > 500


def test_help_lists_exit_codes_and_an_example(cli):
    with pytest.raises(SystemExit) as exit_info:
        cli("--help")
    assert exit_info.value.code == 0


def test_help_text(capsys, pager):
    with pytest.raises(SystemExit):
        pager.main(["--help"])
    out = capsys.readouterr().out
    assert "exit codes:" in out and "2  bad input" in out and "--history assets/test-history.json" in out


# --- bad input: one line, exit 2, nothing changed ---

def _write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


BLOCK = {"id": "b1", "turn": 1, "role": "user", "text": "x"}


@pytest.mark.parametrize("content, expected", [
    ('{"intent_ir": ["x"], "blocks": [{"id": "b1", "turn": "7a", "role": "user", "text": "x"}]}',
     '{h}: blocks[0].turn must be an integer (got "7a")'),
    ('{"intent_ir": ["x"], "blocks": [' + json.dumps(BLOCK) + ", " + json.dumps(BLOCK) + "]}",
     '{h}: blocks[1].id "b1" duplicates blocks[0].id'),
    ('{"current_turn": 0, "intent_ir": ["x"], "blocks": [' + json.dumps(BLOCK) + "]}",
     "{h}: blocks[0].turn (1) lies after current_turn (0)"),
    ('{"intent_ir": ["x"], "blocks": [{"id": "b1", "turn": 1, "role": "user"}]}', "{h}: blocks[0].text is missing"),
    ('{"blocks": []}', "{h}: no intent: pass --intent or --intent-file, give intent_ir, or include a user message"),
    ('{"intent_ir": ["x"], "blocks": [' + json.dumps(BLOCK),
     "{h}: invalid JSON at line 1, column %d: expected ',' (got the end of the file)" % (33 + len(json.dumps(BLOCK)))),
    ('{"intent_ir": ["x"],\n "blocks": [}', "{h}: invalid JSON at line 2, column 13: Expecting value"),
    ("", "{h}: input is empty: nothing to detect"),
    ("[1, 2", "{h}: not a known history format: invalid JSON at line 1 column 6 (Expecting ',' delimiter) "
              "and no line is a Claude Code or Codex record"),
    (b'{"intent_ir": ["\xff"], "blocks": []}', "{h}: not valid UTF-8 text (invalid start byte)"),
    ('{"intent_ir": ["x"], "blocks": []} extra', "{h}: invalid JSON at line 1, column 36: extra data after the history object"),
    ('{"intent_ir": ["x"], "blocks": [], "blocks": []}', "{h}: blocks appears twice"),
])
def test_bad_history_file(cli, tmp_path, content, expected):
    history = _write(tmp_path, "history.json", content)
    contract = _write(tmp_path, "c.limn", 'remember a value called owner with "ana"\n')
    before = contract.read_bytes()
    result = cli("--history", history, "--contract", contract)
    assert result.code == 2
    assert result.err == "pager: error: " + expected.format(h=history) + "\n"
    assert contract.read_bytes() == before


@pytest.mark.parametrize("flags, expected", [
    (["--alpha", "nan"], "--alpha must be a finite number (got nan)"),
    (["--beta", "inf"], "--beta must be a finite number (got inf)"),
    (["--alpha", "-1"], "--alpha must not be negative (got -1.0)"),
    (["--alpha", "abc"], 'argument --alpha: --alpha must be a number (got "abc")'),
    (["--retain-cut", "1.2"], "--retain-cut must lie in [0, 1] (got 1.2)"),
    (["--evict-cut", "-0.5"], "--evict-cut must lie in [0, 1] (got -0.5)"),
    (["--evict-cut", "0.6"], "--evict-cut (0.6) must not exceed --retain-cut (0.55)"),
    (["--now", "yesterday"], '--now must be an ISO-8601 timestamp like 2026-05-17T03:08:12+00:00 (got "yesterday")'),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_flags(cli, tmp_path, flags, expected):
    contract = tmp_path / "c.limn"
    result = cli("--history", ASSET, "--contract", contract, *flags)
    assert result.code == 2
    assert result.err == f"pager: error: {expected}\n"
    assert not contract.exists()


def test_forced_pager_format_wants_an_object(cli, tmp_path):
    history = _write(tmp_path, "h.json", '[{"role": "user", "content": "hi"}]')
    result = cli("--history", history, "--contract", tmp_path / "c.limn", "--format", "pager")
    assert (result.code, result.err) == (2, f"pager: error: {history}: the history must be a JSON object with a blocks list\n")


def test_missing_required_flag(cli):
    result = cli("--history", ASSET)
    assert result.code == 2
    assert result.err == "pager: error: the following arguments are required: --contract\n"


def test_missing_history_file(cli, tmp_path):
    result = cli("--history", tmp_path / "nope.json", "--contract", tmp_path / "c.limn")
    assert (result.code, result.err) == (2, f"pager: error: {tmp_path / 'nope.json'}: no such file\n")
    assert not (tmp_path / "c.limn").exists()


def test_history_is_a_directory(cli, tmp_path):
    result = cli("--history", tmp_path, "--contract", tmp_path / "c.limn")
    assert (result.code, result.err) == (2, f"pager: error: {tmp_path}: is a directory, not a history file\n")


def test_contract_in_missing_folder(cli, tmp_path):
    result = cli("--history", ASSET, "--contract", tmp_path / "no" / "c.limn")
    assert result.code == 2
    assert result.err == f"pager: error: {tmp_path / 'no' / 'c.limn'}: can't open for writing (No such file or directory)\n"


def test_contract_is_a_directory(cli, tmp_path):
    result = cli("--history", ASSET, "--contract", tmp_path)
    assert (result.code, result.err) == (2, f"pager: error: {tmp_path}: is a directory, not a contract file\n")


def test_contract_not_utf8(cli, tmp_path):
    contract = _write(tmp_path, "c.limn", b"remember a value called owner with \"\xff\"\n")
    result = cli("--history", ASSET, "--contract", contract)
    assert (result.code, result.err) == (2, f"pager: error: {contract}: not valid UTF-8 text (byte 36)\n")
    assert contract.read_bytes() == b"remember a value called owner with \"\xff\"\n"


def test_bad_input_in_a_subprocess_has_no_traceback(tmp_path):
    history = _write(tmp_path, "h.json", '{"intent_ir": ["x"], "blocks": [{"id": "b", "turn": "7a", "role": "u", "text": ""}]}')
    result = run_script("--history", history, "--contract", tmp_path / "c.limn")
    assert result.code == 2
    assert result.err == f'pager: error: {history}: blocks[0].turn must be an integer (got "7a")\n'
    assert "Traceback" not in result.err and not (tmp_path / "c.limn").exists()


# A sitecustomize (on PYTHONPATH, so it runs before the script is parsed) that notes the memory
# tracemalloc traces when the script's top level starts and when its main is called, into the
# JSON file PROBE_OUT names.
_MEMORY_PROBE = """
import json, os, sys, tracemalloc
tracemalloc.start()
seen = {}
def probe(frame, event, arg):
    name = frame.f_code.co_name
    if event == "call" and frame.f_code.co_filename.endswith("pager.py") and name in ("<module>", "main"):
        seen.setdefault(name, tracemalloc.get_traced_memory()[0])
        if name == "main":
            sys.setprofile(None)
            with open(os.environ["PROBE_OUT"], "w") as out:
                json.dump(seen, out)
sys.setprofile(probe)
"""


def test_the_script_runs_main_after_cpython_frees_its_syntax_tree(tmp_path):
    """``python3 scripts/pager.py`` (the README's command) calls main from atexit: CPython keeps the
    syntax tree of the file it runs as a script until the top level returns, tens of megabytes a
    pass would otherwise carry in its peak memory (references/speed.md). Fails when main is called
    from the top level (``sys.exit(main())``): the tree is then still held."""
    (tmp_path / "sitecustomize.py").write_text(_MEMORY_PROBE)
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PROBE_OUT=str(tmp_path / "probe.json"))
    proc = subprocess.run([sys.executable, str(PAGER), "--help"], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: pager.py"), proc.stderr
    seen = json.loads((tmp_path / "probe.json").read_text())
    # When the top level starts, the tree is held (its C form, which tracemalloc traces); by main, gone.
    assert seen["<module>"] > 8_000_000, seen
    assert seen["main"] < seen["<module>"] / 2, seen


@pytest.mark.parametrize("runner", ["runpy", "cProfile", "inspect"])
def test_the_script_run_by_python_code_calls_main_in_place(tmp_path, runner):
    """Run by other Python code (runpy, ``python3 -m cProfile``, coverage), no syntax tree is held:
    the script calls main where it stands, so its caller sees the SystemExit (and a profiler sees
    the pass); under ``python3 -i`` the prompt comes after the pass. Fails when main is always put
    off to atexit: runpy returns first, cProfile writes its figures before the pass has run, and
    the prompt's input runs before it."""
    if runner == "runpy":
        code = ("import runpy, sys\n"
                f"sys.argv = [{str(PAGER)!r}, '--help']\n"
                "try:\n"
                f"    runpy.run_path({str(PAGER)!r}, run_name='__main__')\n"
                "except SystemExit as exc:\n"
                "    print('exit', exc.code)\n")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("usage: pager.py") and proc.stdout.endswith("exit 0\n")
    elif runner == "inspect":
        proc = subprocess.run([sys.executable, "-i", str(PAGER), "--help"], input="print('after the pass')\n",
                              capture_output=True, text=True)
        assert proc.stdout.startswith("usage: pager.py") and proc.stdout.endswith("after the pass\n"), proc.stdout
    else:
        stats = tmp_path / "pass.prof"
        proc = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(stats), str(PAGER), "--help"],
                              capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stdout.startswith("usage: pager.py"), proc.stderr
        import pstats
        profiled = {name for _, _, name in pstats.Stats(str(stats)).stats}
        assert "main" in profiled and "_build_parser" in profiled


def _ended_with(body: str) -> subprocess.CompletedProcess:
    """Run ``_exit_after_main`` in a subprocess with ``main`` replaced by a function of ``body``
    (one line of Python); return the finished process."""
    code = (f"import sys; sys.path.insert(0, {str(PAGER.parent)!r}); import pager\n"
            f"def main():\n    {body}\n"
            "pager.main = main; pager._exit_after_main()")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


@pytest.mark.parametrize("body, code, out, err, traceback", [
    ("print('done'); return 0", 0, "done\n", "", False),
    ("return 2", 2, "", "", False),
    ("return None", 0, "", "", False),
    ("sys.stdout.write('usage'); sys.exit(2)", 2, "usage", "", False),
    ("sys.exit('pager: stopped')", 1, "", "pager: stopped\n", False),
    ("print('half', end=''); raise KeyError('a bug')", 1, "half", "KeyError: 'a bug'\n", True),
    ("raise KeyboardInterrupt", 130, "", "KeyboardInterrupt\n", True),
], ids=["ok", "input", "none", "argparse", "message", "bug", "interrupt"])
def test_the_script_ends_with_pythons_exit_codes(body, code, out, err, traceback):
    """How the script ends, seen from outside: main's code, a SystemExit's, 1 with the traceback
    for a bug (what it printed before still flushed), 130 with the traceback for Ctrl-C."""
    proc = _ended_with(body)
    assert (proc.returncode, proc.stdout) == (code, out), proc.stderr
    assert proc.stderr.endswith(err) and (proc.stderr == err) is not traceback
    assert ("Traceback (most recent call last)" in proc.stderr) is traceback


def test_stdin_named_in_errors(tmp_path):
    result = run_script("--history", "-", "--contract", tmp_path / "c.limn", stdin='{"blocks": []}')
    assert (result.code, result.err) == (2, "pager: error: <stdin>: no intent: pass --intent or --intent-file, give intent_ir, or include a user message\n")


def test_records_are_valid_json_for_unicode(cli, tmp_path):
    history = _write(tmp_path, "h.json", json.dumps({"intent_ir": ["x"], "blocks": [
        {"id": "блок\\1\t", "turn": 1, "role": "user", "text": "x", "kind": "ключ"}]}))
    result = cli("--history", history, "--contract", tmp_path / "c.limn")
    assert result.code == 0
    assert result.records[0]["block"] == "блок\\1\t" and result.records[0]["kind"] == "ключ"
    assert re.search(r'"similarity": 1\.0+,', result.err)
