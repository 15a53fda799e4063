"""Fuzz the command line (issue 11): any input, any flags -> exit 0 or 2, never a traceback.

A seeded generator mutates a small history of every format (a value swapped for a
hostile one, keys dropped, text cut or spliced) and picks flags at random, some of
them bad. Every case asserts: the exit code is 0 or 2; exit 2 prints exactly one
line and leaves every file byte-identical; exit 0 leaves a contract that replays in
Liminate to the state the pager reads. PAGER_FUZZ_CASES sets how many cases run
(default 300, a few seconds); PAGER_FUZZ_SEED moves the seed.
"""

import contextlib
import io
import json
import os
import random
import shutil

import pager as engine
from conftest import ASSET, ROOT, liminate_module, tree_snapshot

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
SEEDS = {  # one small history per format and layout: (its format, the file)
    "pager": ("pager", ASSET),
    "openai": ("openai", FIXTURES / "openai_repairs.json"),
    "responses": ("responses", FIXTURES / "responses_session.json"),
    "anthropic": ("anthropic", FIXTURES / "anthropic_alternation.json"),
    "claude-code": ("claude-code", FIXTURES / "claude_code_session.jsonl"),
    "codex": ("codex", FIXTURES / "codex_legacy_compacted.jsonl"),
    "gemini-cli": ("gemini-cli", FIXTURES / "gemini_cli_session.json"),
    "gemini-cli jsonl": ("gemini-cli", FIXTURES / "gemini_cli_session.jsonl"),
    "copilot-cli": ("copilot-cli", FIXTURES / "copilot_cli_events.jsonl"),
    "copilot-cli legacy": ("copilot-cli", FIXTURES / "copilot_cli_legacy.json"),
    "opencode": ("opencode", FIXTURES / "opencode_export.json"),
}
# Two formats with no file of their own here, made from fixtures: a Gemini API body (the Gemini CLI
# session written back) and a SWE-agent trajectory (the Chat fixture's messages as its history).
MADE = {
    "gemini": json.dumps(engine.emit(engine.load((FIXTURES / "gemini_cli_session.json").read_text(encoding="utf-8"),
                                                 "gemini-cli"), {}), ensure_ascii=False),
    "swe-agent": json.dumps({"trajectory": [], "info": {"exit_status": "submitted"}, "history": json.loads(
        (FIXTURES / "openai_parallel.json").read_text(encoding="utf-8"))["messages"]}, ensure_ascii=False),
}


def _seed_text(name):
    """Return the text of seed ``name`` (see SEEDS and MADE) and whether it is JSONL."""
    if name in MADE:
        return MADE[name], False
    path = SEEDS[name][1]
    return path.read_text(encoding="utf-8"), path.suffix == ".jsonl"
CASES = int(os.environ.get("PAGER_FUZZ_CASES", "300"))
SEED = int(os.environ.get("PAGER_FUZZ_SEED", "11"))

BREAKS = ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _hostile_value(rng):
    """Return a JSON value a careless or hostile writer might put anywhere."""
    choice = rng.randrange(16)
    if choice == 0:
        if rng.random() < 0.5:
            return "DEEP"  # expanded by _render: deeper than Python's decoder goes
        depth = rng.choice([50, 300])  # deep but decodable (the generator walks it, so not too deep)
        return json.loads("[" * depth + "]" * depth)
    if choice == 1:
        return rng.choice([2 ** 63 - 1, 2 ** 63, 2 ** 64, -1, -(2 ** 70), 0])
    if choice == 2:
        return "LONGINT"
    if choice == 3:
        return rng.choice([1e308, -0.0, 0.5, 1e-300])
    if choice == 4:
        return "x" + rng.choice(BREAKS) + 'y"z' + rng.choice(BREAKS)
    if choice == 5:
        return rng.choice(["", " ", "\u200b", "\ud800", "a\x00b", "\\", "--", "ADD"])
    if choice == 6:
        return None
    if choice == 7:
        return rng.choice([True, False])
    if choice == 8:
        return {"type": {"a": 1}, "role": ["user"], "text": 5}
    if choice == 9:
        return [1, "two", {"three": 3}]
    if choice == 10:
        return 'add "b1" to paged-blocks because "x"'
    if choice == 11:
        return rng.choice(["user", "assistant", "system", "tool", "developer", "function", "nobody"])
    if choice == 12:
        return rng.choice(["message", "function_call", "function_call_output", "reasoning", "response_item",
                           "tool_use", "tool_result", "text", "thinking"])
    if choice == 13:
        return "word " * rng.choice([1, 50, 3000])
    if choice == 14:
        return rng.choice(["block-0x05", "b1", "call_1", "toolu_1", "pager-index"])
    return rng.randrange(-5, 50)


