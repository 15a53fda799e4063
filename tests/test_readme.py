"""The README is a user's guide whose examples run as shown, and the references it sends readers to
exist and read on their own."""

import doctest
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import ROOT

README = ROOT / "README.md"
REFERENCES = ROOT / "references"
MAX_LINES = 350  # the README is read in the first hour: what it does, how to run it, where the rest is
CLONE = "/home/me/prosecode-context-pager"  # where the README's outputs say the clone is
# Pages other branches write (issues 27, 30, 31, 32): linked already, checked once they exist.
PENDING: set = set()  # reference pages linked before they exist (none now)


def _text(path=README):
    return path.read_text(encoding="utf-8")


def _blocks(kind, text=None):
    return re.findall(rf"```{kind}\n(.*?)```", _text() if text is None else text, re.S)


def _console_steps():
    """Yield (command, expected output lines) of every ``$`` line of the README's console blocks, in order."""
    for block in _blocks("console"):
        current = None
        for line in block.splitlines():
            if line.startswith("$ "):
                if current is not None:
                    yield current
                current = (line[2:], [])
            else:
                current[1].append(line)
        if current is not None:
            yield current


def test_the_readme_is_at_most_350_lines():
    assert len(_text().splitlines()) <= MAX_LINES


def test_readme_opens_with_the_two_commands():
    blocks = _blocks("bash")
    assert blocks[0].strip() == "python3 scripts/pager.py --history assets/test-history.json --contract session.limn"
    assert blocks[1].strip() == 'python3 -m pip install -e ".[test]" && python3 -m pytest'


def test_the_sections_come_in_a_new_users_order():
    headings = re.findall(r"^## (.+)$", _text(), re.M)
    assert headings == ["A first session", "Run it on your own agent's session", "Integrations", "How it decides",
                        "The contract", "Links"]
    integrations = _text().split("## Integrations", 1)[1].split("\n## ", 1)[0]
    named = [m for m in re.findall(r"^\*\*([^*]+)\*\*", integrations, re.M)]
    assert [n.split(".")[0].split(" (")[0] for n in named] == [
        "Claude Code plugin", "MCP server", "Python: `compact` and `Pager`", "LangChain / LangGraph",
        "OpenAI Agents SDK"]


def _folder_like_the_clone():
    """Return a new empty folder whose absolute path has CLONE's length and code marks.

    Recall hints name the script and the contract by absolute path, so a stub's size (and with it a
    block kept because its stub would be no shorter, or a budget's fit) moves with the folder's
    path: the README's figures hold in a folder whose path is as long as the one it shows.
    """
    base = tempfile.mkdtemp(prefix="readme-", dir="/tmp" if os.path.isdir("/tmp") else None)
    pad = len(CLONE) - len(base) - 1
    marks = sum(CLONE.count(c) for c in "/") - sum(base.count(c) for c in "/") - 1
    if pad < 1 or marks != 0:
        shutil.rmtree(base)
        pytest.skip(f"the temporary folder {base} is too long to stand for {CLONE}")
    folder = os.path.join(base, "p" * pad)
    os.mkdir(folder)
    assert len(folder) == len(CLONE) and folder.count("/") == CLONE.count("/")
    return base, folder


def test_every_console_example_prints_what_the_readme_shows():
    """A fresh folder holding what the examples need; the first command as a newcomer runs it, then every
    console example in order. Paths to the folder read as the README's clone."""
    base, folder = _folder_like_the_clone()
    try:
        for part in ("scripts", "assets", "tests/fixtures"):
            shutil.copytree(ROOT / part, os.path.join(folder, part), ignore=shutil.ignore_patterns("__pycache__"))
        first = subprocess.run(_blocks("bash")[0].strip(), shell=True, cwd=folder, capture_output=True, text=True)
        assert first.returncode == 0, first.stderr
        steps = list(_console_steps())
        assert len(steps) >= 10
        for command, expected in steps:
            proc = subprocess.run(command, shell=True, cwd=folder, capture_output=True, text=True)
            shown = (proc.stdout + (proc.stderr if "2>" not in command else "")).replace(folder, CLONE)
            assert shown.splitlines() == expected, command
    finally:
        shutil.rmtree(base)


def test_python_examples_run(tmp_path):
    """The README's and references/api.md's doctests, run from the repository root as they say."""
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    examples = [(f"README[{i}]", e) for i, e in enumerate(_blocks("python"))]
    examples += [(f"api.md[{i}]", e) for i, e in enumerate(_blocks("python", _text(REFERENCES / "api.md")))]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for name, example in examples:
            runner.run(parser.get_doctest(example, {}, name, name, 0))
    finally:
        os.chdir(cwd)
    assert runner.failures == 0 and runner.tries >= 8


def test_the_api_table_is_exactly_the_public_api(pager):
    """references/api.md's table names every name in __all__, and nothing else; each has a docstring."""
    section = _text(REFERENCES / "api.md").split("## Every public name", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\w+)", section, re.M)
    assert sorted(documented) == sorted(pager.__all__)
    for name in pager.__all__:
        value = getattr(pager, name)
        if callable(value):
            assert (value.__doc__ or "").strip(), name


def _links(path):
    return re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", _text(path))


def test_links_resolve_and_references_read_on_their_own():
    for target in _links(README):
        if not target.startswith("http"):
            assert (ROOT / target).exists() or os.path.basename(target) in PENDING, target
    for page in sorted(REFERENCES.glob("*.md")):
        text = _text(page)
        assert text.startswith("# "), page.name
        assert "README" not in text.replace("the README in `shared/data", ""), page.name  # no "see the README"
        for target in _links(page):
            if not target.startswith("http"):
                assert (page.parent / target).exists() or os.path.basename(target) in PENDING, (page.name, target)
    assert {"cli.md", "decisions.md", "transcripts.md", "benchmarks.md", "api.md", "plugin.md", "mcp.md"} <= {
        p.name for p in REFERENCES.glob("*.md")}


def test_the_plugin_install_lines_work_with_the_real_cli(tmp_path):
    """The install line (Claude Code 2.1.275+), and the fallback for older versions, each in a fresh HOME."""
    from test_plugin import claude_cli, run_claude
    text = _text()
    assert "with Claude Code 2.1.275 or later" in text and "With an older Claude Code (no `--marketplace` option)" in text
    commands = [b.strip().splitlines() for b in _blocks("bash") if "claude plugin" in b]
    assert commands == [['claude plugin install prosecode-context-pager --marketplace "$PWD"'],
                        ['claude plugin marketplace add "$PWD"', "claude plugin install prosecode-context-pager@prosecode"]]
    cli = claude_cli()
    for n, lines in enumerate(commands):
        home = tmp_path / f"home{n}"
        for line in lines:
            args = [a.replace('"$PWD"', str(ROOT)) for a in line.split()[1:]]
            proc = run_claude(cli, *args, home=home, cwd=ROOT)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        details = run_claude(cli, "plugin", "details", "prosecode-context-pager@prosecode", home=home, cwd=tmp_path)
        assert "MCP servers (1)  prosecode-pager" in details.stdout, details.stdout + details.stderr
