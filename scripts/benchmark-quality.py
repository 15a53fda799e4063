#!/usr/bin/env python3
"""Measure what the pager keeps under a token budget, on LoCoMo conversations.

For every question with at least one valid evidence turn, the whole conversation is
the history (turn = 1-based position across sessions, id = dia_id, role user/assistant
for speaker a/b, text "<speaker>: <text>" plus " [shares a photo: <caption>]"), the
intent is the question's words ([a-z0-9_]+ tokens, stop words removed, first occurrence
order), and each block costs ceil(characters / 4) tokens. Evidence recall is the share
of a question's evidence turns the pass RETAINS verbatim; all-hit is 1 when it retains
every one. Means over questions, at each budget, for:

  pager          the engine with its defaults and --budget B
  pager-plain    the engine with --similarity plain and --budget B
  unweighted     R = 0.7 * share of keywords present + 0.3 * recency, highest R first, filling B
  window         the most recent turns that fit B (truncation)

Example:
    python3 scripts/benchmark-quality.py ../shared/data/locomo-dev --json /tmp/quality.json
    python3 scripts/benchmark-quality.py ../shared/data/locomo-dev --floor 0.85

LoCoMo (ACL 2024, "Evaluating Very Long-Term Conversational Memory of LLM Agents") is
published by snap-research in its GitHub repository `locomo` (data/locomo10.json); the
project does not ship it. Any folder of its per-conversation JSON files works here.
"""

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pager  # noqa: E402

BUDGETS = (1024, 2048, 4096)
FLOOR_BUDGET = 2048
METHODS = ("pager", "pager-plain", "unweighted", "window")
_QUESTION_TOKEN = re.compile(r"[a-z0-9_]+")


