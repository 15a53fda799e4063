"""Shared fixtures: the engine module, a CLI runner, and contract replay in Liminate."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
PAGER = SCRIPTS / "pager.py"
ASSET = ROOT / "assets" / "test-history.json"
NOW = "2026-05-17T03:08:12+00:00"

sys.path.insert(0, str(SCRIPTS))

import pager as _pager  # noqa: E402

# Stubs carry the recall command, and the CLI's names this file by absolute path (it runs from any
# folder), so a stub's size, and with it a tight budget's choices, would move with the checkout's
# path. In-process runs use one fixed command instead, the one the tests' figures were set with;
# tests of the command itself run the script in a subprocess.
TEST_RECALL_COMMAND = "python3 scripts/pager.py recall"
_pager.RECALL_COMMAND = TEST_RECALL_COMMAND


@pytest.fixture
def pager():
    return _pager


class CliResult:
    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err

    @property
    def records(self):
        import json
        return [json.loads(line) for line in self.err.splitlines() if line.startswith("{")]


@pytest.fixture
def cli(capsys):
    """Run pager.main in-process; return exit code, stdout, stderr."""
    def run(*args):
        code = _pager.main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)
    return run


def load_script(name):
    """Return the script ``scripts/<name>.py`` (a benchmark: its name has hyphens) loaded as a module."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(*args, stdin=None, script=PAGER):
    """Run a script in a subprocess, as a user would."""
    proc = subprocess.run([sys.executable, str(script), *map(str, args)], input=stdin,
                          capture_output=True, text=True, cwd=ROOT)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def liminate_module():
    """Return the real interpreter; in CI its absence fails the test instead of skipping it."""
    if os.environ.get("CI"):
        import liminate  # noqa: F401  (ImportError fails the test in CI)
        return liminate
    return pytest.importorskip("liminate")


def tool_chat(steps):
    """Return a Chat Completions list: a system prompt, a request, then ``steps`` tool round trips
    (round trip i greps helper_i in src/mod_i.py; its result names both six times)."""
    msgs = [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the rounding in src/totals.py; the invoice totals are off."}]
    for i in range(steps):
        call = f"call_{i}"
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": call, "type": "function",
            "function": {"name": "shell", "arguments": json.dumps({"cmd": f"grep -n helper_{i} src/mod_{i}.py"})}}]})
        msgs.append({"role": "tool", "tool_call_id": call,
                     "content": f"src/mod_{i}.py:{i}: def helper_{i}(x): return round(x, {i % 5}) # step {i}\n" * 6})
    return msgs


def replay(text):
    """Run a contract through the real interpreter; return (topic, {name: value})."""
    liminate = liminate_module()
    result = liminate.run(text)
    problems = [r.message for r in result.results if r.message]
    assert not result.had_error, problems
    return result.topic, {name: entry.value for name, entry in result.symbol_table.items()}


def state_lists(state):
    """Return the three lists of a ContractState keyed by their Liminate names."""
    return state.lists()


def tree_snapshot(folder):
    """Return {relative path: SHA-256 of its bytes, or 'link -> target', or 'dir'} of every entry under folder.

    Two equal snapshots mean a command changed nothing there.
    """
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder)
            if os.path.islink(path):
                out[rel] = "link -> " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as fh:
                    out[rel] = hashlib.sha256(fh.read()).hexdigest()
            else:
                out[rel] = "dir"
    return out
