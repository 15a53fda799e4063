"""What a new user meets first (issue 29): a contract path that names the wrong file, recall twice and
from another folder, records where the user wants them, and one clear line for each slip."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ASSET, NOW, ROOT, SCRIPTS, run_script, tree_snapshot

TRANSCRIPTS = ROOT / "tests" / "fixtures" / "transcripts"


def _refused(result, *needles):
    """Exit 2, one stderr line starting ``pager: error: ``, naming each needle."""
    assert result.code == 2, (result.code, result.err)
    assert len(result.err.splitlines()) == 1 and result.err.startswith("pager: error: "), result.err
    for needle in needles:
        assert needle in result.err, result.err


# --- item 1: a contract is a contract ---

NOT_CONTRACTS = {
    "emitted.json": '{"messages": [{"role": "user", "content": "hi"}]}\n',
    "session.jsonl": (TRANSCRIPTS / "claude_code_session.jsonl").read_text(encoding="utf-8"),
    "notes.md": "# Notes\n\nremember to add the tests\n",
    "list.json": "[1, 2]",  # no line end: one unterminated line that is no Liminate
    "after-liminate.limn": 'remember a list called notes\n{"role": "user"}\n',
}


@pytest.mark.parametrize("name", sorted(NOT_CONTRACTS))
def test_a_file_that_is_not_liminate_is_refused_and_left_alone(cli, tmp_path, name):
    contract = tmp_path / name
    contract.write_text(NOT_CONTRACTS[name], encoding="utf-8")
    before = tree_snapshot(tmp_path)
    line = 2 if name == "after-liminate.limn" else 1
    result = cli("--history", ASSET, "--contract", contract, "--now", NOW)
    _refused(result, f"{contract}: not a Liminate contract: line {line} is not a Liminate statement",
             "--contract takes a .limn contract, an empty file or a new path")
    assert tree_snapshot(tmp_path) == before  # nothing written, no page store created
    for command in (["index"], ["recall", "block-0x02"]):
        _refused(cli(*command, "--contract", contract), f"{contract}: not a Liminate contract")
    assert tree_snapshot(tmp_path) == before


@pytest.mark.parametrize("text", ["", "\n\n", "-- a note for the team\n", 'about "billing"\nremember a list called notes\n',
                                  "remember a list called paged-blocks\nrem"])  # a crash cut the last line's verb
def test_an_empty_file_a_comment_or_liminate_is_a_contract(cli, pager, tmp_path, text):
    contract = tmp_path / "c.limn"
    contract.write_text(text, encoding="utf-8")
    result = cli("--history", ASSET, "--contract", contract, "--now", NOW)
    assert result.code == 0, result.err
    assert contract.read_text(encoding="utf-8").startswith(text)


def test_a_new_path_is_a_new_contract(cli, tmp_path):
    result = cli("--history", ASSET, "--contract", tmp_path / "new.limn", "--now", NOW)
    assert result.code == 0 and (tmp_path / "new.limn").exists()


# --- item 4: recall is idempotent, and its hints run from any folder ---

def _paged(pager, contract):
    return [b for b, a in pager.contract_state(str(contract)).directives.items() if a == "page"]


def test_recall_twice_gives_the_text_again_and_records_nothing_new(cli, pager, tmp_path):
    contract = tmp_path / "c.limn"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    first, second = _paged(pager, contract)[:2]
    text = next(b["text"] for b in json.loads(ASSET.read_text())["blocks"] if b["id"] == first)
    once = cli("recall", first, "--contract", contract, "--now", NOW)
    assert (once.code, once.out, once.err) == (0, text, "")
    after_once = contract.read_bytes()
    again = cli("recall", first, "--contract", contract, "--now", "2026-05-18T00:00:00+00:00")
    assert (again.code, again.out, again.err) == (0, text, "")
    assert contract.read_bytes() == after_once  # nothing recorded: no new last-recall either
    both = cli("recall", first, second, "--contract", contract, "--now", NOW)
    assert both.code == 0 and f"==> {first} <==" in both.out and f"==> {second} <==" in both.out
    added = contract.read_bytes()[len(after_once):].decode()
    assert first not in added and f'add "{second}" to retained-blocks because "recalled"' in added


def test_a_retained_block_that_was_never_paged_is_still_refused(cli, pager, tmp_path):
    contract = tmp_path / "c.limn"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    retained = next(b for b, a in pager.contract_state(str(contract)).directives.items() if a == "retain")
    _refused(cli("recall", retained, "--contract", contract), f'block "{retained}" is not paged (it is retained)')


def test_recall_hints_run_from_any_folder(tmp_path):
    """Run as a user does, by a relative script path and a relative contract; recall from elsewhere."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    script = os.path.relpath(SCRIPTS / "pager.py", project)
    run = subprocess.run([sys.executable, script, "--history", str(ASSET), "--contract", "c.limn", "--now", NOW,
                          "--emit", "out.json", "--quiet"], cwd=project, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    index = subprocess.run([sys.executable, script, "index", "--contract", "c.limn"], cwd=project,
                           capture_output=True, text=True)
    header = index.stdout.splitlines()[0]
    command = f"python3 {SCRIPTS / 'pager.py'} recall ID --contract {project / 'c.limn'}"
    assert header == f"Paged blocks: 5 (recall one with: {command})"
    stubs = [b["text"] for b in json.loads((project / "out.json").read_text())["blocks"] if "(recall: " in b["text"]]
    assert stubs and all(f"(recall: python3 {SCRIPTS / 'pager.py'} recall " in s for s in stubs)
    block = index.stdout.splitlines()[1].split(" | ")[0]
    text = next(b["text"] for b in json.loads(ASSET.read_text())["blocks"] if b["id"] == block)
    for _ in range(2):  # and twice: the second recall gives the text again
        recalled = subprocess.run(command.replace(" ID ", f" {block} ").replace("python3", sys.executable, 1),
                                  shell=True, cwd=elsewhere, capture_output=True, text=True)
        assert (recalled.returncode, recalled.stdout) == (0, text), recalled.stderr


def test_same_input_and_flags_give_the_same_stubs(tmp_path):
    """The script's path enters the stub text: from one copy of the script, two runs agree byte for byte."""
    outs = []
    for n in range(2):
        folder = tmp_path / "same"
        if folder.exists():
            for child in folder.iterdir():
                child.unlink()
        folder.mkdir(exist_ok=True)
        proc = run_script("--history", ASSET, "--contract", folder / "c.limn", "--now", NOW, "--emit",
                          folder / "out.json", "--quiet")
        assert proc.code == 0, proc.err
        outs.append(((folder / "out.json").read_bytes(), (folder / "c.limn").read_bytes()))
    assert outs[0] == outs[1]


# --- item 5: records where the user wants them ---

REPAIRS = TRANSCRIPTS / "openai_repairs.json"


def test_records_go_to_stderr_by_default(cli, tmp_path):
    result = cli("--history", REPAIRS, "--contract", tmp_path / "c.limn", "--now", NOW)
    assert result.code == 0 and len(result.records) == 8
    assert sum(line.startswith("pager: repair: ") for line in result.err.splitlines()) == 4


def test_records_file_takes_the_records_and_stderr_keeps_the_repairs(cli, tmp_path):
    default = cli("--history", REPAIRS, "--contract", tmp_path / "a.limn", "--now", NOW)
    records = tmp_path / "records.jsonl"
    result = cli("--history", REPAIRS, "--contract", tmp_path / "b.limn", "--now", NOW, "--records", records)
    assert result.code == 0
    repairs = [line for line in default.err.splitlines() if line.startswith("pager: ")]
    assert result.err.splitlines() == repairs and len(repairs) == 4
    assert records.read_text(encoding="utf-8").splitlines() == [line for line in default.err.splitlines()
                                                                if line.startswith("{")]


def test_quiet_drops_the_records_not_the_warnings(cli, tmp_path):
    result = cli("--history", REPAIRS, "--contract", tmp_path / "c.limn", "--now", NOW, "--quiet")
    assert result.code == 0 and result.records == []
    assert len(result.err.splitlines()) == 4 and all(line.startswith("pager: repair: ")
                                                       for line in result.err.splitlines())
    warned = cli("--history", ASSET, "--contract", tmp_path / "w.limn", "--now", NOW, "--budget", "5", "--quiet")
    assert warned.code == 0 and warned.err.startswith("pager: warning: ")


@pytest.mark.parametrize("target, needle", [
    ("c.limn", "--records and --contract name the same file"),
    ("folder", "--records names a directory"),
    ("missing/records.jsonl", "--records' folder"),
])
def test_a_records_path_that_can_not_be_written_is_refused_first(cli, tmp_path, target, needle):
    (tmp_path / "folder").mkdir()
    before = tree_snapshot(tmp_path)
    _refused(cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--now", NOW, "--records", tmp_path / target),
             needle)
    assert tree_snapshot(tmp_path) == before


# --- items 6/7: one clear line for each slip ---

def test_compact_names_the_adapter_for_langchain_messages(pager):
    if sys.version_info < (3, 10):
        pytest.skip("LangChain 1.x needs Python 3.10+")
    messages = pytest.importorskip("langchain_core.messages")
    chat = [messages.HumanMessage("Fix the invoice rounding."), messages.AIMessage("On it.")]
    for given in (chat, chat[0]):
        with pytest.raises(pager.PagerError, match=r"LangChain message objects: compact them with the LangChain "
                                                   r"adapter, langchain_adapter\.compact_messages\(Pager\(\.\.\.\), "
                                                   r"messages\)"):
            pager.compact(given)
    with pytest.raises(pager.PagerError, match="must be a message list or a request body"):
        pager.compact([object()])


def test_help_says_history_reads_every_format(pager):
    helped = run_script("--help")
    text = " ".join(helped.out.split())
    assert helped.code == 0 and "pager's JSON schema" not in text
    assert "the history: an agent's transcript or a request body in any format --format names" in text
    assert "{auto," + ",".join(pager.FORMATS) + "}" in text
    assert "--records FILE" in text and "--quiet" in text


def test_the_console_script_names_itself_in_usage(tmp_path):
    """A console script as pip writes one (argv[0] is the script's path): usage says prosecode-pager."""
    script = tmp_path / "bin" / "prosecode-pager"
    script.parent.mkdir()
    script.write_text(f"import sys\nsys.path.insert(0, {str(SCRIPTS)!r})\nfrom pager import main\n"
                      "sys.exit(main())\n", encoding="utf-8")
    for args, usage in (([], "usage: prosecode-pager [-h] --history"), (["recall"], "usage: prosecode-pager recall"),
                        (["index"], "usage: prosecode-pager index"), (["search"], "usage: prosecode-pager search"),
                        (["compaction"], "usage: prosecode-pager compaction"),
                        (["report"], "usage: prosecode-pager report")):
        proc = subprocess.run([sys.executable, str(script), *args, "--help"], capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stdout.startswith(usage), proc.stdout[:200]
    assert run_script("--help").out.startswith("usage: pager.py [-h] --history")


@pytest.mark.parametrize("flags, needle", [
    (["--intent", ""], "--intent is empty: say what the agent is doing now, or leave --intent out"),
    (["--intent", "  \n"], "--intent is empty"),
    (["--alpha", "0", "--beta", "0"], "--alpha and --beta are both 0: every block would score R = 0"),
])
def test_flags_that_would_decide_nothing_are_refused(cli, tmp_path, flags, needle):
    _refused(cli("--history", ASSET, "--contract", tmp_path / "c.limn", "--now", NOW, *flags), needle)
    assert list(tmp_path.iterdir()) == []


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path):
    """`pager.py index ... | head -n 1`: the reader closes the pipe after one line; the command stops
    quietly with exit 0 (its contract and store were written before it printed)."""
    contract, history = tmp_path / "c.limn", tmp_path / "h.json"
    blocks = [{"id": f"b{i}", "turn": i, "role": "user", "text": f"note {i} about the pager"} for i in range(3000)]
    history.write_text(json.dumps({"intent_ir": ["pager"], "blocks": blocks}))
    first = subprocess.run([sys.executable, str(SCRIPTS / "pager.py"), "--history", str(history), "--contract",
                            str(contract), "--now", NOW, "--quiet", "--retain-cut", "1", "--evict-cut", "0"],
                           capture_output=True, text=True)
    assert first.returncode == 0, first.stderr  # some 3,000 index lines: more than a pipe holds
    shell = (f'"{sys.executable}" "{SCRIPTS / "pager.py"}" index --contract "{contract}" | head -n 1; '
             'echo "exit=${PIPESTATUS[0]}" >&2')
    result = subprocess.run(["bash", "-c", shell], capture_output=True, text=True)
    assert result.stdout.startswith("Paged blocks: 299") and result.stdout.count("\n") == 1
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr
    assert result.stderr.strip().endswith("exit=0")