def _render(value):
    """Return JSON text for value, with the markers DEEP and LONGINT expanded into raw JSON."""
    text = json.dumps(value, ensure_ascii=False)
    depth = 990 if len(text) % 2 else 1100  # just under the decoder's limit, or over it
    text = text.replace('"DEEP"', "[" * depth + "]" * depth)
    return text.replace('"LONGINT"', "7" * 4400)


def _paths(value, prefix=()):
    """Yield the path of every value inside value."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, prefix + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _paths(child, prefix + (i,))


def _mutate_value(rng, value):
    """Change one to three places inside value: swap in a hostile value, or drop a key or item."""
    for _ in range(rng.randrange(1, 4)):
        paths = [p for p in _paths(value) if p]
        if not paths:
            return _hostile_value(rng)
        path = rng.choice(paths)
        parent = value
        for step in path[:-1]:
            parent = parent[step]
        if rng.random() < 0.25:
            del parent[path[-1]]
        else:
            parent[path[-1]] = _hostile_value(rng)
    return value


def _history_text(rng, name):
    """Return the text of a mutated history: seed ``name``'s."""
    raw, jsonl = _seed_text(name)
    if jsonl:
        lines = raw.splitlines()
        out = []
        for line in lines:
            if rng.random() < 0.1:
                try:
                    line = _render(_mutate_value(rng, json.loads(line)))
                except ValueError:  # the fixture's own unreadable line: keep it
                    pass
            out.append(line)
        text = "\n".join(out) + "\n"
    else:
        text = _render(_mutate_value(rng, json.loads(raw))) if rng.random() < 0.6 else raw
    roll = rng.random()
    if roll < 0.08:  # cut short
        text = text[: rng.randrange(len(text) + 1)]
    elif roll < 0.14:  # a stray character somewhere
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice(['"', "{", "]", ",", "\x00", "\u2028", "\ufeff"]) + text[at:]
    return text


def _contract_text(rng):
    """Return a contract another tool, a crash or a hostile writer may have left, or None."""
    roll = rng.random()
    if roll < 0.6:
        return None
    lines = ['about "shared"', "remember a list called paged-blocks", "remember a value called owner with \"ana\""]
    extra = [
        'add "block-0x05" to paged-blocks because "x"',
        'ADD "b9" TO PAGED-BLOCKS BECAUSE "x"',
        'add "b9" to paged-blocks because "x".',
        "-- note" + rng.choice(BREAKS) + 'add "b8" to paged-blocks because "x"',
        '  remember a list called evicted-blocks',
        'remember a number called token-budget with 12',
        'remember a value called pager-store with "elsewhere.db"',
        'add "a" to paged-bl',
        "-- just a comment",
        'remember a list called notes',
    ]
    lines += rng.sample(extra, rng.randrange(0, 4))
    return "\n".join(lines) + rng.choice(["\n", "", "\r\n"])


