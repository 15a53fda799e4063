"""The package: stdlib-only engine, a valid skill, docs that match what the code does."""

import ast
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

_STDLIB_FALLBACK = {  # Python 3.9 has no sys.stdlib_module_names
    "__future__", "argparse", "array", "dataclasses", "datetime", "io", "json", "math", "os", "re", "sys",
    "typing", "fcntl", "hashlib", "sqlite3", "stat", "tempfile", "time", "unicodedata", "errno",
    "contextlib", "itertools", "functools", "collections", "heapq", "bisect", "random", "string",
    "textwrap", "shutil", "signal", "struct", "uuid", "base64", "codecs", "copy", "enum", "marshal",
    "operator", "zlib",
}


def _imports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module.split(".")[0]


def test_engine_imports_only_the_standard_library():
    stdlib = getattr(sys, "stdlib_module_names", _STDLIB_FALLBACK)
    outside = sorted(set(_imports(ROOT / "scripts" / "pager.py")) - set(stdlib))
    assert outside == []


def test_engine_runs_without_test_dependencies(tmp_path):
    """Import the engine with site-packages hidden: liminate and pytest must not be needed."""
    code = "import sys; sys.path.insert(0, 'scripts'); import pager; print(pager.__version__)"
    proc = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0.1.0"


def _frontmatter():
    text = (ROOT / "SKILL.md").read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "SKILL.md must open with YAML frontmatter"
    return match.group(1), text[match.end():]


def test_skill_frontmatter_follows_the_spec():
    front, body = _frontmatter()
    assert re.search(r"^name: prosecode-context-pager$", front, re.M)
    desc = re.search(r'^description: "(.*)"$', front, re.M)
    assert desc, "description must be a quoted string"
    description = desc.group(1)
    assert 0 < len(description) < 1024
    assert "<" not in description and ">" not in description and "---" not in description
    assert "Use when" in description and "Not for" in description
    assert re.search(r"^license: MIT$", front, re.M)
    assert re.search(r"^metadata:$", front, re.M)
    assert len(body.splitlines()) < 500


def test_skill_names_existing_scripts_and_references():
    _, body = _frontmatter()
    for path in re.findall(r"`((?:scripts|references)/[\w./-]+)`", body):
        assert (ROOT / path).exists(), path