def load_conversation(path):
    """Return (turns, questions) of one LoCoMo file: turns as pager blocks, questions with valid evidence."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    speaker_a = data.get("speaker_a")
    numbers = sorted(int(m.group(1)) for key in data for m in [re.fullmatch(r"session_(\d+)", key)] if m)
    turns = []
    for number in numbers:
        for turn in data[f"session_{number}"]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            turns.append({"id": turn["dia_id"], "turn": len(turns) + 1,
                          "role": "user" if turn["speaker"] == speaker_a else "assistant",
                          "text": text, "tokens": math.ceil(len(text) / 4)})
    ids = {t["id"] for t in turns}
    questions = []
    for qa in data.get("qa", []):
        evidence = []
        for item in qa.get("evidence", []):
            for part in str(item).replace(";", ",").split(","):
                part = part.strip()
                if part in ids and part not in evidence:
                    evidence.append(part)
        if evidence:
            questions.append({"question": qa["question"], "evidence": evidence,
                              "category": qa.get("category")})
    return turns, questions


def question_keywords(question):
    """Return the intent: question words, stop words removed, first occurrence order."""
    seen = {}
    for token in _QUESTION_TOKEN.findall(question.lower()):
        if token not in pager.STOP_WORDS:
            seen.setdefault(token, None)
    return list(seen)


def kept_by_pager(turns, keywords, budget, similarity):
    history = {"current_turn": len(turns) + 1, "intent_ir": keywords, "blocks": turns}
    plan = pager.plan_pass(history, pager.Params(similarity=similarity, budget=budget))
    return {d.block for d in plan.decisions if d.action == "retain"}


def kept_by_unweighted(turns, keywords, budget):
    current = len(turns) + 1
    wanted = set(keywords)
    scored = []
    for position, t in enumerate(turns):
        found = wanted.intersection(pager.tokenize(t["text"])) if wanted else ()
        share = len(found) / len(wanted) if wanted else 0.0
        r = 0.7 * share + 0.3 * pager.recency(current - t["turn"])
        scored.append((-r, -position, t))
    kept, left = set(), budget
    for _, _, t in sorted(scored, key=lambda x: x[:2]):
        if t["tokens"] <= left:
            kept.add(t["id"])
            left -= t["tokens"]
    return kept


def kept_by_window(turns, budget):
    kept, left = set(), budget
    for t in reversed(turns):
        if t["tokens"] > left:
            break
        kept.add(t["id"])
        left -= t["tokens"]
    return kept


def kept_by(method, turns, keywords, budget):
    """Return the ids ``method`` retains verbatim under ``budget``."""
    if method == "pager":
        return kept_by_pager(turns, keywords, budget, "weighted")
    if method == "pager-plain":
        return kept_by_pager(turns, keywords, budget, "plain")
    if method == "unweighted":
        return kept_by_unweighted(turns, keywords, budget)
    return kept_by_window(turns, budget)


def measure(folder, budgets, methods=METHODS):
    """Return {method: {budget: (recall, all_hit)}}, per-category recall of the pager, and counts."""
    files = sorted(p for p in Path(folder).glob("*.json"))
    totals = {m: {b: [0.0, 0.0] for b in budgets} for m in methods}
    categories = {}
    count = 0
    for path in files:
        turns, questions = load_conversation(path)
        for q in questions:
            keywords = question_keywords(q["question"])
            evidence = q["evidence"]
            count += 1
            for b in budgets:
                for method in methods:
                    ids = kept_by(method, turns, keywords, b)
                    hit = sum(1 for e in evidence if e in ids)
                    totals[method][b][0] += hit / len(evidence)
                    totals[method][b][1] += 1.0 if hit == len(evidence) else 0.0
                    if method == "pager" and b == FLOOR_BUDGET:
                        cat = categories.setdefault(q["category"], [0.0, 0])
                        cat[0] += hit / len(evidence)
                        cat[1] += 1
    if not count:
        raise SystemExit(f"benchmark-quality: no question with valid evidence under {folder}")
    table = {m: {b: (totals[m][b][0] / count, totals[m][b][1] / count) for b in budgets} for m in methods}
    per_category = {c: v[0] / v[1] for c, v in sorted(categories.items(), key=lambda kv: str(kv[0]))}
    return table, per_category, count, [p.name for p in files]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="folder of LoCoMo conversation JSON files")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    parser.add_argument("--floor", type=float, help=f"exit 1 if the pager's recall at {FLOOR_BUDGET} is below this")
    args = parser.parse_args(argv)
    if not Path(args.folder).is_dir():
        parser.error(f"{args.folder} is not a folder")
    start = time.perf_counter()
    table, per_category, count, files = measure(args.folder, BUDGETS)
    print(f"LoCoMo retention: {count} questions in {', '.join(files)}; recall / all-hit of the evidence turns")
    print(f"{'method':<12} | " + " | ".join(f"B={b:<13}" for b in BUDGETS))
    for method in METHODS:
        print(f"{method:<12} | " + " | ".join(f"{table[method][b][0]:.3f} / {table[method][b][1]:.3f}"
                                             for b in BUDGETS))
    print("pager recall at 2048 by category: " + ", ".join(f"{c}: {v:.3f}" for c, v in per_category.items()))
    print(f"({time.perf_counter() - start:.1f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "questions": count, "files": files, "budgets": list(BUDGETS),
            "recall": {m: {str(b): round(table[m][b][0], 4) for b in BUDGETS} for m in METHODS},
            "all_hit": {m: {str(b): round(table[m][b][1], 4) for b in BUDGETS} for m in METHODS},
            "pager_recall_2048_by_category": {str(c): round(v, 4) for c, v in per_category.items()}},
            indent=2) + "\n", encoding="utf-8")
    if args.floor is not None:
        recall = table["pager"][FLOOR_BUDGET][0]
        if recall < args.floor:
            print(f"FAIL pager recall at {FLOOR_BUDGET} is {recall:.3f}, below the floor {args.floor}")
            return 1
        print(f"floor: pager recall at {FLOOR_BUDGET} is {recall:.3f} >= {args.floor}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