def _flags(rng, fmt):
    """Return random pass flags: valid values mostly, a bad one now and then."""
    flags = []
    pick = rng.random
    bad = pick() < 0.3  # this case may hold bad flag values

    def value(good, wrong):
        return rng.choice(wrong if bad and pick() < 0.3 else good)

    if pick() < 0.5:
        flags += ["--format", value([fmt, fmt, "auto"], ["pager", "openai", "codex", "claude-code"])]
    if pick() < 0.3:
        flags += ["--budget", value(["1", "50", "400", "5000"], ["0", "-3", "x", str(2 ** 70)])]
    if pick() < 0.2:
        flags += ["--keep-recent", value(["0", "1", "3"], ["-1", str(2 ** 64)])]
    if pick() < 0.2:
        flags += ["--stub-words", value(["1", "7", "40"], ["0", "1e3"])]
    if pick() < 0.2:
        flags += ["--alpha", value(["0.7", "0", "1", "0.3"], ["nan", "inf", "-1", "2"])]
    if pick() < 0.2:
        flags += ["--beta", value(["0.3", "0", "1", "0.7"], ["nan", "-0.5"])]
    if pick() < 0.2:
        flags += ["--retain-cut", value(["0.55", "0.99", "1"], ["0", "2"])]
    if pick() < 0.2:
        flags += ["--evict-cut", value(["0.2", "0.1", "0"], ["0.99", "-1"])]
    if pick() < 0.2:
        flags += ["--similarity", rng.choice(["plain", "weighted"])]
    if pick() < 0.3:
        flags += ["--intent", value(["fix the pager", "tool output", "x y z"],
                                    ["", "x" + rng.choice(BREAKS) + "y", '"q"', "\ud800"])]
    if pick() < 0.5:
        flags += ["--emit", value(["out.json"], [".", "nodir/out.json", "h.json", "c.limn", "link.db"])]
    if pick() < 0.15:
        flags += ["--with-index"]
    if pick() < 0.15:
        flags += ["--store", value(["s.db", "sub.sqlite3"], ['S"x.db', "S\nx.db", "h.json", "c.limn", "link.db"])]
    if pick() < 0.1:
        flags += ["--dry-run"]
    if pick() < 0.2:
        flags += ["--json"]
    flags += ["--now", value(["2026-05-17T03:08:12+00:00", "2026-05-17T03:08:12Z", "2030-01-01T00:00:00-05:00"],
                             ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+01:00", "yesterday"])]
    return flags


def _failures(liminate, result):
    """Return the messages of the statements Liminate failed to run, in order."""
    return [r.message for r in result.results if r.status.value.startswith("error")]


def _run(pager, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = pager.main(argv)
    return code, out.getvalue(), err.getvalue()


def _check_case(pager, liminate, rng, folder, case):
    name = rng.choice(sorted([*SEEDS, *MADE]))
    fmt = SEEDS[name][0] if name in SEEDS else name
    (folder / "h.json").write_text(_history_text(rng, name), encoding="utf-8", errors="surrogatepass")
    contract_text = _contract_text(rng)
    if contract_text is not None:
        (folder / "c.limn").write_text(contract_text)
    if rng.random() < 0.05:
        (folder / "link.db").symlink_to(folder / "h.json")
    foreign = _failures(liminate, liminate.run(contract_text)) if contract_text else []
    flags = _flags(rng, fmt)
    if rng.random() < 0.1:  # a page-in or an index instead of a pass
        argv = rng.choice([["index", "--contract", "c.limn"], ["recall", "block-0x05", "--contract", "c.limn"]])
    else:
        argv = ["--history", "h.json", "--contract", "c.limn", *flags]
    for attempt in range(rng.choice([1, 1, 2])):  # a second pass reads what the first wrote
        before = tree_snapshot(folder)
        code, out, err = _run(pager, argv)
        where = f"case {case} (seed {name}, argv {argv!r})"
        assert code in (0, 2), where
        if code == 2:
            lines = err.splitlines()
            assert len(lines) == 1 and lines[0].startswith("pager: error: ") and err.endswith("\n"), (where, err)
            assert tree_snapshot(folder) == before, (where, err)
            return "refused"
        if argv[0] in ("index", "recall") or "--dry-run" in argv:
            continue
        text = (folder / "c.limn").read_bytes().decode("utf-8")
        result = liminate.run(text)
        # Lines another tool wrote may fail in Liminate already; the pager's lines add no failure.
        assert _failures(liminate, result) == foreign, (where, _failures(liminate, result), foreign)
        state = pager.read_contract_state(text)
        for name, blocks in state.lists().items():
            assert result.symbol_table[name].value == blocks, (where, name)
    return "ok"


def test_fuzz_every_format_and_flag(pager, tmp_path, monkeypatch):
    liminate = liminate_module()
    rng = random.Random(SEED)
    outcomes = {"ok": 0, "refused": 0}
    for case in range(CASES):
        folder = tmp_path / f"case{case}"
        folder.mkdir()
        monkeypatch.chdir(folder)
        outcomes[_check_case(pager, liminate, rng, folder, case)] += 1
        shutil.rmtree(folder)
    print(f"fuzz: {CASES} cases, seed {SEED}: {outcomes}")
    # The generator must reach both outcomes, or it tests too little.
    assert outcomes["ok"] > CASES // 10 and outcomes["refused"] > CASES // 10, outcomes