def test_skill_passes_the_reference_validator(tmp_path):
    if not os.environ.get("CI") and shutil.which("agentskills") is None:
        pytest.skip("skills-ref is not installed")
    skill = tmp_path / "prosecode-context-pager"
    shutil.copytree(ROOT, skill, ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", ".pytest_cache"))
    proc = subprocess.run(["agentskills", "validate", str(skill)], capture_output=True, text=True)
    if proc.returncode == 127 and not os.environ.get("CI"):  # a shim for another Python (pyenv), not the tool
        pytest.skip("skills-ref is not installed for this Python")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_references_document_every_vocabulary_word(pager):
    text = (ROOT / "references" / "paging-directives.md").read_text(encoding="utf-8")
    section = text.split("## The vocabulary", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([a-z][a-z0-9-]*)`", section))
    assert documented == set(pager.LIMN_VOCAB)
    assert "35 words" in section


def test_pyproject_has_no_runtime_dependencies_and_a_test_extra():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    if tomllib is None:
        assert re.search(r"^dependencies = \[\]$", text, re.M)
        return
    data = tomllib.loads(text)
    assert data["project"]["dependencies"] == []
    extras = " ".join(data["project"]["optional-dependencies"]["test"])
    for name in ("pytest", "liminate", "skills-ref"):
        assert name in extras
    assert data["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]


def test_the_engine_reads_top_to_bottom():
    """No top-level definition names another one defined further down (string annotations included)."""
    import ast
    tree = ast.parse((ROOT / "scripts" / "pager.py").read_text(encoding="utf-8"))
    first = {}  # top-level name -> the line that first binds it
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        else:
            bound = [(a.asname or a.name).split(".")[0] for sub in ast.walk(node)
                     if isinstance(sub, (ast.Import, ast.ImportFrom)) for a in sub.names]
        for name in bound:
            first.setdefault(name, node.lineno)
    def annotations(node):
        for sub in ast.walk(node):
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.returns is not None:
                yield sub.returns
            if isinstance(sub, (ast.arg, ast.AnnAssign)) and sub.annotation is not None:
                yield sub.annotation

    later = []
    for node in tree.body:
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        for annotation in annotations(node):  # a quoted annotation such as "Decision" counts too
            for quoted in ast.walk(annotation):
                if isinstance(quoted, ast.Constant) and isinstance(quoted.value, str):
                    used |= {n.id for n in ast.walk(ast.parse(quoted.value, mode="eval")) if isinstance(n, ast.Name)}
        later += [(node.lineno, name) for name in used if first.get(name, 0) > node.lineno]
    assert later == []


def test_benchmark_invariants_hold():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark-pager.py")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "invariants: all hold" in proc.stdout
    assert not list(ROOT.glob("contract-*.limn")), "the benchmark must write outside the repository"


def test_adapters_import_their_frameworks_lazily():
    """With site-packages hidden, the adapters still import: LangChain and the Agents SDK load on use."""
    code = ("import sys; sys.path.insert(0, 'scripts'); import langchain_adapter, agents_adapter; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('langchain', 'langchain_core', "
            "'langgraph', 'agents', 'openai')))")
    proc = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_pyproject_installs_a_package_not_a_top_level_pager_module():
    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert data["tool"]["setuptools"]["packages"] == ["prosecode_pager"]
    assert data["tool"]["setuptools"]["package-dir"] == {"prosecode_pager": "scripts"}
    assert "py-modules" not in data["tool"]["setuptools"]
    assert data["project"]["scripts"] == {"prosecode-pager": "prosecode_pager.pager:main"}
    extras = data["project"]["optional-dependencies"]
    for name in ("langchain-core", "langgraph", "langchain", "openai-agents"):
        assert any(dep.startswith(name) for dep in extras["test"]), name
    assert any(dep.startswith("openai-agents") for dep in extras["agents"])
    assert any(dep.startswith("langchain-core") for dep in extras["langchain"])


def test_a_plain_install_has_the_console_script_and_no_pager_module(tmp_path):
    """pip install . (not editable) into a fresh venv: prosecode_pager imports, pager does not."""
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", ".pytest_cache",
                                                                "build"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / "python"
    # A plain "pip install ." (its build backend comes from PyPI, as for any user).
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(source)],
                             capture_output=True, text=True)
    if install.returncode != 0 and "Could not find a version" in install.stderr and not os.environ.get("CI"):
        pytest.skip("PyPI is out of reach: no build backend for the install")
    assert install.returncode == 0, install.stderr
    work = tmp_path / "work"
    work.mkdir()  # run outside the checkout: nothing of scripts/ on the path
    helped = subprocess.run([str(bin_dir / "prosecode-pager"), "--help"], cwd=work, capture_output=True, text=True)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: prosecode-pager "), helped.stderr
    code = "import prosecode_pager as p; print(p.__version__, callable(p.compact), p.Pager.__module__)"
    imported = subprocess.run([str(python), "-c", code], cwd=work, capture_output=True, text=True)
    assert imported.stdout.split() == ["0.1.0", "True", "prosecode_pager.pager"], imported.stderr
    for code in ("import pager", "import prosecode_pager.claude_hooks; import pager"):
        missing = subprocess.run([str(python), "-c", code], cwd=work, capture_output=True, text=True)
        assert missing.returncode == 1 and "No module named 'pager'" in missing.stderr, code
    # The console script's stubs and index tell the model to recall with the console script.
    shutil.copy(ROOT / "assets" / "test-history.json", work / "h.json")
    run = subprocess.run([str(bin_dir / "prosecode-pager"), "--history", "h.json", "--contract", "c.limn",
                          "--emit", "out.json", "--now", "2026-05-17T03:08:12+00:00"],
                         cwd=work, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "(recall: prosecode-pager recall " in (work / "out.json").read_text(encoding="utf-8")
    index = subprocess.run([str(bin_dir / "prosecode-pager"), "index", "--contract", "c.limn"],
                           cwd=work, capture_output=True, text=True)
    assert f"(recall one with: prosecode-pager recall ID --contract {work / 'c.limn'})" in index.stdout
