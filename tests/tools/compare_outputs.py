#!/usr/bin/env python3
"""Run the pager on every development transcript and fixture; save or compare its outputs.

Used to prove a refactor leaves behaviour byte-identical (issue 27, item 3). For each input file
(every file of ../shared/data/transcripts-dev except its README, every fixture in
tests/fixtures/transcripts, and assets/test-history.json) and each setting (the default, and
``--budget 8000``), with a fixed ``--now``, it captures four artifacts: the contract (.limn), the
emitted request (``--emit``), the stderr records and the stdout summary line. Nothing from
../shared is copied into the repository: outputs go to a folder outside it.

    python3 tests/tools/compare_outputs.py save /tmp/formats-baseline     # before the change
    python3 tests/tools/compare_outputs.py compare /tmp/formats-baseline  # after each step

``compare`` exits 1 and names every artifact that differs; 0 when all are byte-identical.
"""

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGER = os.path.join(ROOT, "scripts", "pager.py")
DEV = os.path.join(os.path.dirname(ROOT), "shared", "data", "transcripts-dev")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "transcripts")
NOW = "2026-05-17T03:08:12+00:00"  # fixed pass time: same input, same bytes
SETTINGS = {"default": [], "budget8000": ["--budget", "8000"]}
ARTIFACTS = ("contract.limn", "emit.json", "stderr.txt", "stdout.txt")


def inputs():
    """Return (case name, path) for every input file, sorted."""
    found = []
    if os.path.isdir(DEV):
        for folder, _, names in os.walk(DEV):
            for name in names:
                if name != "README.md":
                    path = os.path.join(folder, name)
                    found.append(("dev--" + os.path.relpath(path, DEV).replace(os.sep, "--"), path))
    for name in os.listdir(FIXTURES):
        if not name.endswith(".py"):
            found.append(("fixture--" + name, os.path.join(FIXTURES, name)))
    found.append(("asset--test-history.json", os.path.join(ROOT, "assets", "test-history.json")))
    return sorted(found)


def run_one(case, path, setting, out_dir, scratch):
    """Run one pass in a fixed scratch folder (so paths in outputs match) and keep its artifacts."""
    work = os.path.join(scratch, case, setting)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    contract = os.path.join(work, "contract.limn")
    emitted = os.path.join(work, "emit.json")
    command = [sys.executable, PAGER, "--history", path, "--contract", contract, "--emit", emitted,
               "--now", NOW] + SETTINGS[setting]
    done = subprocess.run(command, capture_output=True)
    dest = os.path.join(out_dir, case, setting)
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, "stdout.txt"), "wb") as handle:
        handle.write(done.stdout + b"\nexit %d\n" % done.returncode)
    with open(os.path.join(dest, "stderr.txt"), "wb") as handle:
        handle.write(done.stderr)
    for name, source in (("contract.limn", contract), ("emit.json", emitted)):
        target = os.path.join(dest, name)
        if os.path.exists(source):
            shutil.copyfile(source, target)
        else:
            with open(target, "wb") as handle:
                handle.write(b"<absent>\n")
    return case, setting, done.returncode


def run_all(out_dir, jobs):
    """Run every case under every setting into out_dir; return the (case, setting, code) list."""
    scratch = os.path.join(tempfile.gettempdir(), "formats-compare-scratch")
    tasks = [(case, path, setting) for case, path in inputs() for setting in SETTINGS]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda task: run_one(*task, out_dir, scratch), tasks))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("save", "compare"))
    parser.add_argument("baseline", help="folder of saved outputs")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    if args.mode == "save":
        shutil.rmtree(args.baseline, ignore_errors=True)
        results = run_all(args.baseline, args.jobs)
        print("saved %d files x %d settings x %d artifacts = %d artifacts in %s"
              % (len(results) // len(SETTINGS), len(SETTINGS), len(ARTIFACTS),
                 len(results) * len(ARTIFACTS), args.baseline))
        return 0
    current = tempfile.mkdtemp(prefix="formats-current-")
    results = run_all(current, args.jobs)
    differ = []
    for case, setting, _ in results:
        for name in ARTIFACTS:
            old = os.path.join(args.baseline, case, setting, name)
            new = os.path.join(current, case, setting, name)
            if not os.path.exists(old) or not filecmp.cmp(old, new, shallow=False):
                differ.append("%s/%s/%s" % (case, setting, name))
    total = len(results) * len(ARTIFACTS)
    print("compared %d files x %d settings x %d artifacts = %d artifacts: %d identical, %d differ"
          % (len(results) // len(SETTINGS), len(SETTINGS), len(ARTIFACTS), total, total - len(differ),
             len(differ)))
    for line in differ:
        print("  differs: " + line)
    if not differ:
        shutil.rmtree(current)
    else:
        print("current outputs kept in " + current)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
