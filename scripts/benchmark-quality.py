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

Coding sessions (--coding DIR): future-reference recall and cache stability
-------------------------------------------------------------------------------
DIR is searched recursively for agent transcripts the pager reads (Claude Code and Codex
JSONL, chat/Responses JSON, SWE-agent ``.traj`` files, whose ``history`` is read as OpenAI
chat). A session is the pager's own block list, ``pager.conversation_blocks(pager.load(...))``,
without the blocks from before a compaction boundary: a session compacted k times is measured as
k + 1 contexts (``name#1``...), each as its agent had it (the file up to each boundary, then the
live part after the last: see read_session). Files the pager can't read, and contexts under
MIN_SESSION_BLOCKS blocks (single recorded API requests), are listed as skipped. Every block costs ceil(characters / 4) tokens, for every
policy: the pager gets that figure as each block's ``tokens``.

  step        a maximal run of consecutive assistant blocks (text, thinking, tool calls).
  cut point   the first block of each step that starts at block index WARMUP_BLOCKS or later;
              the history is every block before it. All cut points are scored unless
              --max-cuts N is given: then N per session, evenly spaced, always the same ones
              (the pager still runs before every step: its passes depend on the earlier ones).
  distinctive token  see ``distinctive_tokens``: paths, identifiers, error names, numbers of
              4+ digits, and plain words of PLAIN_WORD_MIN+ letters; lowercased.
  needed      the earlier blocks that hold a distinctive token of the next NEXT_STEPS steps'
              assistant blocks (the cut's step included; tool calls are assistant blocks), for
              tokens held by 1 to MAX_HOLDERS earlier blocks and not in the last user message
              before the cut. Tokens found only after the cut hold no earlier block.
  recall      needed blocks kept verbatim / needed blocks, pooled over cut points.
  reachable   needed blocks kept verbatim or whose exact text the page store holds (the pager's
              store beside its contract, read right after the pass), or held by a range page
              (``r-<12 hex>``) the emitted request names.
  findable    needed blocks kept verbatim, or reachable with a line of the emitted request that
              stands for them naming one of the names the next steps use from them: the block's
              own stub, an index line naming its id, or the line of a range page holding it
              (membership: the engine's ``PageStore.range_members`` when it has one, else its
              ``recall r-... --json`` on copies of the contract and store). The recall command
              on a line is left out (see line_names).
  Each is pooled over every session and per session kind (Claude Code, Codex, SWE-agent; other
  formats only in "all"), and issue 31's targets for the pager are printed, reported, not
  enforced: recall at least the window's; reachable 1.0; findable at least the window's recall
  + 0.15 (at most 1.0) at 4,000 and 8,000.

Policies at each budget B in CODING_BUDGETS, or the budgets --budgets names (system blocks are kept by every policy, as every
agent keeps its instructions, and count against B):
  window      the most recent blocks that fit B, stopping at the first that does not.
  masking     SWE-agent's last-N-observations: tool results older than the last
              MASK_KEEP_OBSERVATIONS become a one-line placeholder, then the window over that.
  pager       the pager as an agent runs it: a pass of ``pager.main`` before every assistant
              step (the history so far, written as the pager's own JSON; current_turn = the
              last block's turn), all on one contract, ``--budget B`` and its defaults (so the
              watermarks: compact at the budget, down to 0.8 of it, directives sticky between);
              at a cut point, kept verbatim = that pass's records with action ``retain``.
              Passes over budget are counted (every pass of the replay).
  refit       the same with ``--target none``: no watermarks, the whole budget fitted anew
              on every pass (what the pager did before the watermarks became its default);
              left out with --no-refit (half the run's time).
  <variant>   the same with extra pager flags: --variant NAME="--flag value ..." (repeatable),
              for engine features to compare without changing the measure.
  upper       the needed blocks alone, smallest first, as many as fit B.

Cache stability (--cache-budget, default 8000): each session is replayed step by step; pass k
sees the blocks before cut point k (all steps, from the first). The pager runs with
``--emit`` on one contract and one page store across the passes, ``--now`` one minute later
each pass (the recall replay at that budget, reused); the window is computed. Emitted blocks are compared as their JSON text: a pass
keeps the prefix when its emitted blocks for the previous pass's history are byte-identical
to the previous pass's emitted blocks; resent uncached = tokens of the emitted blocks after
the longest common prefix (in blocks) with the previous pass, summed over passes (the first
pass sends everything); "new" is the part of that which is new blocks and must be sent anyway.
Shares are given over all passes after the first and over the passes whose history exceeds
the budget.

Example:
    python3 scripts/benchmark-quality.py --coding ../shared/data/transcripts-dev
    python3 scripts/benchmark-quality.py --coding ../shared/data/transcripts-dev --max-cuts 40 \
        --variant plain="--similarity plain" --json /tmp/coding.json

Compaction events (--compaction DIR): what the agent needs after its harness compacts
--------------------------------------------------------------------------------------
Every Claude Code or Codex JSONL file under DIR with compaction boundaries (``compact_boundary``
lines, Codex ``compacted`` items) gives one event per boundary, in order, all of a file's events
on one session contract (the plugin extends it at every compaction).
  needed names  distinctive tokens (the coding measure's) of the assistant blocks of the
              ACTING_STEPS acting steps after the boundary (text, tool names and arguments; the
              transcript's thinking left out), held by 1 to MAX_HOLDERS blocks before it, and
              absent from every user message, tool result and re-sent instruction after it up to
              their first use (the harness's summary aside; the files Claude Code re-attaches
              right after the boundary count as shown). See needed_after.
  summary     the harness's summary (Claude Code's compact summary; Codex's ``message``, empty
              when the summary stays server-side).
  injected    Claude Code: the plugin's PreCompact hook on the transcript cut at the boundary,
              then SessionStart with source ``compact``, run as Claude Code runs them (the
              command of hooks/hooks.json through the shell, the hook JSON on stdin): its
              ``additionalContext``. Codex: the pass with ``--before-compaction`` on the cut
              rollout, then ``index --tokens 2000``, when ``pager.py --help`` lists that flag;
              before then the same two hooks with Codex's hook input (today's behaviour).
  recallable  a page the contract lists holds the name (its store's text).
  search      ``search NAME --json --limit 5`` ranks a page holding the name in its first 5
              hits; "not available" while ``pager.py --help`` lists no search command.
Shares are of the needed names, per event and pooled (all events, Claude Code, Codex), with
the summary's and the injected context's tokens (ceil(chars / 4)), and issue 32's targets as
reported lines: recallable >= 0.97; injected >= 0.30 on Claude Code events; summary or
injected >= 0.50; search top-5 >= 0.9; the injected context within 2,000 tokens.

Example:
    python3 scripts/benchmark-quality.py --compaction ../shared/data/transcripts-dev --json /tmp/compaction.json
"""

import argparse
import bisect
import contextlib
import datetime
import functools
import io
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import claude_hooks  # noqa: E402
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


# ===== Coding sessions: future-reference recall and cache stability =====

CODING_BUDGETS = (4000, 8000, 16000)
CACHE_BUDGET = 8000
MIN_SESSION_BLOCKS = 25     # fewer blocks: a recorded single request, too short for cut points
WARMUP_BLOCKS = 20          # cut points start at this block index
NEXT_STEPS = 3              # assistant steps after a cut whose tokens define the needed blocks
MAX_HOLDERS = 3             # a token held by more earlier blocks than this is not distinctive
MIN_TOKEN_CHARS = 4         # shortest distinctive token
PLAIN_WORD_MIN = 7          # a word of letters only counts from this many letters (a rare word)
MASK_KEEP_OBSERVATIONS = 5  # masking keeps this many latest tool results (SWE-agent's example n)
FIXED_NOW = "2026-01-01T00:00:00+00:00"  # --now of every recall pass: same input, same bytes
TOOL_ROLE = "tool"
SYSTEM_ROLES = ("system", "developer")  # instructions: every policy keeps them
_JSON_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|[nrtbf"\\/])')  # escapes inside tool-call arguments
_COMPOUND = re.compile(r"[A-Za-z0-9_]+(?:[./:\-][A-Za-z0-9_]+)*")
_SEGMENT_BREAK = re.compile(r"[/:]")   # path segments and file:line
_NAME_BREAK = re.compile(r"[.\-]")     # dotted names and hyphenated words
_CAMEL = re.compile(r"[a-z][A-Z]")
_CODE_MARK = re.compile(r"[0-9_./:\-]")
_PART_OF_CODE = re.compile(r"[./:]")   # a compound joined by these is code: its parts are names


def block_cost(text):
    """Return a block's tokens for every coding policy: ceil(characters / 4)."""
    return math.ceil(len(text) / 4)


def _distinctive(piece, in_code):
    """Return ``piece`` lowercased if it is a distinctive token, else None (see distinctive_tokens)."""
    if len(piece) < MIN_TOKEN_CHARS:
        return None
    lowered = piece.lower()
    if lowered in pager.STOP_WORDS:
        return None
    if in_code or _CODE_MARK.search(piece) or _CAMEL.search(piece):
        return lowered
    return lowered if piece.isalpha() and len(piece) >= PLAIN_WORD_MIN else None


def distinctive_tokens(text):
    """Return the set of distinctive tokens of ``text``, lowercased.

    JSON escapes (``\\n``, ``\\"``, ``\\u00e9``...) are read as spaces first, since tool-call
    arguments arrive as JSON text. A compound is a run of letters, digits and ``_`` joined by
    ``.``, ``/``, ``:`` or ``-`` (``src/billing/totals.py``, ``Foo.bar``, ``fields.py:1474``);
    the compound, each of its ``/``/``:`` segments, and each ``.``/``-`` part of those are
    candidates. A candidate of MIN_TOKEN_CHARS+ characters that is not a pager stop word is
    distinctive when it holds a digit (long numbers, versions, hashes), ``_``, ``.``, ``/``,
    ``:`` or ``-`` (paths, identifiers), is camelCase (``TypeError``, ``lineTotal``), is a
    part of a compound joined by ``.``, ``/`` or ``:`` (``totals`` of ``totals.py``), or is
    a word of PLAIN_WORD_MIN+ letters (a rare word; the MAX_HOLDERS rule decides rarity).

    Example:
        >>> sorted(distinctive_tokens('Read({"file_path":"src/billing/totals.py"}) TypeError 42 done'))
        ['billing', 'file_path', 'src/billing/totals.py', 'totals', 'totals.py', 'typeerror']
    """
    found = set()
    for match in _COMPOUND.finditer(_JSON_ESCAPE.sub(" ", text)):
        whole = match.group()
        in_code = bool(_PART_OF_CODE.search(whole))
        candidates = {whole: False}
        for segment in _SEGMENT_BREAK.split(whole):
            candidates.setdefault(segment, in_code)
            for part in _NAME_BREAK.split(segment):
                candidates.setdefault(part, in_code)
        for piece, part_of_code in candidates.items():
            token = _distinctive(piece, part_of_code)
            if token:
                found.add(token)
    return found


def assistant_steps(blocks):
    """Return (first, end) index pairs of the runs of consecutive assistant blocks."""
    steps, start = [], None
    for i, block in enumerate(blocks + [{"role": None}]):
        if block["role"] == "assistant" and start is None:
            start = i
        elif block["role"] != "assistant" and start is not None:
            steps.append((start, i))
            start = None
    return steps


def cut_steps(steps, max_cuts=0, every=1):
    """Return the indices into ``steps`` used as cut points: every ``every``-th step (the steps the
    pager runs before), ``max_cuts`` > 0 of them sampled evenly."""
    chosen = [k for k, (first, _) in enumerate(steps) if first >= WARMUP_BLOCKS and k % every == 0]
    if max_cuts and len(chosen) > max_cuts:
        last = len(chosen) - 1
        picks = sorted({round(i * last / (max_cuts - 1)) for i in range(max_cuts)}) if max_cuts > 1 else [last]
        chosen = [chosen[i] for i in picks]
    return chosen


class TokenIndex:
    """Each block's distinctive tokens, and for each token the blocks holding it, in order."""

    def __init__(self, blocks):
        self.tokens = [distinctive_tokens(b["text"]) for b in blocks]
        self.holders = {}
        for i, found in enumerate(self.tokens):
            for token in found:
                self.holders.setdefault(token, []).append(i)

    def held_before(self, token, cut):
        """Return the indices of the blocks before ``cut`` holding ``token``."""
        at = self.holders.get(token, [])
        return at[:bisect.bisect_left(at, cut)]


def needed_names(blocks, index, steps, k):
    """Return {index of a block before step ``k``: the names its next NEXT_STEPS steps use from it}.

    A name is a distinctive token of those steps' assistant blocks, held by 1 to MAX_HOLDERS
    blocks before the cut and not in the last user message before it; each holder gets the
    names that make it needed (findable asks whether a page's line names one of them).
    """
    cut = steps[k][0]
    wanted = set()
    for first, end in steps[k:k + NEXT_STEPS]:
        for i in range(first, end):
            wanted |= index.tokens[i]
    human = next((i for i in range(cut - 1, -1, -1) if blocks[i]["role"] == "user"), None)
    if human is not None:
        wanted -= index.tokens[human]
    names = {}
    for token in wanted:
        held = index.held_before(token, cut)
        if 0 < len(held) <= MAX_HOLDERS:
            for i in held:
                names.setdefault(i, set()).add(token)
    return {i: frozenset(found) for i, found in names.items()}


def needed_blocks(blocks, index, steps, k):
    """Return the indices of the blocks before step ``k`` that its next NEXT_STEPS steps need.

    Example: if the next steps name ``parse_total`` and only block 3 of the history does,
    block 3 is needed; a token four earlier blocks hold, or one the last user message holds,
    marks nothing.
    """
    return set(needed_names(blocks, index, steps, k))


def _system_first(blocks, budget):
    """Return (indices of the system blocks that fit, tokens left) for the baseline policies."""
    kept, left = set(), budget
    for i, block in enumerate(blocks):
        if block["role"] in SYSTEM_ROLES and block_cost(block["text"]) <= left:
            kept.add(i)
            left -= block_cost(block["text"])
    return kept, left


def window_kept(blocks, budget, costs=None):
    """Return the indices the sliding window sends: system blocks, then the latest that fit."""
    costs = costs or [block_cost(b["text"]) for b in blocks]
    kept, left = _system_first(blocks, budget)
    for i in range(len(blocks) - 1, -1, -1):
        if i in kept:
            continue
        if costs[i] > left:
            break
        kept.add(i)
        left -= costs[i]
    return kept


def mask_placeholder(text):
    """Return the one line that stands for an old tool result under observation masking."""
    return f"[old tool output: {text.count(chr(10)) + 1} lines omitted]"


def masking_kept(blocks, budget, keep=MASK_KEEP_OBSERVATIONS):
    """Return the indices observation masking keeps verbatim under ``budget``.

    Tool results older than the last ``keep`` are replaced by ``mask_placeholder`` (SWE-agent's
    last-N-observations processor); the sliding window then runs over that history, the
    placeholders costing their own tokens and never counting as kept verbatim.
    """
    results = [i for i, b in enumerate(blocks) if b["role"] == TOOL_ROLE]
    masked = set(results[:-keep] if keep else results)
    costs = [block_cost(mask_placeholder(b["text"]) if i in masked else b["text"]) for i, b in enumerate(blocks)]
    return window_kept(blocks, budget, costs) - masked


def upper_kept(blocks, needed, budget):
    """Return the most needed blocks that fit ``budget``: smallest first (the upper bound)."""
    kept, left = set(), budget
    for i in sorted(needed, key=lambda i: (block_cost(blocks[i]["text"]), i)):
        if block_cost(blocks[i]["text"]) <= left:
            kept.add(i)
            left -= block_cost(blocks[i]["text"])
    return kept


def pager_history(blocks):
    """Return the pager's own history object for ``blocks``, each costing block_cost tokens."""
    out = []
    for b in blocks:
        block = dict(b)
        block["tokens"] = block_cost(b["text"])
        out.append(block)
    return {"current_turn": max((b["turn"] for b in blocks), default=0), "blocks": out}


def run_pager(history_path, contract, budget, flags=(), now=FIXED_NOW, emit=None):
    """Run one pass in-process; return (summary dict, {block id: action}). A failed pass raises."""
    # The blocks are a transcript's, in the pager's own JSON: "recent" as the pager means it for a
    # transcript under a budget (nothing protected for being recent: a turn is a human request and
    # all the work after it), unless the flags say otherwise.
    recent = [] if "--keep-recent" in flags else ["--keep-recent", "0"]
    argv = ["--history", str(history_path), "--contract", str(contract), "--budget", str(budget),
            "--json", "--now", now, *recent, *flags]
    if emit:
        argv += ["--emit", str(emit)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = pager.main(argv)
    if code != 0 and "no intent" in err.getvalue() and "--intent" not in flags:
        # The pager found no intent of its own (every user block archived before a compaction
        # boundary, or none yet): give it the last user block's text, as an agent calling it would.
        blocks = json.loads(Path(history_path).read_text(encoding="utf-8")).get("blocks", [])
        users = [b["text"] for b in blocks if b.get("role") == "user" and not b.get("stub")]
        return run_pager(history_path, contract, budget, [*flags, "--intent", users[-1] if users else "continue"],
                         now, emit)
    if code != 0:
        raise SystemExit(f"benchmark-quality: pager pass failed (exit {code}): {err.getvalue().strip()[-300:]}")
    actions = {}
    for line in err.getvalue().splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            actions[record["block"]] = record["action"]
    return json.loads(out.getvalue().strip().splitlines()[-1]), actions


def _is_compaction(line):
    """Return True if a JSONL line is a compaction boundary (Claude Code or Codex)."""
    if '"compact' not in line:
        return False
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and (record.get("subtype") == "compact_boundary"
                                         or record.get("type") == "compacted")


def _live_blocks(text, fmt):
    """Return the blocks of a transcript the model still sees: those after its last compaction."""
    blocks = pager.conversation_blocks(pager.load(text, fmt))
    return [b for b in blocks if b.get("protected") != pager.ARCHIVED]


def read_session(path):
    """Return the contexts of one transcript file as [(label, pager blocks)]; raise pager.PagerError.

    A session without a compaction boundary is one context. A session compacted k times was k + 1
    contexts for its agent: the session up to each boundary as it stood then (the file read up to
    that line), and the live part after the last one (the summary and what follows). Blocks
    from before a boundary are in no policy's reach after it, so no context counts them.
    """
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix == ".traj":
        try:
            trajectory = json.loads(text)
        except ValueError as exc:
            raise pager.PagerError(f"invalid JSON ({exc})") from None
        return [("", _live_blocks(json.dumps(sweagent_messages(trajectory, path)), "openai"))]
    fmt = pager.detect_format(text)
    lines = text.splitlines(keepends=True)
    boundaries = [n for n, line in enumerate(lines) if _is_compaction(line)]
    contexts = [(f"#{k + 1}", _live_blocks("".join(lines[:n]), fmt)) for k, n in enumerate(boundaries)]
    contexts.append((f"#{len(boundaries) + 1}" if boundaries else "", _live_blocks(text, fmt)))
    return contexts


def sweagent_messages(trajectory, path):
    """Return a SWE-agent trajectory's ``history`` as OpenAI chat messages.

    SWE-agent writes a tool message's call ids as a list, ``tool_call_ids``; each such
    message answers one call here, the first it names.
    """
    history = trajectory.get("history") if isinstance(trajectory, dict) else None
    if not isinstance(history, list):
        raise pager.PagerError("a .traj file needs a history list")
    messages = []
    for message in history:
        message = dict(message)
        ids = message.pop("tool_call_ids", None)
        if message.get("role") == TOOL_ROLE and "tool_call_id" not in message and ids:
            message["tool_call_id"] = ids[0]
        messages.append(message)
    return messages


SESSION_KINDS = {"claude-code": "Claude Code", "codex": "Codex", "swe-agent": "SWE-agent"}  # format -> kind
OTHER_KIND = "other"  # request bodies and chat lists: pooled in "all", no table of their own
TARGET_FINDABLE_LEAD = 0.15            # issue 31: findable at least the window's recall + this...
TARGET_FINDABLE_BUDGETS = (4000, 8000)  # ...at these budgets


def session_kind(path, text=None):
    """Return the kind of agent a transcript file comes from: Claude Code, Codex, SWE-agent or other."""
    if Path(path).suffix == ".traj":
        return "SWE-agent"
    try:
        text = Path(path).read_text(encoding="utf-8") if text is None else text
        return SESSION_KINDS.get(pager.detect_format(text), OTHER_KIND)
    except (pager.PagerError, UnicodeDecodeError, OSError):
        return OTHER_KIND


def coding_sessions(folder):
    """Return ([(name, blocks, kind)], [(name, why skipped)]) for the transcripts under ``folder``.

    A compacted session gives one entry per context (``name#1``, ``name#2``...; see read_session).
    """
    sessions, skipped = [], []
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.suffix != ".md"):
        name = str(path.relative_to(folder))
        try:
            contexts = read_session(path)
        except (pager.PagerError, UnicodeDecodeError) as exc:
            skipped.append((name, f"not read: {exc}"))
            continue
        kind = session_kind(path)
        for label, blocks in contexts:
            if len(blocks) < MIN_SESSION_BLOCKS:
                skipped.append((name + label, f"{len(blocks)} blocks"))
            else:
                sessions.append((name + label, blocks, kind))
    return sessions, skipped


REFIT = ("refit", ("--target", "none"))  # the pager without watermarks: a variant measured unless --no-refit


def pager_policies(variants):
    """Return {policy: extra pager flags}: the pager, then the variants (REFIT first, as main adds it)."""
    return {"pager": [], **{name: list(f) for name, f in variants}}


def coding_policies(variants):
    """Return the policy names in table order: baselines, the pager policies, the bound."""
    return ["window", "masking", *pager_policies(variants), "upper"]


def measure_session(blocks, budgets, variants=(), max_cuts=0, workdir=None, every=1):
    """Return {"cuts", "needed", "kept", "reachable", "findable": {policy: {budget: n}}, "over", "replays"}.

    The pager runs as an agent runs it: once before every assistant step, on one contract
    (replay_pager); a scored cut reads what that pass kept verbatim, what its page store holds
    (reachable) and what its emitted stubs and index lines name (findable; see paged_reach).
    The window, masking and the bound store nothing: reachable and findable are their recall.
    "replays" holds each pager policy's passes by budget, for the cache figures.
    """
    index = TokenIndex(blocks)
    steps = assistant_steps(blocks)
    policies = coding_policies(variants)
    flags = pager_policies(variants)
    kept = {p: {b: 0 for b in budgets} for p in policies}
    reach = {p: {b: 0 for b in budgets} for p in policies}
    find = {p: {b: 0 for b in budgets} for p in policies}
    over = {p: {b: 0 for b in budgets} for p in flags}
    probe = {}
    for k in cut_steps(steps, max_cuts, every):
        names = needed_names(blocks, index, steps, k)
        if names:
            probe[steps[k][0]] = names
    scored = {cut: set(names) for cut, names in probe.items()}
    replay_cuts = [first for k, (first, _) in enumerate(steps) if first > 0 and k % every == 0]
    replays = {name: {} for name in flags}
    for budget in budgets:
        for name, extra in flags.items():
            passes = replay_pager(blocks, replay_cuts, budget, extra, workdir, probe)
            replays[name][budget] = passes
            over[name][budget] = sum(p.over for p in passes)
            for cut, run in zip(replay_cuts, passes):
                if cut in scored:
                    ids = {b["id"]: i for i, b in enumerate(run.history)}
                    kept[name][budget] += len(scored[cut] & {ids[x] for x in run.retained if x in ids})
                    reach[name][budget] += len(run.reachable)
                    find[name][budget] += len(run.findable)
        for cut, needed in scored.items():
            history = blocks[:cut]
            chosen = {"window": window_kept(history, budget), "masking": masking_kept(history, budget),
                      "upper": upper_kept(history, needed, budget)}
            for policy in chosen:
                n = len(needed & chosen[policy])
                kept[policy][budget] += n
                reach[policy][budget] += n
                find[policy][budget] += n
    return {"cuts": len(scored), "needed": sum(map(len, scored.values())), "kept": kept, "reachable": reach,
            "findable": find, "over": over, "passes": len(replay_cuts), "replays": replays}


def emitted_by_window(blocks, budget):
    """Return the blocks the sliding window sends, in order."""
    kept = window_kept(blocks, budget)
    return [b for i, b in enumerate(blocks) if i in kept]


def block_key(block):
    """Return the bytes a block is compared by across passes: its JSON text, keys sorted."""
    return json.dumps(block, ensure_ascii=False, sort_keys=True)


def common_prefix(before, after):
    """Return how many leading blocks two emitted histories share byte for byte."""
    n = 0
    for a, b in zip(before, after):
        if block_key(a) != block_key(b):
            break
        n += 1
    return n


def prefix_kept(before, after, old_ids):
    """Return True if ``after``'s blocks from the previous history are exactly ``before``.

    A block of ``before`` that is no block of the history (a range page's line, ``r-...``) counts as
    one of the previous history's: it is kept when the same block comes again, byte for byte.
    """
    old_ids = set(old_ids).union(b["id"] for b in before)
    old = [b for b in after if b["id"] in old_ids]
    return len(old) == len(before) and common_prefix(before, old) == len(before)


def cache_figures(passes, budget):
    """Return the cache figures of one policy from its passes [(history, emitted blocks)]."""
    kept = pressured = kept_pressured = uncached = new = sent = 0
    previous, previous_ids = None, set()
    for history, emitted in passes:
        costs = [block_cost(b["text"]) for b in emitted]
        sent += sum(costs)
        if previous is None:
            uncached += sum(costs)
            new += sum(costs)
        else:
            same = prefix_kept(previous, emitted, previous_ids)
            kept += same
            if sum(block_cost(b["text"]) for b in history) > budget:
                pressured += 1
                kept_pressured += same
            uncached += sum(costs[common_prefix(previous, emitted):])
            new += sum(c for c, b in zip(costs, emitted) if b["id"] not in previous_ids)
        previous, previous_ids = emitted, {b["id"] for b in history}
    later = max(len(passes) - 1, 0)
    return {"passes": len(passes), "prefix_kept": kept / later if later else 1.0,
            "pressured_passes": pressured,
            "prefix_kept_pressured": kept_pressured / pressured if pressured else None,
            "uncached_tokens": uncached, "new_tokens": new, "sent_tokens": sent}


RANGE_ID = re.compile(r"\br-[0-9a-f]{12}\b")        # a range page's id (issue 31: ``r-<12 hex>``)
_ID_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:\-]*")  # a word of an emitted line that may be a block id
_RECALL_WORDS = re.compile(r"\((?:newer copy: [^;()]*; )?recall: [^()\n]*\)|recall one with: [^()\n]*\)?")


def store_path_of(contract):
    """Return the page store the engine keeps beside ``contract`` by default: C.limn -> C.pages.sqlite3."""
    contract = str(contract)
    return (contract[:-5] if contract.endswith(".limn") else contract) + ".pages.sqlite3"


def line_names(line):
    """Return the distinctive tokens an emitted stub or index line names, its recall command left out.

    The command (``(recall: python3 scripts/pager.py recall ID --contract C)``) is the engine's
    boilerplate on every line: its words (``contract``, the contract's path) name no page.
    """
    return distinctive_tokens(_RECALL_WORDS.sub(" ", line))


def emitted_lines(history, emitted):
    """Return ({block id: its stand-in texts}, {id: lines naming it}) of an emitted request.

    A stand-in is an emitted block with a history block's id and other text (its stub); every
    line of a stand-in or of a block the history does not hold (the page index) is listed
    under each history block id and range id (``r-...``) it names.
    """
    original = {b["id"]: b["text"] for b in history}
    own, mentions = {}, {}
    for block in emitted:
        text = block.get("text")
        if not isinstance(text, str) or original.get(block.get("id")) == text:
            continue  # verbatim
        if block.get("id") in original:
            own.setdefault(block["id"], []).append(text)
        for line in text.splitlines():
            for word in {w.rstrip(".:-") for w in _ID_WORD.findall(line)}:
                if word in original or RANGE_ID.fullmatch(word):
                    mentions.setdefault(word, []).append(line)
    return own, mentions


def recall_range(contract, range_id, workdir):
    """Return the block ids a range page holds, by the engine's recall of the range on copies of the files.

    The engine's ``PageStore.range_members`` answers when it has one (see paged_reach); without
    it, ``recall r-... --json`` on a copy of the contract and store (a recall pages blocks in,
    which must not change the replay) lists the blocks it returns. [] when the engine refuses.
    """
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        copy = Path(tmp) / "copy.limn"
        shutil.copyfile(contract, copy)
        if Path(store_path_of(contract)).exists():
            shutil.copyfile(store_path_of(contract), store_path_of(copy))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = pager.main(["recall", range_id, "--contract", str(copy), "--json"])
    if code != 0:
        return []
    return [r["block"] for r in json.loads(out.getvalue()).get("recalled", []) if isinstance(r, dict) and "block" in r]


def paged_reach(history, emitted, contract, wanted, retained, workdir=None):
    """Return (reachable, findable): the ids of ``wanted``'s blocks a pass left in reach, and findable.

    ``wanted`` maps history indices to the names the next steps use from them (needed_names).
    Reachable: kept verbatim (``retained``), or the page store beside ``contract`` holds the
    block's exact text, or a range page named in the emitted request holds the block.
    Findable: verbatim, or reachable and a line of the emitted request standing for it names one
    of its names: its own stub, an index line naming its id, or a line naming a range holding it.
    """
    reachable, findable, members = set(), set(), {}
    own, mentions = emitted_lines(history, emitted)
    ranges = [w for w in mentions if RANGE_ID.fullmatch(w)]
    store = pager.PageStore.open(store_path_of(contract), create=False) if Path(contract).exists() else None
    try:
        def holders(range_id):
            if range_id not in members:
                method = getattr(store, "range_members", None)
                members[range_id] = set(method(range_id) if method else recall_range(contract, range_id, workdir))
            return members[range_id]

        for i, names in sorted(wanted.items()):
            block = history[i]
            if block["id"] in retained:
                reachable.add(block["id"])
                findable.add(block["id"])
                continue
            page = store.get(block["id"]) if store is not None else None
            inside = [r for r in ranges if block["id"] in holders(r)] if ranges and store is not None else []
            if (page is None or page.text != block["text"]) and not inside:
                continue
            reachable.add(block["id"])
            lines = own.get(block["id"], []) + mentions.get(block["id"], [])
            lines += [line for r in inside for line in mentions[r]]
            if any(names & line_names(line) for line in lines):
                findable.add(block["id"])
    finally:
        if store is not None:
            store.close()
    return frozenset(reachable), frozenset(findable)


class Pass(NamedTuple):
    """One pager pass of a replay: its history, the blocks it emitted, the ids it retained, whether it overran.

    ``reachable`` and ``findable``: the ids paged_reach found among the probed blocks of this pass.
    """
    history: list
    emitted: list
    retained: frozenset
    over: bool
    reachable: frozenset = frozenset()
    findable: frozenset = frozenset()


def replay_pager(blocks, cuts, budget, flags, workdir, probe=None):
    """Return the pager's passes [Pass] over the histories ``blocks[:cut]``, one contract for all.

    ``probe`` ({cut: {index: names}}) asks, at those cuts, which of the blocks are reachable and
    findable after the pass (paged_reach), while its page store exists.
    """
    passes = []
    start = datetime.datetime.fromisoformat(FIXED_NOW)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path, out, contract = Path(tmp) / "history.json", Path(tmp) / "emitted.json", Path(tmp) / "session.limn"
        for n, cut in enumerate(cuts):
            history = blocks[:cut]
            path.write_text(json.dumps(pager_history(history), ensure_ascii=False), encoding="utf-8")
            now = (start + datetime.timedelta(minutes=n)).isoformat()
            summary, actions = run_pager(path, contract, budget, flags, now=now, emit=out)
            emitted = json.loads(out.read_text(encoding="utf-8"))["blocks"]
            retained = frozenset(i for i, a in actions.items() if a == "retain")
            reach = (paged_reach(history, emitted, contract, probe[cut], retained, tmp)
                     if probe and cut in probe else (frozenset(), frozenset()))
            passes.append(Pass(history, emitted, retained, bool(summary.get("over_budget")), *reach))
    return passes


def measure_cache(blocks, budget=CACHE_BUDGET, variants=(), workdir=None, replays=None):
    """Return {policy: cache figures} replaying ``blocks`` step by step.

    ``replays`` ({policy: [Pass]} at ``budget``) reuses the passes measure_session ran.
    """
    cuts = [first for first, _ in assistant_steps(blocks) if first > 0]
    window = [(blocks[:c], emitted_by_window(blocks[:c], budget)) for c in cuts]
    results = {"window": cache_figures(window, budget)}
    for name, flags in pager_policies(variants).items():
        passes = (replays or {}).get(name) or replay_pager(blocks, cuts, budget, flags, workdir)
        results[name] = cache_figures([(p.history, p.emitted) for p in passes], budget)
    return results


def pooled_shares(per_session, policies, budgets):
    """Return {"sessions", "cuts", "needed", "recall", "reachable", "findable"} pooled over ``per_session``."""
    needed = sum(s["needed"] for s in per_session)
    shares = {"sessions": len(per_session), "cuts": sum(s["cuts"] for s in per_session), "needed": needed}
    for measure, key in (("recall", "kept"), ("reachable", "reachable"), ("findable", "findable")):
        shares[measure] = {p: {b: sum(s[key][p][b] for s in per_session) / needed if needed else 0.0
                               for b in budgets} for p in policies}
    return shares


def measure_coding(folder, budgets=CODING_BUDGETS, variants=(), max_cuts=0, cache_budget=CACHE_BUDGET, cache=True,
                   every=1):
    """Return the coding figures of every session under ``folder`` (see the module docstring).

    ``cache=False`` leaves out the cache-stability replay (every step of every session: most of the
    run's time), so its figures are absent.
    """
    sessions, skipped = coding_sessions(folder)
    if not sessions:
        raise SystemExit(f"benchmark-quality: no transcript of {MIN_SESSION_BLOCKS}+ blocks under {folder}")
    policies = coding_policies(variants)
    per_session, caches = {}, {}
    with tempfile.TemporaryDirectory() as workdir:
        for name, blocks, kind in sessions:
            figures = measure_session(blocks, budgets, variants, max_cuts, workdir, every)
            replays = {policy: by_budget[cache_budget] for policy, by_budget in figures.pop("replays").items()
                       if cache_budget in by_budget}
            per_session[name] = dict(figures, blocks=len(blocks), kind=kind)
            if cache:
                caches[name] = measure_cache(blocks, cache_budget, variants, workdir, replays)
    everything = pooled_shares(list(per_session.values()), policies, budgets)
    kinds = {}
    for kind in [*SESSION_KINDS.values(), OTHER_KIND]:
        members = [s for s in per_session.values() if s["kind"] == kind]
        if members:
            kinds[kind] = pooled_shares(members, policies, budgets)
    scored = [s for s in per_session.values() if s["needed"]]
    return {"budgets": list(budgets), "policies": policies, "sessions": per_session, "skipped": skipped,
            "cuts": everything["cuts"], "needed": everything["needed"],
            "recall": everything["recall"], "reachable": everything["reachable"],
            "findable": everything["findable"], "kinds": kinds,
            "recall_mean": {p: {b: sum(s["kept"][p][b] / s["needed"] for s in scored) / len(scored) if scored else 0.0
                                for b in budgets} for p in policies},
            "cache_budget": cache_budget, "cache": caches, "cache_total": cache_totals(caches) if caches else {}}


def coding_targets(shares, budgets, policy="pager"):
    """Return issue 31's targets on pooled ``shares``: [(budget, what, figure, bound, holds)].

    recall at least the window's; reachable 1.0; findable at least the window's recall +
    TARGET_FINDABLE_LEAD at TARGET_FINDABLE_BUDGETS (at most 1.0: a window that keeps every
    needed block leaves nothing to find). Reported, never enforced.
    """
    checks = []
    for b in budgets:
        window = shares["recall"]["window"][b]
        checks.append((b, "recall >= window", shares["recall"][policy][b], window,
                       shares["recall"][policy][b] >= window))
        checks.append((b, "reachable = 1.0", shares["reachable"][policy][b], 1.0,
                       shares["reachable"][policy][b] >= 1.0))
        if b in TARGET_FINDABLE_BUDGETS:
            bound = min(1.0, window + TARGET_FINDABLE_LEAD)
            checks.append((b, f"findable >= window + {TARGET_FINDABLE_LEAD}", shares["findable"][policy][b],
                           bound, shares["findable"][policy][b] >= bound - 1e-12))
    return checks


def cache_totals(cache):
    """Return {policy: figures over every session}: passes after the first, the share keeping the prefix, tokens."""
    totals = {}
    for by_policy in cache.values():
        for p, c in by_policy.items():
            t = totals.setdefault(p, {"later_passes": 0, "kept": 0.0, "uncached_tokens": 0, "sent_tokens": 0})
            later = max(c["passes"] - 1, 0)
            t["later_passes"] += later
            t["kept"] += c["prefix_kept"] * later
            t["uncached_tokens"] += c["uncached_tokens"]
            t["sent_tokens"] += c["sent_tokens"]
    for t in totals.values():
        t["prefix_kept"] = t.pop("kept") / t["later_passes"] if t["later_passes"] else 1.0
    return totals


def print_coding(figures, max_cuts, every=1):
    """Print the recall and cache tables of ``measure_coding``'s figures."""
    budgets, policies = figures["budgets"], figures["policies"]
    sampled = f"at most {max_cuts} a session, evenly spaced" if max_cuts else "all"
    if every > 1:
        sampled += f"; the pager run before 1 assistant step in {every}, the cuts among those"
    print(f"Future-reference recall: {len(figures['sessions'])} coding sessions, {figures['cuts']} cut points "
          f"({sampled}; cuts with no needed block left out), {figures['needed']} needed blocks; "
          f"tokens = ceil(chars / 4)")
    for name, why in figures["skipped"]:
        print(f"  skipped {name}: {why}")
    print("share of needed blocks kept verbatim, pooled")
    print(f"{'policy':<12} | " + " | ".join(f"{b:>6}" for b in budgets))
    for p in policies:
        print(f"{p:<12} | " + " | ".join(f"{figures['recall'][p][b]:>6.3f}" for b in budgets))
    print("by session kind, pooled: recall (verbatim) | reachable (verbatim or in the page store) | findable "
          "(verbatim, or paged with a stub or index line naming a name the next steps use)")
    columns = " ".join(f"{b:>6}" for b in budgets)
    for kind, shares in [*figures["kinds"].items(), ("all", figures)]:
        sessions = len(figures["sessions"]) if kind == "all" else shares["sessions"]
        print(f"  {kind}: {sessions} sessions, {shares['cuts']} cuts, {shares['needed']} needed blocks")
        print(f"    {'policy':<10} | recall {columns} | reachable {columns} | findable {columns}")
        for p in policies:
            cells = [" ".join(f"{shares[m][p][b]:>6.3f}" for b in budgets) for m in ("recall", "reachable", "findable")]
            print(f"    {p:<10} | recall {cells[0]} | reachable {cells[1]} | findable {cells[2]}")
    print("issue 31 targets for the pager on these (development) sessions, reported, not enforced:")
    for kind, shares in [*figures["kinds"].items(), ("all", figures)]:
        if kind == OTHER_KIND:
            continue
        for budget in budgets:
            cells = [f"{what}: {figure:.3f} vs {bound:.3f} {'holds' if holds else 'MISSED'}"
                     for b, what, figure, bound, holds in coding_targets(shares, budgets) if b == budget]
            print(f"  {kind} at {budget}: " + "; ".join(cells))
    print("mean of the sessions' shares (each session weighs the same)")
    for p in policies:
        print(f"{p:<12} | " + " | ".join(f"{figures['recall_mean'][p][b]:>6.3f}" for b in budgets))
    print("per session (cuts, needed): " + " | ".join(f"{p}" for p in policies) + f" at {', '.join(map(str, budgets))}")
    for name, s in figures["sessions"].items():
        cells = " | ".join("/".join(f"{s['kept'][p][b] / s['needed']:.2f}" if s["needed"] else "-" for b in budgets)
                           for p in policies)
        print(f"  {name} ({s['cuts']}, {s['needed']}): {cells}")
    for p in figures["policies"]:
        if p in next(iter(figures["sessions"].values()))["over"]:
            overruns = sum(n for s in figures["sessions"].values() for n in s["over"][p].values())
            passes = sum(s["passes"] for s in figures["sessions"].values()) * len(budgets)
            print(f"{p} passes over budget: {overruns} of {passes}")
    if not figures["cache"]:
        print("Cache stability: not measured (--no-cache)")
        return
    print(f"Cache stability at {figures['cache_budget']} tokens, each session replayed step by step: share of "
          "passes keeping the previous emitted blocks byte-identical (all passes after the first; those whose "
          "history is over the budget), tokens resent uncached (of which new blocks), tokens sent")
    for name, by_policy in figures["cache"].items():
        print(f"  {name}")
        for p, c in by_policy.items():
            pressured = ("-" if c["prefix_kept_pressured"] is None
                         else f"{c['prefix_kept_pressured']:.3f} of {c['pressured_passes']}")
            print(f"    {p:<10} | {c['passes']:>4} passes | prefix kept {c['prefix_kept']:.3f}; {pressured:>12} | "
                  f"uncached {c['uncached_tokens']:>8} ({c['new_tokens']:>6} new) | sent {c['sent_tokens']:>8}")
    print("  all sessions")
    for p, t in figures["cache_total"].items():
        print(f"    {p:<10} | prefix kept {t['prefix_kept']:.3f} of {t['later_passes']} later passes | "
              f"uncached {t['uncached_tokens']:>8} | sent {t['sent_tokens']:>8}")


# ===== Compaction events: what the agent needs after its harness compacts =====

ACTING_STEPS = 10          # assistant steps after a boundary whose names are measured
SEARCH_TOP = 5             # a search finds a name when a page holding it is among this many hits
INJECT_TOKENS = claude_hooks.DEFAULT_CONTEXT_TOKENS  # the injected context's cap (`index --tokens` for Codex too)
ROOT = Path(__file__).resolve().parent.parent
HOOKS_FILE = ROOT / "hooks" / "hooks.json"
HOOK_TIMEOUT = 300         # seconds a hook may take here (Claude Code allows PreCompact 120)
_SAFE_SESSION = re.compile(r"[^A-Za-z0-9._-]+")
# issue 32's targets: (what, events, share); reported, never enforced
COMPACTION_TARGETS = (("recallable", "all", 0.97), ("injected", "Claude Code", 0.30),
                      ("either", "Claude Code", 0.50), ("either", "all", 0.50), ("search", "all", 0.9))
SHARES = ("summary", "injected", "either", "recallable", "search")


class Engine(NamedTuple):
    """What the engine's ``--help`` lists of issue 32's interfaces (built on branch ``compaction``)."""
    before_compaction: bool
    search: bool


def engine_features():
    """Return which of ``--before-compaction`` and the ``search`` command ``pager.py --help`` lists."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            pager.main(["--help"])
        except SystemExit:
            pass
    text = out.getvalue()
    return Engine("--before-compaction" in text, re.search(r"\bsearch\b", text) is not None)


@functools.lru_cache(maxsize=1 << 16)
def names_of(text):
    """Return distinctive_tokens(text), frozen and remembered: a file's events and pages share most texts."""
    return frozenset(distinctive_tokens(text))


def boundary_lines(text):
    """Return the 0-based numbers of a JSONL transcript's compaction boundary lines."""
    return [n for n, line in enumerate(text.splitlines(keepends=True)) if _is_compaction(line)]


def compaction_files(folder):
    """Return [(path, kind, [boundary line numbers])] for the Claude Code and Codex files under ``folder``."""
    found = []
    for path in sorted(p for p in Path(folder).rglob("*.jsonl") if p.is_file()):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        lines = boundary_lines(text)
        kind = session_kind(path, text) if lines else None
        if kind in ("Claude Code", "Codex"):
            found.append((path, kind, lines))
    return found


@functools.lru_cache(maxsize=4)
def _blocks_of(text, fmt):
    """Return the blocks of a transcript's text (remembered: one event's after is the next one's before)."""
    return pager.conversation_blocks(pager.load(text, fmt)) if text.strip() else []


def event_sides(text, line, next_line=None):
    """Return (before, after, summary) of the compaction whose boundary is ``line``.

    before: every block of the transcript cut at the boundary (what the agent saw before it,
    earlier compactions' archived blocks included). after: the blocks the model sees after it,
    up to the next boundary (the harness's summary and what it kept or re-sent, then the new
    work). summary: the harness's summary text (Claude Code's compact summary message; Codex
    writes ``message``, empty when the summary is server-side).
    """
    fmt = pager.detect_format(text)
    lines = text.splitlines(keepends=True)
    before = _blocks_of("".join(lines[:line]), fmt)
    upto = "".join(lines[:next_line] if next_line is not None else lines)
    after = [b for b in _blocks_of(upto, fmt) if b.get("protected") != pager.ARCHIVED]
    summaries = [b["text"] for b in after if b.get("kind") == "summary"]
    if not summaries:
        record = json.loads(lines[line])
        message = (record.get("payload") or {}).get("message") if isinstance(record, dict) else None
        summaries = [message] if isinstance(message, str) and message else []
    return before, after, "\n".join(summaries)


def json_records(lines, holding=()):
    """Yield the JSON objects of ``lines`` (a transcript's lines), passing over lines that are not
    one; with ``holding``, only lines holding one of those strings are parsed."""
    for line in lines:
        if holding and not any(mark in line for mark in holding):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def thinking_texts(text):
    """Return the texts of a transcript's thinking parts (Claude Code ``thinking``, Codex reasoning summaries).

    The acting steps' names are read from what the agent says and does (text, tool names and
    arguments); an assistant block whose text is one of these is its thinking, left out.
    """
    found = set()
    for record in json_records(text.splitlines(), ('"thinking"', '"reasoning"')):
        message = record.get("message") if isinstance(record.get("message"), dict) else {}
        payload = record.get("payload") if isinstance(record.get("payload"), dict) else {}
        parts = message.get("content") if isinstance(message.get("content"), list) else []
        if payload.get("type") == "reasoning":
            parts = [*(payload.get("summary") or []), *(payload.get("content") or [])]
        for part in parts:
            if isinstance(part, dict) and part.get("type") in ("thinking", "summary_text", "reasoning_text"):
                value = part.get("thinking", part.get("text"))
                if isinstance(value, str) and value.strip():
                    found.add(value.strip())
    return found


def _strings(value):
    """Yield every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def reattached(text, line):
    """Return the text of the attachments a Claude Code transcript records right after the boundary ``line``.

    Claude Code re-reads recent files into the new context after compacting (``attachment`` lines
    of type ``file``, ``compact_file_reference``...) before the agent's next turn; the reader
    skips those lines, but the model sees them, so their names count as shown after the boundary.
    The lines up to the first assistant record are read.
    """
    found = []
    for record in json_records(text.splitlines()[line + 1:]):
        if record.get("type") == "assistant":
            break
        if record.get("type") == "attachment":
            found.extend(_strings(record.get("attachment")))
    return "\n".join(found)


def needed_after(before, after, steps=ACTING_STEPS, thinking=frozenset(), shown=""):
    """Return the names the agent's first ``steps`` acting steps after a compaction need from before it, in order.

    A name is a distinctive token (distinctive_tokens) of an assistant block of those steps
    (its text, tool names and arguments), held by 1 to MAX_HOLDERS blocks of ``before``, and
    absent from every block after the boundary that is not the agent's own (user messages,
    tool results, re-sent instructions; the harness's summary aside, measured on its own) up to
    its first use. A name's first use decides. Assistant blocks whose text is in ``thinking``
    (thinking_texts) are not acting; ``shown`` is text the harness showed right after the
    boundary outside the blocks (reattached).
    """
    holders = {}
    for i, block in enumerate(before):
        for token in names_of(block["text"]):
            holders.setdefault(token, []).append(i)
    shown, seen, needed = set(names_of(shown)) if shown else set(), set(), []
    acting = assistant_steps(after)[:steps]
    last = acting[-1][1] if acting else 0
    in_steps = {i for first, end in acting for i in range(first, end)}
    for i, block in enumerate(after[:last]):
        tokens = names_of(block["text"])
        if block["role"] != "assistant":
            if block.get("kind") != "summary":
                shown |= tokens
            continue
        if i not in in_steps or block["text"].strip() in thinking:
            continue
        for token in sorted(tokens - seen):
            seen.add(token)
            if token not in shown and 0 < len(holders.get(token, ())) <= MAX_HOLDERS:
                needed.append(token)
    return needed


def hook_command(event_name):
    """Return the command hooks/hooks.json gives the harness for ``event_name``."""
    hooks = json.loads(HOOKS_FILE.read_text(encoding="utf-8"))["hooks"][event_name]
    return hooks[0]["hooks"][0]["command"]


def run_hook(event_name, event, project):
    """Run a plugin hook as Claude Code does (its command through the shell, JSON on stdin); return its output object."""
    env = {k: v for k, v in os.environ.items() if k not in claude_hooks.TOKEN_ENV}  # the default cap
    env.update(CLAUDE_PLUGIN_ROOT=str(ROOT), CLAUDE_PROJECT_DIR=str(project))
    proc = subprocess.run(["/bin/sh", "-c", hook_command(event_name)], input=json.dumps(event), capture_output=True,
                          text=True, cwd=project, env=env, timeout=HOOK_TIMEOUT)
    log = Path(project) / ".prosecode" / "hooks.log"
    if proc.returncode != 0 or log.exists():
        why = log.read_text(encoding="utf-8").strip().splitlines()[-1] if log.exists() else proc.stderr.strip()
        raise SystemExit(f"benchmark-quality: the {event_name} hook failed: {why}")
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


def _engine(argv):
    """Run the engine's CLI in-process; return its standard output, or raise SystemExit with its error."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = pager.main([str(a) for a in argv])
    if code != 0:
        raise SystemExit(f"benchmark-quality: pager {' '.join(map(str, argv[:1]))} failed: {err.getvalue().strip()[-300:]}")
    return out.getvalue()


def inject_after(kind, transcript, project, session, trigger, features):
    """Run what the plugin (or the Codex command) does around one compaction; return (contract, injected text).

    Claude Code: the PreCompact hook on the transcript cut at the boundary, then SessionStart with
    source ``compact``; the injected text is its ``additionalContext``. Codex, once the engine has
    ``--before-compaction``: that pass on the cut rollout, then ``index --tokens INJECT_TOKENS``;
    before then, the same two hooks (the plugin serves Codex's hooks too), Codex's hook input.
    """
    common = {"session_id": session, "transcript_path": str(transcript), "cwd": str(project)}
    if kind == "Codex" and features.before_compaction:
        contract = Path(project) / ".prosecode" / f"{session}.limn"
        contract.parent.mkdir(parents=True, exist_ok=True)
        _engine(["--history", transcript, "--contract", contract, "--before-compaction", "--json"])
        return contract, _engine(["index", "--contract", contract, "--tokens", INJECT_TOKENS])
    if kind == "Codex":
        pre = dict(common, hook_event_name="PreCompact", trigger=trigger, model="gpt-5", turn_id="turn-1")
        start = dict(common, hook_event_name="SessionStart", source="compact", model="gpt-5",
                     permission_mode="default")
    else:
        pre = dict(common, hook_event_name="PreCompact", trigger=trigger, custom_instructions="")
        start = dict(common, hook_event_name="SessionStart", source="compact")
    run_hook("PreCompact", pre, project)
    output = run_hook("SessionStart", start, project)
    text = (output.get("hookSpecificOutput") or {}).get("additionalContext", "")
    return Path(project) / ".prosecode" / f"{session}.limn", text


def store_names(contract):
    """Return {paged block id: its distinctive tokens} of every page the contract lists, read from its store."""
    listed = json.loads(_engine(["index", "--contract", contract, "--json"]))["paged"]
    store = pager.PageStore.open(store_path_of(contract), create=False)
    if store is None:
        return {}
    try:
        pages = {entry["block"]: store.get(entry["block"]) for entry in listed}
        found = {block: names_of(page.text) for block, page in pages.items() if page is not None}
        for block in [b for b, page in pages.items() if page is None and RANGE_ID.fullmatch(b)]:
            method = getattr(store, "range_members", None)
            members = [store.get(m) for m in (method(block) if method else [])]
            found[block] = set().union(*(names_of(m.text) for m in members if m is not None))
        return found
    finally:
        store.close()


def search_finds(name, contract, pages):
    """Return True if ``search NAME`` ranks a page holding ``name`` among its first SEARCH_TOP hits.

    ``pages`` (store_names) gives each listed page's names; a hit it does not list (a block of
    a range page) is read from the store, and remembered in ``pages``.
    """
    hits = json.loads(_engine(["search", name, "--contract", contract, "--json", "--limit", SEARCH_TOP]))
    ids = [hit.get("id") for hit in hits[:SEARCH_TOP] if isinstance(hit, dict)]
    unknown = [i for i in ids if isinstance(i, str) and i not in pages]
    if unknown:
        store = pager.PageStore.open(store_path_of(contract), create=False)
        try:
            for block in unknown:
                page = store.get(block) if store is not None else None
                pages[block] = names_of(page.text) if page is not None else frozenset()
        finally:
            if store is not None:
                store.close()
    return any(name in pages.get(i, ()) for i in ids)


def _without(text, *paths):
    """Return ``text`` without the given file paths (the measure's own folders name no page)."""
    for path in paths:
        text = text.replace(str(path), " ")
    return text


def measure_event(before, after, summary, injected, pages, search, thinking=frozenset(), shown=""):
    """Return one event's figures: needed names and, for each, where it is (see measure_compaction)."""
    needed = needed_after(before, after, thinking=thinking, shown=shown)
    in_summary, in_injected = distinctive_tokens(summary), distinctive_tokens(injected)
    stored = set().union(*pages.values()) if pages else set()
    found = {"summary": [n for n in needed if n in in_summary], "injected": [n for n in needed if n in in_injected],
             "either": [n for n in needed if n in in_summary or n in in_injected],
             "recallable": [n for n in needed if n in stored],
             "search": [n for n in needed if search(n)] if search is not None else None}
    return {"needed": needed, "found": found, "summary_tokens": block_cost(summary) if summary else 0,
            "injected_tokens": block_cost(injected) if injected else 0,
            "injected_estimate": pager.estimate_tokens(injected) if injected else 0}


def measure_compaction(folder, features=None):
    """Return the figures of every compaction event under ``folder``: per event, pooled by kind and over all."""
    features = features or engine_features()
    files = compaction_files(folder)
    if not files:
        raise SystemExit(f"benchmark-quality: no Claude Code or Codex transcript with a compaction under {folder}")
    events = []
    with tempfile.TemporaryDirectory() as workdir:
        for path, kind, boundaries in files:
            text = path.read_text(encoding="utf-8")
            lines = text.splitlines(keepends=True)
            thinking = thinking_texts(text)
            session = _SAFE_SESSION.sub("-", path.stem)[:100].strip("-._") or "session"
            project = Path(workdir) / session
            project.mkdir()
            transcript = project / ("rollout.jsonl" if kind == "Codex" else "transcript.jsonl")
            for number, line in enumerate(boundaries):
                nxt = boundaries[number + 1] if number + 1 < len(boundaries) else None
                before, after, summary = event_sides(text, line, nxt)
                record = json.loads(lines[line])
                trigger = ((record.get("compactMetadata") or {}).get("trigger") or "auto") if kind == "Claude Code" else "auto"
                transcript.write_text("".join(lines[:line]), encoding="utf-8")  # the file as the harness had it
                contract, injected = inject_after(kind, transcript, project, session, trigger, features)
                pages = store_names(contract)
                found = dict(pages)  # search_finds adds the hits it reads beyond the listed pages
                search = (lambda n, c=contract, p=found: search_finds(n, c, p)) if features.search else None
                injected = _without(injected, ROOT / "scripts" / "pager.py", workdir)
                figures = measure_event(before, after, summary, injected, pages, search, thinking,
                                        reattached(text, line))
                events.append(dict(figures, file=path.name, kind=kind, event=number + 1,
                                   line=line + 1, blocks_before=len(before), pages=len(pages)))
    pooled = {"all": pool_events(events)}
    for kind in ("Claude Code", "Codex"):
        members = [e for e in events if e["kind"] == kind]
        if members:
            pooled[kind] = pool_events(members)
    return {"events": events, "pooled": pooled, "features": features._asdict()}


def pool_events(events):
    """Return the pooled shares of ``events``: found names / needed names, each measure; mean tokens."""
    needed = sum(len(e["needed"]) for e in events)
    shares = {}
    for what in SHARES:
        if any(e["found"][what] is None for e in events):
            shares[what] = None
        else:
            shares[what] = sum(len(e["found"][what]) for e in events) / needed if needed else 0.0
    return {"events": len(events), "needed": needed, "shares": shares,
            "summary_tokens": sum(e["summary_tokens"] for e in events) / len(events) if events else 0,
            "injected_tokens": sum(e["injected_tokens"] for e in events) / len(events) if events else 0,
            "injected_estimate_max": max((e["injected_estimate"] for e in events), default=0)}


def _share(value):
    return "   n/a" if value is None else f"{value:>6.3f}"


def print_compaction(figures):
    """Print the per-event and pooled table of ``measure_compaction``'s figures, and issue 32's targets."""
    events = figures["events"]
    features = figures["features"]
    print(f"Compaction events: {len(events)} in {len({e['file'] for e in events})} files. Needed names: distinctive "
          f"tokens of the {ACTING_STEPS} acting steps after the boundary, held by 1-{MAX_HOLDERS} blocks before it, "
          "shown by nothing after it (user messages, tool results, re-attached files) before their use. Share in: the harness's "
          "summary, the injected context, either, the page store (recallable), a top-"
          f"{SEARCH_TOP} hit of `search NAME`; tokens = ceil(chars / 4)")
    codex = ("--before-compaction pass, then index --tokens" if features["before_compaction"]
             else "the plugin's PreCompact / SessionStart hooks (no --before-compaction in this engine)")
    print(f"injected context: Claude Code: the plugin's PreCompact then SessionStart (source compact); Codex: {codex}")
    if not features["search"]:
        print("search: not available (this engine's pager.py --help lists no search command)")
    head = (f"{'event':<66} | {'needed':>6} | {'summary':>7} | {'injected':>8} | {'either':>6} | {'recallable':>10} | "
            f"{'search':>6} | summary tok | injected tok")
    print(head)
    rows = [(f"{e['file']} #{e['event']} (line {e['line']})", e, {w: (None if e['found'][w] is None else
             len(e['found'][w]) / len(e['needed']) if e['needed'] else 0.0) for w in SHARES}) for e in events]
    rows += [(f"pooled: {kind} ({p['events']} events)", p, p["shares"]) for kind, p in figures["pooled"].items()]
    for label, e, shares in rows:
        needed = len(e["needed"]) if isinstance(e["needed"], list) else e["needed"]
        print(f"{label[-66:]:<66} | {needed:>6} | {_share(shares['summary']):>7} | {_share(shares['injected']):>8} | "
              f"{_share(shares['either'])} | {_share(shares['recallable']):>10} | {_share(shares['search'])} | "
              f"{e['summary_tokens']:>11.0f} | {e['injected_tokens']:>12.0f}")
    print("issue 32 targets on these (development) events, reported, not enforced:")
    for what, kind, bound in COMPACTION_TARGETS:
        pooled = figures["pooled"].get(kind)
        if pooled is None:
            continue
        value = pooled["shares"][what]
        verdict = ("not available" if value is None else
                   f"{value:.3f} {'holds' if value >= bound else 'MISSED'}")
        print(f"  {what} >= {bound} on {kind} events: {verdict}")
    most = figures["pooled"]["all"]["injected_estimate_max"]
    print(f"  injected context <= {INJECT_TOKENS} tokens (the engine's estimate, largest event): {most} "
          f"{'holds' if most <= INJECT_TOKENS else 'MISSED'}")


def run_compaction(args):
    """Measure the compaction events under ``args.compaction``, print them; return 0."""
    start = time.perf_counter()
    figures = measure_compaction(args.compaction)
    print_compaction(figures)
    print(f"({time.perf_counter() - start:.1f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


def parse_variant(text):
    """Return (name, flags) of a --variant NAME=FLAGS value."""
    name, sep, flags = text.partition("=")
    if not sep or not re.fullmatch(r"[a-z][a-z0-9_-]*", name) or name in ("window", "masking", "pager", "refit", "upper"):
        raise argparse.ArgumentTypeError(f"--variant wants NAME=FLAGS with a new lowercase name (got {text!r})")
    return name, tuple(shlex.split(flags))


def parse_budgets(text):
    """Return the budgets of a --budgets value: positive whole numbers, comma-separated, ascending."""
    try:
        budgets = tuple(int(b) for b in text.split(","))
    except ValueError:
        budgets = ()
    if not budgets or any(b < 1 for b in budgets) or list(budgets) != sorted(set(budgets)):
        raise argparse.ArgumentTypeError(f"--budgets wants whole numbers, ascending, comma-separated (got {text!r})")
    return budgets


def run_coding(args):
    """Measure the coding transcripts as ``args`` say, print the tables; return 0."""
    start = time.perf_counter()
    variants = ([] if args.no_refit else [REFIT]) + args.variant
    figures = measure_coding(args.coding, args.budgets, variants, args.max_cuts, args.cache_budget,
                             not args.no_cache, args.every)
    print_coding(figures, args.max_cuts, args.every)
    print(f"({time.perf_counter() - start:.1f} s)")
    if args.json:
        def rounded(table):
            return {p: {str(b): round(v, 4) for b, v in r.items()} for p, r in table.items()}

        kinds = {kind: dict(shares, **{m: rounded(shares[m]) for m in ("recall", "reachable", "findable")})
                 for kind, shares in figures["kinds"].items()}
        figures = dict(figures, variants={name: list(flags) for name, flags in variants}, kinds=kinds,
                       reachable=rounded(figures["reachable"]), findable=rounded(figures["findable"]),
                       recall={p: {str(b): round(v, 4) for b, v in r.items()} for p, r in figures["recall"].items()},
                       recall_mean={p: {str(b): round(v, 4) for b, v in r.items()}
                                    for p, r in figures["recall_mean"].items()})
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", help="folder of LoCoMo conversation JSON files")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    parser.add_argument("--floor", type=float, help=f"exit 1 if the pager's recall at {FLOOR_BUDGET} is below this")
    parser.add_argument("--coding", metavar="DIR", help="measure coding transcripts under DIR instead of LoCoMo")
    parser.add_argument("--compaction", metavar="DIR",
                        help="measure what the agent needs after each compaction event of the transcripts under DIR")
    parser.add_argument("--max-cuts", type=int, default=0, metavar="N",
                        help="with --coding: at most N cut points a session, evenly spaced (default: all)")
    parser.add_argument("--variant", type=parse_variant, action="append", default=[], metavar="NAME=FLAGS",
                        help="with --coding: also measure the pager run with these extra flags (repeatable)")
    parser.add_argument("--no-cache", action="store_true",
                        help="with --coding, leave out the cache-stability replay of every step (most of the time)")
    parser.add_argument("--budgets", type=parse_budgets, default=CODING_BUDGETS, metavar="B,B,...",
                        help="with --coding: the budgets measured (default "
                             + ",".join(map(str, CODING_BUDGETS)) + ")")
    parser.add_argument("--every", type=int, default=1, metavar="K",
                        help="with --coding: the pager runs before every K-th assistant step (an agent paging "
                             "less often), cut points among those steps (default 1: every step)")
    parser.add_argument("--no-refit", action="store_true",
                        help="with --coding, leave out the refit policy (the pager with --target none)")
    parser.add_argument("--cache-budget", type=int, default=CACHE_BUDGET, metavar="TOKENS",
                        help=f"with --coding: budget of the cache replay (default {CACHE_BUDGET})")
    args = parser.parse_args(argv)
    if args.compaction is not None:
        if args.folder is not None or args.floor is not None or args.coding is not None:
            parser.error("--compaction measures compaction events: give no other folder, --coding or --floor")
        if not Path(args.compaction).is_dir():
            parser.error(f"{args.compaction} is not a folder")
        return run_compaction(args)
    if args.coding is not None:
        if args.folder is not None or args.floor is not None:
            parser.error("--coding measures coding transcripts: give no LoCoMo folder and no --floor")
        if not Path(args.coding).is_dir():
            parser.error(f"{args.coding} is not a folder")
        if args.max_cuts < 0 or args.cache_budget < 1 or args.every < 1:
            parser.error("--max-cuts must be 0 or more, --cache-budget and --every 1 or more")
        return run_coding(args)
    if args.folder is None:
        parser.error("give a LoCoMo folder, or --coding DIR")
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
