#!/usr/bin/env python3
"""prosecode context pager: decide which blocks of an agent's history to keep.

Each block of a conversation history is scored against the agent's current
intent with ``R = alpha * sim + beta * recency`` and gets one directive:
``retain`` (kept verbatim), ``page`` (replaced by a stub, recallable) or
``evict`` (removed). Every decision is appended to a session contract, a
``.limn`` file in the Liminate prose language, so the next pass and the next
agent know what was kept and what was let go.

Example:
    python3 scripts/pager.py --history assets/test-history.json \\
        --contract /tmp/session.limn --now 2026-05-17T03:08:12+00:00

Standard library only; Python 3.9+. The file reads top to bottom; every
section uses only what the sections above it define. Search for a banner
(``# ===== Name =====``) to jump to it:

    Errors and exit codes     PagerError, and the three exit codes
    Constants                 weights, cuts, actions, the contract vocabulary
    Shared helpers            value rendering for messages, quotable text
    Text                      tokens, stems, keyword matches, token estimates
    Stubs and the page index  what stands in for a paged block
    Scoring and decisions     Params, Decision, the _Scorer, budgets and units
    Harness markup            one row per harness: what it writes as user text
    The pass plan             intent, PassPlan, plan_pass (pure: no I/O)
    Liminate statements       the six statement forms, contract state
    Reading histories         the pager's JSON, streamed in bounded memory
    Transcripts               one class per format: claim, read, pair,
                              write back, validate
    Page store                SQLite file of paged blocks' exact text
    The contract file         locked, all-or-nothing appends
    Recording a pass          pages, compacted history, contract, in order
    Report                    the session as one HTML page: pure rendering
    Command line              flags, the pass, ``recall``, ``index``, main

The core (Text through Transcripts, except reading files) never touches
files, the clock, stdout or stderr; files, locks and the clock live in the
last four sections.
"""

from __future__ import annotations

import argparse
import array
import atexit
import codecs
import dataclasses
import datetime
import errno
import gc
import hashlib
import heapq
import io
import json
import marshal
import math
import operator
import os
import re
import sqlite3
import sys
import tempfile
from bisect import bisect_left, bisect_right
from collections import ChainMap, Counter
from contextlib import contextmanager
from functools import lru_cache
from itertools import chain, compress, islice, repeat
from typing import (Any, Callable, Container, Dict, Iterable, Iterator, List, Mapping, NamedTuple, NoReturn,
                    Optional, Sequence, Set, Tuple, Union)

try:  # advisory locks are POSIX; elsewhere the append still happens in one write
    import fcntl
except ImportError:  # pragma: no cover - exercised only on platforms without fcntl
    fcntl = None  # type: ignore[assignment]

__version__ = "0.1.0"

# The public API: each name is documented in its docstring and in the README's "Python API".
__all__ = [
    # errors and constants
    "PagerError", "ACTIONS", "FORMATS",
    # text and scoring
    "tokenize", "intent_keywords", "estimate_tokens", "recency", "Params", "Decision", "fit_budget",
    # the pass plan
    "Intent", "PassPlan", "plan_pass",
    # stubs and the page index
    "StoredPage", "stub_summary", "make_stub", "index_lines",
    # the contract
    "ContractState", "check_statement", "render_pass", "read_contract_state", "contract_state",
    # transcripts
    "Conversation", "detect_format", "load", "conversation_blocks", "human_requests", "emit", "validate",
    # the page store
    "PageStore",
    # the library: compact in memory, a Pager across calls, recall as a tool
    "compact", "Pager", "Compacted", "CompactReport", "recall_tool", "run_recall_tool", "RECALL_TOOL_NAME",
    "RECALL_TOOL_DESCRIPTION",
    # the command line
    "main",
]


# ===== Errors and exit codes =====


class PagerError(Exception):
    r"""An expected failure: bad input, a bad flag, or a contract the pager can't read.

    Its message is always one line, whatever input it echoes: every line break that
    ``str.splitlines`` knows (U+2028 and NEL included) becomes a space.

    Example:
        >>> str(PagerError("a\nb\u2028c"))
        'a b c'
    """

    def __init__(self, message: object) -> None:
        super().__init__(" ".join(str(message).splitlines()))


EXIT_OK, EXIT_BUG, EXIT_INPUT = 0, 1, 2  # done; an unexpected bug (traceback); bad input (one line)


# ===== Constants =====

DEFAULT_ALPHA = 0.7        # weight of intent similarity in R
DEFAULT_BETA = 0.3         # weight of recency in R
DEFAULT_RETAIN_CUT = 0.55  # R at or above this keeps a block verbatim
DEFAULT_EVICT_CUT = 0.20   # R below this removes a block; between the cuts it is paged

ACTIONS = ("retain", "page", "evict")
LIST_OF_ACTION = {"retain": "retained-blocks", "page": "paged-blocks", "evict": "evicted-blocks"}
ACTION_OF_LIST = {name: action for action, name in LIST_OF_ACTION.items()}
ACTION_RANK = {"evict": 0, "page": 1, "retain": 2}  # a tool unit takes its strongest member's directive
GIANT_SHARE = 0.25          # under a budget, a block over this share of it is a giant: its stub keeps its head and tail
GIANT_EDGE_SHARE = 0.025    # ...each of them about this share of the budget (4 characters a token)
GIANT_MIN_EDGE = 50         # tokens: a budget whose edge would be smaller than this has no giants
REPEATED_BY = "repeated by "  # the reason of a block paged because a later block repeats it, then that block's id
MASK = "mask"  # emit only: a tool result paged in place while its call is kept (observation masking)
# Range pages (see references/budget.md): under a budget, the paged blocks that get no stub of their
# own collapse, run by run, into range pages: one line of the page index each, recallable by its id.
RANGED = "budget-ranged"   # the reason of a block paged into a range page (no stub of its own)
# The reasons range planning tells apart (_plan_ranges: a RANGED block joins a run, a "compacted" one
# is in no request and passes over it); any other reason is the same to it.
_REASONS_RANGES_READ = {RANGED: 1, "compacted": 2}
RANGE = "range"            # a range page's kind in the page store, and the role its stub line names
RANGE_PREFIX = "r-"        # a range page's id: this, then RANGE_DIGITS hex digits of its members' ids
RANGE_DIGITS = 12
RANGE_REASON = "range; "   # the reason recorded with a range page's id in paged-blocks
DEFAULT_INDEX_SHARE = 0.1  # the range pages' lines may take this share of the budget
DEFAULT_RECENT_SHARE = 0.0  # in a history with tool work, recency fills this share of the room first (fit_budget)
RANGE_TOPICS = 8           # a range page's line lists this many names (topics), more in room the lines leave
LINES_SHARE = 0.5          # the range lines are planned in this share of the index's room; the rest lists more names
TOPICS_PER_BLOCK = 2       # ...at most this many names per block a range holds
# Only the first range line of a request says how to recall (the command, then this when there are
# more): the others are recalled the same way, and a command on every line would cost the index a
# third of its room.
RANGE_HINT_TAIL = "; the same for any range id"
# A lone UTF-16 surrogate: valid in a JSON string ("\ud83d", where a log cut a long output inside an
# emoji), not in UTF-8, so no page store can hold it.  A block holding one is never paged (reason
# UNSTORABLE when it would have been), and the files the pager writes keep it as its JSON escape.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
UNSTORABLE = "unstorable"
SMALL = "small"  # a pass without a budget keeps a block its stub would not shorten (paging it saves nothing)
# The reason of a block paged because the harness compacts next (--before-compaction): its summary
# replaces the conversation, so every block it takes out is stored, whatever its score said.
BEFORE_COMPACTION = "before compaction"
ASIDE_KIND = "attachment"  # block kind of a transcript line the reader does not send (a file re-read, queued input)
OPAQUE = "opaque"  # block kind: a part the pager carries as it is and reads by a label only
UNPAGEABLE_KINDS = ("media", OPAQUE)  # block kinds a stub would lose: kept whole or evicted, never paged
# Block kind of a user-role text the harness wrote that only the log's metadata tells apart (Claude
# Code ``isMeta``: a plugin's SDK prompt, a skill body; a SWE-agent demonstration, ``is_demo``).
# The API body a pass writes back cannot carry that mark, so the contract's directive carries it
# (its reason opens with HARNESS_MARK) and a pass reading the written-back form marks the same text
# again (ContractState.harness): the text stays the harness's, not a human's request, and the
# turns and ids stay as they were.
HARNESS = "harness"
HARNESS_MARK = HARNESS + "; "
# Reasons of a directive the block's own score decided (a block of those kinds, or an unstorable
# text, that would have been paged is evicted instead): what a guard such as "recent" overrides.
SCORED = ("score", UNSTORABLE) + UNPAGEABLE_KINDS
JSON_ESCAPE_ERRORS = "prosecode-pager-json-escape"  # the codec error handler for that (see _file_beside)

SIMILARITIES = ("weighted", "plain")  # the default proxy first; plain is the engine issue's
NEIGHBOUR_DECAY = 0.7      # weighted sim: a block gets this share of an earlier block's match...
NEIGHBOUR_WINDOW = 2       # ...per step, from up to this many blocks before it (answers follow questions)
NEIGHBOUR_POWER = 1.5      # ...raised to this power: a block that clearly raised the topic lends more
DIALOGUE_ROLES = frozenset({"user", "assistant"})  # neighbour credit flows between these only
SYSTEM_ROLES = frozenset({"system", "developer"})  # always retained: the agent's instructions
DEFAULT_TRIGGER = 1.0      # under a budget: compact when the history as last decided reaches this share of it...
DEFAULT_TARGET = 0.8       # ...and then down to this share, so the passes between keep their prompt prefix
NO_TARGET = "none"         # --target none: fit the whole budget on every pass (no watermarks)
REPEAT_MIN_CHARS = 400     # a tool result this long whose text a later result repeats is paged first
MASK_RESULT_SHARE = 0.1    # --mask-results: tool results above this share of the budget page apart from their call
SIZE_POWER = 0.4          # under a budget a block competes by R / tokens ** this: value per token spent
LENGTH_WEIGHT = 0.25       # weighted sim: how much a long block's coverage is discounted (0 = none)
DEFAULT_STUB_WORDS = 40    # words of block text a page stub keeps
DEFAULT_WORK_STEPS = 3      # the agent's last steps whose calls and results join the intent
WORK_KEYWORDS = 48          # at most this many keywords from the work, the latest steps' first
WORK_TEXT_CHARS = 2000      # of a long call or result, this many characters from each end are read
WORK_SOURCE = "last user message and recent work"
HUMAN_WORDS = 3             # with the work in the intent, a human message of fewer keywords counts that share
RARE_HOLDERS = 3            # with the work in the intent: a name held by at most this many blocks is rare...
RARE_PER_BLOCKS = 10        # ...and by at most one block in this many (in a short history no name is rare).
RARE_SHARE = 0.5            # Under a budget each rare name shared with the recent work halves what sim lacks of 1,
COMMON_WORTH = 0.3          # and a block holding no rare name competes at this share of its R per token
NAME_MIN_CHARS = 4          # a name (for rarity) is a word token of at least this many characters, not a stop word
INDEX_SUMMARY_WORDS = 12   # words of a stub a page-index line keeps
STORE_SUFFIX = ".pages.sqlite3"  # C.limn -> C.pages.sqlite3 beside the contract
INDEX_FLAG = "pager_index"  # marks the page-index block --with-index prepends; passes skip it
# This file, absolute (read once at import): the CLI's recall hints name it, so they run from any folder.
SCRIPT_PATH = os.path.abspath(__file__)
CONSOLE_SCRIPT = "prosecode-pager"  # the command pip installs (pyproject.toml)

COMPACTION = "compaction"  # a provider's compaction block or item: it is the compacted past, kept like the instructions
# Under a budget, the floors no budget removes (reason CURRENT): the human's last request, and the
# agent's current step (its last run of assistant blocks, the units it opened, the results after it;
# a giant among them competes, paged in place at worst).
CURRENT = "current"
PROTECTIONS = ("pinned", "system", "recent", COMPACTION, CURRENT)  # reasons a block is kept whatever its score...
HELD_OVER_BUDGET = ("pinned", "recent", COMPACTION, CURRENT)  # ...and whatever the budget; "system" only while it fits
# (under a budget the system prompt is claimed first, block by block in order, while it fits; a
# system block that does not fit is paged while its stub fits, else evicted, so a harness's long
# instructions (a Codex skills list of 6,000 tokens under a budget of 4,000) never push the pass
# over its budget)
# (a "task" block is kept whatever its score; under a budget it is kept first of the rest, and
# paged, never evicted, only when it alone does not fit)
# Block ``protected`` values with a meaning beyond "system": the task statement (kept like a pin
# unless Params.protect_task is off), a human's message (paged at worst, never evicted, unless the
# stubs of every floor would not fit the budget: see fit_budget) and a block from before a
# compaction boundary (paged: stored, listed, never emitted).
FLOORED = ("task", "human")
# Other blocks paged at worst, never evicted: a compaction summary (it is the compacted past)
# and an assistant's conclusion (its last text before the human speaks again, where what the
# tools found is written down).
PAGE_FLOORS = FLOORED + ("summary", "conclusion")
ARCHIVED = "archived"
# Instructions a harness sent as a user message (see HARNESS_MARKUP): kept like the system
# prompt (reason "system") without a budget; under one they compete like the rest, so the budget
# holds when an AGENTS.md alone is larger than it.
INSTRUCTIONS = "instructions"
_MAX_COUNT = (1 << 63) - 1  # turns and token counts are kept in 64-bit arrays
_BATCH_BLOCKS = 1024  # blocks handled a batch at a time (statements, decoded JSON); small keeps the peak low

_PAGE_ROWS = 1024  # page-store rows inserted at a time

CONTRACT_TOPIC = "prosecode context pager session contract"
PASS_MARKER = "last-pager-pass"  # the value every pass writes last

# Statement keywords: the only Liminate words the pager's six statement forms use.
_KEYWORDS = ("about", "remember", "a", "list", "called", "value", "number", "with",
             "add", "to", "remove", "from", "because")
# Named values holding quoted text.
TEXT_VALUES = ("last-pager-pass", "last-recall", "pager-version", "pager-intent",
               "pager-intent-source", "pager-format", "pager-similarity", "pager-store")
# Named values holding plain decimal numbers.
NUMBER_VALUES = ("pager-alpha", "pager-beta", "pager-retain-cut", "pager-evict-cut",
                 "pager-keep-recent", "pager-stub-words", "token-budget", "tokens-before",
                 "tokens-after", "pressure-before", "pressure-after")
# The bounded vocabulary: every unquoted word the pager may write (35 words).
LIMN_VOCAB = frozenset(_KEYWORDS + tuple(LIST_OF_ACTION.values()) + TEXT_VALUES + NUMBER_VALUES)
PAGER_NAMES = frozenset(LIST_OF_ACTION.values()) | frozenset(TEXT_VALUES) | frozenset(NUMBER_VALUES)

# Slot classes in a statement shape.
_Q, _NUM, _LIST, _TEXT, _NUMNAME = "<quoted>", "<number>", "<list>", "<text-name>", "<number-name>"
# The documented statement forms (see references/paging-directives.md).
STATEMENT_FORMS = {
    ("about", _Q): "about",
    ("remember", "a", "list", "called", _LIST): "declare",
    ("add", _Q, "to", _LIST, "because", _Q): "add",
    ("remove", _Q, "from", _LIST, "because", _Q): "remove",
    ("remember", "a", "value", "called", _TEXT, "with", _Q): "text",
    ("remember", "a", "number", "called", _NUMNAME, "with", _NUM): "number",
}
_SLOT_OF_WORD = {**{w: w for w in _KEYWORDS},
                 **{w: _LIST for w in LIST_OF_ACTION.values()},
                 **{w: _TEXT for w in TEXT_VALUES},
                 **{w: _NUMNAME for w in NUMBER_VALUES}}

# What a quoted value can't hold: the quote (Liminate has no escape) and every character
# Python's str.splitlines() breaks on, which the interpreter uses to split statements.
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
FORBIDDEN_IN_QUOTES = frozenset('"' + _LINE_BREAKS)
_FORBIDDEN_RE = re.compile(f'["{_LINE_BREAKS}]')
_LINE_BREAK_RE = re.compile(f"[{_LINE_BREAKS}]")

_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?\Z")
_UNQUOTED_RE = re.compile(r"[a-z0-9 .-]*\Z")
_WORD_RE = re.compile(r"\w+")


# ===== Shared helpers =====


def _show(value: object, limit: int = 60) -> str:
    """Return a short JSON rendering of a bad value for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_escape(error: UnicodeError) -> Tuple[str, int]:
    """Codec error handler: write what UTF-8 cannot hold (a lone surrogate) as its JSON escape.

    The pager's files are JSON, and such a character is only ever inside a JSON string there,
    where ``\\udXXX`` reads back as the same character.
    """
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return "".join(f"\\u{ord(c):04x}" for c in error.object[error.start:error.end]), error.end


codecs.register_error(JSON_ESCAPE_ERRORS, _json_escape)


@contextmanager
def _file_beside(path: Optional[str]) -> Iterator[Optional[io.TextIOBase]]:
    """Yield a new text file (mode 0600) beside ``path``; when the block succeeds it replaces ``path``.

    The file is flushed and fsynced before the replace. If the block raises, or the
    replace fails, the file is removed and ``path`` is left as it was. Every file
    the pager writes whole (the compacted history) goes through here; ``path`` None
    yields None.
    """
    if path is None:
        yield None
        return
    fd, tmp = tempfile.mkstemp(prefix=".pager-emit-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors=JSON_ESCAPE_ERRORS) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextmanager
def _collector_held() -> Iterator[None]:
    """Hold off the cyclic garbage collector while a step builds many objects and no cycles to free.

    Reading a large log (a million live objects) or scoring a batch of its blocks, the
    collector would walk the whole heap each time what survived grew by a quarter of it:
    about a fifth of a 50,000-message pass. Afterwards what is left counts as old (freeze,
    then unfreeze: moved to the oldest generation, none exempt from later collections).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        gc.enable()


# The one quoted word the Liminate interpreter does not keep in a list: a list holding only "none"
# reads as empty (the next add replaces it) and ``remove "none" from L`` fails, so a block with this
# id could not be recorded.
LIST_EMPTY_WORD = "none"


def _check_quotable(value: str, what: str) -> str:
    """Return ``value`` if it can stand between quotes in a statement, else raise PagerError."""
    if not value:
        raise PagerError(f"{what} must not be empty")
    bad = _FORBIDDEN_RE.search(value)
    if bad:
        name = "a double quote" if bad.group() == '"' else f"a line break (U+{ord(bad.group()):04X})"
        raise PagerError(f"{what} holds {name}, which a contract line can't carry (got {_show(value)})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PagerError(f"{what} holds an unpaired surrogate (got {_show(value)})") from None
    return value


# ===== Text: tokens, stems, matches, sizes =====

# English stop words: dropped from intents, so "what did we decide" keeps only "decide".
STOP_WORDS = frozenset("""
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could d did do does doing done down during each either else ever
    every few for from further had has have having he her here hers herself him himself his how i if
    in into is it its itself just ll m may me might more most much must my myself no nor not now o
    of off on once one only or other others our ours ourselves out over own re s same shall she
    should so some such t than that the their theirs them themselves then there these they this
    those through thus to too under until up upon us ve very was we were what whatever when
    whenever where whereas wherever whether which while who whom whose why will with within without
    would yet you your yours yourself yourselves aren couldn didn doesn don hadn hasn haven isn
    mustn shan shouldn wasn weren won wouldn
""".split())


def tokenize(text: str) -> List[str]:
    """Return the lowercase word tokens of ``text``.

    Example:
        >>> tokenize("Fixed the off-by-one in block_index()")
        ['fixed', 'the', 'off', 'by', 'one', 'in', 'block_index']
    """
    return _WORD_RE.findall(text.lower())


_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _snake(token: str) -> str:
    """Return ``token`` lowercased, a camelCase hump read as "_": ``lineTotal`` -> ``line_total``.

    A programmer reads ``lineTotal``, ``LineTotal`` and ``line_total`` as one name; the
    snake form is the one the matcher knows (``_identifier_in`` also finds it written
    joined, as ``linetotal``). All-capitals words and plain words only lose their case.

    Example:
        >>> [_snake(t) for t in ("lineTotal", "HTTPServer", "parse_v2", "Caroline", "LGBTQ")]
        ['line_total', 'http_server', 'parse_v2', 'caroline', 'lgbtq']
    """
    return _CAMEL_HUMP.sub("_", token).lower() if not token.islower() else token


def intent_keywords(items: Iterable[str]) -> List[str]:
    """Return the intent keywords: tokens of ``items`` minus stop words, first occurrence order, once.

    A camelCase token becomes its snake form (``lineTotal`` -> ``line_total``), so the
    keyword meets the name however a later block writes it.

    Example:
        >>> intent_keywords(["Pager", "what is the retention score", "pager"])
        ['pager', 'retention', 'score']
        >>> intent_keywords(["fix lineTotal in src/billing/totals.py"])
        ['fix', 'line_total', 'src', 'billing', 'totals', 'py']
    """
    seen: Dict[str, None] = {}
    for item in items:
        for raw in _WORD_RE.findall(item):
            token = _snake(raw)
            if token not in STOP_WORDS:
                seen.setdefault(token, None)
    return list(seen)


_SUFFIXES = (("ments", 3), ("ment", 3), ("ions", 3), ("ion", 3), ("ingly", 3), ("edly", 3),
             ("ings", 3), ("ing", 3), ("ies", 2), ("ied", 2), ("ed", 3), ("ly", 5), ("s", 3))
_VOWEL_RE = re.compile(r"[aeiouy]")
_STEMS: Dict[str, str] = {}   # memo: a session repeats its words
_STEMS_MAX = 500_000
_TOKEN_AT = re.compile(r"\w*").match


def _stem(word: str) -> str:
    """Return a light English stem of a lowercase token, so "retained" meets "retain".

    It cuts one common suffix (keeping a few letters and a vowel), undoes a doubled
    final consonant, drops a final "e" and turns a final "y" into "i". Words of three
    letters or fewer, and tokens with digits or "_", are left alone.

    Example:
        >>> [_stem(w) for w in ("retained", "retain", "retaining", "families", "family", "scores")]
        ['retain', 'retain', 'retain', 'famili', 'famili', 'scor']
    """
    known = _STEMS.get(word)
    if known is not None:
        return known
    base = word
    if len(word) > 3 and word.isalpha():
        if not word.endswith(("ss", "us", "is", "eed")):
            for suffix, keep in _SUFFIXES:
                if word.endswith(suffix) and len(word) - len(suffix) >= keep:
                    cut = word[: -len(suffix)]
                    if not _VOWEL_RE.search(cut):
                        continue
                    base = cut
                    if suffix in ("ies", "ied"):
                        base += "i"
                    elif (suffix in ("ing", "ings", "ed", "ingly", "edly") and len(base) >= 4
                          and base[-1] == base[-2] and base[-1] not in "aeiou" and base[-1] not in "lsz"):
                        base = base[:-1]
                    break
        if len(base) > 3 and base.endswith("e"):
            base = base[:-1]
        if len(base) > 2 and base.endswith("y"):
            base = base[:-1] + "i"
    if len(_STEMS) < _STEMS_MAX:
        _STEMS[word] = base
    return base


def _keyword_stems(keywords: Iterable[str]) -> List[str]:
    """Return the distinct stems of ``keywords``, first occurrence first."""
    return list(dict.fromkeys(_stem(k) for k in keywords))


def _needle(stem_: str) -> str:
    # Every token whose stem is s starts with s, except that a final "y" became "i":
    # search for s without its final "i" then ("famili" is found through "famil").
    return stem_[:-1] if len(stem_) > 1 and stem_[-1] == "i" else stem_


_IDENTIFIER_FORMS: Dict[str, Tuple[Tuple[str, ...], str]] = {}  # memo: identifier -> (snake forms, joined form)


def _identifier_forms(name: str) -> Tuple[Tuple[str, ...], str]:
    """Return the ways a programmer writes the identifier ``name`` (snake case, with a ``_``).

    The snake forms are the name itself and, for a name of three parts or more, the
    name without its first part and without its last (``test_line_total`` is about
    ``line_total``); the joined form is the parts run together (``lineTotal`` lowered).
    """
    known = _IDENTIFIER_FORMS.get(name)
    if known is None:
        parts = [p for p in name.split("_") if p]
        forms = [name]
        if len(parts) >= 3:
            forms += ["_".join(parts[1:]), "_".join(parts[:-1])]
        known = (tuple(dict.fromkeys(forms)), "".join(parts) if len(parts) >= 2 else "")
        if len(_IDENTIFIER_FORMS) < _STEMS_MAX:
            _IDENTIFIER_FORMS[name] = known
    return known


def _found_between(lowered: str, form: str, joint: str) -> bool:
    """Return True if ``form`` occurs in ``lowered`` with no letter, digit or ``_`` on either side,
    ``joint`` (``"_"`` or ``""``) counting as a side that is allowed."""
    size, end = len(form), len(lowered)
    i = lowered.find(form)
    while i >= 0:
        j = i + size
        before = lowered[i - 1] if i else " "
        after = lowered[j] if j < end else " "
        if (before == joint or not (before.isalnum() or before == "_")) and \
                (after == joint or not (after.isalnum() or after == "_")):
            return True
        i = lowered.find(form, i + 1)
    return False


def _identifier_in(lowered: str, name: str) -> bool:
    """Return True if lowercased text ``lowered`` names the identifier ``name`` (which holds a ``_``).

    A snake form counts where it is a whole token or a ``_``-separated run of parts of
    one (``line_total`` is in ``test_line_total`` and ``line_total_v2``, not in
    ``line_totals``); the joined form counts as a whole token (``lineTotal``).

    Example:
        >>> [_identifier_in(t, "line_total") for t in ("def test_line_total():", "x.linetotal = 1", "line_totals")]
        [True, True, False]
    """
    snakes, joined = _identifier_forms(name)
    return (any(_found_between(lowered, form, "_") for form in snakes)
            or (bool(joined) and _found_between(lowered, joined, "")))


class _Needle(NamedTuple):
    """One intent stem as _hits searches for it, worked out once per pass (see _needles)."""

    stem: str
    needle: str    # what every token stemming to ``stem`` starts with (_needle)
    size: int      # len(needle)
    name: bool     # an identifier (holds "_"): matched as a programmer reads it, not by stem
    whole: bool    # the needle is a token (word characters only) and stems to ``stem``
    forms: Tuple[Tuple[str, str], ...]  # of an identifier: each (form, joint) _identifier_in looks for
    # of a needle of word characters: the search for a token that starts with it (the needle, then
    # no letter, digit or "_" before it, then the token's rest), which C runs past every occurrence
    # inside a token ("py" in "copy"); None for an identifier and any other needle
    tokens: Optional[Callable[..., Optional["re.Match[str]"]]]


_NeedleFields = Tuple[str, str, int, bool, bool, Tuple[Tuple[str, str], ...],
                      Optional[Callable[..., Optional["re.Match[str]"]]]]


def _needles(stems: Iterable[str]) -> List[_NeedleFields]:
    """Return each stem's _Needle fields, in order, as a plain tuple (a loop unpacks one faster than a NamedTuple)."""
    out = []
    for s in stems:
        needle = _needle(s)
        word = _WORD_RE.fullmatch(needle) is not None  # a needle of word characters only
        whole = word and _stem(needle) == s
        forms: Tuple[Tuple[str, str], ...] = ()
        tokens = None
        if "_" in s:
            snakes, joined = _identifier_forms(s)
            forms = tuple((form, "_") for form in snakes) + (((joined, ""),) if joined else ())
        elif word:
            quoted = re.escape(needle)
            tokens = re.compile(quoted + r"(?<!\w" + quoted + r")\w*").search
        out.append(tuple(_Needle(s, needle, len(needle), "_" in s, whole, forms, tokens)))
    return out


def _hits(lowered: str, needles: List[_NeedleFields]) -> Tuple[str, ...]:
    """Return _block_hits for the ``needles`` of its stems (see _needles)."""
    found: Tuple[str, ...] = ()
    find = lowered.find
    end = len(lowered)
    for s, needle, size, name, whole, forms, tokens in needles:
        if name:  # _identifier_in, each form looked for first (most blocks hold none)
            for form, joint in forms:
                if form in lowered and _found_between(lowered, form, joint):
                    found += (s,)
                    break
            continue
        if tokens is not None:  # each token that starts with the needle, in turn
            if needle not in lowered:
                continue
            match = tokens(lowered)
            while match is not None:
                token = match.group()
                if len(token) == size:  # the token is the needle itself
                    if whole:
                        found += (s,)
                        break
                elif (_STEMS.get(token) or _stem(token)) == s:
                    found += (s,)
                    break
                match = tokens(lowered, match.end())
            continue
        i = find(needle) if size else -1  # one search tells whether it occurs and where
        while i >= 0:
            if i:
                c = lowered[i - 1]
                if c.isalnum() or c == "_":
                    i = find(needle, i + size)  # inside a token, not at its start
                    continue
            j = i + size
            if j == end or not ((c := lowered[j]).isalnum() or c == "_"):  # the token is the needle itself
                if whole:
                    found += (s,)
                    break
                i = find(needle, j + 1)
                continue
            token = _TOKEN_AT(lowered, i).group()
            if (_STEMS.get(token) or _stem(token)) == s:
                found += (s,)
                break
            i = find(needle, i + len(token) + 1)
    return found


def _block_hits(lowered: str, stems: Iterable[str]) -> Tuple[str, ...]:
    """Return the stems that some whole token of ``lowered`` stems to, in the order given.

    Equal to checking ``stem(t)`` for every ``\\w+`` token ``t``, without tokenizing the
    block: it searches for each stem's prefix, keeps hits that start a token, and stems
    just that token.

    Example:
        >>> _block_hits("we retained the families' scores", ["retain", "famili", "pager"])
        ('retain', 'famili')
    """
    return _hits(lowered, _needles(stems))


def _has_token(text: str, word: str) -> bool:
    """Return True if ``word`` occurs in ``text`` as a whole token (as ``tokenize`` splits it).

    A substring search plus a look at the neighbouring characters is several
    times faster than tokenizing every block; ``\\w`` is alphanumeric or ``_``.

    Example:
        >>> _has_token("re-score the block", "score"), _has_token("scores", "score")
        (True, False)
    """
    size, end = len(word), len(text)
    i = text.find(word)
    while i >= 0:
        j = i + size
        if (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) and \
                (j == end or not (text[j].isalnum() or text[j] == "_")):
            return True
        i = text.find(word, i + 1)
    return False


def _keyword_hits(lowered: str, keywords: Iterable[str]) -> Tuple[str, ...]:
    """Return the keywords found in ``lowered`` as a whole token or as the stem of one.

    One matcher for both proxies' keywords: plain keywords are whole tokens, weighted
    ones are stems.

    Example:
        >>> _keyword_hits("the retention score", ["retent", "score", "pager"])
        ('retent', 'score')
    """
    return tuple(k for k in keywords
                 if k and _needle(k) in lowered and (_has_token(lowered, k) or _block_hits(lowered, (k,))))


def _two_ends(text: str, chars: int = WORK_TEXT_CHARS) -> str:
    """Return ``text``, or of a longer one its first and last ``chars`` characters, each cut at a
    space or line break so that no name is cut in two (a command's error is usually at the end).

    Example:
        >>> _two_ends("alpha beta gamma delta", 7)
        'alpha\\n delta'
    """
    if len(text) <= 2 * chars:
        return text
    head, tail = text[:chars], text[-chars:]
    return head[:max(head.rfind(" "), head.rfind("\n"), 0)] + "\n" + tail[max(tail.find(" "), tail.find("\n"), 0):]


_NAME_RE = re.compile(r"\w{%d,}" % NAME_MIN_CHARS)
# A JSON escape for a line break or a tab, as a tool call's arguments hold them ("...)\n_TEL_TIER=..."):
# read as the spaces it stands for, or "n_tel_tier" would pass for a name.
_JSON_BREAK = re.compile(r"\\[nrt]")


def _unescaped_breaks(text: str) -> str:
    r"""Return ``text`` with each JSON line-break or tab escape as two spaces (its length kept): the one
    rule for reading names out of a tool call's JSON arguments (matching, rare names, the recent work).

    Example:
        >>> _unescaped_breaks('{"cmd": "a=1\\nb_c=2"}')
        '{"cmd": "a=1  b_c=2"}'
    """
    return _JSON_BREAK.sub("  ", text) if "\\" in text else text


_NAMES: Dict[str, str] = {}  # one copy of each name: a session repeats its names in many blocks
# A path, a dotted or hyphenated name: words joined by . / -; a ":" ends one (grep's file:line, a URL scheme).
# Tried at word starts only: from inside a word the same match fails again, and each try walks the
# word's rest (a text of long words cost the square of their length).
_COMPOUND_RE = re.compile(r"(?<!\w)\w+(?:[./-]\w+)+")
_COMPOUND_BREAK = re.compile(r"[./:-]")
COMPOUND_MAX_CHARS = 80  # a longer path or dotted name is left to its parts
NAMES_CACHED = 16384     # texts whose names are remembered (range planning asks for the same blocks' names on every fit)


def _compounds_in(lowered: str) -> List[str]:
    """Return the compound names (paths, dotted or hyphenated names) of ``lowered``: a text as
    _names_of reads it (its two ends, escapes as spaces, lowercased).

    Example:
        >>> _compounds_in("read src/billing/totals.py and a-b")
        ['src/billing/totals.py']
    """
    if "." not in lowered and "/" not in lowered and "-" not in lowered:
        return []
    return [c for c in _COMPOUND_RE.findall(lowered) if NAME_MIN_CHARS <= len(c) <= COMPOUND_MAX_CHARS]


@lru_cache(maxsize=NAMES_CACHED)
def _names_of(text: str, compounds: bool = False) -> Tuple[str, ...]:
    """Return the names of ``text`` whose rarity the scorer counts: its distinct word tokens of
    NAME_MIN_CHARS or more characters (paths and identifiers split at ``/``, ``.`` and ``-``,
    numbers, words) that are not stop words, lowercased, read from the text's two ends.

    With ``compounds`` (the injected index, which shows names to the model) the whole paths and
    dotted or hyphenated names are names too (``src/billing/totals.py``, ``totals.py``), up to
    COMPOUND_MAX_CHARS characters.

    Example:
        >>> sorted(_names_of("Read src/billing/totals.py: TypeError in line_total, 1042 lines"))
        ['1042', 'billing', 'line_total', 'lines', 'read', 'totals', 'typeerror']
        >>> sorted(n for n in _names_of("Read src/billing/totals.py now", compounds=True) if "." in n)
        ['src/billing/totals.py']
    """
    shared = _NAMES
    lowered = _unescaped_breaks(_two_ends(text)).lower()
    found = set(_NAME_RE.findall(lowered))
    found -= STOP_WORDS
    if len(shared) < _STEMS_MAX:  # each distinct name once (a set's order is no part of the answer)
        found = set(map(shared.setdefault, found, found))  # (two walks of one set pair each name with itself)
    if compounds:
        found.update(_compounds_in(lowered))
    return tuple(found)


def _names_with_compounds(text: str, names: Tuple[str, ...]) -> Tuple[str, ...]:
    """Return _names_of(``text``, compounds=True), given ``names``, its _names_of(``text``): only the
    compounds are read (a budget pass has read every block's names once already)."""
    found = set(names)
    found.update(_compounds_in(_unescaped_breaks(_two_ends(text)).lower()))
    return tuple(found)


def recency(delta_t: int) -> float:
    """Return the recency term ``1 / (1 + ln(1 + delta_t))``: 1 now, falling slowly with age."""
    return 1.0 / (1.0 + math.log1p(delta_t))


_CODE_MARKS = b'{}[]()<>"\':;,=/\\|`$#*&+'  # brackets, quotes and operators: JSON and code
_NON_LATIN = re.compile("[^\u0000-\u024f]")


def estimate_tokens(text: str) -> int:
    """Return a tokenizer-free token estimate of ``text``.

    Published figures for the cl100k/o200k tokenizers: English prose about 4.2
    characters a token, JSON about 3.4 to 4.0, code 3 to 4.2; non-Latin scripts can
    cost a token or more a character. So: ASCII text counts 4 characters a token,
    or 3.4 when more than one character in eight is a bracket, quote or other code
    mark (JSON, code); every character beyond Latin (above U+024F: Greek, Cyrillic,
    CJK, ...) counts one token, the rest 4 characters a token. Always rounded up.

    Example:
        >>> estimate_tokens("The pager keeps what matters."), estimate_tokens('{"a": [1, 2], "b": {}}')
        (8, 7)
        >>> estimate_tokens("контекст"), estimate_tokens("")
        (8, 0)
    """
    size = len(text)
    if text.isascii():
        marks = size - len(text.encode("ascii").translate(None, _CODE_MARKS))
        return -(-size * 10 // 34) if marks * 8 > size else -(-size // 4)
    wide = len(_NON_LATIN.findall(text))
    return wide + -(-(size - wide) // 4)


# ===== Stubs and the page index =====

_SENTENCE_BREAK = re.compile(r"[.!?]\s|\n\s*\n")  # a sentence ends at . ! or ? before a space, or a blank line


class StoredPage(NamedTuple):
    """A paged block's original as the page store keeps it."""

    block: str
    turn: int
    role: str
    kind: Optional[str]
    tokens: int
    keywords: Tuple[str, ...]  # the intent keywords it matched when it was paged
    sha256: str
    paged_at: str
    summary: str
    text: str


def stub_summary(text: str, keywords: Iterable[str], words: int = DEFAULT_STUB_WORDS) -> str:
    """Return up to ``words`` words of ``text``: its best-matching sentence onward, else its start.

    The best sentence holds the most distinct intent keywords (_keyword_hits; the
    earliest wins a tie); with no match the text's first words stand for it.
    Whitespace is collapsed; a cut summary ends with "...".

    Example:
        >>> stub_summary("Setup done. The off-by-one in the index helper is fixed now.", ["index"], 6)
        'The off-by-one in the index helper...'
    """
    wanted = list(keywords)
    # Sentences are found as they are read: the search stops at the first sentence holding every
    # keyword, and a text with no break character is one sentence without a regex scan.
    breaks = _SENTENCE_BREAK.finditer(text) if wanted and any(c in text for c in ".!?\n") else iter(())
    first = next(breaks, None)
    if first is not None:
        best, start, begin = 0, 0, 0
        for end in chain([first.end()], (m.end() for m in breaks), [len(text)]):
            hits = len(_keyword_hits(text[begin:end].lower(), wanted))
            if hits > best:
                best, start = hits, begin
                if hits == len(wanted):
                    break  # no sentence can hold more
            begin = end
        text = text[start:]
    chosen = text.split(None, words)
    if not chosen:
        return "(empty)"
    if len(chosen) > words:
        return " ".join(chosen[:words]) + "..."
    return " ".join(chosen)


def _with_summary(page: "StoredPage", words: int) -> "StoredPage":
    """Return ``page`` with its stub summary, computed from its text if it has none yet."""
    if page.summary:
        return page
    return page._replace(summary=stub_summary(page.text, page.keywords, words))


_SHELL_PLAIN = re.compile(r"[\w@%+=:,./-]+", re.ASCII)  # a word the shell reads as it is, unquoted


def _shell_word(text: str) -> str:
    return text if _SHELL_PLAIN.fullmatch(text) else "'" + text.replace("'", "'\\''") + "'"


RECALL_COMMAND = f"python3 {_shell_word(SCRIPT_PATH)} recall"  # the recall hint of a pager run as a script


def _recall_command(argv0: Optional[str] = None) -> str:
    """Return a recall command that runs from any folder: the console script, else this script's absolute path.

    ``argv0`` (default ``sys.argv[0]``) tells how the pager was run. The path enters the stubs'
    text, so the same input and flags give the same bytes from the same copy of the script.

    Example:
        >>> _recall_command("/usr/local/bin/prosecode-pager")
        'prosecode-pager recall'
        >>> _recall_command("scripts/pager.py") == RECALL_COMMAND  # python3 <this script, absolute> recall
        True
    """
    if argv0 is None:
        argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0 or "").startswith(CONSOLE_SCRIPT):
        return f"{CONSOLE_SCRIPT} recall"
    return RECALL_COMMAND


# (argv[0], contract, store) -> the recall command's text before and after the block id: a
# budget pass prices every block's stub, and the command around the id is the same each time.
_HINT_AROUND: Dict[Tuple[str, str, Optional[str]], Tuple[str, str]] = {}


def _recall_hint(block: str, contract: str, store: Optional[str]) -> str:
    """Return the command that recalls ``block``."""
    argv0 = sys.argv[0] if sys.argv else ""
    around = _HINT_AROUND.get((argv0, contract, store))
    if around is None:
        if len(_HINT_AROUND) >= 64:  # a long-lived process with many contracts: keep the table small
            _HINT_AROUND.clear()
        around = _HINT_AROUND[argv0, contract, store] = (
            f"{_recall_command(argv0)} ",
            f" --contract {_shell_word(contract)}" + (f" --store {_shell_word(store)}" if store else ""))
    return around[0] + _shell_word(block) + around[1]


def _giant_edge(tokens: int, budget: Optional[int]) -> int:
    """Return how many characters of a paged block's head (and of its tail) its stub keeps: 0 but for a giant.

    A giant is a block of more than GIANT_SHARE of the budget (a long log, a whole file): a one-line
    stub would hide what such a block is, so its stub keeps its start and its end verbatim.  Under
    a budget too small for edges of GIANT_MIN_EDGE tokens (under 2,000) a one-line stub says more.
    """
    edge = int(budget * GIANT_EDGE_SHARE) if budget is not None else 0
    if edge < GIANT_MIN_EDGE or tokens <= GIANT_SHARE * budget:  # type: ignore[operator]
        return 0
    return edge * 4


def _giant_parts(text: str, edge: int) -> Optional[Tuple[str, str]]:
    """Return (head, tail) of ``text``, about ``edge`` characters each, cut at line breaks; None if too short."""
    if edge <= 0 or len(text) < 4 * edge:
        return None
    head, tail = text[:edge], text[-edge:]
    if "\n" in head[edge // 2:]:
        head = head[:head.rindex("\n")]
    if "\n" in tail[:edge // 2]:
        tail = tail[tail.index("\n") + 1:]
    return head.rstrip("\n"), tail


def _giant_end(block: str) -> str:
    """Return the last line of a giant's stub: where its tail ends."""
    return f"[end of paged {block}]"


def make_stub(page: "StoredPage", hint: str, newer: Optional[str] = None, edge: int = 0) -> str:
    """Return the stub that stands in for a paged block: one line, or a giant's head and tail.

    ``newer`` names the later block that repeats this one (the same file read again, the
    same command run again), where the current copy is.  With ``edge`` (see _giant_edge)
    a long text keeps its first and last ``edge`` characters or so verbatim, between a
    header line and an end line, with the middle paged.

    Example:
        >>> page = StoredPage("b4", 8, "assistant", None, 19, (), "", "", "Fixed the index helper.", "")
        >>> make_stub(page, "python3 scripts/pager.py recall b4 --contract C.limn")
        '[paged b4 | turn 8 | assistant | 19 tokens] Fixed the index helper. (recall: python3 scripts/pager.py recall b4 --contract C.limn)'
        >>> make_stub(page, "the recall tool", newer="b9")
        '[paged b4 | turn 8 | assistant | 19 tokens] Fixed the index helper. (newer copy: b9; recall: the recall tool)'

    A range page's line (kind RANGE) says how to recall only with a ``hint``: a request gives it
    to its first range line alone (see range_stubs).
    """
    if page.kind == RANGE:  # a range page's line: its summary is the rest of the line (see range_summary)
        line = f"[paged {page.block} | turn {page.turn} | {RANGE} | {page.summary}"
        return line + (f" (recall: {hint})" if hint else "")
    where = f"newer copy: {newer}; " if newer is not None else ""
    ends = _giant_parts(page.text, edge)
    if ends is not None:
        return (f"[paged {page.block} | turn {page.turn} | {page.role} | {page.tokens} tokens | head and tail]\n"
                f"{ends[0]}\n[... the middle is paged ({where}recall: {hint}) ...]\n{ends[1]}\n"
                f"{_giant_end(page.block)}")
    return (f"[paged {page.block} | turn {page.turn} | {page.role} | {page.tokens} tokens] {page.summary} "
            f"({where}recall: {hint})")


def range_id(members: Sequence[str]) -> str:
    """Return the id of the range page holding the blocks ``members`` (in order): derived from their ids.

    Example:
        >>> range_id(["b1", "b2"]) == range_id(["b1", "b2"]) != range_id(["b2", "b1"])
        True
    """
    digest = hashlib.sha256("\n".join(members).encode("utf-8", "surrogatepass")).hexdigest()
    return RANGE_PREFIX + digest[:RANGE_DIGITS]


TOPICS_MARK = "] topics: "  # in a range page's summary, what ends its counts and opens its topics


def range_summary(first_turn: int, last_turn: int, count: int, tokens: int, topics: Sequence[str]) -> str:
    """Return a range page's summary: the rest of its index line after ``[paged ID | turn T | range | ``.

    Example:
        >>> range_summary(3, 9, 14, 5210, ["src/totals.py", "typeerror"])
        'turns 3-9 | 14 blocks | 5210 tokens] topics: src/totals.py, typeerror'
    """
    head = f"turns {first_turn}-{last_turn} | {count} blocks | {tokens} tokens"
    return head + (TOPICS_MARK + ", ".join(topics) if topics else "]")


class RangePage(NamedTuple):
    """A range page: consecutive paged blocks standing in the request as one line of the page index."""

    id: str
    members: Tuple[str, ...]   # the block ids it holds, in order (a member may itself be a range page)
    positions: Tuple[int, ...]  # their positions among the pass's decisions
    first_turn: int
    last_turn: int
    tokens: int                # what its blocks cost verbatim
    summary: str               # see range_summary
    cost: int                  # what its line costs in the request

    def page(self) -> "StoredPage":
        """Return the StoredPage the page store keeps for it (its text: the member ids, a line each)."""
        text = "\n".join(self.members)
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return StoredPage(self.id, self.first_turn, RANGE, RANGE, self.tokens, (), sha, "",
                          self.summary, text)

    def to_dict(self) -> Dict[str, object]:
        """Return the range page as JSON: id, members, turns, tokens, summary."""
        return {"id": self.id, "members": list(self.members), "turns": [self.first_turn, self.last_turn],
                "tokens": self.tokens, "summary": self.summary}


def _first_range_line(line: str, many: bool) -> str:
    """Return ``line``, a range page's line with its recall hint, as a request's first range line:
    with RANGE_HINT_TAIL inside the hint's parentheses when the request holds ``many`` range lines."""
    return line[:-1] + RANGE_HINT_TAIL + ")" if many and line.endswith(")") else line


def range_stubs(ranges: Sequence[RangePage], hint: Callable[[str], str]) -> List[str]:
    """Return the lines of ``ranges`` (a request's, oldest first) as the request shows them: the
    first says how to recall it, and the other ranges (RANGE_HINT_TAIL) when there are more; the
    rest list only their blocks.

    Example:
        >>> a = RangePage("r-1", ("b1", "b2"), (0, 1), 1, 2, 90, range_summary(1, 2, 2, 90, ["totals"]), 0)
        >>> b = a._replace(id="r-2", summary=range_summary(4, 4, 1, 40, []))
        >>> for line in range_stubs([a, b], lambda rid: f"recall {rid}"):
        ...     print(line)
        [paged r-1 | turn 1 | range | turns 1-2 | 2 blocks | 90 tokens] topics: totals (recall: recall r-1; the same for any range id)
        [paged r-2 | turn 1 | range | turns 4-4 | 1 blocks | 40 tokens]
    """
    return [_first_range_line(make_stub(r.page(), hint(r.id)), len(ranges) > 1) if k == 0 else make_stub(r.page(), "")
            for k, r in enumerate(ranges)]


def _newer_copy(reason: str) -> Optional[str]:
    """Return the id of the block that repeats a block paged for the reason ``reason``, else None."""
    return reason[len(REPEATED_BY):] if reason.startswith(REPEATED_BY) else None


def index_lines(pages: Iterable["StoredPage"]) -> List[str]:
    """Return one compact line per paged block: id, turn, tokens and the start of its summary."""
    lines = []
    for page in pages:
        if page.kind == RANGE:  # a range page's summary is its line's own text
            lines.append(f"{page.block} | {page.summary}")
            continue
        words = page.summary.split(" ")
        short = page.summary if len(words) <= INDEX_SUMMARY_WORDS else " ".join(words[:INDEX_SUMMARY_WORDS]) + "..."
        lines.append(f"{page.block} | turn {page.turn} | {page.tokens} tokens | {short}")
    return lines


# --- the index injected after a compaction ---

INDEX_TOKENS = 2000         # the injected index's size by default (index --tokens)
INDEX_SCAN_TOKENS = 250_000  # the index reads the newest pages' text up to about this many tokens
INDEX_WORD_CHARS = 7        # a name of letters alone is shown from this many letters (a shorter one is common English)
INDEX_LINE_NAMES = 20       # an index line holds the names of consecutive pages until it has this many
# What a name's pages say of it, the likeliest needed first (see _index_names):
TIER_AGENT = 0              # the agent wrote it: its messages, or a path its tool calls named (a file it read, edited, ran)
TIER_CALL = 1               # another name of its tool calls' arguments (code it wrote, a command's words)
TIER_READ = 2               # it only read it: tool output, attachments, the human's and the harness's text
_INDEX_CODE = re.compile(r"[0-9_./:-]")  # a name holding one of these is an identifier, a path or a number


class _IndexName(NamedTuple):
    """A distinctive name of the pages before a compaction, as the injected index ranks it."""

    name: str
    tier: int    # TIER_AGENT, TIER_CALL or TIER_READ: the best of its pages'
    age: int     # its newest page's place among the pages read, 0 the newest
    block: str   # that page's id...
    turn: int    # ...and turn


_TOPIC_TRAITS: Dict[str, Tuple[bool, Optional[Tuple[str, ...]]]] = {}  # a name -> _topic_traits(name), remembered


def _topic_traits(name: str) -> Tuple[bool, Optional[Tuple[str, ...]]]:
    """Return (whether ``name`` may be shown as a distinctive name, its compound parts or None): what
    _ranked_names asks of each name, worked out once per name (remembered up to _STEMS_MAX names).

    A name is distinctive when it is an identifier, a path or a number, or a word of INDEX_WORD_CHARS
    letters or more; a compound (a path, a dotted or hyphenated name) breaks into its parts.

    Example:
        >>> _topic_traits("src/totals.py"), _topic_traits("total"), _topic_traits("quantize")
        ((True, ('src', 'totals', 'py')), (False, None), (True, None))
    """
    distinctive = bool(name.strip("_") and (_INDEX_CODE.search(name) or len(name) >= INDEX_WORD_CHARS))
    traits = (distinctive, tuple(_COMPOUND_BREAK.split(name)) if _COMPOUND_BREAK.search(name) else None)
    if len(_TOPIC_TRAITS) < _STEMS_MAX:
        _TOPIC_TRAITS[name] = traits
    return traits


_DISTINCTIVE: Dict[Tuple[str, ...], Tuple[str, ...]] = {}  # names -> the distinctive ones, remembered


def _distinctive_names(names: Iterable[str]) -> Tuple[str, ...]:
    """Return the names of ``names`` that _topic_traits calls distinctive, in order (remembered for
    NAMES_CACHED name tuples: a block's names are one tuple, _names_of's).

    Example:
        >>> _distinctive_names(("total", "src/totals.py", "quantize"))
        ('src/totals.py', 'quantize')
    """
    names = tuple(names)
    kept = _DISTINCTIVE.get(names)
    if kept is None:
        traits = _TOPIC_TRAITS.get
        kept = tuple(name for name in names if (traits(name) or _topic_traits(name))[0])
        if len(_DISTINCTIVE) < NAMES_CACHED:
            _DISTINCTIVE[names] = kept
    return kept


READ_STEP = 128        # rows between the states _read_rows keeps along the rows it read last, at least...
READ_STATES = 8        # ...and doubled until it keeps at most this many states...
READ_KEPT = 100_000    # ...holding at most this many names in all (a long range keeps few states, or none)
# The rows _read_rows read last (oldest first) and its states along them: (rows read, each name's
# newest row, each name's best tier) after each step and at the end. Replaced whole, never changed in place.
_ROWS_READ: List[Tuple[list, list]] = [([], [])]


def _tiers_of(rows: Sequence[Tuple[str, bool, Tuple[str, ...]]]) -> Dict[str, int]:
    """Return each name's best tier over ``rows`` (see _ranked_names): the worst first, each better
    one written over it (a tool call's name is TIER_AGENT when it is a path, else TIER_CALL)."""
    tiers: Dict[str, int] = dict.fromkeys(chain.from_iterable(f for role, _, f in rows if role != "assistant"),
                                          TIER_READ)
    called = dict.fromkeys(chain.from_iterable(f for role, call, f in rows if role == "assistant" and call),
                           TIER_CALL)
    tiers.update(called)
    tiers.update(dict.fromkeys([name for name in called if "/" in name], TIER_AGENT))
    tiers.update(dict.fromkeys(chain.from_iterable(f for role, call, f in rows if role == "assistant" and not call),
                               TIER_AGENT))
    return tiers


def _read_rows(rows: List[Tuple[str, bool, Tuple[str, ...]]]) -> Tuple[Dict[str, int], Dict[str, int]]:
    """Return each name of ``rows`` (oldest first) -> the newest row holding it (its place in
    ``rows``), and -> its best tier (_tiers_of).

    A plan ranks ranges that begin with the same oldest rows (merging the oldest ranges by halving,
    fit after fit), so the reading goes on from the longest state kept along the rows read last
    that ``rows`` begins with (the same rows: role, call and the very names), and keeps its own.

    Example:
        >>> _read_rows([("tool", False, ("a_1", "b_2")), ("assistant", False, ("a_1",))])
        ({'a_1': 1, 'b_2': 0}, {'a_1': 0, 'b_2': 2})
    """
    read, states = _ROWS_READ[0]
    kept = 0  # the states that hold for ``rows``
    done = 0
    for count, _, _ in states:
        if count > len(rows) or rows[done:count] != read[done:count]:
            break
        kept, done = kept + 1, count
    if kept:
        count, last, tiers = states[kept - 1]
        last, tiers = dict(last), dict(tiers)
    else:
        count, last, tiers = 0, {}, {}
    saved = states[:kept]
    step = READ_STEP
    while len(rows) > step * READ_STATES:
        step *= 2
    # (a range of fewer rows than READ_STEP is read whole: its states would only displace a long one's)
    room = READ_KEPT - sum(len(state[1]) for state in saved) if len(rows) >= READ_STEP else 0
    while count < len(rows):
        end = min((count // step + 1) * step, len(rows))
        chunk = rows[count:end]
        last.update(zip(chain.from_iterable(found for _, _, found in chunk),
                        chain.from_iterable(repeat(row, len(found)) for row, (_, _, found) in enumerate(chunk, count))))
        better = _tiers_of(chunk)
        if tiers:
            ranked = tiers.get
            better = {name: tier for name, tier in better.items() if tier < ranked(name, TIER_READ + 1)}
        tiers.update(better)
        count = end
        if (count % step == 0 or count == len(rows)) and 0 < len(last) <= room:
            saved.append((count, dict(last), dict(tiers)))
            room -= len(last)
    if len(saved) > kept:
        _ROWS_READ[0] = (rows, saved)
    return last, tiers


def _ranked_names(rows: Sequence[Tuple[str, bool, Iterable[str]]], known: Container[str] = (),
                  held: Optional[Mapping[str, int]] = None, limit: Optional[int] = None,
                  distinct: bool = False) -> List[Tuple[str, int, int]]:
    """Return (name, tier, age) of the distinctive names of ``rows``, the likeliest needed first: the
    one ranking of names to show (the injected index, a range page's topics).

    ``rows``: (role, is a tool call, names) of blocks, newest first (age: a row's place, 0 the
    newest); names are _names_of with compounds. A name is distinctive when it is an identifier, a
    path or a number, or a word of INDEX_WORD_CHARS letters or more; and not ``known`` (the model
    reads it elsewhere). Order: the rare names (held by at most RARE_HOLDERS blocks: of ``held``,
    the whole history's count, when given, a compound counted as its rarest part; else of the rows)
    first, then the others (a name many blocks hold is no pointer to one: they fill what room is
    left); within each, by tier (a name's best over its rows: TIER_AGENT in an assistant message that
    is no tool call, or a path a tool call names; TIER_CALL for a tool call's other names; TIER_READ
    in any other row: what the agent wrote and the files it acted on are what it takes up again), then the newest row first, a path or dotted name before a word, then
    alphabetically. A part of a compound ranked earlier is not ranked again (the whole shows it).
    ``limit``: the first that many only (taken from a heap: a long range holds thousands of names).
    ``distinct``: each row's names are already its distinctive ones (_distinctive_names), as range
    planning keeps them per block (_BlockNames.distinctive).

    Example:
        >>> _ranked_names([("tool", False, ("docs/rounding.md", "rounding")),
        ...                ("assistant", True, ("src/totals.py", "totals", "quantize"))])
        [('src/totals.py', 0, 1), ('quantize', 1, 1), ('docs/rounding.md', 2, 0)]
    """
    # Built with dict and Counter updates (C loops): a merged range holds thousands of names, the
    # distinctive ones alone read (a row's, remembered by its names: blocks keep their names' tuples).
    if not distinct:
        rows = [(role, call, _distinctive_names(found)) for role, call, found in rows]
    last, tiers = _read_rows(rows[::-1])  # each name's newest row (counted from the oldest) and best tier
    top = len(rows) - 1
    counted: List[Counter] = []  # how many rows hold each name, counted when first asked

    def rows_holding(name: str) -> int:
        if not counted:
            counted.append(Counter(chain.from_iterable(found for _, _, found in rows)))
        return counted[0][name]

    def keyed(names: Iterable[str]) -> List[tuple]:
        """Return the sort key of each of ``names`` shown (not ``known``, distinctive): (common, tier,
        age, a word rather than a path or dotted name, name)."""
        keys = []
        traits_of = _TOPIC_TRAITS.get
        for name in names:
            if name in known:
                continue
            traits = traits_of(name)
            if traits is None:
                traits = _topic_traits(name)
            if not traits[0]:
                continue
            parts = traits[1]
            if held is None:
                count = rows_holding(name)
            else:
                count = held.get(name)
                if count is None:  # a compound: held by no more blocks than its rarest part
                    counts = [held[part] for part in parts if part in held] if parts else []
                    count = min(counts) if counts else rows_holding(name)
            keys.append((count > RARE_HOLDERS, tiers[name], top - last[name], parts is None, name))
        return keys

    def chosen(keys: List[tuple]) -> List[tuple]:
        """Return (common, name, tier, age) of the names ``keys`` rank first, a compound's parts after it
        passed over; ``limit`` at most."""
        if limit is None:
            keys.sort()
            ranked: Iterable[tuple] = keys
        else:
            heapq.heapify(keys)  # the same order, taken only as far as ``limit`` names need
            ranked = (heapq.heappop(keys) for _ in range(len(keys)))
        shown: set = set()
        names = []
        for common, tier, age, _, name in ranked:
            if name in shown:
                continue
            shown.add(name)
            parts = _TOPIC_TRAITS[name][1] if name in _TOPIC_TRAITS else _topic_traits(name)[1]
            if parts is not None:  # "totals" is said by src/billing/totals.py
                shown.update(parts)
            names.append((common, name, tier, age))
            if limit is not None and len(names) >= limit:
                break
        return names

    # Rare names first; a page's paths and dotted names before its words: the whole name shows its parts.
    if held is not None and limit is not None:
        # Every rare name ranks before every other: when the names ``held`` counts as rare (and those
        # it has no count for) alone fill ``limit``, the others are not read.
        few = chosen(keyed(compress(last, map(RARE_HOLDERS.__ge__, map(held.get, last, repeat(0))))))
        if len(few) >= limit and not any(common for common, _, _, _ in few):
            return [(name, tier, age) for _, name, tier, age in few]
    return [(name, tier, age) for _, name, tier, age in chosen(keyed(last))]


def _index_names(rows: Sequence[Tuple[str, int, str, Optional[str], str]],
                 known: Container[str] = ()) -> List[_IndexName]:
    """Return the names the injected index may show, the likeliest needed first (_ranked_names), from
    ``rows``: (block, turn, role, kind, text) of the pages read, newest first (the order they were
    stored). A tool call is an assistant page whose result (``ID:result``) is a page.

    Example:
        >>> rows = [("c1", 2, "assistant", None, "Edit src/totals.py: quantize"),
        ...         ("c1:result", 2, "tool", None, "Edited; see docs/rounding.md"),
        ...         ("m-1", 1, "assistant", None, "The fix goes in line_total.")]
        >>> [(n.name, n.tier) for n in _index_names(rows)]
        [('src/totals.py', 0), ('line_total', 0), ('quantize', 1), ('docs/rounding.md', 2)]
    """
    ids = {row[0] for row in rows}
    said = [(role, role == "assistant" and block + ":result" in ids, _names_of(text, compounds=True))
            for block, _, role, _, text in rows]
    return [_IndexName(name, tier, age, rows[age][0], rows[age][1])
            for name, tier, age in _ranked_names(said, known)]


def _index_lines(names: Sequence[_IndexName]) -> List[str]:
    """Return the index lines showing ``names``: their pages newest first, each line the names of
    consecutive pages until it holds INDEX_LINE_NAMES, as ``turn T: ID ...: names`` (the first
    page's turn and id; "..." when more pages share the line: a search of a name finds its page).
    """
    pages: Dict[int, List[_IndexName]] = {}
    for name in names:
        pages.setdefault(name.age, []).append(name)
    lines, run = [], []  # type: List[str], List[_IndexName]
    for age in sorted(pages):
        if run and len(run) >= INDEX_LINE_NAMES:
            lines.append(run)  # type: ignore[arg-type]
            run = []
        run.extend(pages[age])
    if run:
        lines.append(run)  # type: ignore[arg-type]
    out = []
    for held in lines:
        first = held[0]  # type: ignore[index]
        more = " ..." if any(n.age != first.age for n in held) else ""  # type: ignore[union-attr]
        out.append(f"turn {first.turn}: {first.block}{more}: " + " ".join(n.name for n in held))  # type: ignore
    return out


def compaction_index(names: Sequence[_IndexName], head: str, tokens: int = INDEX_TOKENS) -> str:
    """Return the index to inject after a compaction: ``head``, then lines showing the first of
    ``names`` (ranked by _index_names) that fit, within ``tokens`` (the whole text's estimate).

    Example:
        >>> names = [_IndexName("line_total", 0, 1, "m-2", 5), _IndexName("src/totals.py", 0, 0, "c1", 6),
        ...          _IndexName("docs/rounding.md", 2, 3, "m-1", 4)]
        >>> print(compaction_index(names, "HEAD"))
        HEAD
        turn 6: c1 ...: src/totals.py line_total docs/rounding.md
        >>> compaction_index(names, "HEAD", 12)
        'HEAD\\nturn 6: c1 ...: src/totals.py line_total'
    """
    def text(count: int) -> str:
        return "\n".join([head] + _index_lines(names[:count]))

    low, high = 0, len(names)  # the most names that fit: estimates are not additive, so halve on the whole
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(text(middle)) <= tokens:
            low = middle
        else:
            high = middle - 1
    return text(low)


# ===== Scoring and decisions =====


@dataclasses.dataclass(frozen=True)
class Params:
    """Weights and cuts of one pass."""

    alpha: float = DEFAULT_ALPHA
    beta: float = DEFAULT_BETA
    retain_cut: float = DEFAULT_RETAIN_CUT
    evict_cut: float = DEFAULT_EVICT_CUT
    similarity: str = SIMILARITIES[0]
    budget: Optional[int] = None  # tokens the kept blocks and stubs may take; None: no budget
    stub_words: int = DEFAULT_STUB_WORDS  # words of text a stub keeps
    keep_recent: Optional[int] = None  # always retain the last N blocks; None: the current turn's blocks
    results_apart: bool = False  # a tool result may be paged in place while its call is kept
    trigger: float = DEFAULT_TRIGGER  # with target: compact only when the kept history reaches this share of budget
    target: Optional[float] = DEFAULT_TARGET  # compact down to this share of budget; None: fit the whole budget every pass
    work_steps: int = DEFAULT_WORK_STEPS  # the agent's last steps whose names join an intent drawn from the history
    protect_task: bool = True  # a block marked protected="task" (a session's first human request) stays like a pin
    keep_small: Optional[bool] = None  # without a budget, a block its stub would not shorten stays; None: transcripts
    before_compaction: bool = False  # the harness compacts next: every block it takes out of context is paged
    index_share: float = DEFAULT_INDEX_SHARE  # under a budget, the share of it the range pages' lines may take
    recent_share: float = DEFAULT_RECENT_SHARE  # under a budget, with tool work: the share recency fills first

    def validate(self) -> "Params":
        """Return self, or raise PagerError naming the first bad value."""
        if self.similarity not in SIMILARITIES:
            raise PagerError(f"--similarity must be one of {', '.join(SIMILARITIES)} (got {_show(self.similarity)})")
        if self.budget is not None and (not _is_int(self.budget) or self.budget < 1):
            raise PagerError(f"--budget must be a positive integer (got {_show(self.budget)})")
        if not _is_int(self.stub_words) or self.stub_words < 1:
            raise PagerError(f"--stub-words must be a positive integer (got {_show(self.stub_words)})")
        if self.target is not None and self.budget is not None:  # without a budget there is nothing to compact
            for flag, value in (("--trigger", self.trigger), ("--target", self.target)):
                if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
                        or value <= 0:
                    raise PagerError(f"{flag} must be a positive number (got {_show(value)})")
            if self.trigger > 1.0:
                raise PagerError(f"--trigger must not exceed 1: the history may not outgrow the budget "
                                 f"(got {self.trigger!r})")
            if self.target > self.trigger:
                raise PagerError(f"--target ({self.target!r}) must not exceed --trigger ({self.trigger!r})")
        if self.before_compaction not in (True, False):
            raise PagerError(f"before_compaction must be true or false (got {_show(self.before_compaction)})")
        if self.before_compaction and self.budget is not None:
            raise PagerError("--before-compaction takes no --budget: the compaction takes every block out of "
                             "the context, so every one is stored")
        if not isinstance(self.index_share, (int, float)) or isinstance(self.index_share, bool) \
                or not math.isfinite(self.index_share) or not 0.0 < self.index_share < 1.0:
            raise PagerError(f"--index-share must be a number between 0 and 1 (got {_show(self.index_share)})")
        if not isinstance(self.recent_share, (int, float)) or isinstance(self.recent_share, bool) \
                or not math.isfinite(self.recent_share) or not 0.0 <= self.recent_share <= 1.0:
            raise PagerError(f"--recent-share must be a number from 0 to 1 (got {_show(self.recent_share)})")
        if self.keep_small not in (None, True, False):
            raise PagerError(f"keep_small must be true, false or None (got {_show(self.keep_small)})")
        if not _is_int(self.work_steps) or self.work_steps < 0:
            raise PagerError(f"--work-steps must be a non-negative integer (got {_show(self.work_steps)})")
        if self.keep_recent is not None and (not _is_int(self.keep_recent) or self.keep_recent < 0):
            raise PagerError(f"--keep-recent must be a non-negative integer (got {_show(self.keep_recent)})")
        for flag, value in (("--alpha", self.alpha), ("--beta", self.beta)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise PagerError(f"{flag} must be a finite number (got {value!r})")
            if value < 0:
                raise PagerError(f"{flag} must not be negative (got {value!r})")
        for flag, value in (("--retain-cut", self.retain_cut), ("--evict-cut", self.evict_cut)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise PagerError(f"{flag} must be a finite number (got {value!r})")
            if not 0.0 <= value <= 1.0:
                raise PagerError(f"{flag} must lie in [0, 1] (got {value!r})")
        if self.evict_cut > self.retain_cut:
            raise PagerError(f"--evict-cut ({self.evict_cut!r}) must not exceed --retain-cut ({self.retain_cut!r})")
        return self

    def growth_room(self) -> float:
        """Return the tokens between --target and --trigger: what the passes between two compactions
        grow into (with a budget and a target)."""
        return (self.trigger - self.target) * self.budget  # type: ignore[operator]

    def classify(self, r: float) -> str:
        """Return the directive for score ``r``: retain, page or evict."""
        if r >= self.retain_cut:
            return "retain"
        if r < self.evict_cut:
            return "evict"
        return "page"


_RATIONALE = "R=%.3f sim=%.3f rec=%.3f dt=%d"
_RATIONALE_NB = "R=%.3f sim=%.3f (nb; own=%.3f) rec=%.3f dt=%d"
_RATIONALE_S = "R=%s sim=%s rec=%s dt=%d"  # the same, for numbers already formatted
_RATIONALE_NB_S = "R=%s sim=%s (nb; own=%s) rec=%s dt=%d"


class Decision(NamedTuple):
    """One block's scored directive. A NamedTuple: passes build 100k of these."""

    block: str
    turn: int
    role: str
    kind: Optional[str]
    tokens: int
    matched: Tuple[str, ...]  # the intent keywords (stems, for the weighted proxy) it holds
    similarity: float         # sim = max(own, neighbour)
    own: float                # the block's own share of the intent
    neighbour: float          # credit from a matching neighbour (weighted proxy only)
    recency: float
    delta_t: int
    R: float
    action: str
    reason: str  # "score"; a protection: "pinned", "system", "recent"; "unit ..."; or "budget-..."
    stub: bool   # the block arrived as a page stub and was scored on its stored text

    def rationale(self) -> str:
        """Return the score parts, as written after ``because`` in the contract."""
        parts = self._score_parts()
        parts = parts if self.reason == "score" else f"{self.reason}; {parts}"
        return HARNESS_MARK + parts if self.kind == HARNESS else parts

    def _score_parts(self) -> str:
        """Return R and its parts; when the neighbour's credit set sim, say so and give the block's own."""
        if self.neighbour > self.own:
            return _RATIONALE_NB % (self.R, self.similarity, self.own, self.recency, self.delta_t)
        return _RATIONALE % (self.R, self.similarity, self.recency, self.delta_t)

    def to_dict(self) -> Dict[str, object]:
        """Return the JSON record of this decision."""
        return {"block": self.block, "kind": self.kind, "role": self.role, "turn": self.turn,
                "tokens": self.tokens, "matched": list(self.matched),
                "similarity": round(self.similarity, 6), "own": round(self.own, 6),
                "neighbour": round(self.neighbour, 6), "recency": round(self.recency, 6),
                "delta_t": self.delta_t, "R": round(self.R, 6), "action": self.action,
                "reason": self.reason, "stub": self.stub}


class _DecisionTable:
    """The decisions of a pass, one column per Decision field: a sequence of Decision.

    A pass over 100,000 blocks holds one of these instead of 100,000 tuples;
    indexing or iterating builds each Decision on the way out, and assigning a
    Decision to an index writes its fields back. The hot paths (contract
    statements, JSON records, counts) read the columns directly.
    """

    __slots__ = Decision._fields

    def __init__(self, *columns: Any) -> None:
        for name, column in zip(Decision._fields, columns):
            setattr(self, name, column)

    @classmethod
    def of(cls, decisions: Iterable[Decision]) -> "_DecisionTable":
        """Return a table holding ``decisions``."""
        rows = list(decisions)
        columns = [list(column) for column in zip(*rows)] if rows else [[] for _ in Decision._fields]
        return cls(*columns)

    def columns(self) -> List[Any]:
        return [getattr(self, name) for name in Decision._fields]

    def __len__(self) -> int:
        return len(self.block)

    def __iter__(self) -> Iterator[Decision]:
        return map(tuple.__new__, repeat(Decision), zip(*self.columns()))

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return tuple.__new__(Decision, [column[index] for column in self.columns()])

    def __setitem__(self, index: int, decision: Decision) -> None:
        for name, value in zip(Decision._fields, decision):
            getattr(self, name)[index] = value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (_DecisionTable, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"_DecisionTable({list(self)!r})"


def _column(decisions: Sequence[Decision], name: str) -> Sequence[Any]:
    """Return one field of every decision: the table's own column, or gathered from a list."""
    if isinstance(decisions, _DecisionTable):
        return getattr(decisions, name)
    return [getattr(d, name) for d in decisions]


def _decision_items(count: int, skipped: List[int]) -> List[int]:
    """Return the block position of each of ``count`` decisions, stepping over skipped positions."""
    skip, items, item = set(skipped), [], 0
    for _ in range(count):
        while item in skip:
            item += 1
        items.append(item)
        item += 1
    return items


def _guard(decisions: List[Decision], i: int, reason: str) -> None:
    """Retain the block at ``i`` for ``reason`` unless something other than its score decided it."""
    d = decisions[i]
    if d.reason in SCORED:
        decisions[i] = d._replace(action="retain", reason=reason)


def _protect_recent(decisions: List[Decision], current_turn: int, keep_recent: Optional[int]) -> None:
    """Retain the most recent blocks (reason "recent"): the last ``keep_recent``, or the current turn's."""
    if keep_recent is None:
        chosen = range(len(decisions) - 1, -1, -1)
        for i in chosen:
            if decisions[i].turn != current_turn:
                break
            _guard(decisions, i, "recent")
    else:
        for i in range(max(0, len(decisions) - keep_recent), len(decisions)):
            _guard(decisions, i, "recent")


def _join_units(decisions: List[Decision], units: List[Optional[str]],
                unpageable: Container[int] = ()) -> None:
    """Give every block of a unit its strongest member's directive (retain > page > evict).

    A unit holding a picture or file (``unpageable`` positions) is never paged: it is evicted
    whole instead.
    """
    best: Dict[str, str] = {}
    actions, reasons = _column(decisions, "action"), _column(decisions, "reason")
    table = isinstance(decisions, _DecisionTable)  # then the columns are its own, written in place below
    whole = set()
    for i, (action, unit) in enumerate(zip(actions, units)):
        if unit is not None and ACTION_RANK[action] >= ACTION_RANK[best.get(unit, "evict")]:
            best[unit] = action
        if unit is not None and i in unpageable:
            whole.add(unit)
    for unit in whole:
        if best[unit] == "page":
            best[unit] = "evict"
    for i, unit in enumerate(units):
        if unit is not None and actions[i] != best[unit]:
            if table:  # building each Decision to replace two fields costs more
                actions[i], reasons[i] = best[unit], f"unit {unit}"
            else:
                decisions[i] = decisions[i]._replace(action=best[unit], reason=f"unit {unit}")


def _unit_groups(count: int, units: Optional[Sequence[Optional[str]]]) -> Dict[object, List[int]]:
    """Return the positions ``range(count)`` grouped as they share directives: by unit, else each alone."""
    groups: Dict[object, List[int]] = {}
    for i in range(count):
        groups.setdefault(units[i] if units and units[i] is not None else i, []).append(i)
    return groups


def _keep_small(decisions: "_DecisionTable", units: Sequence[Optional[str]], stubs: Container[int],
                stub_size: Callable[[int], int]) -> None:
    """Retain (reason SMALL) each paged block or unit that costs no more whole than its stubs.

    For a pass without a budget, which would otherwise grow a context it pages ("It is 12 C."
    is 4 tokens, its stub 30 and more). ``stub_size`` gives a position's stub cost; a unit's
    stub is its paged members' stubs (the rest of it goes). A unit with a member kept or
    arriving as a stub, and pages of a compaction boundary (not in the context), stay as they are.
    """
    actions, reasons, tokens = decisions.action, decisions.reason, decisions.tokens
    for members in _unit_groups(len(actions), units).values():
        if any(actions[i] == "retain" or i in stubs or reasons[i] == "compacted" for i in members):
            continue
        paged = [i for i in members if actions[i] == "page"]
        if paged and sum(tokens[i] for i in members) <= sum(map(stub_size, paged)):
            for i in members:
                actions[i], reasons[i] = "retain", SMALL


def _page_before_compaction(decisions: "_DecisionTable", units: Sequence[Optional[str]],
                            unpageable: Container[int]) -> None:
    """Page (reason BEFORE_COMPACTION) every block a harness's compaction takes out of the context.

    That is every block but the instructions (system or developer: the harness sends them again)
    and what no page can hold (a picture, a file, an unstorable text, and the units holding one):
    a retained or evicted block would be gone from the model's context and from the store alike.
    """
    actions, reasons, roles, kinds = decisions.action, decisions.reason, decisions.role, decisions.kind
    whole = {units[i] for i in range(len(actions)) if i in unpageable and units and units[i] is not None}
    for i, action in enumerate(actions):
        if kinds[i] == ASIDE_KIND:  # an attachment line: never in the context, stored for the compaction
            reasons[i] = BEFORE_COMPACTION
        if action == "page" or i in unpageable or roles[i] in SYSTEM_ROLES or (units and units[i] in whole):
            continue
        actions[i], reasons[i] = "page", BEFORE_COMPACTION


def _steps_back(roles: Sequence[str], skip: Container[int] = ()) -> Iterator[List[int]]:
    """Yield the agent's steps, latest first, each as its positions latest first.

    A step is a run of assistant blocks (text, thinking, tool calls) with the tool results
    after it, as _WorkNotes reads them while a history streams; user blocks and the positions
    in ``skip`` (stubs: they stand for old blocks) belong to no step.

    Example:
        >>> list(_steps_back(["user", "assistant", "tool", "assistant", "assistant", "tool", "user"]))
        [[5, 4, 3], [2, 1]]
    """
    step: List[int] = []
    for i in range(len(roles) - 1, -1, -1):
        if i not in skip and roles[i] in ("assistant", "tool"):
            step.append(i)
            if roles[i] == "assistant" and (i == 0 or roles[i - 1] != "assistant"):
                yield step
                step = []
    if step:
        yield step


def _recent_steps(roles: Sequence[str], steps: int, skip: Container[int] = ()) -> List[int]:
    """Return the positions of the last ``steps`` agent steps (_steps_back), latest first.

    Example:
        >>> _recent_steps(["user", "assistant", "tool", "assistant", "assistant", "tool", "user"], 1)
        [5, 4, 3]
    """
    return list(chain.from_iterable(islice(_steps_back(roles, skip), max(steps, 0))))


def _open_units(roles: Sequence[str], units: Sequence[Optional[str]]) -> "frozenset[str]":
    """Return the units of the tool results that end the conversation: its open round trip.

    The model's next step answers those results; fit_budget keeps their calls verbatim.
    """
    found = set()
    i = len(units) - 1
    while i >= 0 and roles[i] == "tool":
        if units[i] is not None:
            found.add(units[i])
        i -= 1
    return frozenset(found)


def _stubs_within(stub_tokens: Sequence[int], members: List[int], room: int) -> Optional[int]:
    """Return what the stubs of ``members`` cost if that fits in ``room``, else None.

    A cost table with lower bounds (a ``floor`` method, as _StubCosts has: never negative) is
    asked those first, member by member, so stubs that cannot fit are never priced.
    """
    floor = getattr(stub_tokens, "floor", None)
    if floor is not None:
        if getattr(stub_tokens, "least", 0) * len(members) > room:
            return None  # not even the shortest stub there could be fits: nothing to price
        bound = 0
        for i in members:
            bound += floor(i)
            if bound > room:
                return None
    stubs = sum(stub_tokens[i] for i in members)
    return stubs if stubs <= room else None


def fit_budget(decisions: List[Decision], stub_tokens: List[int], budget: int,
               units: Optional[List[Optional[str]]] = None, results_apart: bool = False,
               floors: Container[int] = (), unpageable: Container[int] = (),
               open_units: Container[str] = (), worth: Optional[Mapping[int, float]] = None,
               index_room: int = 0, recent_share: float = 0.0) -> int:
    """Fit ``decisions`` (changed in place) into ``budget`` tokens; return the tokens kept.

    What stays costs its tokens verbatim, or its stub's tokens when paged. Pinned and
    recent blocks and a provider's compaction (HELD_OVER_BUDGET) always stay verbatim,
    and so does any unit holding one. The system prompt comes next, block by block in
    order: each stays verbatim while it fits, one that does not is paged while its stub
    fits, and one whose stub does not fit either is evicted (the budget holds). A unit (a
    tool call and its results) competes as one piece: its tokens summed, its R the best of
    its members. With ``results_apart`` it competes
    as two: its call (with what else is not a tool result, plus the stubs of its
    results) and its results, which can be kept verbatim only with the call; a call
    kept without its results has them paged in place (observation masking), so
    large results are what goes first. The pieces compete by value per token,
    ``R / tokens ** SIZE_POWER``, highest first (ties: later turn, then later position):
      1. each is kept verbatim while its tokens still fit (one that does not fit is
         skipped, so a smaller one after it may fit);
      2. the rest that classification did not evict become stubs while their stub
         still fits (a block under the evict cut is never worth a stub);
      3. the rest are paged without a stub of their own (reason RANGED): the caller collapses
         them into range pages (_plan_ranges), whose lines share ``index_room``, which is set
         aside first whenever the history does not fit whole.
    So the budget, not the retain cut, decides what is kept verbatim, and the budget never
    evicts: what does not fit is paged (only the score evicts, and a picture or file that
    fits nowhere is evicted for its kind). Every change says so in its reason:
    "budget-kept", "budget-paged", RANGED. When protected blocks alone exceed the budget the
    pass still completes (all else paged into ranges) and the caller reports the overflow.
    The tokens returned leave out the index room: the caller adds what the lines cost.

    A block in ``floors`` (a human's message) is never evicted while its stub fits: its stub is
    spoken for first (newest first), and it is kept verbatim when that fits; a block kept for
    the reason "task" (the task statement) likewise, before any other but the human's last
    message (the request the model answers next, whose stub is spoken for first of all), and it
    is the first to be kept verbatim.  When the stubs of the floors alone would pass the budget,
    the oldest whose stubs do not fit compete like any other block: the budget holds.  A unit
    holding a block in ``unpageable`` (a picture or file) is kept verbatim or evicted, never
    paged; a floor that is one (a human's attachment) claims its whole size, after the floors
    that have stubs.  A block paged for a compaction boundary
    (reason "compacted") is not in the context and costs nothing.

    A unit in ``open_units`` is the open round trip: the conversation ends on its results, and
    the model answers them next. Its call (with its thinking or reasoning) is claimed right after
    the task statement and stays verbatim while it fits; its results compete apart, as with
    ``results_apart``, so at worst they are paged in place and the request still ends on them.
    Paged whole, the unit's stub would end the request on an assistant turn: a prefill, which
    Anthropic refuses when extended thinking is on.  An open round trip holding a picture or file
    cannot be paged in place: it is claimed whole at that point while it fits, else evicted whole.
    With ``results_apart`` too, a unit holding one competes whole.

    ``worth`` (position -> factor, default 1: see _Scorer._rare_names) scales a group's value
    per token by its members' highest factor.

    ``recent_share`` > 0 in a history with tool work (``units``): recency fills first. After the
    task statement and the open round trip, the pieces are taken newest first, each kept verbatim
    while it fits in that share of the room left, until the first that does not (the sliding
    window's rule, so what stays verbatim starts from what recency keeps); a giant (over
    GIANT_SHARE of the budget: paged as its head and tail), a block a later one repeats (a stale
    read) and one the score evicted (noise) are passed over, not kept, and do not stop the walk.
    Only the room left after that goes by value per token, to older blocks.
    """
    groups = _unit_groups(len(decisions), units)
    table = isinstance(decisions, _DecisionTable)  # then _column gives its own columns, written in place below
    tokens, reasons = _column(decisions, "tokens"), _column(decisions, "reason")
    rs, turns, actions = _column(decisions, "R"), _column(decisions, "turn"), _column(decisions, "action")
    roles = _column(decisions, "role") if results_apart or open_units else None

    def decide(i: int, action: str, reason: str) -> None:
        if table:  # write the table's own columns: building each Decision costs more
            actions[i], reasons[i] = action, reason
        else:
            decisions[i] = decisions[i]._replace(action=action, reason=reason)

    left = budget
    live = []  # the groups in the context and not protected
    system = []  # the system prompt's groups, in order: kept while they fit
    whole_size = 0
    size_of = tokens.__getitem__
    for members in groups.values():
        said = set(map(reasons.__getitem__, members))  # its members' reasons
        if said == {"compacted"}:
            continue  # paged at a compaction boundary: not in the context, costs nothing
        size = sum(map(size_of, members))
        whole_size += size
        if not said.isdisjoint(HELD_OVER_BUDGET):
            left -= size
        elif "system" in said:
            system.append(members)
        else:
            live.append(members)
    for members in system:  # after what the budget cannot move: whole while it fits, else its stub, else a range
        whole = sum(tokens[i] for i in members)
        if whole > left:
            stubs = _stubs_within(stub_tokens, members, left)
            whole = stubs if stubs is not None else 0
            for i in members:
                decide(i, "page", "budget-paged" if stubs is not None else RANGED)
        left -= whole
    reserved = min(index_room, max(left, 0)) if whole_size > budget else 0
    left -= reserved  # the range pages' lines: set aside after the fixed costs, before the rest is chosen
    # Floors speak for their stubs first: the human's last message (the request the model answers
    # next), the task statement, then a human's other messages newest first, while their stubs fit,
    # then what a human attached (whole: a picture has no stub).  The budget is a promise too: a
    # floor whose stub no longer fits (hundreds of requests under a small budget) competes like
    # any other block.
    floored: Dict[int, int] = {}  # a floored group's first member -> its stub's cost, spoken for up front
    human = [members for members in live if any(reasons[i] == "task" or i in floors for i in members)]
    last = max((members[-1] for members in human if not any(i in unpageable for i in members)), default=None)
    claims = sorted(((0 if members[-1] == last else 1 if any(reasons[i] == "task" for i in members) else
                      3 if any(i in unpageable for i in members) else 2, -members[-1], members)
                     for members in human), key=lambda claim: claim[:2])
    for *_, members in claims:
        whole = sum(tokens[i] for i in members)
        stubs = whole if any(i in unpageable for i in members) else min(sum(stub_tokens[i] for i in members), whole)
        if stubs <= left:
            left -= stubs
            floored[members[0]] = stubs
    # A piece: (0 for the task statement, else 1; value per token; -turn; -position; members; what keeping
    # it verbatim costs now; the call piece it needs or None; its group).
    pieces: List[tuple] = []
    for members in live:
        cost = sum(map(size_of, members))
        task = members[0] in floored and any(reasons[i] == "task" for i in members)
        best = members[0] if len(members) == 1 else max(members, key=lambda i: (rs[i], turns[i], i))
        value = rs[best] * max(map(worth.get, members, repeat(1.0))) if worth else rs[best]
        opened = units is not None and units[members[0]] in open_units
        first = 0 if task else 2  # the task statement comes first of all, then an open round trip's call
        whole = any(map(unpageable.__contains__, members))  # a picture's unit: kept whole or evicted, never split
        apart = (results_apart or opened) and len(members) > 1 and members[0] not in floored and not whole
        results = [i for i in members if roles[i] == "tool"] if apart else []  # type: ignore[index]
        call = [i for i in members if roles[i] != "tool"] if results else []  # type: ignore[index]
        if results and call and not opened and sum(tokens[i] for i in results) < MASK_RESULT_SHARE * budget:
            results = []  # a small result stays with its call: its stub would cost about as much
        if results and call:
            call_cost = sum(tokens[i] for i in call) + sum(stub_tokens[i] for i in results)
            head = (call, call_cost)
            pieces.append((1 if opened else first, -value / max(call_cost, 1) ** SIZE_POWER, -turns[best], -best,
                           call, call_cost, None, members))
            extra = sum(tokens[i] - stub_tokens[i] for i in results)  # what the results cost beyond their stubs
            size = sum(tokens[i] for i in results)
            pieces.append((first, -value / max(size, 1) ** SIZE_POWER, -turns[best], -best, results, extra, head,
                           members))
        else:  # an open round trip holding a picture is claimed whole, where its call would have been
            pieces.append((1 if opened and first else first, -value / max(cost, 1) ** SIZE_POWER, -turns[best],
                           -best, members, cost - floored.get(members[0], 0), None, members))
    pieces.sort(key=lambda c: c[:4])
    verbatim: Set[int] = set()
    walked: Set[int] = set()  # the pieces (by position in ``pieces``) recency took

    def keep(members: List[int], cost: int, needs: Optional[tuple]) -> bool:
        nonlocal left
        if members[0] in verbatim:
            return True  # a call its results' piece already kept
        if needs is not None and needs[0][0] not in verbatim:
            cost += needs[1]
        if cost > left:
            return False
        left -= cost
        verbatim.update(members)
        if needs is not None:
            verbatim.update(needs[0])
        return True

    walk = recent_share > 0 and units is not None and any(u is not None for u in units)
    for n, piece in enumerate(pieces):
        if walk and piece[0] >= 2:  # the task statement and the open call are placed: recency fills next
            walk = False
            giant = GIANT_SHARE * budget
            share = int(recent_share * left)
            spare = left - share  # what recency may not take
            left = share
            newest = sorted((k for k in range(n, len(pieces)) if not any(
                tokens[i] > giant or actions[i] == "evict" or reasons[i].startswith(REPEATED_BY)
                for i in pieces[k][4])), key=lambda k: -pieces[k][4][-1])
            for k in newest:
                if not keep(*pieces[k][4:7]):
                    break
                walked.add(k)
            left += spare
        if n not in walked:
            keep(*piece[4:7])
    done = set()
    for piece in pieces:  # best first: the best of the rest get the room left for stubs
        members = piece[7]  # the piece's group
        if members[0] in done:
            continue
        done.add(members[0])
        rest = [i for i in members if i not in verbatim]
        if len(rest) < len(members):
            chosen = {i: "page" for i in rest}  # results of a kept call: their stubs are paid for
        elif members[0] in floored:  # its stub is paid for; one no shorter than the block keeps it whole
            action = "page" if floored[members[0]] < sum(tokens[i] for i in members) else "retain"
            chosen = {i: action for i in members}
        elif actions[members[0]] == "evict":
            continue  # the score evicted it (noise): not worth a page
        elif any(i in unpageable for i in members):  # no page can hold a picture: it goes, for its kind
            for i in members:
                if actions[i] != "evict":
                    decide(i, "evict", next((unpageable[j] for j in members if j in unpageable), OPAQUE)
                           if isinstance(unpageable, Mapping) else OPAQUE)
            continue
        else:
            stubs = _stubs_within(stub_tokens, members, left)
            if stubs is not None:
                left -= stubs
                chosen = {i: "page" for i in members}
            else:
                for i in members:
                    decide(i, "page", RANGED)
                continue
        for i in members:
            action = chosen.get(i, "retain")
            if action != actions[i]:
                decide(i, action, "budget-" + {"retain": "kept", "page": "paged"}[action])
    return budget - left - reserved


def _pass_growth(roles: Sequence[str], tokens: Sequence[int], new: Sequence[bool], skip: Container[int] = (),
                 steps: int = DEFAULT_WORK_STEPS) -> Tuple[int, int]:
    """Return (the tokens of the ``new`` blocks, the growth a pass typically brings): the median size
    of the last ``steps`` agent steps (_steps_back, ``skip`` as there), times the steps this pass
    brought (at least one: an agent may run the pager every few steps; then the median is of that
    many steps at least).

    Example:
        >>> roles = ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]
        >>> _pass_growth(roles, [50, 10, 900, 10, 40, 10, 990], [False] * 5 + [True] * 2)
        (1000, 910)
    """
    grown = sum(t for t, fresh in zip(tokens, new) if fresh)
    sizes: List[int] = []
    brought = 0
    for step in _steps_back(roles, skip):
        sizes.append(sum(tokens[i] for i in step))
        brought += new[step[-1]]  # (its first block)
        if len(sizes) >= max(steps, brought) and not new[step[-1]]:
            break
    sizes = sorted(sizes[:max(steps, brought)])
    return grown, (sizes[len(sizes) // 2] if sizes else 0) * max(1, brought)


def _previous_actions(decisions: List[Decision], stub_tokens: List[int],
                      previous: Mapping[str, str], ranged: Container[str] = ()) -> Tuple[List[str], int]:
    """Return every block's directive of the previous pass (a new block: retain) and the tokens they keep.

    Between two compactions nothing the agent has already sent changes, so the
    emitted history grows only at its end and a cached prompt prefix stays valid.
    Pinned and recent blocks and a provider's compaction stay retained; a system block keeps
    its last directive (fit_budget pages one that does not fit).  A block of a range page
    (``ranged``) costs nothing here: its range's line is counted apart.  A block before a
    compaction boundary (reason "compacted") is in no request: it keeps this pass's directive,
    whatever an earlier pass gave it, and costs nothing.
    """
    blocks, tokens, reasons = _column(decisions, "block"), _column(decisions, "tokens"), _column(decisions, "reason")
    actions = _column(decisions, "action")
    chosen, kept = [], 0
    for i, block in enumerate(blocks):
        if reasons[i] == "compacted":
            chosen.append(actions[i])
            continue
        action = "retain" if reasons[i] in HELD_OVER_BUDGET else previous.get(block, "retain")
        chosen.append(action)
        kept += tokens[i] if action == "retain" else stub_tokens[i] if action == "page" and block not in ranged else 0
    return chosen, kept


def _range_topics(rows: Sequence[Tuple[str, bool, Iterable[str]]], shown: Container[str],
                  held: Mapping[str, int], limit: int = RANGE_TOPICS, distinct: bool = False) -> List[str]:
    """Return a range page's topics: the names of its blocks the kept context does not show, the
    likeliest needed first (_ranked_names: rare in the history, ``held``; what the agent wrote and
    the paths its tool calls named before its calls' other names, before what it only read);
    ``limit`` at most. ``rows``: (role, is a tool call, names) of its blocks, newest first (``distinct``:
    their distinctive names only, as _ranked_names says).

    Example:
        >>> _range_topics([("tool", False, ("rounding_mode",)), ("assistant", True, ("src/totals.py", "totals"))],
        ...               shown={"decimal"}, held={"rounding_mode": 1, "totals": 2})
        ['src/totals.py', 'rounding_mode']
    """
    return [name for name, _, _ in _ranked_names(rows, shown, held, limit, distinct)]


def _topic_room(blocks: int, longest: int, names: int) -> int:
    """Return how many topics a range page of ``blocks`` blocks lists when the longest new line's
    range (of ``longest`` blocks) lists ``names``: the same number per block, RANGE_TOPICS at least.

    Example:
        >>> _topic_room(40, 40, 75), _topic_room(20, 40, 75), _topic_room(1, 40, 75)
        (75, 37, 8)
    """
    return max(RANGE_TOPICS, names * blocks // longest)


def _plan_ranges(decisions: Sequence[Decision], room: int, line_cost: Callable[["StoredPage"], int],
                 names_of: Callable[[int], Sequence[str]], shown: Container[str] = (),
                 held: Optional[Mapping[str, int]] = None,
                 known: Optional[Mapping[str, str]] = None,
                 units: Optional[Sequence[Optional[str]]] = None,
                 built: Optional[Dict[Tuple[Tuple[int, ...], Optional[int]], RangePage]] = None,
                 distinct_of: Optional[Callable[[int], Tuple[str, ...]]] = None) -> List[RangePage]:
    """Return the range pages of the blocks ``decisions`` paged without a stub (reason RANGED).

    Pure. A range page is a run of such blocks: evicted blocks and pages of a compaction
    boundary (in no request) are passed over, any other block ends the run. A long run is cut
    into ranges that grow with age (from the newest: 1, 1, 2, 2, 4, 4, ... pieces, a piece being
    a block or a whole tool unit: ``units``), so recent work gets the finest lines and the index
    fills its room. Each range costs its line (``line_cost`` of its RangePage.page()). The lines are
    planned with RANGE_TOPICS topics each in LINES_SHARE of ``room``: while they cost more, the two
    oldest ranges merge into one (the index stays bounded; the newest runs keep the finest lines),
    and a last range that alone does not fit lists fewer topics (its last ones: _range_topics ranks
    them). The room the lines leave lists more topics: every new line the same number per block
    it holds, the most that fit ``room``. ``names_of`` gives a block's names, each once, compounds included.
    ``known`` maps range ids to the summary an earlier pass gave them: a range with the same
    blocks keeps its line, so the request's prefix stays the same between passes.  A run that is
    one range page read back from an earlier request (kind RANGE) stays that range page.
    ``built`` (members' positions and topics -> RangePage), when given, keeps the ranges built for
    a caller that plans again with the same ``shown``, ``held`` and ``known`` (a pass plans its
    ranges on each fit). ``distinct_of`` gives a block's distinctive names (_distinctive_names of
    ``names_of``) where the caller keeps them: a plan ranks the oldest blocks again for each merge.
    """
    blocks, turns, actions, reasons = (_column(decisions, n) for n in ("block", "turn", "action", "reason"))
    if distinct_of is None:
        distinct_of = lambda i: _distinctive_names(names_of(i))  # noqa: E731
    tokens, kinds, roles = _column(decisions, "tokens"), _column(decisions, "kind"), _column(decisions, "role")
    runs: List[List[int]] = []
    run: List[int] = []
    for i, reason in enumerate(reasons):
        if reason == RANGED and actions[i] == "page":
            run.append(i)
        elif actions[i] == "evict" or reason == "compacted":
            continue  # in no request: the run goes on across it
        elif run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    if not runs:
        return []
    cut: List[List[int]] = []
    for members in reversed(runs):  # newest first: sizes 1, 1, 2, 2, 4, 4, ... pieces
        pieces: List[List[int]] = []
        for i in members:
            unit = units[i] if units and kinds[i] != RANGE else None  # a range page read back is a piece alone
            if pieces and unit is not None and units[pieces[-1][-1]] == unit \
                    and kinds[pieces[-1][-1]] != RANGE:  # type: ignore[index]
                pieces[-1].append(i)
            else:
                pieces.append([i])
        while pieces:
            size = 1 << (len(cut) // 2)
            taken = pieces[-size:]
            alone = [k for k, piece in enumerate(taken) if kinds[piece[0]] == RANGE]
            if alone:  # a range page read back stays one range: it ends the range it would have joined
                taken = taken[alone[-1] + 1:] or taken[-1:]
            pieces = pieces[:-len(taken)]
            cut.append([i for piece in taken for i in piece])
    runs = cut[::-1]
    known = known or {}
    counts: Mapping[str, int] = held if held is not None else Counter(
        chain.from_iterable(names_of(i) for members in runs for i in members))  # (each block's names are distinct)

    def build(members: List[int], topics: Optional[int] = None) -> RangePage:
        if built is not None:
            key = (tuple(members), topics)
            page = built.get(key)
            if page is None:
                page = built[key] = make(members, topics)
            return page
        return make(members, topics)

    def make(members: List[int], topics: Optional[int] = None) -> RangePage:
        ids = tuple(blocks[i] for i in members)
        one = len(members) == 1 and kinds[members[0]] == RANGE
        rid = ids[0] if one else range_id(ids)
        summary = known.get(rid)
        if summary is None or topics is not None:
            said = [(roles[i], roles[i] == "assistant" and bool(units) and units[i] is not None,  # type: ignore[index]
                     distinct_of(i))  # type: ignore[misc]
                    for i in reversed(members)]  # newest first
            limit = RANGE_TOPICS if topics is None else topics
            names = _range_topics(said, shown, counts, limit, distinct=True) if limit else []
            summary = range_summary(min(turns[i] for i in members), max(turns[i] for i in members), len(members),
                                    sum(tokens[i] for i in members), names)
        page = RangePage(rid, ids, tuple(members), turns[members[0]], max(turns[i] for i in members),
                         sum(tokens[i] for i in members), summary, 0)
        return page._replace(cost=line_cost(page.page()))

    # The lines are built from the newest back while they fit: once the newest k cost more than the
    # room, every older range is merged whatever it would cost alone, so it is never built alone.
    def first_topics(page: RangePage, count: int) -> RangePage:
        """Return ``page`` with its line listing only its first ``count`` topics, its cost counted again
        (``page`` itself when it lists no more)."""
        head, sep, topics = page.summary.partition(TOPICS_MARK)
        names = topics.split(", ")
        if not sep or len(names) <= count:
            return page
        cut = page._replace(summary=head + sep + ", ".join(names[:count]))
        return cut._replace(cost=line_cost(cut.page()))

    def planned(page: RangePage) -> int:
        # A line is planned at what it costs with RANGE_TOPICS topics, over LINES_SHARE: a line an
        # earlier pass gave more (below) is planned as it was then, so the same ranges come again.
        return int(first_topics(page, RANGE_TOPICS).cost / LINES_SHARE)

    count = len(runs)
    built_alone: List[Optional[RangePage]] = [None] * count
    after = [0] * (count + 1)  # after[k]: what the lines of ranges k.. are planned at (from k on, where built)
    k = count
    while k > 0:
        k -= 1
        page = built_alone[k] = build(runs[k])
        after[k] = after[k + 1] + planned(page)
        if after[k] > room:
            break
    total = after[k]
    if total > room and count > 1:
        # Merging the two oldest ranges until the lines fit makes one range of the oldest j + 1: find
        # the least such j by halving (a build reads every block it holds, so merging one range at a
        # time read the oldest blocks again for each merge: quadratic in a long session). No j below
        # k fits (the lines after it alone pass the room).
        low, high, found = max(1, k), count - 1, None
        while low <= high:
            middle = (low + high) // 2
            merged = build([i for members in runs[:middle + 1] for i in members])
            if planned(merged) + after[middle + 1] <= room:
                found, high = (middle, merged), middle - 1
            else:
                low = middle + 1
        last = count - 1
        j, merged = found if found is not None else (last, build([i for members in runs for i in members]))
        built_alone[:j + 1] = [merged]
    ranges: List[RangePage] = built_alone  # type: ignore[assignment]  # each built, or merged into the first
    total = sum(r.cost for r in ranges)
    if total > room and len(ranges) > 1:
        # Lines an earlier pass gave more names than their plan counts (a compaction that fills
        # the budget leaves no slack for them): each lists its first RANGE_TOPICS, as planned.
        ranges = [first_topics(r, RANGE_TOPICS) if r.id in known else r for r in ranges]
        total = sum(r.cost for r in ranges)
    if total > room:  # one range left, its line too long: fewer topics (none at worst)
        last = ranges[0]
        for topics in range(RANGE_TOPICS - 1, -1, -1):
            last = build(list(last.positions), topics)
            if last.cost <= room:
                break
        ranges[0] = last
        return ranges
    # The room the lines leave names more of what the ranges hold: each new line lists the same
    # number of names per block it holds (RANGE_TOPICS at least, TOPICS_PER_BLOCK at most), the
    # most that fits, found by halving on the longest new line's count, one name at a time (a
    # coarser step left most of the room unused where one range holds hundreds of blocks); a line
    # an earlier pass gave keeps its text. Each range is ranked once, for the most names its line
    # could list in the room; a line with fewer lists the first.
    fresh = [k for k, r in enumerate(ranges) if r.id not in known]
    if not fresh:
        return ranges
    spare = room - total  # each name a line adds costs a token or more: no line lists more than that many more
    cap = [min(max(RANGE_TOPICS, TOPICS_PER_BLOCK * len(ranges[k].positions)), RANGE_TOPICS + max(spare, 0))
           for k in fresh]
    # a line that lists fewer than RANGE_TOPICS already lists every name it has: it is ranked no further
    most = [build(list(ranges[k].positions), most) if most > RANGE_TOPICS and
            ranges[k].summary.count(", ") == RANGE_TOPICS - 1 else ranges[k] for k, most in zip(fresh, cap)]
    longest = max(len(page.positions) for page in most)

    others = total - sum(ranges[k].cost for k in fresh)  # what the lines an earlier pass gave cost
    low, high, chosen = RANGE_TOPICS + 1, max(cap), []
    while low <= high:
        names = (low + high) // 2
        trial = [first_topics(page, _topic_room(len(page.positions), longest, names)) for page in most]
        if others + sum(r.cost for r in trial) <= room:
            low, chosen = names + 1, trial
        else:
            high = names - 1
    for k, r in zip(fresh, chosen):
        ranges[k] = r
    return ranges


def _evicting_age(params: Params) -> Optional[int]:
    """Return the least delta_t at which ``beta * recency`` alone is under the evict cut (None: never).

    Recency only falls with age, so every older block with sim 0 is evicted too.
    """
    if params.evict_cut <= 0.0:
        return None
    if params.beta * recency(0) < params.evict_cut:
        return 0
    # beta / (1 + ln(1 + dt)) < cut  <=>  dt > exp(beta / cut - 1) - 1; then step to the exact integer.
    guess = math.exp(min(params.beta / params.evict_cut - 1.0, 700.0)) - 1.0
    if guess > _MAX_COUNT:
        return None
    age = max(0, int(guess) - 2)
    while params.beta * recency(age) >= params.evict_cut:
        age += 1
    return age


# The fields of a pager-history block: name -> (is the value right?, what it must be).
_BLOCK_FIELDS: Dict[str, Tuple[Callable[[object], bool], str]] = {
    "id": (lambda v: type(v) is str, "a string"),
    "turn": (lambda v: type(v) is int, "an integer"),
    "role": (lambda v: type(v) is str, "a non-empty string"),
    "text": (lambda v: type(v) is str, "a string"),
    "kind": (lambda v: v is None or type(v) is str, "a string"),
    "pinned": (lambda v: type(v) is bool, "true or false"),
    "tokens": (lambda v: v is None or type(v) is int, "a non-negative integer"),
    "stub": (lambda v: type(v) is bool, "true or false"),
    "unit": (lambda v: v is None or type(v) is str, "a string"),
    "protected": (lambda v: v is None or type(v) is str, "a string"),
}
_REQUIRED_FIELDS = ("id", "turn", "role", "text")


def _block_problem(index: int, raw: object) -> Optional[str]:
    """Return what is wrong with ``raw`` as ``blocks[index]`` of a pager history, or None if nothing.

    The one place the pager-history block rules live: the _Scorer, the pager-format
    reader and the pager-format validator all ask it. The first problem found is
    named, required fields first.

    Example:
        >>> _block_problem(3, {"id": "b", "turn": "7a", "role": "user", "text": ""})
        'blocks[3].turn must be an integer (got "7a")'
    """
    where = f"blocks[{index}]"
    if type(raw) is not dict:
        return f"{where} must be an object (got {_show(raw)})"
    for name, (ok, expected) in _BLOCK_FIELDS.items():
        if name not in raw:
            if name in _REQUIRED_FIELDS:
                return f"{where}.{name} is missing"
        elif not ok(raw[name]):
            return f"{where}.{name} must be {expected} (got {_show(raw[name])})"
    turn, tokens = raw["turn"], raw.get("tokens")
    if turn < 0:
        return f"{where}.turn must not be negative (got {turn})"
    if turn > _MAX_COUNT:
        return f"{where}.turn is too large (got {turn})"
    if not raw["role"]:
        return f'{where}.role must be a non-empty string (got "")'
    if tokens is not None and tokens < 0:
        return f"{where}.tokens must be a non-negative integer (got {tokens})"
    if tokens is not None and tokens > _MAX_COUNT:
        return f"{where}.tokens is too large (got {tokens})"
    try:
        _check_quotable(raw["id"], f"{where}.id")
    except PagerError as exc:
        return str(exc)
    if raw["id"] == LIST_EMPTY_WORD:
        return f'{where}.id "{LIST_EMPTY_WORD}" is the word Liminate reads as no entry: a contract can\'t list it'
    return None


def _duplicate_problem(index: int, block_id: str, seen: Dict[str, int]) -> Optional[str]:
    """Return the problem if ``block_id`` is in ``seen`` (id -> first index); else note it there and return None."""
    first = seen.setdefault(block_id, index)
    return None if first == index else f"blocks[{index}].id {_show(block_id)} duplicates blocks[{first}].id"


_UNPRICED = -1  # a stub cost not worked out yet (see _Scorer._stub_cost_at)


class _StubCosts:
    """Every block's stub cost, by position, each worked out when first read (see _Scorer._stub_cost_at)."""

    __slots__ = ("price", "bound", "count", "least")

    def __init__(self, price: Callable[[int], int], bound: Callable[[int], int], count: int, least: int = 0) -> None:
        self.price, self.bound, self.count = price, bound, count
        self.least = least  # what every stub costs at the least: its fixed words

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, position: int) -> int:
        if not -self.count <= position < self.count:
            raise IndexError(position)
        return self.price(position % self.count)

    def floor(self, position: int) -> int:
        """Return a lower bound of the cost at ``position``, never negative, cheaper than the cost itself."""
        return self.bound(position)


def _counts_moved(last: Tuple[tuple, Counter], positions: tuple, names_of: Callable[[int], Sequence[str]]) -> Counter:
    """Return how many of the blocks at ``positions`` hold each name (a block's names are distinct): the
    counts ``last`` gave for other positions, moved by the blocks that came and went when they are few,
    else counted anew. Either way a name no block holds has no entry.

    Example:
        >>> names = {i: (f"x{i}", "shared") for i in range(9)}.__getitem__
        >>> counts = Counter(chain.from_iterable(map(names, range(8))))  # blocks 0-7
        >>> moved = _counts_moved((tuple(range(8)), counts), tuple(range(1, 9)), names)  # 0 went, 8 came
        >>> moved["shared"], "x0" in moved, moved["x8"]
        (8, False, 1)
    """
    before, counts = last
    came, went = set(positions).difference(before), set(before).difference(positions)
    if len(came) + len(went) > len(positions) // 4:
        return Counter(chain.from_iterable(map(names_of, positions)))
    moved = Counter(counts)
    moved.update(chain.from_iterable(map(names_of, came)))
    gone = list(chain.from_iterable(map(names_of, went)))
    moved.subtract(gone)
    for name in gone:
        if moved.get(name, 1) <= 0:
            del moved[name]
    return moved


class _RangeMemory:
    """The range pages a running Pager built, kept from one call to the next (its ``compact`` calls
    plan ranges over mostly the same blocks: the trial plan, each fit, the next call's).

    A build is kept under its members' signatures and its topic count, a signature being every
    field of a block a range page's line is made of (id, kind, role, whether it is a tool call,
    turn, tokens, its names: so a block whose text changed has another); each block signature gets
    a serial number, never given to another (``serials``). A kept build is served only while what
    its topics were ranked against is the same where its blocks' names are concerned: the kept
    context's names (``shown``), the holder counts (``held``) of its names and their compound parts,
    and the summary an earlier pass gave its id (``known``). What a call used is what the next keeps
    (``settle``); a new recall hint (which a line holds) forgets everything.
    """

    def __init__(self) -> None:
        self.serials: Dict[tuple, int] = {}   # a block's signature -> its serial number
        self.builds: Dict[tuple, list] = {}   # (members' serials, topics) -> [page, shown, held, known summary, names]
        self.used_serials: Dict[tuple, int] = {}
        self.used_builds: Dict[tuple, list] = {}
        self.count = 0      # serial numbers given so far
        self.hint: Any = None
        self.shown: set = set()      # the last kept names and holder counts given, so an equal one is the same object
        # the ranged blocks' serials of the last plan, their names, and how many of them hold each name
        self.counted: Tuple[tuple, Dict[int, Sequence[str]], Counter] = ((), {}, Counter())
        self.held: Optional[Mapping[str, int]] = None

    def start(self, hint: Any) -> None:
        """Begin a call whose lines carry the recall hint ``hint``: a different one forgets every build."""
        if hint is not self.hint:
            self.serials, self.builds, self.hint = {}, {}, hint
        self.used_serials, self.used_builds = {}, {}

    def settle(self) -> None:
        """End a call: keep only what it used."""
        self.serials, self.builds = self.used_serials, self.used_builds
        self.used_serials, self.used_builds = {}, {}

    def serial(self, signature: tuple) -> int:
        """Return the serial number of a block signature (a new one for a signature not seen)."""
        number = self.used_serials.get(signature)
        if number is None:
            number = self.serials.get(signature)
            if number is None:
                self.count += 1
                number = self.count
            self.used_serials[signature] = number
        return number

    def held_counts(self, serials: Tuple[int, ...], positions: Sequence[int],
                    names_of: Callable[[int], Sequence[str]]) -> Counter:
        """Return how many of the blocks at ``positions`` (their ``serials``) hold each name: the counts
        kept for the ranged blocks of the last plan, moved by the blocks that came and went
        (_counts_moved; blocks are told apart by serial, so an edited one came and its old self went)."""
        before, names, counts = self.counted
        if serials != before:
            now = dict(zip(serials, map(names_of, positions)))
            either = ChainMap(now, names)
            counts = _counts_moved((before, counts), serials, either.__getitem__)
            self.counted = (serials, now, counts)
        return counts

    def same(self, shown: set, held: Mapping[str, int]) -> Tuple[set, Mapping[str, int]]:
        """Return ``shown`` and ``held``, or the equal ones given before (a kept build made against
        the very same objects needs no check of its names)."""
        if shown is not self.shown and shown == self.shown:
            shown = self.shown
        if held is not self.held and self.held is not None and (
                dict.__eq__(held, self.held) if isinstance(held, dict) and isinstance(self.held, dict)
                else held == self.held):  # (a dict's own equality: a Counter's is a Python loop)
            held = self.held
        self.shown, self.held = shown, held
        return shown, held


class _BlockNames(dict):
    """Position -> the names of that block's text (_names_of with compounds: a path shown whole), read
    when first asked: its own text, else for a block that arrived as a stub its page's; () for none.
    A dict, so a name list already read is one C lookup (range planning asks for thousands)."""

    def __init__(self, texts: Sequence[Optional[str]], pages: Optional[Callable[[str], Optional["StoredPage"]]],
                 stubs: Container[int], blocks: Sequence[str], read: Sequence[Tuple[str, ...]] = ()) -> None:
        super().__init__()
        self.texts, self.pages, self.stubs, self.blocks, self.read = texts, pages, stubs, blocks, read
        self.distinct: Dict[int, Tuple[str, ...]] = {}  # position -> its distinctive names (see distinctive)

    def __missing__(self, i: int) -> Tuple[str, ...]:
        texts = self.texts
        text = texts[i] if i < len(texts) else None
        if text is not None and i < len(self.read):  # its names without compounds, read as it came in
            found = self[i] = _names_with_compounds(text, self.read[i]) if text else ()
            return found
        if text is None and self.pages is not None and i in self.stubs:
            page = self.pages(self.blocks[i])
            text = page.text if page is not None else None
        found = self[i] = _names_of(text, compounds=True) if text else ()
        return found

    def distinctive(self, i: int) -> Tuple[str, ...]:
        """Return the distinctive names of the block at ``i`` (_distinctive_names), read once a pass."""
        found = self.distinct.get(i)
        if found is None:
            found = self.distinct[i] = _distinctive_names(self[i])
        return found


class _RangeBuilds:
    """The ``built`` mapping _plan_ranges fills in one plan ((members' positions, topics) -> RangePage),
    backed by a _RangeMemory: a build of the same blocks kept from an earlier plan is served when
    nothing its line depends on changed (see _RangeMemory)."""

    def __init__(self, memory: _RangeMemory, serials: Callable[[Sequence[int]], Tuple[int, ...]],
                 names_of: Callable[[int], Sequence[str]], shown: set, held: Mapping[str, int],
                 known: Mapping[str, str]) -> None:
        self.memory, self.serials, self.names_of = memory, serials, names_of
        self.shown, self.held, self.known = shown, held, known
        self.local: Dict[tuple, RangePage] = {}
        self.moved: Dict[int, Tuple[set, set]] = {}  # id of another context's kept names -> (them, _moved)

    def _moved(self, shown: set) -> set:
        """Return the names kept in the context ``shown`` or in this plan's, not in both."""
        moved = self.moved.get(id(shown))
        if moved is None or moved[0] is not shown:
            moved = self.moved[id(shown)] = (shown, shown.symmetric_difference(self.shown))
        return moved[1]

    def _names(self, members: Sequence[int]) -> frozenset:
        """Return every name the ranking of ``members`` reads a count or a kept name for: their names and parts."""
        names = set(chain.from_iterable(map(self.names_of, members)))
        traits = _TOPIC_TRAITS.get
        names.update(chain.from_iterable(filter(None, [(traits(name) or _topic_traits(name))[1] for name in names])))
        return frozenset(names)

    def get(self, key: Tuple[Tuple[int, ...], Optional[int]]) -> Optional[RangePage]:
        page = self.local.get(key)
        if page is not None:
            return page
        members, topics = key
        memory = self.memory
        kept = (self.serials(members), topics)
        entry = memory.used_builds.get(kept) or memory.builds.get(kept)
        if entry is None:
            return None
        page, shown, held, summary, names = entry
        said = self.known.get(page.id) if topics is None else None
        if said is not None:  # the line an earlier pass gave these blocks: what a build makes of them now
            if said != page.summary:
                return None
        elif summary is not None and topics is None:  # that build's summary was an earlier pass's, not ranked
            return None
        elif held is not self.held:  # other counts: each of its names and parts read against both
            if names is None:
                names = self._names(members)
            if shown is not self.shown and names.intersection(shown) != names.intersection(self.shown):
                return None
            if list(map(held.get, names)) != list(map(self.held.get, names)):
                return None
        elif shown is not self.shown:  # the same counts: does a name kept in one context and not the other name a block?
            if names is not None:
                if names.intersection(shown) != names.intersection(self.shown):
                    return None
            elif not self._moved(shown).isdisjoint(chain.from_iterable(map(self.names_of, members))):
                return None
        memory.used_builds[kept] = [page, shown if said is not None else self.shown,
                                    held if said is not None else self.held, summary, names]
        if page.positions != members:  # the same blocks elsewhere in the list
            page = page._replace(positions=tuple(members))
        self.local[key] = page
        return page

    def __setitem__(self, key: Tuple[Tuple[int, ...], Optional[int]], page: RangePage) -> None:
        self.local[key] = page
        members, topics = key
        self.memory.used_builds[(self.serials(members), topics)] = [page, self.shown, self.held,
                                                                    self.known.get(page.id), None]


class _Scorer:
    """Scores blocks as they stream in, then classifies them once the whole history is seen.

    Blocks go in through ``add`` (one) or ``add_all`` (a list), which validate each;
    decisions come out of ``finish``. Only small per-block features are
    kept in between, column by column, so a caller streaming a large history never
    holds all of its text: just the text of blocks that may still be paged (see
    ``texts``), which saves the page store a second read of the file.
    """

    def __init__(self, keywords: List[str], params: Params,
                 pages: Optional[Callable[[str], Optional["StoredPage"]]] = None,
                 stub_text: Optional[Callable[..., str]] = None,
                 with_index: bool = False, reserve: Optional[Callable[[Container[str]], int]] = None,
                 current_turn: Optional[int] = None, settle_from: Optional[Mapping[str, str]] = None) -> None:
        self.keywords = list(keywords)
        # The directives an earlier pass with the same intent and settings recorded: when every
        # block is among them, nothing that decided them has changed and they stand ("settled").
        self.settle_from = settle_from  # the contract's directives, when this pass may settle on them
        self.settled = False
        self.params = params
        self.weighted = params.similarity == "weighted"
        self.terms = _keyword_stems(self.keywords) if self.weighted else self.keywords
        self._needles = _needles(self.terms)
        self.pages = pages  # id -> the stored original of a paged block, for blocks arriving as stubs
        # Budget mode prices every block as a stub; stub_text renders one (default hint: C.limn).
        if stub_text is None:
            stub_text = lambda page, newer=None, edge=0: make_stub(  # noqa: E731
                page, _recall_hint(page.block, "C.limn", None), newer, edge)
        self._render_stub: Callable[..., str] = stub_text  # also without a budget: see _keep_small
        self.stub_text = stub_text if params.budget is not None else None
        self.with_index = with_index  # a page also costs its line in the emitted page index
        self.reserve = reserve        # ids seen -> budget tokens spoken for outside them (the index's rest, tool definitions)
        # One entry per decision (block positions minus skipped page-index blocks), by column.
        self._ids: List[str] = []
        self._turns = array.array("q")
        self._roles: List[str] = []
        self._kinds: List[Optional[str]] = []
        self._tokens = array.array("q")
        self._matched: List[Tuple[str, ...]] = []  # the intent terms each holds (shared tuples)
        self._lengths = array.array("q")      # characters of the (original) text, for the weighted proxy
        self._stub_tokens = array.array("q")  # what each costs as a stub (budget mode only)
        self._newer: Dict[int, str] = {}      # the newer copy a repeated block's stub names (see finish)
        self._guards: Dict[int, str] = {}     # why it must stay: "pinned", "system" or "task"
        self._floors: set = set()             # a human's message: paged at worst, never evicted
        self._archived: set = set()           # before a compaction boundary: paged, costs nothing
        self._unpageable: Dict[int, str] = {}  # position -> why a stub would lose it (UNPAGEABLE_KINDS, UNSTORABLE)
        self._units: Dict[int, str] = {}      # blocks sharing a unit (a tool call and its results)
        self._stubs: set = set()              # arrived as a page stub, scored on its stored text
        self._range_summaries: Dict[str, str] = {}  # a range page that arrived as a stub -> its summary
        # the ranges _make_ranges built in this pass, and the kept names they were built against
        # (no names yet: the first plan builds, whatever names the kept context shows, none included)
        self._built: Tuple[Optional[set], Dict[Tuple[Tuple[int, ...], Optional[int]], RangePage]] = (None, {})
        self.range_memory: Optional[_RangeMemory] = None  # a running Pager's builds of earlier plans and calls
        self._serials: List[Optional[int]] = []  # each position's serial number in range_memory, when asked
        self._serials_of: Optional[Callable[[Sequence[int]], Tuple[int, ...]]] = None  # see _range_serials
        self._block_names: Optional[_BlockNames] = None  # each block's names, for range pages (_make_ranges)
        self._ranges_made: Tuple[tuple, List[RangePage]] = ((), [])  # the last _make_ranges: what it read, made
        self._system_texts: Dict[bytes, int] = {}   # under a budget: digest of a system block -> its latest position
        self._system_repeats: Dict[int, str] = {}   # ...and an earlier copy's position -> the later copy's id
        # The text of each block that may end up paged, else None: a block is sure to be
        # evicted when nothing can raise its sim above 0 (no match of its own, no unit, no
        # neighbour credit to borrow) and its recency alone scores under the evict cut.
        self.texts: List[Optional[str]] = []
        self._seen: set = set()  # ids so far: a set, not a dict of positions, to keep 100k-block passes small
        self.skipped: List[int] = []  # positions of page-index blocks, which get no decision
        self._shared: Dict[object, object] = {}  # one copy of each role, kind and match tuple
        self.max_turn: Optional[int] = None
        self.current_turn = current_turn  # when the header gave it before the blocks
        self._last_lender = -NEIGHBOUR_WINDOW - 1  # the last position that may lend neighbour credit
        self._old_age = _evicting_age(params)  # a block this many turns old scores under the evict cut on age alone
        self.tokens_before = 0  # what the history costs as it arrived (stubs at their own size)
        self.tokens_after: Optional[int] = None  # set by finish when a budget is fitted
        self.previous: Optional[Mapping[str, str]] = None  # the contract's directives, for --target
        self.work_terms: frozenset = frozenset()   # terms drawn from the recent work only (see Intent.work)
        self._contents: Dict[bytes, int] = {}  # digest of a long tool result -> its latest position
        self.repeated: Dict[int, str] = {}     # position of a tool result -> id of a later one with its content
        self._long: set = set()                # positions of tool results of REPEAT_MIN_CHARS or more
        self.compacted: Optional[bool] = None  # with --target: whether this pass compacted
        self.compacted_to: Optional[float] = None  # ...and then to what share of the budget (_compaction_share)
        self.grown = 0  # ...and the tokens of the blocks new since the pass before
        self.with_names = False  # whether each block's names are read (see use_work)
        self._names: List[Tuple[str, ...]] = []  # then each block's names (_names_of)
        self.worth: Dict[int, float] = {}  # position -> what its R per token is worth under a budget (_rare_names)
        self._held: Optional[Counter] = None  # name -> blocks holding it, when names were read (_rare_names)
        # Range pages an earlier pass made (id -> (its blocks, its summary)): with the watermarks a
        # range's blocks stay in it between compactions, and a range of the same blocks keeps its line.
        self.previous_ranges: Mapping[str, Tuple[Tuple[str, ...], str]] = {}
        self.ranges: List[RangePage] = []  # set by finish under a budget

    def use_work(self, work: Iterable[str]) -> None:
        """Mark the intent keywords ``work`` as drawn from the agent's recent work (see _similarities);
        under a budget, blocks are then read for their rare names too (see _rare_names)."""
        if self.weighted:
            self.work_terms = frozenset(_keyword_stems(work))
        self.with_names = bool(self.work_terms) and self.params.budget is not None

    def _note_repeat(self, position: int, block_id: str, role: str, text: str) -> None:
        """Remember a long tool result's content, or a tool call's; an earlier one the same is repeated.

        The same call again (the same file read, the same command run) supersedes the
        earlier call and its results, whatever they said: the newer copy is the current one.
        """
        if role == "tool":
            self._long.add(position)
        digest = hashlib.blake2b((role + "\x00" + text).encode("utf-8", "surrogatepass"), digest_size=16).digest()
        earlier = self._contents.get(digest)
        if earlier is not None:
            self.repeated[earlier] = block_id
        self._contents[digest] = position

    def _evicted_by_age(self, turn: int) -> bool:
        """Return True if a block of ``turn`` with sim 0 scores under the evict cut, whatever comes later."""
        # current_turn is at least every turn seen, so recency can only fall from this bound.
        latest = self.current_turn if self.current_turn is not None else self.max_turn
        return self._old_age is not None and latest is not None and latest - turn >= self._old_age

    def _keep_text(self, text: str, turn: int, role: str, matched: tuple, unit: Optional[str]) -> Optional[str]:
        """Return ``text`` if the block may yet be paged, else None (see ``texts``)."""
        position = len(self._ids) - 1  # the block just recorded
        # Neighbour credit (weighted proxy) flows only between dialogue blocks outside any
        # unit, from a matching one to the NEIGHBOUR_WINDOW blocks after it (_similarities).
        talk = self.weighted and role in DIALOGUE_ROLES and unit is None
        near = talk and position - self._last_lender <= NEIGHBOUR_WINDOW
        if matched and talk:
            self._last_lender = position
        if matched or near or unit is not None or not self._evicted_by_age(turn):
            return text
        if self.params.budget is not None:
            return text  # under a budget a history with tool work pages what the score would evict (_decide)
        # a system block is never evicted, and under a budget one that does not fit is paged
        return text if self._guards.get(position) == "system" else None

    def add(self, index: int, raw: object) -> None:
        """Validate ``raw`` (the block at ``blocks[index]``) and record its features."""
        if type(raw) is not dict:
            raise PagerError(_block_problem(index, raw))
        get = raw.get
        block_id, turn, role, text = get("id"), get("turn"), get("role"), get("text")
        if len(raw) == 4:  # the four required fields alone (checked below): nothing optional to read
            kind = tokens = unit = protected = None
            pinned = stub = False
        else:
            if get(INDEX_FLAG) is True:
                self.skipped.append(index)
                return  # the page index a previous --emit --with-index prepended: not conversation
            kind, pinned, tokens = get("kind"), get("pinned", False), get("tokens")
            stub, unit, protected = get("stub", False), get("unit"), get("protected")
        # The usual block passes this one test; _block_problem decides about any other.
        if not (type(block_id) is str and type(turn) is int and type(role) is str and type(text) is str
                and (kind is None or type(kind) is str) and type(pinned) is bool and type(stub) is bool
                and (tokens is None or (type(tokens) is int and 0 <= tokens <= _MAX_COUNT))
                and (unit is None or type(unit) is str) and (protected is None or type(protected) is str)
                and 0 <= turn <= _MAX_COUNT and role and block_id and block_id.isascii()
                and not _FORBIDDEN_RE.search(block_id) and block_id != LIST_EMPTY_WORD):
            problem = _block_problem(index, raw)
            if problem is not None:
                raise PagerError(problem)
        if tokens is None:
            tokens = estimate_tokens(text)
        seen = self._seen
        size = len(seen)
        seen.add(block_id)
        if len(seen) == size:
            self._duplicate(index, block_id)
        position = len(self._ids)
        if protected != ARCHIVED:  # an archived block is not in the live context: no part of its size
            self.tokens_before += tokens
        if stub:
            # Never score a stub as if it were the block: score the original it stands for.
            page = self.pages(block_id) if self.pages is not None else None
            if page is None:
                raise PagerError(f"blocks[{index}] is the stub of {_show(block_id)}, but the page store "
                                 "holds no text for it (evicted since? pass the latest --emit output)")
            text, tokens = page.text, page.tokens
            self._stubs.add(position)
            if page.kind in FLOORED or page.kind == RANGE or (page.kind in PAGE_FLOORS and self.params.budget is None):
                self._floors.add(position)  # paged under a floor, or a range page: still never evicted
            if page.kind == RANGE:  # a range page read back: it stays one, with its line
                self._range_summaries[block_id] = page.summary
                kind = RANGE
        matched: Tuple[str, ...] = ()
        if self.terms:
            lowered = _unescaped_breaks(text.lower())
            if self.weighted:
                found = _hits(lowered, self._needles)
            else:
                found = tuple([k for k in self.terms if k in lowered and _has_token(lowered, k)])
            if found:
                matched = self._shared.setdefault(found, found)  # type: ignore[assignment]
        shared = self._shared
        role = shared.setdefault(role, role)  # type: ignore[assignment]
        if kind is not None:
            kind = shared.setdefault(kind, kind)  # type: ignore[assignment]
        if unit is not None:
            self._units[position] = shared.setdefault(unit, unit)  # type: ignore[assignment]
        self._protect(position, role, kind, pinned, protected)
        if self.max_turn is None or turn > self.max_turn:
            self.max_turn = turn
        self._ids.append(block_id)
        self._turns.append(turn)
        self._roles.append(role)
        self._kinds.append(kind)
        self._tokens.append(tokens)
        self._matched.append(matched)
        self._lengths.append(len(text))
        if self.with_names:
            self._names.append(_names_of(text))
        self.texts.append(None if stub is True else self._keep_text(text, turn, role, matched, unit))
        if self.stub_text is not None:
            # A block whose text is kept is priced as a stub only when a decision asks (_stub_cost_at):
            # under a tight budget the room is spent long before most stubs come up.
            self._stub_tokens.append(_UNPRICED if self.texts[position] is not None else
                                     self._stub_cost(block_id, turn, role, kind, tokens, matched, text))
        self._note_text(position, block_id, role, unit, text, stub)

    def _note_text(self, position: int, block_id: str, role: str, unit: Optional[str], text: str,
                   stub: bool = False) -> None:
        """Note what the text of the block just recorded at ``position`` says beside its score: the
        system prompt sent again, a text no page store can hold, a tool call or long result repeated.
        (``stub``: the text is the page a stub stands for, which repeats nothing.)"""
        if self.params.budget is not None and self._guards.get(position) == "system":
            # the same instructions sent again (a harness repeats them after each compaction): the
            # earlier copy is paged, naming the later one, so the request holds and counts one
            digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
            earlier = self._system_texts.get(digest)
            if earlier is not None:
                self._system_repeats[earlier] = block_id
            self._system_texts[digest] = position
        if not text.isascii() and _LONE_SURROGATE.search(text):
            self._unpageable[position] = UNSTORABLE
        if not stub and ((role == "tool" and len(text) >= REPEAT_MIN_CHARS)
                         or (unit is not None and role == "assistant" and unit.startswith("tool:"))):
            self._note_repeat(position, block_id, role, text)

    def _protect(self, position: int, role: str, kind: Optional[str], pinned: bool, protected: Optional[str]) -> None:
        """Note what guards the block at ``position``: a pin, a system role, the task, a floor, a picture."""
        if pinned:
            self._guards[position] = "pinned"
        elif protected == ARCHIVED:  # before a compaction boundary: in no request, whatever its role
            self._archived.add(position)
        elif role in SYSTEM_ROLES or protected == "system" or (protected == INSTRUCTIONS and self.params.budget is None):
            self._guards[position] = "system"
        elif protected == COMPACTION:
            self._guards[position] = COMPACTION
        elif protected == "task" and self.params.protect_task:
            self._guards[position] = "task"
        elif protected in FLOORED or (protected in PAGE_FLOORS and self.params.budget is None):
            self._floors.add(position)
        elif protected == ARCHIVED:
            self._archived.add(position)
        if kind in UNPAGEABLE_KINDS:
            self._unpageable[position] = kind

    def add_all(self, first: int, blocks: List[object]) -> None:
        """Validate and record ``blocks``, the blocks at ``blocks[first:]``, one at a time."""
        with _collector_held():
            for index, raw in enumerate(blocks, first):
                self.add(index, raw)

    def _stub_cost(self, block_id: str, turn: int, role: str, kind: Optional[str], tokens: int,
                   matched: Tuple[str, ...], text: str, newer: Optional[str] = None) -> int:
        """Return what the block costs as a stub (and its page-index line, with --with-index)."""
        if kind == RANGE and block_id in self._range_summaries:  # its own line says how to recall
            return self._range_line_cost(StoredPage(block_id, turn, RANGE, RANGE, tokens, (), "", "",
                                                    self._range_summaries[block_id], "")) + self._range_hint_cost()
        summary = stub_summary(text, matched, self.params.stub_words)
        page = StoredPage(block_id, turn, role, kind, tokens, matched, "", "", summary, text)
        cost = estimate_tokens(self._render_stub(page, newer, _giant_edge(tokens, self.params.budget)))
        if self.with_index:
            cost += estimate_tokens(index_lines([page])[0]) + 1
        return cost

    def _stub_cost_at(self, position: int) -> int:
        """Return what the block at ``position`` costs as a stub, pricing it now if ``add`` left it unpriced."""
        cost = self._stub_tokens[position]
        if cost == _UNPRICED:
            cost = self._stub_tokens[position] = self._stub_cost(
                self._ids[position], self._turns[position], self._roles[position], self._kinds[position],
                self._tokens[position], self._matched[position], self.texts[position],  # type: ignore[arg-type]
                self._newer.get(position))
        return cost

    def _stub_floor(self, position: int) -> int:
        """Return a lower bound of what the block at ``position`` costs as a stub, without its summary.

        Its cost if priced, else a token per 4 characters (estimate_tokens counts at least that)
        of its stub with an empty summary: stub_text renders make_stub's stub, which its summary,
        a newer copy's id or a giant's head and tail only lengthen.
        """
        cost = self._stub_tokens[position]
        return cost if cost != _UNPRICED else self._bare_stub_cost(position)

    def _bare_stub_cost(self, position: int) -> int:
        """Return a token per 4 characters of the block's stub with an empty summary (see _stub_floor)."""
        page = StoredPage(self._ids[position], self._turns[position], self._roles[position], self._kinds[position],
                          self._tokens[position], (), "", "", "", "")
        return -(-len(self._render_stub(page)) // 4)

    def _least_stub(self) -> int:
        """Return a lower bound of every stub's cost: the stub of a one-letter id and role at turn 0, 0 tokens.

        An id, a role, a turn and a size only lengthen a stub (see _bare_stub_cost).
        """
        return -(-len(self._render_stub(StoredPage("x", 0, "x", None, 0, (), "", "", "", ""))) // 4)

    def _stub_size(self, position: int) -> int:
        """Return what the block at ``position`` would cost as a stub: exact while its text is at hand."""
        text = self.texts[position]
        if text is None:  # only a block sure to be evicted lets its text go: its stub at its shortest
            return self._bare_stub_cost(position)
        return self._stub_cost(self._ids[position], self._turns[position], self._roles[position],
                               self._kinds[position], self._tokens[position], self._matched[position], text,
                               self._newer.get(position))

    def _duplicate(self, index: int, block_id: str) -> NoReturn:
        first = _decision_items(len(self._ids), self.skipped)[self._ids.index(block_id)]
        raise PagerError(_duplicate_problem(index, block_id, {block_id: first}))

    def _similarities(self) -> Tuple["array.array[float]", "array.array[float]"]:
        """Return the columns (own, neighbour): each block's own score and its neighbour credit.

        Weighted proxy: a keyword counts by its rarity in this history,
        ``idf(k) = ln(1 + (N - df + 0.5) / (df + 0.5))``; ``own`` is the idf share of the
        intent the block holds, divided by ``1 - b + b * length / mean length`` (b =
        LENGTH_WEIGHT) and capped at 1; a user or assistant block outside any tool unit, up
        to NEIGHBOUR_WINDOW blocks after a matching such block, gets
        ``NEIGHBOUR_DECAY ** distance * own ** NEIGHBOUR_POWER`` of it. Keywords that occur
        nowhere are left out of the total. Plain proxy: ``own`` is the share of keywords
        present, no neighbour credit. Only blocks with a match (and the blocks after them)
        are visited; every other score stays 0.
        """
        n = len(self._ids)
        own, neighbour = array.array("d", bytes(8 * n)), array.array("d", bytes(8 * n))
        matched = self._matched
        hits = list(compress(range(n), matched))  # positions holding a match (a non-empty tuple)
        if not hits:
            return own, neighbour
        kinds_of_match = Counter(map(matched.__getitem__, hits))
        if not self.weighted:
            for i in hits:
                own[i] = len(matched[i]) / len(self.terms)
            return own, neighbour
        df: Dict[str, int] = dict.fromkeys(self.terms, 0)
        for found, count in kinds_of_match.items():
            for term in found:
                df[term] += count
        idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        total = sum(idf[t] for t, d in df.items() if d)
        mean_length = sum(self._lengths) / n or 1.0
        coverage = {found: sum(idf[t] for t in found) / total for found in kinds_of_match}
        if self.work_terms:
            # An intent with the agent's recent work has two parts, the human's words and the
            # work's names; a block's coverage is its better part's, so neither dilutes the other.
            # A human message of few words ("continue") counts only that share of HUMAN_WORDS.
            human = [t for t in self.terms if t not in self.work_terms]
            said = min(1.0, sum(1 for t in human if df[t]) / HUMAN_WORDS)
            for part, factor in ((human, said), ([t for t in self.terms if t in self.work_terms], 1.0)):
                weight = sum(idf[t] for t in part if df[t])
                if weight:
                    members = set(part)
                    for found in kinds_of_match:
                        share = factor * sum(idf[t] for t in found if t in members) / weight
                        if share > coverage[found]:
                            coverage[found] = share
        lengths = self._lengths
        for i in hits:
            scaled = coverage[matched[i]] / (1.0 - LENGTH_WEIGHT + LENGTH_WEIGHT * lengths[i] / mean_length)
            own[i] = scaled if scaled < 1.0 else 1.0
        # Dialogue turns lend and borrow credit; a tool call, a tool result or a system block
        # has its own content (and its unit) to go by, not its position.
        steps = [(d, NEIGHBOUR_DECAY ** d) for d in range(1, NEIGHBOUR_WINDOW + 1)]
        roles, units, talk = self._roles, self._units, DIALOGUE_ROLES
        for i in hits:
            if roles[i] not in talk or i in units:
                continue
            lent = own[i] ** NEIGHBOUR_POWER
            for d, factor in steps:
                credit = lent * factor
                j = i + d  # forward only: the topic is raised first, the answer follows
                if j < n and credit > neighbour[j] and roles[j] in talk and j not in units:
                    neighbour[j] = credit
        return own, neighbour

    def _rare_names(self, own: "array.array[float]") -> Dict[int, float]:
        """Raise ``own`` by the rare names each block shares with the agent's recent work; return the
        positions of the blocks that hold no rare name, each with COMMON_WORTH (fit_budget's ``worth``).

        Under a budget, with the recent work in the intent (see use_work). A name (_names_of) is
        rare when at most RARE_HOLDERS blocks of the history hold it, and at most one in
        RARE_PER_BLOCKS (so in a history of fewer than RARE_PER_BLOCKS blocks no name is rare): a
        path, an identifier, an error or a number that few blocks name is what the next step is
        likely to need from the one that named it. A block sharing k rare names with the last
        work_steps steps (_recent_steps; a block of those steps shares what their other blocks
        name) scores at least ``1 - RARE_SHARE ** k``. A block holding no rare name says nothing
        that no other block says: it competes at COMMON_WORTH of its R per token. A pass without
        a budget is left as it was: there the cuts decide, and this floor would lift most of the
        recent work's neighbourhood over the retain cut.

        Example: the work runs ``pytest -k parse_invoice_total``; an old read that alone defined
        ``parse_invoice_total`` shares one rare name with it and scores at least 0.5.
        """
        names = self._names
        held = self._held = Counter(chain.from_iterable(names))
        most = min(RARE_HOLDERS, len(names) // RARE_PER_BLOCKS)
        recent = _recent_steps(self._roles, self.params.work_steps, self._stubs)
        work = Counter(chain.from_iterable(names[i] for i in recent))  # name -> recent blocks holding it
        mine = set(recent)
        common: Dict[int, float] = {}
        for i, found in enumerate(names):
            rare = [name for name in found if held[name] <= most]
            if not rare:
                common[i] = COMMON_WORTH
                continue
            least = 2 if i in mine else 1  # a block of the recent work counts what the rest of it names
            shared = sum(1 for name in rare if work[name] >= least)
            if shared:
                floor = 1.0 - RARE_SHARE ** shared
                if floor > own[i]:
                    own[i] = floor
        return common

    def _settle(self, decisions: "_DecisionTable", stub_tokens: Sequence[int], reserved: int) -> bool:
        """Give every block the directive ``settle_from`` holds for it (reason "settled"), if that may stand.

        It may when every block is known to ``settle_from`` (no new block: the pass saw nothing the
        earlier one did not) and, under a budget, the kept blocks and stubs still fit.  The scores
        differ from the earlier pass's only by the blocks that pass removed (the weighted proxy's
        keyword rarity is counted over the blocks present), which is no reason to move a block.
        """
        previous = self.settle_from
        if not previous or any(block not in previous for block in decisions.block):
            return False
        wanted = [previous[block] for block in decisions.block]
        if any(a not in ACTIONS for a in wanted):
            return False
        ranged = self._ranged_before(decisions)
        if self.params.budget is not None:
            kept = sum(t for t, a in zip(decisions.tokens, wanted) if a == "retain")
            kept += sum(stub_tokens[i] for i, a in enumerate(wanted) if a == "page" and decisions.block[i] not in ranged)
            index_room = self._index_room()
            lines = self._range_lines(decisions, wanted, ranged, index_room)
            if kept + lines + reserved > self.params.budget:
                return False
            self.tokens_after = kept + lines + reserved
        for i, action in enumerate(wanted):
            decisions.action[i] = action
            decisions.reason[i] = RANGED if action == "page" and decisions.block[i] in ranged else "settled"
        if self.params.budget is not None:
            self.ranges = self._make_ranges(decisions, self._index_room())
        self.settled = True
        return True

    def finish(self, current_turn: Optional[int]) -> "_DecisionTable":
        """Return one Decision per block, in input order (a _DecisionTable)."""
        decisions = self._decide(current_turn)
        if self.params.before_compaction:
            units: List[Optional[str]] = [None] * len(decisions) if self._units else []
            for i, unit in self._units.items():
                units[i] = unit
            _page_before_compaction(decisions, units, self._unpageable)
        return decisions

    def _decide(self, current_turn: Optional[int]) -> "_DecisionTable":
        """Return the decisions the scores, guards and budget make (``finish`` before a compaction)."""
        if current_turn is None:
            current_turn = self.max_turn if self.max_turn is not None else 0
        turns = self._turns
        if self.max_turn is not None and self.max_turn > current_turn:
            index = next(i for i, t in enumerate(turns) if t > current_turn)
            position = _decision_items(index + 1, self.skipped)[index]
            raise PagerError(f"blocks[{position}].turn ({turns[index]}) lies after current_turn ({current_turn})")
        reserved = 0
        if self.params.budget is not None and self.reserve is not None:
            reserved = self.reserve(self._seen)
        self._seen = set()  # the ids are in the decisions now: let the set go before they are built
        owns, nears = self._similarities()
        if self.with_names:
            self.worth = self._rare_names(owns)  # (the names stay: range pages read them, _BlockNames)
        n = len(self._ids)
        recency_of = {t: recency(current_turn - t) for t in set(turns)}
        recencies = array.array("d", map(recency_of.__getitem__, turns))
        sims = array.array("d", owns)  # sim = max(own, neighbour): the own score, unless the credit is higher
        for j in compress(range(n), nears):
            if nears[j] > owns[j]:
                sims[j] = nears[j]
        alpha, beta = float(self.params.alpha), float(self.params.beta)  # an int weight multiplies the same
        retain_cut, evict_cut = self.params.retain_cut, self.params.evict_cut
        rs = array.array("d", map(operator.add, map(alpha.__mul__, sims), map(beta.__mul__, recencies)))
        # Params.classify, inlined: this runs once per block
        actions = ["retain" if r >= retain_cut else "evict" if r < evict_cut else "page" for r in rs]
        reasons = ["score"] * n
        if self.params.budget is not None and self._units and "evict" in actions:
            # Under a budget, in a history with tool work, nothing is noise for its score alone: what
            # the agent did and read, and what its harness sent (a skill's body, a reminder), is paged
            # (a range page costs the index a share of a line); an agent may use any of it again.
            actions = ["page" if action == "evict" else action for action in actions]
        if self.repeated:
            members: Dict[str, List[int]] = {}
            for i, unit in self._units.items():
                members.setdefault(unit, []).append(i)
            for i, newer in self.repeated.items():
                # A later block repeats this one: page it (and its unit) first, at R 0. A call
                # repeated counts when its results are long: a short one is cheaper than its stub.
                group = members.get(self._units[i], [i]) if i in self._units else [i]
                if self._long.intersection(group):
                    for j in group:
                        rs[j], actions[j], reasons[j] = 0.0, "page", REPEATED_BY + newer
                        if self.stub_text is not None and self.texts[j] is not None:
                            # its stub names the newer copy: that stub is priced (when asked)
                            self._stub_tokens[j], self._newer[j] = _UNPRICED, newer
        for i, guard in self._guards.items():
            actions[i], reasons[i] = "retain", guard
        for i, newer in self._system_repeats.items():  # sent and counted once: the latest copy
            rs[i], actions[i], reasons[i] = 0.0, "page", REPEATED_BY + newer
            self._guards.pop(i)
            if self.stub_text is not None and self.texts[i] is not None:
                self._stub_tokens[i], self._newer[i] = _UNPRICED, newer
        for i, why in self._unpageable.items():
            if actions[i] == "page":
                actions[i], reasons[i] = "evict", why
        for i in self._archived:
            actions[i], reasons[i] = ("evict" if i in self._unpageable else "page"), "compacted"
        stubs = [False] * n
        for i in self._stubs:
            stubs[i] = True
        decisions = _DecisionTable(self._ids, turns, self._roles, self._kinds, self._tokens, self._matched,
                                  sims, owns, nears, recencies, array.array("q", map(current_turn.__sub__, turns)),
                                  rs, actions, reasons, stubs)
        units: List[Optional[str]] = []
        if self._units:
            units = [None] * n
            for i, unit in self._units.items():
                units[i] = unit
        stub_tokens = _StubCosts(self._stub_cost_at, self._stub_floor, len(self._stub_tokens), self._least_stub())
        self._lengths = array.array("q")
        if self._settle(decisions, stub_tokens, reserved):
            return decisions
        _protect_recent(decisions, current_turn, self.params.keep_recent)
        if units:
            _join_units(decisions, units, self._unpageable)
        for i in self._floors:  # a floor lifts what would go for good to a page (reason "floor")
            if decisions.action[i] == "evict":  # (one no page can hold stays whole)
                decisions.action[i] = "retain" if i in self._unpageable else "page"
                decisions.reason[i] = "floor"
        if self.params.budget is None and self.params.keep_small and not self.params.before_compaction:
            _keep_small(decisions, units, self._stubs, self._stub_size)  # (before a compaction all is paged)
        if self.params.budget is not None:
            self._hold_current(decisions, units)
            room = max(0, self.params.budget - reserved)
            target = self.params.target
            # The watermarks keep a prompt prefix the agent has sent: a first pass (no earlier
            # directives) has none yet, and fits the whole budget.
            index_room = self._index_room()
            if target is not None and self.previous:
                ranged = self._ranged_before(decisions)
                chosen, kept = _previous_actions(decisions, stub_tokens, self.previous, ranged)
                lines = self._range_lines(decisions, chosen, ranged, index_room)
                self.compacted = kept + lines + reserved > self.params.trigger * self.params.budget
                if not self.compacted:  # the directives stay as the agent last saw them ("sticky")
                    actions, reasons = decisions.action, decisions.reason
                    for i, action in enumerate(chosen):
                        if action == "page" and decisions.block[i] in ranged:
                            actions[i], reasons[i] = action, RANGED
                        elif action != actions[i]:
                            actions[i], reasons[i] = action, "sticky"
                    kept_ranges = self._ranges_kept(decisions)  # the lines the agent was sent
                    self.ranges = kept_ranges if kept_ranges is not None else self._make_ranges(decisions, index_room)
                    self.tokens_after = kept + sum(r.cost for r in self.ranges) + reserved
                    return decisions
                self.compacted_to = self._compaction_share(decisions)
                room = max(0, int(self.compacted_to * self.params.budget) - reserved)
            before = (list(decisions.action), list(decisions.reason))
            index_room = min(index_room, room)
            for attempt in range(2):  # a second fit gives back the index room the lines left unused
                kept = fit_budget(decisions, stub_tokens, room, units or None, self.params.results_apart,
                                  self._floors, self._unpageable, _open_units(self._roles, units),
                                  self.worth, index_room, self.params.recent_share)
                kept -= self._rerange(decisions, stub_tokens)
                # the lines get what the fit set aside: less when the system prompt took some of it
                self.ranges = self._make_ranges(decisions, min(index_room, max(room - kept, 0)))
                lines = sum(r.cost for r in self.ranges)
                self.tokens_after = kept + lines + reserved
                if attempt:
                    if kept + lines > room and first[3] <= room + reserved:
                        # the room given back let blocks be ranged whose lines no longer fit: the first fit stands
                        decisions.action[:], decisions.reason[:], self.ranges, self.tokens_after = first
                    break
                if index_room - lines < (self._least_range_line() if self.ranges else 1):
                    break
                first = (list(decisions.action), list(decisions.reason), self.ranges, self.tokens_after)
                index_room = lines
                decisions.action[:], decisions.reason[:] = before
            if self.ranges and sum(decisions.tokens[r] for g in self.ranges for r in g.positions) <= lines:
                # The ranged blocks cost no more verbatim than their lines: fit again with no room set
                # aside for lines, and keep that fit if it needs no range page (a line never costs more
                # than the text it stands for).
                fitted = (list(decisions.action), list(decisions.reason), self.ranges, self.tokens_after)
                decisions.action[:], decisions.reason[:] = before
                kept = fit_budget(decisions, stub_tokens, room, units or None, self.params.results_apart,
                                  self._floors, self._unpageable, _open_units(self._roles, units),
                                  self.worth, 0, self.params.recent_share)
                kept -= self._rerange(decisions, stub_tokens)
                if any(r == RANGED and a == "page" for a, r in zip(decisions.action, decisions.reason)):
                    decisions.action[:], decisions.reason[:], self.ranges, self.tokens_after = fitted
                else:
                    self.ranges, self.tokens_after = [], kept + reserved
            for i in self._system_repeats:  # an earlier copy of instructions sent again is never sent twice
                if decisions.action[i] == "retain":
                    stub = stub_tokens[i]
                    decisions.action[i], decisions.reason[i] = "page", REPEATED_BY + self._system_repeats[i]
                    self.tokens_after -= decisions.tokens[i] - stub  # type: ignore[operator]
        return decisions

    def _hold_current(self, decisions: "_DecisionTable", units: Sequence[Optional[str]]) -> None:
        """Keep the floors of a budget pass verbatim (reason CURRENT): the human's last request, the
        task statement and the agent's current step (_recent_steps' last step, with every block of
        the units it holds).

        A unit holding a giant (see _giant_edge) or a picture is left to compete: fit_budget claims
        an open round trip's call and pages its results in place at worst.
        """
        actions, reasons, tokens = decisions.action, decisions.reason, decisions.tokens
        humans = [i for i in self._floors if i not in self._stubs]  # under a budget: a human's messages
        humans += [i for i, guard in self._guards.items() if guard == "task"]
        step = _recent_steps(self._roles, 1, self._stubs)
        chosen = set(step)
        if units:
            opened = {units[i] for i in step if units[i] is not None}
            chosen.update(i for i, unit in enumerate(units) if unit is not None and unit in opened)
        giant = GIANT_SHARE * self.params.budget  # type: ignore[operator]
        if units:
            whole: Dict[str, List[int]] = {}
            for i in chosen:
                if units[i] is not None:
                    whole.setdefault(units[i], []).append(i)  # type: ignore[arg-type]
            for members in whole.values():
                if any(tokens[i] > giant or i in self._unpageable for i in members):
                    chosen.difference_update(members)
        chosen = {i for i in chosen if tokens[i] <= giant and i not in self._unpageable}
        if humans:
            chosen.add(max(humans))
        chosen.update(i for i, guard in self._guards.items() if guard == "task")  # the task statement
        for i in chosen:
            if tokens[i] > giant and reasons[i] not in PROTECTIONS:
                continue  # a giant floor (a whole log pasted as the request) is paged as its head and tail at worst
            if reasons[i] not in PROTECTIONS and reasons[i] != "compacted":
                actions[i], reasons[i] = "retain", CURRENT

    def _compaction_share(self, decisions: "_DecisionTable") -> float:
        """Return the share of the budget a compacting pass fits the history into: the target, or the
        trigger when the history grows by more than the room between the two from pass to pass.

        The watermarks trade verbatim room for a stable prompt prefix: the history is fitted into
        the target so that the passes after it grow into the room up to the trigger, sending what was
        sent before. When the passes' growth is more than that room (an agent whose tool outputs are
        large under a small budget), every pass compacts whatever the target: the room keeps no
        prefix and only holds less of the history verbatim than the budget allows, so the whole
        budget is fitted. Both this pass's growth and the growth its recent steps make typical
        (_pass_growth) must pass the room: one long file read does not, for the small steps after it
        would then compact again at once where the target lets them grow in place.
        """
        previous = self.previous or {}
        self.grown, typical = _pass_growth(decisions.role, decisions.tokens, [b not in previous for b in decisions.block],
                                           self._stubs)
        params = self.params
        return params.trigger if min(self.grown, typical) > params.growth_room() else params.target  # type: ignore[return-value]

    def _ranged_before(self, decisions: "_DecisionTable") -> Set[str]:
        """Return the blocks an earlier pass left in range pages: the members of its range pages, and
        the range pages read back from its request (each stays a range page while it is paged)."""
        ranged = {b for members, _ in self.previous_ranges.values() for b in members}
        ranged.update(b for b, kind in zip(decisions.block, decisions.kind) if kind == RANGE)
        return ranged

    def _rerange(self, decisions: "_DecisionTable", stub_tokens: List[int]) -> int:
        """Make each range page read back that a fit paged with a stub of its own a range page of this
        pass's again (reason RANGED: its line is one of the index's); return what its stub cost the fit."""
        freed = 0
        for i, kind in enumerate(decisions.kind):
            if kind == RANGE and decisions.action[i] == "page" and decisions.reason[i] not in (RANGED, "compacted"):
                decisions.reason[i] = RANGED
                freed += stub_tokens[i]
        return freed

    def _widest_range(self) -> "StoredPage":
        """Return the page of a range page whose line without topics is as long as any (five-digit turns)."""
        return RangePage(RANGE_PREFIX + "0" * RANGE_DIGITS, (), (), 99999, 99999, 0,
                         range_summary(99999, 99999, 99999, 9999999, ()), 0).page()

    def _least_range_line(self) -> int:
        """Return what the line of a request's one range page costs at most without topics (five-digit
        turns), its recall hint included."""
        return self._range_line_cost(self._widest_range()) + self._range_hint_cost(many=False)

    def _range_hint_cost(self, many: bool = True) -> int:
        """Return what the recall hint costs the first range line of a request, ``many`` when the
        request holds more than one (see range_stubs)."""
        widest = self._widest_range()
        tail = estimate_tokens(RANGE_HINT_TAIL) if many else 0
        return estimate_tokens(self._render_stub(widest)) - estimate_tokens(make_stub(widest, "")) + tail + 1

    def _index_room(self) -> int:
        """Return the tokens the range pages' lines may take: the index share of the budget, and at
        least one line without topics with the recall hint (a budget too small for that is one line over)."""
        least = self._least_range_line() + estimate_tokens(RANGE_HINT_TAIL)
        return max(int(self.params.index_share * self.params.budget), least)  # type: ignore[operator]

    def _range_lines(self, decisions: "_DecisionTable", chosen: List[str], ranged: Container[str],
                     room: int) -> int:
        """Return what the lines of the earlier pass's range pages cost, where its directives stand."""
        if not ranged:
            return 0
        trial = _DecisionTable(*decisions.columns())
        trial.action = list(chosen)
        trial.reason = [RANGED if a == "page" and b in ranged else "compacted" if r == "compacted" else "sticky"
                        for a, b, r in zip(chosen, decisions.block, decisions.reason)]
        kept = self._ranges_kept(trial)
        return sum(r.cost for r in (kept if kept is not None else self._make_ranges(trial, room)))

    def _make_ranges(self, decisions: "_DecisionTable", room: int) -> List[RangePage]:
        """Return the range pages of this pass's blocks paged without a stub (see _plan_ranges).

        The same directives planned again give the same pages (a pass between compactions plans the
        lines of the last directives to see whether they still fit, then keeps those directives):
        the last plan is kept under what it read, each block's directive and whether its reason is
        RANGED or "compacted" (the rest of a pass's table and the names stay put within a pass).
        """
        if RANGED not in decisions.reason:
            return []
        read = (room, tuple(decisions.action), tuple(map(_REASONS_RANGES_READ.get, decisions.reason)))
        if self._ranges_made[0] == read:
            return list(self._ranges_made[1])
        ranges = self._plan_range_pages(decisions, room)
        self._ranges_made = (read, list(ranges))
        return ranges

    def _plan_range_pages(self, decisions: "_DecisionTable", room: int) -> List[RangePage]:
        """Return _make_ranges' range pages, planned."""
        if self._block_names is None:  # each block's names, read once a pass (texts and pages stay put)
            self._block_names = _BlockNames(self.texts, self.pages, self._stubs, decisions.block, self._names)
        names_of = self._block_names.__getitem__

        shown = set()
        for i, action in enumerate(decisions.action):
            if action == "retain":
                shown.update(names_of(i))
        known = {rid: summary for rid, (_, summary) in self.previous_ranges.items()}
        known.update(self._range_summaries)
        units = [self._units.get(i) for i in range(len(decisions))] if self._units else None
        held = self._held
        memory = self.range_memory
        if memory is not None and self._serials_of is None:
            self._serials_of = self._range_serials(decisions, names_of, units)
        if memory is not None and held is None:  # the counts _plan_ranges would make: of every ranged block
            ranged = [i for i, (action, reason) in enumerate(zip(decisions.action, decisions.reason))
                      if reason == RANGED and action == "page"]
            held = memory.held_counts(self._serials_of(ranged), ranged, names_of)  # type: ignore[misc]
        if memory is not None:
            shown, held = memory.same(shown, held)
        if self._built[0] != shown:  # what the ranges built on a fit before say holds while the kept names do
            self._built = (shown, {} if memory is None else
                           _RangeBuilds(memory, self._serials_of, names_of, shown, held, known))  # type: ignore[dict-item,arg-type]
        elif memory is not None:  # the builds of this plan stand as before; a new one is kept under what it read
            builds: _RangeBuilds = self._built[1]  # type: ignore[assignment]
            builds.held, builds.known = held, known
        head = self._range_hint_cost()  # the first line's recall hint: counted once, with the oldest range
        ranges = _plan_ranges(decisions, max(room - head, 0), self._range_line_cost, names_of, shown, held,
                              known, units, self._built[1], self._block_names.distinctive)
        return self._first_line_priced(ranges)

    def _first_line_priced(self, ranges: List[RangePage]) -> List[RangePage]:
        """Return ``ranges`` with the first line's cost as rendered, its recall hint included (never
        more than the room planned for it)."""
        if ranges:
            page = ranges[0].page()
            line = _first_range_line(self._render_stub(page), len(ranges) > 1)
            ranges[0] = ranges[0]._replace(cost=estimate_tokens(line) + 1 + self._index_line_cost(page))
        return ranges

    def _ranges_kept(self, decisions: "_DecisionTable") -> Optional[List[RangePage]]:
        """Return the earlier pass's range pages as its request held them, for a pass that keeps its
        directives; None unless they hold exactly this pass's ranged blocks, each range's in order.

        Planned anew (_make_ranges), they could come out otherwise: a compaction's ranges were
        planned in the room its fit left, a pass that keeps them has the whole index room, and the
        oldest runs merge by the room.  The lines the agent was sent are what it keeps.
        """
        if not self.previous_ranges:
            return None
        blocks, actions, reasons = decisions.block, decisions.action, decisions.reason
        turns, tokens = decisions.turn, decisions.tokens
        ranged = [i for i, (action, reason) in enumerate(zip(actions, reasons)) if reason == RANGED and action == "page"]
        where = {blocks[i]: i for i in ranged}
        ranges, held = [], 0
        for rid, (members, summary) in self.previous_ranges.items():
            positions = tuple(where.get(block, -1) for block in members)
            if -1 in positions or list(positions) != sorted(set(positions)):
                return None
            held += len(positions)
            ranges.append(RangePage(rid, tuple(members), positions, turns[positions[0]],
                                    max(turns[i] for i in positions), sum(tokens[i] for i in positions), summary, 0))
        if held != len(ranged) or len(set(chain.from_iterable(r.positions for r in ranges))) != held:
            return None  # a ranged block in no earlier range, or in two
        ranges.sort(key=lambda r: r.positions[0])
        return self._first_line_priced([r._replace(cost=self._range_line_cost(r.page())) for r in ranges])

    def _range_serials(self, decisions: "_DecisionTable", names_of: Callable[[int], Tuple[str, ...]],
                       units: Optional[List[Optional[str]]]) -> Callable[[Sequence[int]], Tuple[int, ...]]:
        """Return a function of members' positions giving their serial numbers in range_memory (see
        _RangeMemory: each block's signature is every field its range page's line is made of)."""
        memory, serials = self.range_memory, self._serials
        if len(serials) != len(decisions):
            serials[:] = [None] * len(decisions)
        blocks, kinds, roles, turns, tokens = (decisions.block, decisions.kind, decisions.role, decisions.turn,
                                               decisions.tokens)

        def of(members: Sequence[int]) -> Tuple[int, ...]:
            found = tuple(map(serials.__getitem__, members))
            if None not in found:
                return found  # type: ignore[return-value]
            for i in members:
                if serials[i] is None:
                    call = roles[i] == "assistant" and bool(units) and units[i] is not None  # type: ignore[index]
                    serials[i] = memory.serial(  # type: ignore[union-attr]
                        (blocks[i], kinds[i], roles[i], call, turns[i], tokens[i], names_of(i)))
            return tuple(map(serials.__getitem__, members))  # type: ignore[arg-type]
        return of

    def _range_line_cost(self, page: "StoredPage") -> int:
        """Return what a range page's line without the recall hint costs in the request (and in the
        page index, with --with-index); the first line's hint is _range_hint_cost."""
        return estimate_tokens(make_stub(page, "")) + 1 + self._index_line_cost(page)

    def _index_line_cost(self, page: "StoredPage") -> int:
        """Return what a range page's line costs in the page index (--with-index), else 0."""
        return estimate_tokens(index_lines([page])[0]) + 1 if self.with_index else 0


# ===== Harness markup =====
#
# What a harness (the agent program around the model: Claude Code, Codex, Cline...) writes into a
# conversation as user-role text that no human typed: reminders, command echoes, tool reports,
# instructions, compaction summaries, editor state.  One row per harness in HARNESS_MARKUP; the
# engine builds one classifier from the rows (_MARKUP), which the pass plan (what the intent reads)
# and the transcript readers (who wrote a user text) ask.  No other section spells a harness's
# markup: a new harness is a new row.


class _Markup(NamedTuple):
    """One harness's markup: how the user-role texts it writes open, by what they are."""

    harness: str
    text: Tuple[str, ...] = ()          # its own texts: reminders, notifications, echoes, command output
    instructions: Tuple[str, ...] = ()  # instructions it sends as a user message (kept like the system prompt)
    summaries: Tuple[str, ...] = ()     # the compaction summary it sends as a user message
    context: Tuple[str, ...] = ()       # tags of editor state it puts before the human's words in one block
    commands: Tuple[str, ...] = ()      # tags of a slash command it echoes: (message, name, arguments)
    setup_commands: str = ""            # its commands whose arguments set it up, never a request (space-separated)
    request_context: Tuple[str, ...] = ()  # (how its IDE context opens a request, the heading the intent drops)
    reports: str = ""                   # a regular expression: how a tool report it sends as user text opens
    relayed: Tuple[str, ...] = ()       # tags inside such a report that carry the human's words
    attributes: bool = False            # it writes markup tags with attributes (``<tag type="...">``)
    demonstration: str = ""             # how its demonstration opens (told apart by its own format only)


# Text of the user message put where the APIs need one and the pager left none.
OMITTED_NOTE = "[earlier conversation omitted by the context pager]"

HARNESS_MARKUP = (
    _Markup("Claude Code",
            text=("<task-notification>", "<system-reminder>", "<local-command-caveat>", "<local-command-stdout>",
                  "<local-command-stderr>", "<bash-input>", "<bash-stdout>", "<bash-stderr>",
                  "<user-prompt-submit-hook>", "Caveat: The messages below were generated by the user",
                  "Stop hook feedback:", "Base directory for this skill:", "[Request interrupted by user"),
            summaries=("This session is being continued from a previous conversation",),
            commands=("command-message", "command-name", "command-args"),
            # ``/compact <what the summary should keep>``, ``/model <name>``: never a human's request.
            setup_commands="""
    /add-dir /agents /bashes /bug /clear /compact /config /context /cost /doctor /exit /export /feedback /help
    /hooks /ide /install-github-app /login /logout /mcp /memory /model /output-style /permissions /plugin
    /privacy-settings /release-notes /reload-plugins /rename /resume /rewind /sandbox /stats /status
    /statusline /terminal-setup /theme /todos /upgrade /usage /vim"""),
    # Codex: the repository's AGENTS.md, the user's own instructions, the working environment; its IDE
    # extension's request opens with the editor's state (the active file and selection, the open tabs)
    # before "## My request for Codex:"; the open tabs say nothing of the request: the intent drops them.
    _Markup("Codex",
            text=("<user_shell_command>", "<turn_aborted>", "<recommended_plugins>", "<available_skills>"),
            instructions=("# AGENTS.md instructions for ", "<user_instructions>", "<environment_context>",
                          "<INSTRUCTIONS>"),
            summaries=("Another language model started to solve this problem",),
            request_context=("# Context from my IDE setup:", "## Open tabs:")),
    # An IDE extension (Claude Code in VS Code and JetBrains): the file open, the lines selected.  A
    # text block of its own is the harness's; words after it in the same block are the human's.
    _Markup("IDE context", context=("ide_opened_file", "ide_selection")),
    # Cline and Roo Code: the editor state after every message (the human's words sit in blocks of their
    # own), a tool's result as user text opening "[name for 'argument'] Result:" or "[name] Result:" (the
    # header alone in one block or followed by the result), a resumed task as "[TASK RESUMPTION] ...";
    # a report relays the human's words only as a reply to a question or feedback on a result.
    _Markup("Cline / Roo Code", text=("<environment_details>", "# task_progress", "# TODO LIST UPDATE REQUIRED"),
            reports=r"\[(?:[\w.-]+(?: for '.*?')?\] Result:|TASK RESUMPTION\])",
            relayed=("<feedback>", "<answer>", "<user_message>")),
    _Markup("Crush", text=("<system_reminder>",)),  # its own spelling of Claude Code's reminder
    # Mastra sends ``<system-reminder type="...">`` (a refused prefill's retry): any row's tag may carry attributes.
    _Markup("Mastra", attributes=True),
    # SWE-agent's default demonstration template: a user message the harness wrote (``is_demo`` in a
    # .traj; the words alone once written back as Chat messages; see _swe_agent_harness).
    _Markup("SWE-agent", demonstration="Here is a demonstration of how to correctly accomplish this task."),
    _Markup("mini-swe-agent", text=("<returncode>",)),  # a command's output, sent back as a user message
    # Gemini CLI: its automatic continuation, a function response and the files of an @-mention,
    # sent as user text (the messages its resume leaves out are its format's: _GeminiCli).
    _Markup("Gemini CLI", text=("System: Please continue.", "[Function Response: ",
                                "--- Content from referenced files ---", "Content from @", "--- End of content ---")),
    # GitHub Copilot CLI: the date and the reminders around the typed words (its ``<system_reminder>``
    # is Crush's spelling, in that row).
    _Markup("GitHub Copilot CLI", text=("<current_datetime>", "<reminder>")),
    # OpenCode: a synthetic part ("Called the Read tool with the following input: ..."), and last the
    # question a compaction part stands for (OPENCODE_COMPACTION_ASK).
    _Markup("OpenCode", text=("Called the ", "What did we do so far?")),
    _Markup("the pager", text=(OMITTED_NOTE,)),
)


class _MarkupReader:
    """The classifier built from HARNESS_MARKUP: whose a user-role text is, and what the intent reads of it."""

    def __init__(self, rows: Sequence[_Markup]) -> None:
        self.rows = {row.harness: row for row in rows}
        self.instructions = tuple(p for row in rows for p in row.instructions)
        self.summaries = tuple(p for row in rows for p in row.summaries)
        self.context = tuple(f"<{tag}>" for row in rows for tag in row.context)
        self._context = re.compile(r"\s*<(%s)>.*?</\1>" % "|".join(t for row in rows for t in row.context), re.S)
        opens = [p for row in rows for p in row.text] + list(self.instructions + self.summaries + self.context)
        opens += [f"<{tag}>" for row in rows for tag in row.commands]
        if any(row.attributes for row in rows):
            opens += [p[:-1] + " " for p in opens if p.startswith("<") and p.endswith(">")]
        self.harness = tuple(opens)  # how any harness's user-role text opens
        self._reports = re.compile("|".join(f"(?:{row.reports})" for row in rows if row.reports), re.S)
        self.relayed = tuple(t for row in rows for t in row.relayed)
        self._commands = [(tuple(f"<{t}>" for t in row.commands[:2]),
                           *(re.compile(f"<{t}>(.*?)</{t}>", re.S) for t in row.commands[1:]),
                           frozenset(row.setup_commands.split())) for row in rows if row.commands]
        self._requests = [(row.request_context[0], re.compile(
            "^%s\n.*?(?=^## |\\Z)" % re.escape(row.request_context[1]), re.S | re.M))
            for row in rows if row.request_context]

    def opens_harness_text(self, text: str) -> bool:
        """Return True if ``text`` opens as a harness's user-role text does."""
        return text.lstrip().startswith(self.harness)

    def is_report(self, text: str, whole: bool = False) -> bool:
        """Return True if ``text`` opens as a tool report a coding agent sends as user text (``whole``:
        is a report's header alone, its result in the next block)."""
        return (self._reports.fullmatch(text.strip()) if whole else self._reports.match(text.lstrip())) is not None

    def after_context(self, text: str) -> Optional[str]:
        """Return the words after the IDE context a text opens with, else None.

        Example:
            >>> _MARKUP.after_context("<ide_opened_file>The user opened a.py</ide_opened_file>Fix the parser")
            'Fix the parser'
        """
        if not text.lstrip().startswith(self.context):
            return None
        rest, found = text, self._context.match(text)
        while found is not None:
            rest = rest[found.end():]
            found = self._context.match(rest)
        rest = rest.strip()
        return rest if rest and not rest.startswith(self.context) else None

    def typed_command(self, text: str) -> Optional[str]:
        """Return what a human typed as a slash command with arguments, "/name arguments", read from
        the tags the harness echoes it in; None for other text, for a command without arguments and
        for one that sets the harness up (``setup_commands``).

        Example:
            >>> _MARKUP.typed_command("<command-name>/review</command-name><command-args>the totals patch</command-args>")
            '/review the totals patch'
        """
        for opens, name_tag, args_tag, setup in self._commands:
            if not text.lstrip().startswith(opens):
                continue
            args = args_tag.search(text)
            if args is None or not args.group(1).strip():
                return None
            name = name_tag.search(text)
            command = name.group(1).strip() if name else ""
            if command in setup:
                return None
            return (command + " " if command else "") + args.group(1).strip()
        return None

    def request_words(self, text: str) -> str:
        """Return the words of a human's message that the intent reads: a slash command's (see
        typed_command), else the text without the part of an IDE context that says nothing of it.

        Example:
            >>> _MARKUP.request_words("# Context from my IDE setup:\\n\\n## Open tabs:\\n- a.md: a.md\\n\\n## My request for Codex:\\nFix totals")
            '# Context from my IDE setup:\\n\\n## My request for Codex:\\nFix totals'
        """
        typed = self.typed_command(text)
        if typed is not None:
            return typed
        for opening, dropped in self._requests:
            if text.lstrip().startswith(opening):
                return dropped.sub("", text)
        return text


_MARKUP = _MarkupReader(HARNESS_MARKUP)


# ===== The pass plan =====


@dataclasses.dataclass(frozen=True)
class PassPlan:
    """The scored decisions of one pass, before any contract is consulted."""

    decisions: Sequence[Decision]  # a _DecisionTable from the pager's own planning
    keywords: List[str]
    current_turn: int
    params: Params
    header: Dict[str, object] = dataclasses.field(default_factory=dict)  # the history's other fields
    tokens_before: int = 0              # the history as it arrived (stubs at their own size)
    tokens_after: Optional[int] = None  # kept verbatim plus stubs, when a budget was fitted
    intent_source: str = "intent_ir"    # where the keywords came from (see Intent)
    compacted: Optional[bool] = None    # with a --target: True if the pass compacted, False if it kept the last
    compacted_to: Optional[float] = None  # ...the share of the budget it compacted to (_Scorer._compaction_share)
    grown: int = 0                      # ...the tokens of the blocks new since the pass before
    # Per decision, the text of a block that may be paged, kept from the read (else None);
    # the page store takes new pages' text from here instead of reading the history again.
    texts: Optional[List[Optional[str]]] = dataclasses.field(default=None, repr=False, compare=False)
    intent_block: Optional[str] = None  # the message the intent came from (id, turn), when one did
    intent_turn: Optional[int] = None
    settled: bool = False  # every directive is the earlier pass's (see _Scorer._settle)
    ranges: List[RangePage] = dataclasses.field(default_factory=list)  # the range pages, oldest first

    @classmethod
    def of(cls, decisions: Sequence[Decision], scorer: "_Scorer", current: Optional[int], params: Params,
           header: Dict[str, object], intent: Any, settled: bool = False) -> "PassPlan":
        """Return the plan of the pass ``scorer`` decided: ``current`` the current turn given (else the
        latest the scorer read), ``intent`` what the keywords came from (its source, block and turn)."""
        return cls(decisions, scorer.keywords, current if current is not None else (scorer.max_turn or 0),
                   params, header, scorer.tokens_before, scorer.tokens_after, intent.source,
                   compacted=scorer.compacted, compacted_to=scorer.compacted_to, grown=scorer.grown,
                   ranges=scorer.ranges, texts=scorer.texts, intent_block=intent.block, intent_turn=intent.turn,
                   settled=settled)

    def range_of(self) -> Dict[int, RangePage]:
        """Return decision position -> the range page holding it."""
        return {i: r for r in self.ranges for i in r.positions}

    def pressure(self) -> Optional[Tuple[float, float]]:
        """Return context pressure (tokens / budget) before and after the pass, or None."""
        if self.params.budget is None or self.tokens_after is None:
            return None
        return self.tokens_before / self.params.budget, self.tokens_after / self.params.budget

    def budget_values(self) -> Dict[str, object]:
        """Return the contract's budget values for this pass (empty without a budget)."""
        rho = self.pressure()
        if rho is None or self.settled:  # a settled pass leaves the deciding pass's figures standing
            return {}
        return {"token-budget": self.params.budget, "tokens-before": self.tokens_before,
                "tokens-after": self.tokens_after, "pressure-before": round(rho[0], 4),
                "pressure-after": round(rho[1], 4)}

    def fixed_tokens(self, reserved: int = 0) -> int:
        """Return what no budget removes: blocks kept for a protection (pins, the system prompt while
        it fits, a compaction, the floors: see CURRENT), the range pages' lines, and ``reserved``
        (tool definitions)."""
        actions, reasons, tokens = (_column(self.decisions, n) for n in ("action", "reason", "tokens"))
        kept = sum(t for a, r, t in zip(actions, reasons, tokens) if a == "retain" and r in PROTECTIONS + ("task",))
        return kept + sum(r.cost for r in self.ranges) + reserved

    def counts(self) -> Dict[str, int]:
        """Return the number of blocks per directive."""
        actions = _column(self.decisions, "action")
        return {action: actions.count(action) for action in ACTIONS}


INTENT_SCHEMA = "prosecode.intent.v0"  # the sibling prompt compiler's Intent IR


class Intent(NamedTuple):
    """The intent keywords of a pass and where they came from."""

    keywords: List[str]
    source: str  # "--intent", "--intent-file", "intent_ir", "intent_ir (prosecode.intent.v0)",
    #              "last human message", "last user message", either "... and recent work", "recent work"
    work: Tuple[str, ...] = ()  # the keywords drawn from the agent's recent work
    block: Optional[str] = None  # the message's block id, when a message gave the intent
    turn: Optional[int] = None   # ... and its turn


def _intent_from_ir(value: object) -> Intent:
    """Return the Intent of an ``intent_ir`` value: a keyword list, or a prosecode.intent.v0 object.

    From an Intent IR object the keywords come from its ``verb`` and its slot values.

    Example:
        >>> _intent_from_ir({"schema": "prosecode.intent.v0", "verb": "fix",
        ...                 "slots": {"target": "the invoice rounding", "scope": "billing"}}).keywords
        ['fix', 'invoice', 'rounding', 'billing']
    """
    if isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise PagerError(f"intent_ir[{i}] must be a string (got {_show(item)})")
        return Intent(intent_keywords(value), "intent_ir")
    if isinstance(value, dict) and value.get("schema") == INTENT_SCHEMA:
        verb, slots = value.get("verb"), value.get("slots", {})
        if not isinstance(verb, str):
            raise PagerError(f"intent_ir.verb must be a string (got {_show(verb)})")
        if not isinstance(slots, dict):
            raise PagerError(f"intent_ir.slots must be an object (got {_show(slots)})")
        texts = [verb]
        for name, text in slots.items():
            if isinstance(text, (int, float)) and not isinstance(text, bool):
                text = str(text)
            if not isinstance(text, str):
                raise PagerError(f"intent_ir.slots.{name} must be text (got {_show(text)})")
            texts.append(text)
        return Intent(intent_keywords(texts), f"intent_ir ({INTENT_SCHEMA})")
    raise PagerError(f"intent_ir must be a list of keywords or a {INTENT_SCHEMA} object (got {_show(value)})")


# A name in code: letters, digits and "_" joined by ".", "/", ":" or "-" (a path, Foo.bar, file.py:12).
_CODE_NAME = re.compile(r"[A-Za-z0-9_]+(?:[./:\-][A-Za-z0-9_]+)+|\w*[a-z0-9][A-Z]\w*|\w+_\w+|\w*(?:Error|Exception)\b")


class _WorkNotes:
    """What the intent needs from a history read in order: the last user message and the recent work.

    A step is a run of assistant blocks (text, thinking, tool calls) with the tool results
    that follow it; the last ``steps`` steps are kept, each call or result cut to its two
    ends (WORK_TEXT_CHARS each: a command's error is usually at the end of its output).
    Stub blocks are skipped: they stand for old blocks, not for what the agent just did.
    """

    def __init__(self, steps: int = DEFAULT_WORK_STEPS) -> None:
        self.steps = steps
        self.last_user: Optional[str] = None
        self.work: List[List[Tuple[str, str]]] = []  # the kept steps, each [(role, text)]
        self.in_step = False

    def see(self, raw: object, text: Optional[str] = None) -> None:
        """Note one block of the history (``text`` overrides its text: a stub's stored original)."""
        if type(raw) is not dict:
            return
        role = raw.get("role")
        body = text if text is not None else raw.get("text")
        if not isinstance(body, str):
            return
        if role == "user":
            if text is not None or raw.get("stub") is not True:
                self.last_user = body
            self.in_step = False
            return
        if self.steps <= 0 or raw.get("stub") is True or role not in ("assistant", "tool"):
            return
        if role == "assistant" and not self.in_step:
            self.work.append([])
            del self.work[:-self.steps]
            self.in_step = True
        elif role == "tool":
            self.in_step = False
        if self.work:
            self.work[-1].append((role, _two_ends(body)))

    def work_keywords(self) -> List[str]:
        """Return the keywords of the recent work: the names in code (paths, identifiers, error
        names) of its calls, results and text; the latest step's first, at most WORK_KEYWORDS."""
        found: Dict[str, None] = {}
        for step in reversed(self.work):
            for role, text in step:
                names = [m.group() for m in _CODE_NAME.finditer(_unescaped_breaks(text))]
                for keyword in intent_keywords(names):
                    if len(keyword) > 2 and not keyword.isdigit():
                        found.setdefault(keyword, None)
        return list(found)[:WORK_KEYWORDS]


# A markup tag (``<name>``, ``</name>``, a harness's: see HARNESS_MARKUP): its words are not what the message
# says, so the intent read from a message that opens with one leaves them out; other text keeps
# its angle brackets (``Vec<u8>``).
_MARKUP_TAG = re.compile(r"</?[A-Za-z][\w-]{0,40}>")


def _human_text(protected: object, kind: object) -> bool:
    """Return True for a block of text a human wrote: marked "task" or "human" by a transcript
    reader (see human_requests), and not what the human attached (kind "media").

    The one rule both the intent (_LastRequest) and human_requests follow.
    """
    return protected in FLOORED and kind != "media"


class _LastRequest:
    """Follows the blocks of a history and keeps the message that gives the intent.

    The last block a human wrote (``protected`` "task" or "human": the transcript readers mark
    them, see human_requests) wins.  When the live context holds none (a compaction took every
    request: what follows the boundary is its summary and the harness's lines), the last one
    from before the boundary (``protected`` "archived", kind "human") speaks for the human; it is
    still the human's last word, where the live user blocks are the harness's.  A history with no
    such mark falls back to its last user block.
    """

    def __init__(self, pages: Optional[Callable[[str], Optional["StoredPage"]]] = None) -> None:
        self.pages = pages
        # (text, block id, turn): the text as the block holds it; its request_words are read for the one that wins
        self.human: Optional[Tuple[str, str, int]] = None
        self.archived: Optional[Tuple[str, str, int]] = None  # the last human block before a boundary
        self.user: Optional[Tuple[str, str, int]] = None

    def note(self, raw: object) -> None:
        """Look at one raw block."""
        if type(raw) is not dict or raw.get("role") != "user" or not isinstance(raw.get("text"), str):
            return
        protected = raw.get("protected")
        if protected == ARCHIVED:
            if raw.get("kind") in FLOORED:  # a human's text, before a compaction boundary (turn 0)
                self.archived = (raw["text"], str(raw.get("id")), 0)
            return
        if raw.get("kind") in UNPAGEABLE_KINDS:
            return  # not text anybody wrote: a picture's or carried part's label
        text: Optional[str] = raw["text"]
        if raw.get("stub") is True:
            page = self.pages(str(raw.get("id"))) if self.pages is not None else None
            text = page.text if page is not None else None
        if text is None:
            return
        found = (text, str(raw.get("id")), raw.get("turn") if _is_int(raw.get("turn")) else 0)
        if _human_text(protected, raw.get("kind")):
            self.human = found
        self.user = found

    def intent(self) -> Optional[Intent]:
        """Return the Intent of the message found, or None."""
        # A slash command's words, not its tags; no IDE's open tabs (read for the one message that wins).
        if self.human is not None:
            text, block, turn = self.human
            return Intent(intent_keywords([_MARKUP.request_words(text)]), "last human message", block=block, turn=turn)
        if self.archived is not None:
            text, block, turn = self.archived
            return Intent(intent_keywords([_MARKUP.request_words(text)]),
                          "last human message (before the compaction boundary)", block=block, turn=turn)
        if self.user is not None:
            text, block, turn = self.user
            text = _MARKUP.request_words(text)
            if _MARKUP_TAG.match(text.lstrip()):
                text = _MARKUP_TAG.sub(" ", text)
            return Intent(intent_keywords([text]), "last user message", block=block, turn=turn)
        return None


def _note_blocks(blocks: Iterable[object], last: _LastRequest, notes: _WorkNotes) -> None:
    """Show each raw block to ``last`` and ``notes``; a user block that is a stub is seen through its page's text."""
    pages = last.pages
    for raw in blocks:
        last.note(raw)
        if type(raw) is dict and raw.get("role") == "user" and raw.get("stub") is True and pages is not None:
            page = pages(str(raw.get("id")))
            if page is not None:
                notes.see(raw, page.text)
        else:
            notes.see(raw)


def _header_intent(header: Mapping[str, object], given: Optional[Intent],
                   last: Optional[Intent], work: Sequence[str] = ()) -> Intent:
    """Return the pass's intent: the flags', else intent_ir's, else the last human (or user) message's
    together with the keywords of the agent's recent work (``work``)."""
    if given is not None:
        return given
    if "intent_ir" in header:
        return _intent_from_ir(header["intent_ir"])
    if last is not None or work:
        if not work:
            return last  # type: ignore[return-value]
        human = last.keywords if last is not None else []
        source = f"{last.source} and recent work" if last is not None else "recent work"
        return Intent(list(dict.fromkeys(human + list(work))), source, tuple(k for k in work if k not in human),
                      last.block if last is not None else None, last.turn if last is not None else None)
    raise PagerError("no intent: pass --intent or --intent-file, give intent_ir, or include a user message")


def _header_current_turn(header: Mapping[str, object]) -> Optional[int]:
    value = header.get("current_turn")
    if value is None:
        return None
    if not _is_int(value):
        raise PagerError(f"current_turn must be an integer (got {_show(value)})")
    if value < 0:
        raise PagerError(f"current_turn must not be negative (got {value})")
    if value > _MAX_COUNT:  # the same bound as a block's turn
        raise PagerError(f"current_turn must be at most {_MAX_COUNT} (got {_show(value)})")
    return value


def plan_pass(history: Mapping[str, object], params: Params = Params(),
              pages: Optional[Mapping[str, "StoredPage"]] = None, intent: Optional[Intent] = None,
              previous: Optional[Mapping[str, str]] = None) -> PassPlan:
    """Return the PassPlan for a history dict in the pager's own schema. No I/O.

    ``pages`` maps a block id to its stored original (StoredPage); blocks that
    arrive as stubs (``"stub": true``) are scored on it. ``previous`` maps block ids
    to the directives of the last pass (a contract's ``directives``): with
    ``params.target`` set, they stand until the history reaches the trigger.

    Example:
        >>> plan = plan_pass({"intent_ir": ["pager"], "blocks": [
        ...     {"id": "b1", "turn": 1, "role": "user", "text": "Tune the pager."}]})
        >>> [(d.block, d.action) for d in plan.decisions]
        [('b1', 'retain')]
    """
    if not isinstance(history, Mapping):
        raise PagerError("the history must be a JSON object with a blocks list")
    params.validate()
    blocks = history.get("blocks")
    if not isinstance(blocks, list):
        raise PagerError(f"blocks must be a list (got {_show(blocks)})" if "blocks" in history
                         else "blocks is missing")
    notes = _WorkNotes(params.work_steps)
    last = _LastRequest()
    if intent is None and "intent_ir" not in history:
        for raw in blocks:
            notes.see(raw)
            last.note(raw)
    intent = _header_intent(history, intent, last.intent(), notes.work_keywords())
    current = _header_current_turn(history)
    scorer = _Scorer(intent.keywords, params, pages.get if pages is not None else None, current_turn=current)
    scorer.previous = previous
    scorer.use_work(intent.work)
    scorer.add_all(0, blocks)
    decisions = scorer.finish(current)
    header = {key: value for key, value in history.items() if key != "blocks"}
    return PassPlan.of(decisions, scorer, current, params, header, intent)


# ===== Liminate statements and contract state =====


def _format_number(value: float) -> str:
    """Return ``value`` as a plain decimal the interpreter stores as a number (no exponent).

    Example:
        >>> _format_number(0.7), _format_number(3), _format_number(0.1 + 0.2)
        ('0.7', '3', '0.3')
    """
    if _is_int(value):
        return str(value)
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _segment_table() -> Dict[Tuple[str, ...], str]:
    """Return every valid sequence of unquoted segments (forms without a number) -> form.

    Expanding each form's name slots over the vocabulary once lets the hot path
    check a statement with one split and one dictionary lookup.
    """
    choices = {_LIST: LIST_OF_ACTION.values(), _TEXT: TEXT_VALUES}
    table: Dict[Tuple[str, ...], str] = {}
    for shape, form in STATEMENT_FORMS.items():
        if _NUM in shape or _NUMNAME in shape:
            continue
        expansions: List[List[str]] = [[]]
        for slot in shape:
            options = choices.get(slot, ['"x"' if slot == _Q else slot])
            expansions = [done + [option] for done in expansions for option in options]
        for words in expansions:
            table[tuple(" ".join(words).split('"')[0::2])] = form
    return table


_SEGMENTS = _segment_table()


def _check_statement_slowly(statement: str, parts: List[str]) -> str:
    """Check word by word: the number form, and a precise message for a bad statement."""
    if len(parts) % 2 == 0:
        raise PagerError(f"statement has an unclosed quote: {_show(statement, 80)}")
    shape: List[str] = []
    last = len(parts) - 1
    for i in range(0, len(parts), 2):
        segment = parts[i]
        if not _UNQUOTED_RE.match(segment):
            raise PagerError(f"statement has a character outside the vocabulary: {_show(statement, 80)}")
        words = segment.split(" ")
        # A quoted value must be set off by exactly one space on each inner side.
        if i > 0:
            if words[0] != "":
                raise PagerError(f"statement needs a space after a quoted value: {_show(statement, 80)}")
            words = words[1:]
        if i < last:
            if not words or words[-1] != "":
                raise PagerError(f"statement needs a space before a quoted value: {_show(statement, 80)}")
            words = words[:-1]
        for word in words:
            if not word:
                raise PagerError(f"statement has a stray space: {_show(statement, 80)}")
            slot = _SLOT_OF_WORD.get(word)
            if slot is None:
                if _NUMBER_RE.match(word):
                    slot = _NUM
                else:
                    raise PagerError(f"word {_show(word)} is not in the pager vocabulary: {_show(statement, 80)}")
            shape.append(slot)
        if i < last:
            value = parts[i + 1]
            if not value or _FORBIDDEN_RE.search(value):
                raise PagerError(f"statement has an empty or unwritable quoted value: {_show(statement, 80)}")
            shape.append(_Q)
    form = STATEMENT_FORMS.get(tuple(shape))
    if form is None:
        raise PagerError(f"statement has no documented form: {_show(statement, 80)}")
    return form


def check_statement(statement: str) -> str:
    """Return the form name of ``statement``, or raise PagerError.

    A statement passes when every unquoted word is in LIMN_VOCAB (or is a plain
    number where the form wants one), words are separated by single spaces, and
    the sequence of words and quoted values is one of STATEMENT_FORMS. Quoted
    values must be non-empty and free of quotes and line breaks.

    Example:
        >>> check_statement('add "b1" to paged-blocks because "R=0.4"')
        'add'
    """
    parts = statement.split('"')
    form = _SEGMENTS.get(tuple(parts[0::2]))
    if form is not None:
        # The segments matched, so quotes are where the form wants them; what is
        # left is a line break or an empty value inside the quotes.
        if _LINE_BREAK_RE.search(statement) or "" in parts[1::2]:
            raise PagerError(f"statement has an empty or unwritable quoted value: {_show(statement, 80)}")
        return form
    return _check_statement_slowly(statement, parts)


def _statements_pattern() -> str:
    """Return a regex matching exactly the statements check_statement accepts, each ending in LF."""
    quoted = '"[^' + "".join(re.escape(c) for c in sorted(FORBIDDEN_IN_QUOTES)) + ']+"'
    slots = {_Q: quoted, _NUM: _NUMBER_RE.pattern[:-2], _LIST: "|".join(LIST_OF_ACTION.values()),
             _TEXT: "|".join(TEXT_VALUES), _NUMNAME: "|".join(NUMBER_VALUES)}
    shapes = sorted(STATEMENT_FORMS, key=lambda shape: shape[0] != "add")  # the common form first
    forms = [" ".join(f"(?:{slots[w]})" if w in slots else re.escape(w) for w in shape) for shape in shapes]
    return "(?:(?:" + "|".join(forms) + ")\n)*"


_STATEMENTS_RE = re.compile(_statements_pattern())


def _check_statements(statements: List[str]) -> None:
    """Run check_statement on every statement of the list; raise PagerError for the first bad one.

    The same checks a list at a time: one regex, built from STATEMENT_FORMS and the
    vocabulary, must match the joined statements line by line. Only when it does not
    is each statement checked alone, for the exact message.
    """
    if not statements:
        return
    text = "\n".join(chain(statements, [""]))  # each statement ends its line; no second copy of the text
    if text.count("\n") != len(statements) or _STATEMENTS_RE.fullmatch(text) is None:
        for statement in statements:
            check_statement(statement)


def _quoted_values(statement: str) -> List[str]:
    return statement.split('"')[1::2]


def _unquoted_words(statement: str) -> List[str]:
    return " ".join(statement.split('"')[0::2]).split()


def _parse_number(text: str) -> float:
    return int(text) if "." not in text else float(text)


@dataclasses.dataclass
class ContractState:
    """What the pager's own statements in a contract say, as replay would leave it."""

    directives: Dict[str, str] = dataclasses.field(default_factory=dict)  # block id -> action
    declared: set = dataclasses.field(default_factory=set)                # list names declared
    values: Dict[str, object] = dataclasses.field(default_factory=dict)   # named values
    # Content ids (a block id up to any ``~``) of texts a directive called the harness's (HARNESS_MARK).
    harness: set = dataclasses.field(default_factory=set)
    # The range pages paged-blocks lists: id -> the reason recorded with it (RANGE_REASON ...).
    ranges: Dict[str, str] = dataclasses.field(default_factory=dict)
    empty: bool = True          # the file holds no statement at all (an ``about`` may open it)
    needs_newline: bool = False  # the last line has no line end; the append starts with one

    def lists(self) -> Dict[str, List[str]]:
        """Return the three lists as replay orders them (insertion order)."""
        out: Dict[str, List[str]] = {name: [] for name in LIST_OF_ACTION.values()}
        for block, action in self.directives.items():
            out[LIST_OF_ACTION[action]].append(block)
        return out

    def apply(self, statement: str) -> None:
        """Apply one checked pager statement; raise PagerError if replay would fail or diverge."""
        form = check_statement(statement)
        words = _unquoted_words(statement)
        quoted = _quoted_values(statement)
        if form == "declare":
            name = words[4]
            action = ACTION_OF_LIST[name]
            # Liminate resets a list declared again; replay that.
            for block in [b for b, a in self.directives.items() if a == action]:
                del self.directives[block]
                self.ranges.pop(block, None)
            self.declared.add(name)
        elif form in ("add", "remove"):
            name, block = words[2], quoted[0]
            if name not in self.declared:
                raise PagerError(f"{form}s to {name} before it is declared")
            action = ACTION_OF_LIST[name]
            current = self.directives.get(block)
            if form == "add":
                if current is not None:
                    raise PagerError(f"block {_show(block)} is already in {LIST_OF_ACTION[current]}")
                self.directives[block] = action
                if quoted[1].startswith(HARNESS_MARK):
                    self.harness.add(block.split("~", 1)[0])
                elif action == "page" and quoted[1].startswith(RANGE_REASON):
                    self.ranges[block] = quoted[1]
            else:
                if current != action:
                    raise PagerError(f"block {_show(block)} is not in {name}")
                del self.directives[block]
                self.ranges.pop(block, None)
        elif form == "text":
            self.values[words[4]] = quoted[0]
        elif form == "number":
            self.values[words[4]] = _parse_number(words[6])


def _statement_add(block: str, action: str, because: str) -> str:
    """Return the statement adding ``block`` to the list of ``action``."""
    return f'add "{block}" to {LIST_OF_ACTION[action]} because "{because}"'


def _statement_remove(block: str, action: str, because: str) -> str:
    """Return the statement removing ``block`` from the list of ``action``."""
    return f'remove "{block}" from {LIST_OF_ACTION[action]} because "{because}"'


def _statement_value(name: str, value: object) -> str:
    """Return the statement remembering a named text or number value."""
    if name in NUMBER_VALUES:
        return f"remember a number called {name} with {_format_number(value)}"  # type: ignore[arg-type]
    return f'remember a value called {name} with "{value}"'


def _formatted(values: Sequence[float], spec: str) -> List[str]:
    """Return ``spec % v`` for each value, formatting each distinct value once when values repeat.

    Formatting a float costs several dictionary lookups, and a pass repeats many
    of its numbers: sim 0 for most blocks, one recency per turn.
    """
    distinct = set(values)
    if len(distinct) * 2 > len(values):
        return [spec % v for v in values]
    text = {v: spec % v for v in distinct}
    return list(map(text.__getitem__, values))


def _range_reason(r: RangePage) -> str:
    """Return the reason recorded with range page ``r``'s id: its turns, size and end blocks."""
    return (f"{RANGE_REASON}turns {r.first_turn}-{r.last_turn}; {len(r.members)} blocks; {r.tokens} tokens; "
            f"first {r.members[0]}; last {r.members[-1]}")


def _range_changes(plan: PassPlan, state: ContractState) -> Tuple[List[RangePage], List[str]]:
    """Return (the pass's range pages the contract does not list as paged yet, the listed ones it ends).

    A range page read back from an earlier request is one of the pass's blocks: its directive
    says what becomes of it.  A listed range page ends when this pass holds its first block and
    no longer makes it (its blocks were recalled, or merged into a coarser range).
    """
    if not plan.ranges and not state.ranges:
        return [], []
    blocks = set(_column(plan.decisions, "block"))
    known = state.directives
    new = [r for r in plan.ranges if r.id not in blocks and known.get(r.id) != "page"]
    current = {r.id for r in plan.ranges}
    ended = []
    for rid, reason in state.ranges.items():
        first = reason.split("; first ", 1)[-1].rsplit("; last ", 1)[0]
        if known.get(rid) == "page" and rid not in current and rid not in blocks and first in blocks:
            ended.append(rid)
    return new, ended


def _statement_batches(plan: PassPlan, state: ContractState, now: str,
                      extra_values: Mapping[str, object] = {}) -> Iterator[List[str]]:
    """Yield the checked statements that bring ``state`` to ``plan``'s directives, a list at a time.

    New blocks get an ``add``; a block whose directive changed gets a ``remove``
    and an ``add``; an unchanged block gets nothing. Settings that differ from
    the contract's are remembered again; the pass marker comes last. Every list
    passes _check_statements before it is yielded.
    """
    head = [f'about "{CONTRACT_TOPIC}"'] if state.empty else []
    head += [f"remember a list called {name}" for name in LIST_OF_ACTION.values() if name not in state.declared]
    if head:
        _check_statements(head)
        yield head
    decisions = plan.decisions
    blocks, actions, reasons = (_column(decisions, name) for name in ("block", "action", "reason"))
    rs, sims, owns, nears, recs, dts = (_column(decisions, name) for name in
                                        ("R", "similarity", "own", "neighbour", "recency", "delta_t"))
    known = state.directives
    list_of = LIST_OF_ACTION
    kinds = _column(decisions, "kind")
    marked = HARNESS in kinds
    for start in range(0, len(blocks), _BATCH_BLOCKS):
        stop = min(start + _BATCH_BLOCKS, len(blocks))
        if known:
            get = known.get
            changed = [i for i in range(start, stop) if get(blocks[i]) != actions[i]]
        else:
            changed = range(start, stop)  # type: ignore[assignment]
        # Decision.rationale, a batch at a time
        if known:
            r3, sim3, rec3 = (_formatted([column[i] for i in changed], "%.3f") for column in (rs, sims, recs))
            dt = [dts[i] for i in changed]
        else:
            r3, sim3, rec3 = (_formatted(column[start:stop], "%.3f") for column in (rs, sims, recs))
            dt = dts[start:stop]
        because = list(map(_RATIONALE_S.__mod__, zip(r3, sim3, rec3, dt)))
        if known:
            near_more = [nears[i] > owns[i] for i in changed]
            flagged = [reasons[i] != "score" for i in changed]
        else:
            near_more = map(operator.gt, nears[start:stop], owns[start:stop])
            flagged = map(operator.ne, reasons[start:stop], repeat("score"))
        for k in compress(range(len(because)), near_more):  # the neighbour's credit set sim
            i = changed[k]
            because[k] = _RATIONALE_NB_S % (r3[k], sim3[k], f"{owns[i]:.3f}", rec3[k], dt[k])
        for k in compress(range(len(because)), flagged):  # a protection, a unit or the budget decided
            because[k] = f"{reasons[changed[k]]}; {because[k]}"
        if marked:  # the harness wrote the text (see HARNESS)
            for k in range(len(because)):
                if kinds[changed[k]] == HARNESS:
                    because[k] = HARNESS_MARK + because[k]
        if known:
            lines: List[str] = []
            for i, why in zip(changed, because):
                previous = known.get(blocks[i])
                if previous is not None:
                    lines.append(f'remove "{blocks[i]}" from {list_of[previous]} because "{why}"')
                lines.append(f'add "{blocks[i]}" to {list_of[actions[i]]} because "{why}"')
        else:
            lines = list(map('add "%s" to %s because "%s"'.__mod__,
                             zip(blocks[start:stop], map(list_of.__getitem__, actions[start:stop]), because)))
        if lines:
            _check_statements(lines)
            yield lines
    new_ranges, ended = _range_changes(plan, state)
    lines = [_statement_remove(rid, "page", "range ended") for rid in ended]
    for r in new_ranges:
        if r.id in known:
            lines.append(_statement_remove(r.id, known[r.id], "range made again"))
        lines.append(_statement_add(r.id, "page", _range_reason(r)))
    if lines:
        _check_statements(lines)
        yield lines
    settings: Dict[str, object] = {
        "pager-version": __version__,
        "pager-alpha": plan.params.alpha,
        "pager-beta": plan.params.beta,
        "pager-retain-cut": plan.params.retain_cut,
        "pager-evict-cut": plan.params.evict_cut,
        "pager-intent": " ".join(plan.keywords) or "none",
        "pager-similarity": plan.params.similarity,
        **plan.budget_values(),
    }
    settings.update(extra_values)
    tail = []
    for name, value in settings.items():
        if name in NUMBER_VALUES:
            value = _parse_number(_format_number(value))  # compare as the contract will store it
        if state.values.get(name) != value:
            tail.append(_statement_value(name, value))
    tail.append(_statement_value(PASS_MARKER, now))
    _check_statements(tail)
    yield tail


def render_pass(plan: PassPlan, state: ContractState, now: str,
                extra_values: Mapping[str, object] = {}) -> List[str]:
    """Return the checked statements a pass appends to a contract in ``state``, in order.

    Example:
        >>> plan = plan_pass({"intent_ir": ["pager"], "blocks": [
        ...     {"id": "b1", "turn": 1, "role": "user", "text": "Tune the pager."}]})
        >>> render_pass(plan, ContractState(), now="2026-05-17T03:08:12+00:00")[4]
        'add "b1" to retained-blocks because "recent; R=1.000 sim=1.000 rec=1.000 dt=0"'
    """
    return list(chain.from_iterable(_statement_batches(plan, state, now, extra_values)))


class _Payload:
    """The bytes a pass appends, held as pieces of a few dozen KiB that one ``writev`` writes.

    Small pieces come from memory the read already freed, where one large buffer
    would add its whole size to the pass's peak; one system call still writes
    them all (see _LockedContract.append).
    """

    def __init__(self, pieces: List[bytes]) -> None:
        self.pieces = pieces

    def __len__(self) -> int:
        return sum(map(len, self.pieces))

    def count(self, byte: bytes) -> int:
        """Return how many times the single byte ``byte`` occurs."""
        return sum(piece.count(byte) for piece in self.pieces)

    def tobytes(self) -> bytes:
        return b"".join(self.pieces)


_PAYLOAD_PIECE = 512  # statements per piece: about 45 KiB, under the allocator's large-block threshold


def _encode_batches(state: ContractState, batches: Iterable[List[str]]) -> _Payload:
    """Return the bytes to append, one line per statement (after a line end if the file lacks one)."""
    pieces = [b"\n"] if state.needs_newline else []
    for batch in batches:
        for start in range(0, len(batch), _PAYLOAD_PIECE):
            pieces.append(("\n".join(batch[start: start + _PAYLOAD_PIECE]) + "\n").encode("utf-8"))
    return _Payload(pieces)


def _count_changes(plan: PassPlan, state: ContractState) -> Dict[str, int]:
    """Return how many blocks are new, moved and unchanged relative to ``state``."""
    blocks, actions = _column(plan.decisions, "block"), _column(plan.decisions, "action")
    previous = list(map(state.directives.get, blocks))
    new = previous.count(None)
    unchanged = sum(map(operator.eq, previous, actions))
    return {"new": new, "moved": len(blocks) - new - unchanged, "unchanged": unchanged}


def _looks_cut_from_pager_name(words: List[str]) -> bool:
    return any(w not in LIMN_VOCAB and any(n.startswith(w) for n in PAGER_NAMES) for w in words)


_LIMINATE_DECORATIVE = ",.?!"  # what Liminate's lexer strips from both ends of an unquoted word


def _liminate_words(line: str) -> List[str]:
    """Return the unquoted words of ``line`` as Liminate's lexer reads them.

    The lexer splits at white space (``str.isspace``), ``:`` and quotes, strips
    ``,.?!`` from both ends of a word, and lower-cases it; text after an unclosed
    quote is no word.

    Example:
        >>> _liminate_words('ADD "b1" TO Paged-Blocks, because: "x"')
        ['add', 'to', 'paged-blocks', 'because']
    """
    words = []
    for part in line.split('"')[0::2]:
        for chunk in part.split():
            for word in chunk.split(":"):
                word = word.strip(_LIMINATE_DECORATIVE).lower()
                if word:
                    words.append(word)
    return words


def _is_liminate_comment(line: str) -> bool:
    """Return True if Liminate skips ``line``: blank, or ``--`` after leading white space."""
    stripped = line.lstrip()
    return not stripped or stripped.startswith("--")


def read_contract_state(text: str) -> ContractState:
    """Return the ContractState that the pager's own statements in ``text`` describe.

    Lines are split as the interpreter splits them (``str.splitlines``). Lines that
    do not name one of the pager's lists or values, as Liminate's lexer reads the
    words (any case, ``,.?!`` stripped), are other tools' and skipped. A line that
    names one must be exactly a pager statement, which replay reads as the pager
    does; any other such line (another case, punctuation, indentation), a pager
    statement that does not parse, or one that replay would reject, raises
    PagerError naming its line: the pager refuses rather than read a different state.
    """
    state = ContractState()
    lines = text.splitlines()
    state.needs_newline = bool(text) and text[-1] not in _LINE_BREAKS
    last_index = len(lines) - 1
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        state.empty = False
        if _is_liminate_comment(line):
            continue
        words = _liminate_words(line)
        unterminated = number - 1 == last_index and state.needs_newline
        ours = any(w in PAGER_NAMES for w in words)
        if not ours:
            if unterminated and (line.count('"') % 2 == 1 or _looks_cut_from_pager_name(_unquoted_words(line))):
                raise PagerError(f"line {number} looks cut short (no line end): {_show(line, 80)}")
            continue
        try:
            state.apply(line)
        except PagerError as exc:
            cut = " (no line end: cut short?)" if unterminated else ""
            raise PagerError(f"line {number}: can't read back pager statement{cut}: {exc}") from None
    return state


# ===== Reading histories =====

_JSON_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
# The largest JSON value (one block, or one header field) a history may hold, in characters.
# Reading a value holds a few copies of it at once (the read buffer, the decoded string, its
# UTF-8 bytes for the store's hash), so this bounds the pass's peak memory; see the README.
MAX_BLOCK_CHARS = 1 << 26
# Transcripts (every format but the pager's) are read whole, at about 15 times their size in
# memory: the largest transcript file read, in bytes; convert bigger ones to the pager's format.
MAX_TRANSCRIPT_BYTES = 1 << 27


def _decode_problem(exc: BaseException) -> Optional[str]:
    """Return what a JSON decoder failure that is not a syntax error means, or None.

    Python's decoder raises RecursionError on values nested about a thousand deep and
    ValueError on integers longer than its int-digit limit (4300 by default).
    """
    if isinstance(exc, RecursionError):
        return "values nested too deeply (Python's JSON decoder stops near 1,000 levels)"
    if isinstance(exc, ValueError) and not isinstance(exc, json.JSONDecodeError) and "digits" in str(exc):
        limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
        return f"an integer longer than {limit} digits (Python's limit for decoding one)"
    return None


class _JsonStream:
    """Reads one JSON document from a text stream value by value, in bounded memory."""

    def __init__(self, fp: io.TextIOBase, name: str, chunk: int = 1 << 19) -> None:
        self.fp, self.name, self.chunk = fp, name, chunk
        self.buf, self.pos, self.eof = "", 0, False
        self.lines_before = 0  # line ends in text already dropped from buf
        self.col_before = 0    # characters after the last dropped line end
        self.dropped = 0       # characters dropped from buf: buf[i] is character dropped + i
        self.what = "a value"  # what the next value is, for the message when it is too large

    def _more(self) -> bool:
        if self.eof:
            return False
        try:
            data = self.fp.read(self.chunk)
        except UnicodeDecodeError as exc:
            raise PagerError(f"{self.name}: not valid UTF-8 text ({exc.reason})") from None
        if not data:
            self.eof = True
            return False
        dropped = self.buf[: self.pos]
        self.dropped += self.pos
        newline = dropped.rfind("\n")
        if newline >= 0:
            self.lines_before += dropped.count("\n")
            self.col_before = len(dropped) - newline - 1
        else:
            self.col_before += len(dropped)
        self.buf = self.buf[self.pos:] + data
        self.pos = 0
        return True

    def fail(self, what: str, pos: Optional[int] = None) -> None:
        pos = self.pos if pos is None else pos
        line = self.lines_before + self.buf.count("\n", 0, pos) + 1
        newline = self.buf.rfind("\n", 0, pos)
        column = pos - newline if newline >= 0 else self.col_before + pos + 1
        raise PagerError(f"{self.name}: invalid JSON at line {line}, column {column}: {what}")

    def peek(self) -> str:
        """Return the next non-blank character ('' at the end), without consuming it."""
        while True:
            self.pos = _JSON_WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def take(self, expected: str) -> None:
        got = self.peek()
        if got != expected:
            self.fail(f"expected {expected!r}" + (f" (got {got!r})" if got else " (got the end of the file)"))
        self.pos += 1

    def value(self) -> object:
        """Decode and return the next JSON value."""
        if self.pos >= len(self.buf) or self.buf[self.pos] in " \t\n\r":
            self.peek()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.pos == 0:
                    if len(self.buf) > MAX_BLOCK_CHARS:
                        self._too_large()
                    # The buffer holds only this unfinished value: it outgrew a chunk. Read
                    # bigger chunks so a huge value costs near-linear, not quadratic, time.
                    self.chunk = min(self.chunk * 2, 1 << 26)
                if self._more():
                    continue
                self.fail(exc.msg, exc.pos)
            except (RecursionError, ValueError) as exc:
                problem = _decode_problem(exc)
                if problem is None:
                    raise
                self.fail(problem)
            if end - self.pos > MAX_BLOCK_CHARS:
                self._too_large()
            # A number at the very end of the buffer may continue in the next chunk.
            if end < len(self.buf) or not self._more():
                self.pos = end
                return obj

    def _too_large(self) -> NoReturn:
        raise PagerError(f"{self.name}: {self.what} is larger than the limit of {MAX_BLOCK_CHARS:,} "
                         "characters of JSON (MAX_BLOCK_CHARS; see the README)")


# Between two blocks of the list: the end of one object, a comma, and the start of the next
# object (its first key or its end). A raw '"' can't stand inside a JSON string, so a match
# never lies wholly inside a text; one that isn't between top-level blocks makes the batch
# fail to parse, and the reader falls back to reading value by value.
_BLOCK_BREAK = re.compile(r'\}[ \t\n\r]*,[ \t\n\r]*(?=\{[ \t\n\r]*["}])')
_BATCH_WINDOW = 1 << 16  # where to look for the last block break: the buffer's last 64 KiB


def _last_break(buf: str, start: int) -> int:
    """Return where the last block break in ``buf[start:]`` starts (its '}'), or -1."""
    found = -1
    window = max(start, len(buf) - _BATCH_WINDOW)
    for match in _BLOCK_BREAK.finditer(buf, window):
        found = match.start()
    if found < 0 and window > start:  # a block longer than the window: look through the rest
        for match in _BLOCK_BREAK.finditer(buf, start, window + 64):  # 64: room for the look-ahead
            found = match.start()
    return found


def _read_blocks(js: "_JsonStream", sink: Optional[Callable[[int, List[object]], None]],
                 runs: Optional["array.array[int]"]) -> None:
    """Read the blocks list after its '[', handing the blocks to ``sink`` in batches.

    Most of the list is decoded a batch at a time: every block whose end is in the
    buffer, by one ``json.loads`` (twice as fast as a value at a time). What that
    can't take (a block longer than the buffer, a break look-alike inside a text,
    the list's last blocks, invalid JSON) is read value by value, which also gives
    invalid JSON its exact line and column. With ``runs``, each handed batch appends
    (first character, end character, first index, count): the text between holds
    just its blocks and the commas between them.
    """
    index = 0
    pending: List[object] = []  # blocks read value by value, not handed over yet
    pending_start = pending_end = 0
    no_batch_before = 0  # a batch up to here failed to parse, or no break was found before here
    loads = json.loads

    def hand(blocks: List[object], start: int, end: int) -> None:
        nonlocal index
        if runs is not None:
            runs.extend((start, end, index, len(blocks)))
        if sink is not None:
            sink(index, blocks)
        index += len(blocks)

    if js.peek() == "]":
        js.pos += 1
        return
    while True:
        if js.dropped + js.pos >= no_batch_before:
            if len(js.buf) - js.pos < js.chunk // 2:
                js._more()
            cut = _last_break(js.buf, js.pos)
            if cut < 0:
                no_batch_before = js.dropped + len(js.buf)  # read on value by value, then look again
            else:
                try:
                    batch = loads("[" + js.buf[js.pos: cut + 1] + "]")
                except (ValueError, RecursionError):  # read value by value: it names the place
                    no_batch_before = js.dropped + cut + 1
                else:
                    if pending:
                        hand(pending, pending_start, pending_end)
                        pending = []
                    hand(batch, js.dropped + js.pos, js.dropped + cut + 1)
                    js.pos = _BLOCK_BREAK.match(js.buf, cut).end()  # type: ignore[union-attr]
                    continue
        if not pending:
            pending_start = js.dropped + js.pos
        js.what = f"blocks[{index + len(pending)}]"
        pending.append(js.value())
        pending_end = js.dropped + js.pos
        c = js.peek()
        if c == "]":
            js.pos += 1
            hand(pending, pending_start, pending_end)
            return
        js.take(",")
        js.peek()
        if len(pending) >= _BATCH_BLOCKS:
            hand(pending, pending_start, pending_end)
            pending = []


def _stream_history(fp: io.TextIOBase, name: str,
                    on_blocks: Callable[[Dict[str, object]], Optional[Callable[[int, List[object]], None]]],
                    chunk: int = 1 << 19, runs: Optional["array.array[int]"] = None) -> Tuple[Dict[str, object], bool]:
    """Read a pager history object, handing its blocks in batches to the sink ``on_blocks`` returns.

    ``on_blocks(header_so_far)`` is called when the ``blocks`` list starts and
    returns ``sink(first_index, blocks)``, or None to skip the blocks. With
    ``runs``, where each handed batch lies in the text is noted (see _read_blocks),
    so a later read can decode single batches without parsing the rest. Returns
    the header fields and whether the blocks were handed over.
    """
    js = _JsonStream(fp, name, chunk)
    if js.peek() != "{":
        if js.peek() == "":
            raise PagerError(f"{name}: the file is empty")
        raise PagerError(f"{name}: the history must be a JSON object with a blocks list")
    js.take("{")
    header: Dict[str, object] = {}
    handed = False
    seen_blocks = False
    if js.peek() == "}":
        js.pos += 1
    else:
        while True:
            key = js.value()
            if not isinstance(key, str):
                js.fail("expected a field name")
            js.take(":")
            if key == "blocks":
                if seen_blocks:
                    raise PagerError(f"{name}: blocks appears twice")
                seen_blocks = True
                if js.peek() != "[":
                    raise PagerError(f"{name}: blocks must be a list (got {_show(js.value())})")
                js.take("[")
                sink = on_blocks(header)
                handed = sink is not None
                _read_blocks(js, sink, runs if handed else None)
            else:
                js.what = f"field {_show(key)}"
                header[key] = js.value()
            c = js.peek()
            if c == "}":
                js.pos += 1
                break
            js.take(",")
    if js.peek() != "":
        js.fail("extra data after the history object")
    if not seen_blocks:
        raise PagerError(f"{name}: blocks is missing")
    return header, handed


class _HistorySource:
    """A history file (or standard input, held in memory) that can be streamed more than once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = "<stdin>" if path == "-" else path
        self.runs: "array.array[int]" = array.array("q")  # where the batches of the last full stream lie
        self.skipped: List[int] = []  # block positions the scorer skipped (page-index blocks)
        self._stdin: Optional[str] = None
        self._blocks: Optional[List[Dict[str, Any]]] = None  # see from_blocks
        if path == "-":
            data = sys.stdin.buffer.read()
            try:
                self._stdin = data.decode("utf-8-sig")  # a byte order mark some editors write is not text
            except UnicodeDecodeError as exc:
                raise PagerError(f"<stdin>: not valid UTF-8 text ({exc.reason})") from None

    @classmethod
    def from_text(cls, name: str, text: str) -> "_HistorySource":
        """Return a source over ``text`` held in memory (a history in pager JSON)."""
        source = cls.__new__(cls)
        source.path, source.name, source._stdin = name, name, text
        source.runs, source.skipped = array.array("q"), []
        source._blocks = None
        return source

    @classmethod
    def from_blocks(cls, name: str, blocks: List[Dict[str, Any]]) -> "_HistorySource":
        """Return a source over pager blocks held in memory (a transcript's, from conversation_blocks).

        Streaming it hands the blocks as they are: the same the pager JSON of ``{"blocks": blocks}``
        would give, without writing that JSON and parsing it again.
        """
        source = cls.from_text(name, "")
        source._blocks = blocks
        return source

    def read_text(self) -> str:
        """Return the whole history as text."""
        with self.open() as fp:
            try:
                return fp.read()
            except UnicodeDecodeError as exc:
                raise PagerError(f"{self.name}: not valid UTF-8 text ({exc.reason})") from None

    def open(self) -> io.TextIOBase:
        """Return a fresh text stream over the history."""
        if self._stdin is not None:
            return io.StringIO(self._stdin)
        try:
            return open(self.path, encoding="utf-8-sig", newline="")  # a byte order mark is not text
        except FileNotFoundError:
            raise PagerError(f"{self.path}: no such file") from None
        except IsADirectoryError:
            raise PagerError(f"{self.path}: is a directory, not a history file") from None
        except OSError as exc:
            raise PagerError(f"{self.path}: can't read ({exc.strerror})") from None

    def stream(self, on_blocks: Callable[[Dict[str, object]], Optional[Callable[[int, List[object]], None]]]
               ) -> Tuple[Dict[str, object], bool]:
        """Stream the history once (see _stream_history), noting where each batch of blocks lies."""
        runs = array.array("q")
        try:
            if self._blocks is not None:
                return self._hand_blocks(on_blocks)
            with self.open() as fp:
                header, handed = _stream_history(fp, self.name, on_blocks, runs=runs)
                if handed:
                    self.runs = runs
                return header, handed
        except PagerError as exc:
            message = str(exc)
            raise PagerError(message if message.startswith(self.name + ":") else f"{self.name}: {message}") from None
        except OSError as exc:
            raise PagerError(f"{self.name}: can't read ({exc.strerror})") from None


    def _hand_blocks(self, on_blocks: Callable[[Dict[str, object]], Optional[Callable[[int, List[object]], None]]]
                     ) -> Tuple[Dict[str, object], bool]:
        """Stream blocks held in memory (see from_blocks): an empty header, the blocks a batch at a time."""
        header: Dict[str, object] = {}
        sink = on_blocks(header)
        if sink is None:
            return header, False
        blocks = self._blocks
        for first in range(0, len(blocks), _BATCH_BLOCKS):  # type: ignore[arg-type]
            batch = blocks[first:first + _BATCH_BLOCKS]  # type: ignore[index]
            for index, block in enumerate(batch, first):
                self._check_size(index, block)
            sink(first, batch)  # type: ignore[arg-type]
        return header, True

    def _check_size(self, index: int, block: Dict[str, Any]) -> None:
        """Refuse a block longer than MAX_BLOCK_CHARS as JSON, as reading it from the file would."""
        text = block.get("text")
        # JSON escapes one character into at most 6: only a text of a sixth of the limit can pass it.
        if isinstance(text, str) and 6 * len(text) + 4096 > MAX_BLOCK_CHARS \
                and len(json.dumps(block, ensure_ascii=False)) > MAX_BLOCK_CHARS:
            raise PagerError(f"{self.name}: blocks[{index}] is larger than the limit of {MAX_BLOCK_CHARS:,} "
                             "characters of JSON (MAX_BLOCK_CHARS; see the README)")

    def blocks_at(self, items: Iterable[int]) -> Iterator[Tuple[int, object]]:
        """Yield ``(item, block)`` for the given ascending block positions.

        Reads the history again and decodes only the batches (see _read_blocks) that
        hold a wanted block, found by the offsets the last full stream noted; the
        file must not have changed in between.
        """
        if self._blocks is not None:
            blocks = self._blocks
            yield from ((item, blocks[item]) for item in items)
            return
        runs = self.runs
        firsts = runs[2::4]
        changed = f"{self.name}: the history changed while the pass was reading it"
        with self.open() as fp:
            at = 0  # characters of the file read so far
            current, blocks = -1, []  # the decoded run
            for item in items:
                run = bisect_right(firsts, item) - 1
                if run != current:
                    start, end, count = runs[4 * run], runs[4 * run + 1], runs[4 * run + 3]
                    while at < start:  # pass over the gap before the run
                        data = fp.read(min(start - at, 1 << 20))
                        if not data:
                            raise PagerError(changed)
                        at += len(data)
                    text = fp.read(end - start)
                    at += len(text)
                    try:
                        blocks = json.loads("[" + text + "]")
                    except (ValueError, RecursionError):
                        raise PagerError(changed) from None
                    if len(text) != end - start or len(blocks) != count:
                        raise PagerError(changed)
                    current = run
                yield item, blocks[item - firsts[run]]


def _load_and_plan(source, params: Params,
                  pages: Optional[Callable[[str], Optional[StoredPage]]] = None,
                  stub_text: Optional[Callable[..., str]] = None,
                  with_index: bool = False,
                  reserve: Optional[Callable[[Container[str]], int]] = None,
                  intent: Optional[Intent] = None, previous: Optional[Mapping[str, str]] = None,
                  settle: Optional[Tuple[Mapping[str, str], object]] = None,
                  previous_ranges: Optional[Mapping[str, Tuple[Tuple[str, ...], str]]] = None) -> PassPlan:
    """Stream a history (a path, '-' for stdin, or a _HistorySource) and return its PassPlan.

    The intent is ``intent`` (from flags), else the history's ``intent_ir``, else the
    last user message; when neither of the first two is known as the blocks start,
    the history is read twice.  ``previous`` is (the contract's directives, the intent it
    recorded): they stand when the intent is the same and no block is new (see _Scorer._settle).
    """
    params.validate()
    if not isinstance(source, _HistorySource):
        source = _HistorySource(source)
    scorer: Optional[_Scorer] = None
    chosen: Optional[Intent] = None
    notes = _WorkNotes(params.work_steps)
    last = _LastRequest(pages)

    def new_scorer(header: Dict[str, object], keywords: List[str]) -> _Scorer:
        given = header.get("current_turn")  # a hint only: checked once the header is read
        hint = given if _is_int(given) and given >= 0 else None  # type: ignore[operator]
        same = settle is not None and (" ".join(keywords) or "none") == settle[1]
        made = _Scorer(keywords, params, pages, stub_text, with_index, reserve, hint,  # type: ignore[arg-type]
                       settle_from=settle[0] if same else None)  # type: ignore[index]
        made.previous = previous
        made.previous_ranges = previous_ranges or {}
        return made

    def on_blocks(header: Dict[str, object]) -> Optional[Callable[[int, List[object]], None]]:
        nonlocal scorer, chosen
        if intent is None and "intent_ir" not in header:
            return note_user  # the intent is further on, or is the last user message: read twice
        chosen = _header_intent(header, intent, None)
        scorer = new_scorer(header, chosen.keywords)
        scorer.use_work(chosen.work)
        return scorer.add_all

    def note_user(_first: int, blocks: List[object]) -> None:
        _note_blocks(blocks, last, notes)

    try:
        header, _ = source.stream(on_blocks)
        if scorer is None:
            chosen = _header_intent(header, intent, last.intent(), notes.work_keywords())
            scorer = new_scorer(header, chosen.keywords)
            scorer.use_work(chosen.work)
            source.stream(lambda _header: scorer.add_all)  # type: ignore[union-attr]
        current = _header_current_turn(header)
        decisions = scorer.finish(current)
        source.skipped = scorer.skipped
    except PagerError as exc:
        message = str(exc)
        raise PagerError(message if message.startswith(source.name + ":") else f"{source.name}: {message}") from None
    return PassPlan.of(decisions, scorer, current, params, header, chosen, settled=scorer.settled)


# ===== Transcripts =====
#
# Agent histories in the formats agents write, read as the pager's blocks and written back
# compacted in the format of the API they came from.  One class per format, behind one protocol
# (_Format: claims, claims_line, read, pair, units, write, check, read_back, tool_api), in one
# registry (_FORMATS, at the end of the section, with the probe order _PROBE_ORDER); the functions
# there (detect_format, load, conversation_blocks, emit, validate) dispatch through it.  Formats
# of one API shape share a family base: Claude Code over Anthropic Messages, Codex over Responses,
# SWE-agent over Chat Completions.  references/formats.md lists them.
#
# How to add a format: a subclass of _Format, or of the family base whose API it is written back
# in (it inherits ``pair``, ``units``, ``write``, ``check``), after the helpers it needs: ``name``,
# ``emits_as``, ``jsonl``, ``claims`` or ``claims_line``, ``read`` (into _Msg lists for _finish), and
# ``read_back`` only when its written-back form loses what tells the harness's messages from the
# human's.  A new API also needs ``write``, ``check`` and the recall tool's shapes (``tool_api``,
# ``tool_definition``, ``tool_call``, ``tool_result``, ``takes_tool_call``), and ``may_join`` when
# its ``pair`` or ``units`` group a message with later ones other than by call id (_FinishMemo).  Then its name in
# _FORMATS and _PROBE_ORDER (before any format that would also claim its documents), its harness's
# row in HARNESS_MARKUP, a fixture and a row in references/formats.md.
#
# Blocks.  Each message becomes one block, or one block per content part when a message holds
# several (text, image, tool call, tool result, thinking, reasoning).  Every block is a dict with
# exactly the keys id, turn, role, text, tokens (int or None), pinned (bool), protected (None or
# "system"), unit (None or str) and stub (bool).
#
# Ids are native or content-derived, never positional, so a block keeps its id when the pager
# removes other messages between two passes:
#   * a tool call: its call id; its result: ``<call block id>:result``;
#   * a message that is one block and has an id of its own: that id (Claude Code message id or
#     line uuid, Responses/Codex item id); the out-of-band system prompt: ``system`` (Anthropic)
#     or ``instructions`` (Responses);
#   * any other block (a part of a multi-part message, a message without an id, an OpenAI legacy
#     function_call): ``m-`` and the first 12 hex digits of
#     sha256(message role + "\x00" + part kind + "\x00" + block text), part kind being one of
#     text, media, call, thinking, reasoning, other.  Example: ``m-3f2a9c1b7d4e``;
#   * a stub line written by an earlier pass (see below): the id inside the stub.
# A repeated id (the same content again, the same stub twice) gets ``~2``, ``~3``... in order of
# appearance (so removing an earlier copy renumbers the later ones).  Claude Code message ids do
# not survive a pass: the history is written back as Anthropic Messages, which has no message ids,
# so those blocks come back with content ids (stubs keep the id they were paged under).  Unit
# names ``turn:<turn>`` are positional: they group blocks within one pass only.  Native ids are
# cleaned for the contract's lines: a double quote, a line break or a lone surrogate becomes
# ``_`` and `` | `` becomes `` _ `` (it would end the id inside a stub).  ``turn`` is the 1-based
# position of the message (Responses/Codex: of the item); an out-of-band system prompt (Anthropic
# ``system``, Responses ``instructions``) has turn 0.  ``role`` is the message role, except
# ``tool`` for every tool result.  System and developer text is ``protected="system"``; a user
# message that is the harness's instructions (HARNESS_MARKUP) is ``protected="instructions"``.
# ``tokens`` is what a part costs when its text is not its whole size (_part_tokens), else None.
#
# Stubs.  A text part whose text consists only of stub lines ``[paged <ID> | turn <T> | ...``
# (blank lines between them allowed) was written by an earlier pass: it becomes one block per
# line, with ``id`` = ``<ID>``, ``text`` = the line, ``stub=True``, the role of its message,
# ``unit=None`` and ``tokens=None``.  The engine scores such a block on the text it stored.
#
# Units (blocks that must share one directive): a tool call and its result(s), ``tool:<call
# block id>`` (parallel calls are separate units; an Anthropic server tool pairs the same way), plus
# what a format's ``units`` adds: an Anthropic thinking turn with its tool calls, a Responses
# reasoning item with the items it produced, a Chat reply's reasoning with its calls.
#
# Load-time repairs (``Conversation.repairs``, one line each, never an exception): a tool result
# whose call is not where the API needs it, a call with no result (Anthropic keeps one in the last
# message: a prefill), empty text blocks and messages left empty are dropped (each format's ``pair``).
#
# Emit rules (_effective, then the format's ``write``): decisions map block id -> ("retain", None)
# | ("retain", full_text) | ("page", stub) | ("evict", None); a missing id means retain, an unknown
# id or directive is a PagerError.  ("retain", full_text) restores a stub block as a plain text part
# of its message (a restored call or result stays text); for any other block the text is ignored.
# A page directive with an empty stub gets STUB_FALLBACK, which a later load reads back as the same
# stub block.  A unit takes its members' most conservative directive (retain > page > evict), so no
# map can break a call/result pair; a paged unit becomes ONE text note of its stubs at the place of
# its first block, its call and results removed.  A paged block outside a unit becomes a text part
# holding its stub in the same message, never merged into other text, so the next load finds it.
# An empty message list becomes one user message holding OMITTED_NOTE (the APIs reject an empty
# list).  What each API needs beyond that (Anthropic's alternation, a Responses item's id) is its
# ``write``'s; references/formats.md lists them.


# --- what the formats share: constants, the model of a conversation, ids, units ---

# Stub used when a page directive carries no stub text; a later load reads it back.
STUB_FALLBACK = "[paged {id} | turn {turn} | {role}]"
# First line of a stub written by a pass: "[paged <ID> | turn <T> | <role> | <N> tokens] ...".
STUB_LINE_RE = re.compile(r"\[paged (.+?) \| turn (\d+) \| (?:([a-z_]+) \| )?")
# Characters a block id must not hold: those a quoted contract value can't, and lone surrogates.
_ID_UNSAFE_RE = re.compile(f'["{_LINE_BREAKS}\ud800-\udfff]')
# A "|" between spaces, which would end an id inside a stub line.
ID_PIPE_RE = re.compile(r"(?<= )\|(?= )")
# Content-derived ids: prefix and how many hex digits of the sha256 are kept.
CONTENT_ID_PREFIX = "m-"
CONTENT_ID_DIGITS = 12
# Key shared by an OpenAI legacy function_call and the function message answering it.
LEGACY_FUNCTION_KEY = "\0function_call"
THINKING_TYPES = ("thinking", "redacted_thinking")
REDACTED_THINKING = "[redacted thinking]"  # the text a redacted thinking block is scored and stubbed by
# Text part types across the formats.
TEXT_PART_TYPES = ("text", "input_text", "output_text", "summary_text", "reasoning_text")
# What each format looks like: its roles, and the types and keys that tell it apart.
OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
ANTHROPIC_ROLES = ("user", "assistant")
# The fields the Messages API takes on a message and on its text and thinking blocks; it refuses any
# other ("messages.1.reasoning_details: Extra inputs are not permitted").  A client's own keys on a
# saved history (Cline's ``metrics`` and ``modelInfo``, a text block's ``reasoning_details``) are
# left out of what a pass writes, reported as one repair.
ANTHROPIC_FIELDS = {"message": ("role", "content"), "text": ("type", "text", "cache_control", "citations"),
                    "thinking": ("type", "thinking", "signature")}
RESPONSES_ROLES = ("system", "developer", "user", "assistant")
# Content block types only Anthropic uses (detection).
ANTHROPIC_MARKER_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking",
                                     "image", "document", "server_tool_use", "mcp_tool_use", "mcp_tool_result",
                                     "compaction", "container_upload", "search_result"})
ANTHROPIC_MARKER_SUFFIX = "_tool_result"  # a server tool's result (web_search_tool_result, web_fetch_...)
# Chat-message roles, fields and part types only OpenAI uses (detection).
OPENAI_MARKER_ROLES = frozenset({"system", "developer", "tool", "function"})
OPENAI_MARKER_FIELDS = ("tool_calls", "tool_call_id", "function_call")
OPENAI_MARKER_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
# Responses call item type -> output item types that may answer it.
RESPONSES_CALLS = {"function_call": ("function_call_output",),
                   "custom_tool_call": ("custom_tool_call_output",),
                   "local_shell_call": ("local_shell_call_output", "function_call_output"),
                   "computer_call": ("computer_call_output",),
                   "shell_call": ("shell_call_output",),  # the hosted shell and apply_patch tools of GPT-5.1
                   "apply_patch_call": ("apply_patch_call_output",)}
RESPONSES_OUTPUTS = frozenset(t for outs in RESPONSES_CALLS.values() for t in outs)
# Keys of a Responses body that continues what the server holds (a stored response, a conversation):
# its input then holds only the new items, such as outputs answering the stored response's calls.
RESPONSES_STATE_KEYS = ("previous_response_id", "conversation")
RESPONSES_ITEM_TYPES = frozenset({"message", "reasoning", "item_reference", "web_search_call",
                                  "file_search_call", "image_generation_call", "compaction",
                                  "code_interpreter_call", "mcp_call", "mcp_list_tools"}
                                 | set(RESPONSES_CALLS) | RESPONSES_OUTPUTS)
CODEX_LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context",
                              "compacted"})
# Codex items that are harness bookkeeping, never sent to the model.
CODEX_SKIPPED_ITEMS = ("ghost_snapshot",)
# Codex's own bookkeeping on a rollout item (the turn it belongs to, what its parts are): not part
# of the request. A provider other than OpenAI's refuses it, and the API reference has no such field.
CODEX_METADATA_KEYS = ("internal_chat_message_metadata_passthrough",)
# Keys that mark a JSONL record as a Claude Code transcript line.
CLAUDE_MARKER_KEYS = ("uuid", "parentUuid", "sessionId", "leafUuid", "messageId")

@dataclasses.dataclass(eq=False)
class _Part:
    """One future block: a content part of a message, with what emit needs to rebuild it."""
    kind: str                      # text | media | call | result | thinking | reasoning | other
    raw: Any                       # original JSON value, written back verbatim when retained
    where: str                     # location in the input, for repair reports
    text: str = ""
    key: Optional[str] = None      # call id that pairs a call with its results
    link: Optional[str] = None     # server-tool id pairing two parts of one message
    pos: int = 0                   # 1-based content position; 0 = the message's only part
    partner: Optional["_Part"] = None  # for a result: the call it answers
    bid: str = ""
    unit: Optional[str] = None
    tokens: Optional[int] = None
    stub_id: Optional[str] = None  # id read from a stub line written by an earlier pass
    source: Optional["_Part"] = None  # for a stub line: the text part holding the lines
    turn: int = 0                  # the turn it belongs to (see _number_turns)
    human: bool = False            # a text a human wrote (see _is_human)
    harness: bool = False          # a user text only metadata marks as the harness's (block kind HARNESS)
    carried: int = 0               # tokens its message sends beside it (a Chat reply's annotations)


@dataclasses.dataclass(eq=False)
class _Msg:
    """One message (or Responses item) of the conversation being paged."""
    role: str
    where: str
    raw: Dict[str, Any]            # original message/item; its content is rebuilt on emit
    parts: List[_Part]
    mid: Optional[str] = None      # message id given by the format
    string_content: bool = False   # content was a plain string: keep it one when untouched
    item: bool = False             # Responses non-message item: one part, the item itself
    repaired: bool = False         # a part was dropped at load: raw content is stale
    turn: int = 0
    harness: bool = False          # a user-role message the harness wrote (the format's metadata says so)
    summary: bool = False          # a compaction summary (the format's metadata or its opening says so)
    human: bool = False            # a message a human wrote (set by _finish: see human_requests)


def _fingerprint(value: Any) -> Optional[bytes]:
    """Return an exact fingerprint of a value held as JSON-like objects, or None for one that holds another type.

    Its ``marshal`` bytes in format 2 (no shared references): different values (a changed text,
    a field added, True for 1, a tuple for a list) never give the same bytes.  About a
    thirtieth of the cost of ``json.dumps``.

    Example:
        >>> _fingerprint([{"role": "user", "content": "hi"}]) == _fingerprint([{"role": "user", "content": "hi"}])
        True
        >>> _fingerprint([{"role": "user", "content": "hi"}]) == _fingerprint([{"role": "user", "content": "hi!"}])
        False
    """
    try:
        return marshal.dumps(value, 2)
    except (ValueError, TypeError):  # an object of the caller's own type: read afresh every call
        return None


def _message_prints(raws: List[Any]) -> Optional[List[bytes]]:
    """Return each message's exact fingerprint (_fingerprint of its JSON), or None if one has none."""
    prints = [_fingerprint(raw) for raw in raws]
    return None if None in prints else prints  # type: ignore[return-value]


def _memo_key(fmt: str, held: bool, head: List[_Msg], shell: Any) -> Optional[bytes]:
    """Return the fingerprint of what a read depends on besides its messages (see _FinishMemo)."""
    fields = {k: v for k, v in shell.items() if k not in ("messages", "input")} if isinstance(shell, dict) else shell
    return _fingerprint([fmt, held, [msg.raw for msg in head], fields])


class _NoResume(Exception):
    """A read resumed from a _FinishMemo met what only reading the whole list settles: read it whole."""


@dataclasses.dataclass(eq=False)
class _FinishMemo:
    """What _finish read, kept by a library Pager: its next read of the same messages with more at
    the end finishes only the new ones (issue 28, item 2).  A blank memo asks _finish to keep one.

    A read resumes only where reading the whole list would give the same Conversation: the same
    format, head and request fields (``key``), every earlier message the same (``prints``, each
    one's exact fingerprint), and before them nothing repaired, no call left without its result,
    and no last message that later ones could join (the format's ``may_join``).  The new messages
    must then, read on their own, repair nothing, hold no stub line and share no call id with the
    earlier ones.  The one thing new messages change before them is the assistant's conclusion
    (``pending``, see _floor_parts): its block is built again.  Anything else raises _NoResume.

    The objects read are the caller's (a message kept verbatim is written back as the very object
    it came as), and a caller may edit one in place after the call: a read is used again, on or
    whole, only while every object it read still has the fingerprint it had (``intact``).
    """

    key: Optional[bytes] = None       # format, held, head and the request's other fields, fingerprinted
    prints: List[bytes] = dataclasses.field(default_factory=list)  # each message's fingerprint, in order
    raws: List[Any] = dataclasses.field(default_factory=list)     # ...and the message each was taken of
    fmt: str = ""
    held: bool = False
    shell: Any = None                 # the request body read (its fields beside the messages are in ``key``)
    head: List[_Msg] = dataclasses.field(default_factory=list)
    msgs: List[_Msg] = dataclasses.field(default_factory=list)    # the messages kept, finished
    blocks: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    floors: Dict[int, str] = dataclasses.field(default_factory=dict)  # _floor_parts' first item
    pending: Optional[_Part] = None   # _floor_parts' second item
    turn: int = 0                     # the turn the last message leaves open
    used: set = dataclasses.field(default_factory=set)            # the block ids taken
    task_seen: bool = False           # a human's text was read: the task statement is behind
    keys: set = dataclasses.field(default_factory=set)            # the call ids of every call and result
    unknown: Dict[str, int] = dataclasses.field(default_factory=dict)
    clean: bool = False               # what is read may be continued (see above)

    def continued_by(self, key: Optional[bytes], prints: Optional[List[bytes]]) -> bool:
        """Return True if messages of ``key`` with ``prints`` are this read's messages and more."""
        done = len(self.prints)
        return (self.clean and key is not None and key == self.key and prints is not None
                and len(prints) > done and prints[:done] == self.prints and self.intact())

    def intact(self) -> bool:
        """Return True if every object this read took its fingerprints of has them still."""
        return (_message_prints(self.raws) == self.prints
                and _memo_key(self.fmt, self.held, self.head, self.shell) == self.key)


@dataclasses.dataclass
class Conversation:
    """A loaded history: pager blocks plus what emit needs to rebuild the same format."""
    fmt: str
    blocks: List[Dict[str, Any]]
    emit_format: str          # the format emit() writes it back in (its format class's emits_as)
    skipped_lines: int = 0
    repairs: List[str] = dataclasses.field(default_factory=list)
    # What the log recorded about the context a call really used (Claude Code and Codex usage):
    # recorded_context_tokens (the last call), recorded_baseline_tokens (the first call: system
    # prompt and tools, which the transcript does not hold); empty when the log has none.
    recorded: Dict[str, int] = dataclasses.field(default_factory=dict)
    other_lines: Dict[str, int] = dataclasses.field(default_factory=dict)    # non-conversation lines by type
    unknown_parts: Dict[str, int] = dataclasses.field(default_factory=dict)  # parts of types the pager does not know
    archived: int = 0  # blocks before a compaction boundary: stored as pages, never emitted
    definitions_tokens: int = 0  # a request body's tool definitions: sent with every request, never paged
    # Lines the reader does not send (Claude Code attachments: files re-read, queued input): blocks of
    # kind ASIDE_KIND, pages never emitted, added to a pass only before a compaction (see _aside_blocks).
    aside: List[Dict[str, Any]] = dataclasses.field(default_factory=list, repr=False)
    _msgs: List[_Msg] = dataclasses.field(default_factory=list, repr=False)
    _head: List[_Msg] = dataclasses.field(default_factory=list, repr=False)
    _shell: Any = dataclasses.field(default=None, repr=False)
    _memo: Optional["_FinishMemo"] = dataclasses.field(default=None, repr=False)  # see _FinishMemo


class _Format:
    """One transcript format: how the pager claims, reads, pairs, writes back and checks it (a subclass
    per format in _FORMATS: see "How to add a format"); the defaults are what most formats need not do."""

    name = ""              # its --format name
    emits_as = ""          # the format its compacted history is written in (the API it was sent to)
    jsonl = False          # one JSON object a line (read from the text), else one JSON document
    tool_api: Optional[str] = None  # the API whose shape its tool calls and results take (None: no tools)
    tool_call_type: Optional[str] = None  # an API class's: the ``type`` of a tool call in its shape
    per_block = False      # directives apply block by block: its blocks carry their own units (the pager's)
    # ``read_back(value, harness_texts)``: its written-back form read as its session, when that form
    # alone loses what told the harness's messages apart (SWE-agent's command outputs, Claude Code's
    # isMeta prompts; ``harness_texts``: the content ids the contract recorded, see HARNESS); None: as emitted.
    read_back: Optional[Callable[[Any, Container[str]], Conversation]] = None

    def takes_tool_call(self, call: Any) -> bool:
        """Return True if ``call`` is a tool call in this API's shape (the recall tool answers in it)."""
        return isinstance(call, dict) and call.get("type") == self.tool_call_type

    def claims(self, value: Any) -> bool:
        """Return True if a whole-file JSON value is a document of this format (asked in probe order)."""
        return False

    def claims_line(self, record: Dict[str, Any]) -> bool:
        """Return True if a JSONL record is a line of this format (asked in probe order)."""
        return False

    def read(self, document: Any, held: bool = False, memo: Optional["_FinishMemo"] = None) -> Conversation:
        """Return the Conversation of a document (a JSONL format: the text); ``held``: see pair.
        ``memo``: given to a format ``compact`` takes (LIBRARY_FORMATS) by a running Pager (see _FinishMemo)."""
        raise NotImplementedError

    def may_join(self, msg: _Msg) -> bool:
        """Return True if a message after ``msg``, the last one read, may be grouped with it or those
        before it beyond a call and its results, which pair by call id (see _FinishMemo)."""
        return False

    def pair(self, msgs: List[_Msg], repairs: List[str], held: bool) -> None:
        """Pair calls with results and repair the rest; ``held``: the server holds the earlier turns
        (see _continues_response), where an output may answer a call the history does not hold."""

    def units(self, msgs: List[_Msg]) -> None:
        """Group the parts that must share one directive beyond each call and its results."""

    def write(self, conv: Conversation, effective: Dict[str, Tuple[str, Optional[str]]]) -> Any:
        """Return the document with the settled directives applied, in the ``emits_as`` API's shape."""
        raise NotImplementedError

    def check(self, obj: Any) -> List[str]:
        """Return what the ``emits_as`` API would reject in ``obj`` ([] when valid)."""
        raise NotImplementedError


# The registry: every format by its --format name, in the order --help lists them (filled at the end of the section).
_FORMATS: Dict[str, _Format] = {}


def _type_name(value: Any) -> str:
    """Return the JSON type name of a Python value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _parse_json(text: str, where: str = "input") -> Any:
    """Return the parsed JSON value or raise a one-line PagerError."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise PagerError(f"{where}: invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})") from None
        raise PagerError(f"{where}: invalid JSON ({_decode_problem(exc) or exc})") from None


class _JsonlHead(NamedTuple):
    """A JSONL text's first records as detection parsed them, for its reader to go on from."""

    text: str                                  # the text they were read from (the reader checks it is its own)
    lines: int                                 # lines read: the reader parses from the next one
    offset: int                                # where the next line starts in ``text``
    records: List[Tuple[int, Dict[str, Any]]]  # (line number, object) of each line that parsed as an object
    skipped: int                               # lines that did not


# id(text) -> detection's head of that text, while ``_load`` has its reader read it (see _jsonl_records).
_JSONL_HEADS: Dict[int, _JsonlHead] = {}
_JSON_SCAN = json.JSONDecoder().scan_once  # json.loads' own scanner, called without its per-call wrapping
_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # the white space JSON allows around a value (str.isspace allows more)


def _json_line(line: str) -> Any:
    """Return the JSON value of one JSONL line, as ``json.loads`` reads it; ValueError or RecursionError if none.

    Example:
        >>> _json_line('{"a": [1, 2]} '), _json_line(' {"a": 1}')
        ({'a': [1, 2]}, {'a': 1})
    """
    try:
        value, end = _JSON_SCAN(line, 0)
    except StopIteration:  # no value at its first character (white space, or none): json.loads tells
        return json.loads(line)
    if end != len(line) and _JSON_SPACE.match(line, end).end() != len(line):  # JSON's white space only
        raise ValueError("extra data after the line's JSON value")
    return value


def _jsonl_records(text: str) -> Tuple[List[Tuple[int, Dict[str, Any]]], int]:
    r"""Return (line number, object) for each JSONL line that parses, and the skipped count.

    Lines end at ``\n`` only (a ``\r`` before it is JSON white space). Never ``str.splitlines()``:
    it also breaks at U+2028, U+2029, U+0085, ``\x0b``, ``\x0c`` and ``\x1c``-``\x1e``, which JSON
    allows raw inside a string, and would cut such a record in two. The lines detection parsed (a
    head ``_load`` hands over for this very text) are not parsed again.

    Example:
        >>> _jsonl_records('{"text": "a\u2028b"}\r\n[1]\n{}')
        ([(1, {'text': 'a\u2028b'}), (3, {})], 1)
    """
    head = _JSONL_HEADS.pop(id(text), None)
    if head is not None and head.text is text:
        records, skipped, number, start = list(head.records), head.skipped, head.lines, head.offset
    else:
        records, skipped, number, start = [], 0, 0, 0
    # Each line's value is scanned where it lies in the text (no copy of every line, tens of MB on
    # a long log), and counts when it ends within its line, as json.loads reads the line alone
    # (_json_line); whatever else happens the line is read alone. After a value that ran past its
    # line (a malformed log), every line is read alone: no scan reads far beyond its own line.
    size = len(text)
    scan, space = _JSON_SCAN, _JSON_SPACE.match
    alone = False
    while start <= size:
        end = text.find("\n", start)
        if end < 0:
            end = size
        number += 1
        line_start, start = start, end + 1
        if line_start == end:
            continue  # blank
        if not alone:
            try:
                obj, stop = scan(text, line_start)
            except json.JSONDecodeError as exc:
                if exc.pos <= end:  # the line's own characters are not JSON: read alone, neither are they
                    skipped += 1
                    continue
                alone = True
            except (StopIteration, ValueError, RecursionError):
                pass  # white space first, no value, a number too long, too deep: the line alone tells
            else:
                if stop <= end:
                    if stop != end and space(text, stop, end).end() != end:  # JSON's white space only
                        skipped += 1  # extra data after the line's value
                    elif type(obj) is dict:
                        records.append((number, obj))
                    else:
                        skipped += 1
                    continue
                alone = True
        line = text[line_start:end]
        if line.isspace():  # blank (strip() would copy every line to tell)
            continue
        try:
            obj = _json_line(line)
        except (ValueError, RecursionError):  # too deep or too long a number: unreadable too
            skipped += 1
            continue
        if isinstance(obj, dict):
            records.append((number, obj))
        else:
            skipped += 1
    return records, skipped


DETECT_LINES = 2000  # JSONL records detection looks at: enough to tell; its reader goes on from there


def _jsonl_head(text: str, limit: int) -> _JsonlHead:
    """Return the head of a JSONL text: its lines up to the ``limit``-th that parses as an object.

    Lines are found one at a time (``\n`` only, as _jsonl_records reads them): a huge log is not split whole to be told.
    """
    records: List[Tuple[int, Dict[str, Any]]] = []
    start, number, skipped = 0, 0, 0
    while len(records) < limit and start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line, start, number = text[start:end], end + 1, number + 1
        if not line or line.isspace():
            continue
        try:
            obj = _json_line(line)
        except (ValueError, RecursionError):  # too deep or too long a number: unreadable too
            skipped += 1
            continue
        if isinstance(obj, dict):
            records.append((number, obj))
        else:
            skipped += 1
    return _JsonlHead(text, number, start, records, skipped)


_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # json.dumps would make one a call


def _compact_json(value: Any) -> str:
    """Return value as compact JSON (tool arguments in block text)."""
    return _COMPACT_JSON.encode(value)


# What the providers charge for an image (their vision documentation): Anthropic about
# width * height / 750 tokens after scaling the long side to at most 1568 px (so at most about
# 1,600 a picture); OpenAI "high" detail 85 + 170 per 512 px tile after fitting 2048 x 2048 and
# then the short side to 768, "low" detail 85.  Without dimensions the data size decides, capped
# at the provider's most for one picture; a document or file is counted from its data size.
ANTHROPIC_IMAGE_EDGE = 1568
ANTHROPIC_IMAGE_PIXELS_PER_TOKEN = 750
ANTHROPIC_IMAGE_MAX = 1600
OPENAI_IMAGE_BASE, OPENAI_IMAGE_TILE, OPENAI_IMAGE_MAX = 85, 170, 85 + 170 * 6
MEDIA_BYTES_PER_TOKEN = 750  # unknown dimensions: about a token per 750 bytes of picture data
# Picture parts: Anthropic's, Chat's, Responses' input, and a computer-use call's screenshot output
# (Responses ``computer_screenshot``: an ``image_url`` string, counted by OpenAI's rule).
IMAGE_PART_TYPES = ("image", "image_url", "input_image", "computer_screenshot")
_B64_HEAD = 4096  # base64 characters decoded at a time while looking for the dimensions
# What audio costs (OpenAI's audio models take it) goes by its length: accounts of the rate run
# from a token per 100 ms of a user's audio to about 1,000 a minute, and a token per 50 ms of the
# model's own; the pager takes a token per 50 ms for all audio, so it never counts short.  The
# length comes from a WAV header's byte rate; any other encoding is taken at 128 kbit/s, which can
# overstate a lower bitrate's length, never understate it.  A spoken reply sent back by its id alone
# counts about 6 audio tokens for each token of its transcript (speech is about 3 text tokens a
# second), else as unknown media.
AUDIO_TOKENS_PER_SECOND = 20
COMPRESSED_AUDIO_BYTES_PER_SECOND = 16000
REPLY_AUDIO_PER_TEXT_TOKEN = 6


def _b64_bytes(data: str, count: int) -> bytes:
    """Return the first bytes of base64 ``data`` (about ``count``), b'' when it does not decode."""
    import base64
    chars = -(-count // 3) * 4
    try:
        return base64.b64decode(data[:chars].strip() + "=" * (-len(data[:chars].strip()) % 4))
    except ValueError:
        return b""


def _jpeg_size(data: str) -> Optional[Tuple[int, int]]:
    """Return (width, height) from a JPEG's first frame header, decoding only as far as it lies."""
    want = _B64_HEAD
    while True:
        head = _b64_bytes(data, want)
        i = 2
        while i + 9 < len(head):
            if head[i] != 0xFF:
                return None
            marker = head[i + 1]
            if marker == 0xFF or marker == 0x01 or 0xD0 <= marker <= 0xD7:
                i += 1 if marker == 0xFF else 2
                continue
            length = int.from_bytes(head[i + 2:i + 4], "big")
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                return int.from_bytes(head[i + 7:i + 9], "big"), int.from_bytes(head[i + 5:i + 7], "big")
            i += 2 + length
        if len(head) < want * 3 // 4 - 3 or want > 1 << 22:
            return None  # the data ended (or is absurd) before a frame header
        want = max(want * 2, (i + 16) * 4 // 3 + 8)


def _audio_seconds(data: str) -> float:
    """Return the length in seconds of base64 audio ``data`` (see AUDIO_TOKENS_PER_SECOND).

    Example:
        >>> _audio_seconds("AAAA" * 16000)  # 48,000 bytes, not a WAV: taken at 128 kbit/s
        3.0
    """
    size = len(data.rstrip("=")) * 3 // 4
    head = _b64_bytes(data, 44)
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE" and len(head) >= 32:
        rate = int.from_bytes(head[28:32], "little")
        if rate > 0:
            return max(0, size - 44) / rate
    return size / COMPRESSED_AUDIO_BYTES_PER_SECOND


def _image_size(data: str) -> Optional[Tuple[int, int]]:
    """Return (width, height) of a base64 PNG, GIF, WebP or JPEG picture, or None.

    Only the header is decoded (JPEG: as far as its first frame header).

    Example:
        >>> _image_size("R0lGODlhgALgAQAAAAAAAAAA")  # base64 of a GIF header for 640 x 480
        (640, 480)
    """
    if not isinstance(data, str) or not data:
        return None
    head = _b64_bytes(data, 64)
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and len(head) >= 24:
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP" and len(head) >= 30:
        chunk = head[12:16]
        if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
            return (int.from_bytes(head[26:28], "little") & 0x3FFF,
                    int.from_bytes(head[28:30], "little") & 0x3FFF)
        if chunk == b"VP8L" and head[20] == 0x2F:
            bits = int.from_bytes(head[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        if chunk == b"VP8X":
            return int.from_bytes(head[24:27], "little") + 1, int.from_bytes(head[27:30], "little") + 1
        return None
    if head[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _anthropic_image_tokens(size: Tuple[int, int]) -> int:
    """Return Anthropic's charge for a picture of ``size`` (scaled to its edge limit first)."""
    width, height = size
    scale = min(1.0, ANTHROPIC_IMAGE_EDGE / max(width, height, 1))
    pixels = int(width * scale) * int(height * scale)
    return min(ANTHROPIC_IMAGE_MAX, max(1, -(-pixels // ANTHROPIC_IMAGE_PIXELS_PER_TOKEN)))


def _openai_image_tokens(size: Tuple[int, int], detail: Any) -> int:
    """Return OpenAI's charge for a picture of ``size`` at ``detail`` (the tile rule)."""
    if detail == "low":
        return OPENAI_IMAGE_BASE
    width, height = (float(v) for v in size)
    fit = min(1.0, 2048 / max(width, height, 1))
    width, height = width * fit, height * fit
    short = min(1.0, 768 / max(min(width, height), 1))
    width, height = width * short, height * short
    tiles = math.ceil(width / 512) * math.ceil(height / 512)
    return OPENAI_IMAGE_BASE + OPENAI_IMAGE_TILE * tiles


# An assistant message's spoken reply in Chat Completions (audio output): ``{"id"}`` as clients send it
# back, the whole response object (data, transcript) as some echo it.  Read as one ``media`` part
# {"type": "audio", "audio": <the field>} (see _reply_audio): kept whole or evicted, never paged.
CHAT_AUDIO_FIELD = "audio"


def _media_data(part: Dict[str, Any]) -> Tuple[Optional[str], Any]:
    """Return (base64 data or None, OpenAI detail) of a picture, document, file or audio part.

    Only data carried in the part counts: a link or a file id gives None.
    """
    source = part.get("source")
    if isinstance(source, dict):  # Anthropic image/document: data only for a base64 source
        data = source.get("data") if source.get("type") == "base64" else None
        return (data if isinstance(data, str) else None), None
    image = part.get("image_url")
    if isinstance(image, dict):  # Chat: {"image_url": {"url", "detail"}}
        url, detail = image.get("url"), image.get("detail")
    else:  # Responses: {"image_url": "...", "detail"}
        url, detail = image, part.get("detail")
    if not isinstance(url, str):
        inner = part.get("file") if isinstance(part.get("file"), dict) else part
        url = inner.get("file_data")
        audio = part.get("input_audio", part.get(CHAT_AUDIO_FIELD))
        if not isinstance(url, str) and isinstance(audio, dict):
            url = audio.get("data")
            return (url if isinstance(url, str) else None), None
    if isinstance(url, str) and url.startswith("data:"):
        return url.partition(",")[2], detail
    if isinstance(url, str) and image is None and not url.startswith(("http:", "https:")):
        return url, detail  # a file's raw base64 data
    return None, detail


def _media_tokens(part: Any) -> int:
    """Return what a provider charges for a picture, document, file or audio part, never a placeholder's few tokens.

    Pictures: by their dimensions (read from the base64 header) with Anthropic's rule for an
    Anthropic ``image`` part and OpenAI's tile rule for ``image_url`` / ``input_image``; from
    the data size when the dimensions are unknown (at most the provider's most for one
    picture; a URL or file id with no data counts as that most).  An Anthropic document of plain
    text (or of custom content blocks) counts its text.  Other documents, files and audio: from
    the data size (a token per 3 bytes of a PDF's text layer is not knowable here), at least the
    picture maximum when nothing else is known.

    Example:
        >>> _media_tokens({"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}})
        85
    """
    if not isinstance(part, dict):
        return 0
    kind = part.get("type")
    source = part.get("source")
    if kind == "document" and isinstance(source, dict) and source.get("type") in ("text", "content"):
        # A plain-text document is charged as its text, a custom-content one as its blocks.
        inner = source.get("data") if source["type"] == "text" else source.get("content")
        tokens = estimate_tokens(" ".join(str(part.get(k) or "") for k in ("title", "context")))
        for block in inner if isinstance(inner, list) else [{"type": "text", "text": inner}]:
            if isinstance(block, dict) and block.get("type") in IMAGE_PART_TYPES:
                tokens += _media_tokens(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                tokens += estimate_tokens(block["text"])
        return tokens
    data, detail = _media_data(part)
    if kind in IMAGE_PART_TYPES:
        anthropic = kind == "image"
        size = _image_size(data) if data else None
        if size is not None:
            return _anthropic_image_tokens(size) if anthropic else _openai_image_tokens(size, detail)
        if detail == "low" and not anthropic:
            return OPENAI_IMAGE_BASE
        most = ANTHROPIC_IMAGE_MAX if anthropic else OPENAI_IMAGE_MAX
        if not data:
            return most
        return min(most, max(OPENAI_IMAGE_BASE, len(data) * 3 // 4 // MEDIA_BYTES_PER_TOKEN))
    if kind in ("input_audio", "audio"):  # "audio": a spoken reply (see _reply_audio)
        if data:
            return max(1, math.ceil(_audio_seconds(data) * AUDIO_TOKENS_PER_SECOND))
        reply = part.get(CHAT_AUDIO_FIELD)
        transcript = reply.get("transcript") if isinstance(reply, dict) else None
        if isinstance(transcript, str) and transcript.strip():
            return REPLY_AUDIO_PER_TEXT_TOKEN * estimate_tokens(transcript)
    if not data:
        return ANTHROPIC_IMAGE_MAX
    return max(ANTHROPIC_IMAGE_MAX, len(data) * 3 // 4 // 3)


def _media_label(part: Dict[str, Any]) -> str:
    """Return the short text a picture/document/file part is scored and shown by."""
    kind = part.get("type")
    if kind in IMAGE_PART_TYPES:
        data, _ = _media_data(part)
        size = _image_size(data) if data else None
        shape = f" {size[0]}x{size[1]}" if size else ""
        return f"[image{shape}, {_media_tokens(part)} tokens]"
    if kind in ("input_audio", "audio"):
        reply = part.get(CHAT_AUDIO_FIELD)
        transcript = reply.get("transcript") if isinstance(reply, dict) else None
        return f"[audio: {transcript}]" if isinstance(transcript, str) and transcript.strip() else "[audio]"
    if kind == "document":
        title = part.get("title")
        return f"[document: {title}]" if isinstance(title, str) and title else "[document]"
    inner = part.get("file") if isinstance(part.get("file"), dict) else part
    name = inner.get("filename")
    return f"[file: {name}]" if isinstance(name, str) and name else "[file]"


MEDIA_PART_TYPES = frozenset(IMAGE_PART_TYPES) | {"input_audio", "audio", "document", "file", "input_file"}


def _reply_audio(raw: Dict[str, Any], where: str, pos: int) -> Optional[_Part]:
    """Return an assistant message's spoken reply (CHAT_AUDIO_FIELD) as a ``media`` part, else None.

    Its text names the transcript when the message carries one; it counts what the provider
    charges for audio (_media_tokens: from the data when sent, else the most for unknown media).
    """
    audio = raw.get(CHAT_AUDIO_FIELD)
    if not isinstance(audio, dict) or not audio:
        return None
    voice = {"type": "audio", CHAT_AUDIO_FIELD: audio}
    return _Part("media", voice, f"{where}.{CHAT_AUDIO_FIELD}", text=_media_label(voice), pos=pos)


def _is_reply_audio(part: _Part) -> bool:
    """Return True for the part _reply_audio read (a message field, not a content part)."""
    return part.kind == "media" and isinstance(part.raw, dict) and CHAT_AUDIO_FIELD in part.raw \
        and part.raw.get("type") == "audio"


LABEL_FIELD_CHARS = 200  # an unknown part's label names its string fields up to this many characters


def _part_text(part: Any) -> str:
    """Return readable text of one content part; media become short labels (see _media_label).

    A part of a type the pager does not know is labelled by its type and, when they are short,
    its string fields (a Claude Code tool search's ``tool_reference`` reads "[tool_reference:
    WebSearch]"), so a page of it gives back what it named.
    """
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return _compact_json(part)
    kind = part.get("type")
    if kind in TEXT_PART_TYPES:
        text = part.get("text")
        return text if isinstance(text, str) else ""
    if kind == "refusal":
        return str(part.get("refusal", ""))
    if isinstance(kind, str) and kind in MEDIA_PART_TYPES:
        return _media_label(part)
    if kind == "search_result":  # Anthropic: a source's text blocks, under its title and address
        inner = part.get("content")
        texts = [b["text"] for b in inner if isinstance(b, dict) and isinstance(b.get("text"), str)] \
            if isinstance(inner, list) else []
        named = ", ".join(v for v in (part.get("title"), part.get("source")) if isinstance(v, str) and v)
        return "\n".join([f"[search_result: {named}]"] + texts)
    if not isinstance(kind, str):
        return _compact_json(part)
    named = [v for k, v in part.items() if k != "type" and isinstance(v, str) and v.strip()]
    short = named and sum(map(len, named)) <= LABEL_FIELD_CHARS
    return f"[{kind}: {', '.join(named)}]" if short else f"[{kind}]"


def _flatten(content: Any) -> str:
    """Return the readable text of a tool output (string, part list or Codex payload)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_part_text(p) for p in content) if t)
    if isinstance(content, dict):
        if "content" in content:  # Codex FunctionCallOutputPayload {content, success}
            return _flatten(content["content"])
        return _part_text(content)
    return _compact_json(content)


def _output_text(output: Any) -> str:
    """Return the readable text of a Responses/Codex tool output, "[error] " first on failure.

    Codex stores some outputs as JSON text {"output": ..., "metadata": {"exit_code": N}} and
    older rollouts as {"content": ..., "success": false}; both are unwrapped.
    """
    failed = isinstance(output, dict) and output.get("success") is False
    if isinstance(output, str) and output.startswith("{"):
        try:
            decoded = json.loads(output)
        except (ValueError, RecursionError):
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
            meta = decoded.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            failed = isinstance(code, int) and code != 0
            output = decoded["output"]
    return ("[error] " if failed else "") + _flatten(output)


def _text_part(where: str, raw: Any, text: str, pos: int) -> _Part:
    """Return a text part."""
    return _Part("text", raw, where, text=text, pos=pos)


def _safe_id(value: str) -> str:
    """Return value with what a contract line or a stub can't carry replaced (see docstring)."""
    return ID_PIPE_RE.sub("_", _ID_UNSAFE_RE.sub("_", value))


def _content_id(role: str, kind: str, text: str, raw: Any = None) -> str:
    """Return the content-derived id of a block with no native id.

    A picture, reasoning item or other non-text part also hashes its raw JSON (``raw``), so two
    such parts with the same label but different data get different ids; so does a thinking
    block whose text says nothing (Claude Code writes ``"thinking": ""`` with a signature in
    every turn; redacted thinking is a label): its signature or data tells it apart.

    Example: _content_id("user", "text", "hi") == "m-" + sha256(b"user\\x00text\\x00hi")[:12]
    """
    key = f"{role}\x00{kind}\x00{text}"
    if raw is not None and (kind in ("media", "reasoning", "other")
                            or (kind == "thinking" and (not text.strip() or text == REDACTED_THINKING))):
        key += "\x00" + json.dumps(raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return CONTENT_ID_PREFIX + digest[:CONTENT_ID_DIGITS]


def _stub_lines(text: str) -> List[Tuple[str, str]]:
    """Return (stub, id) for each stub when text is only stubs, else [].

    A stub is one line, or a giant's lines: its header (ending "| head and tail]") down to
    its end line, taken whole.
    """
    if "[paged " not in text:  # every stub starts so: most texts are told apart without splitting them
        return []
    found = []
    lines = text.splitlines()
    at = 0
    while at < len(lines):
        line = lines[at].strip()
        at += 1
        if not line:
            continue
        match = STUB_LINE_RE.match(line)
        if match is None:
            return []
        if line.endswith(" | head and tail]"):
            end = _giant_end(match.group(1))
            stop = next((k for k in range(at, len(lines)) if lines[k] == end), None)
            if stop is None:
                return []
            line, at = "\n".join([line, *lines[at:stop + 1]]), stop + 1
        found.append((line, match.group(1)))
    return found


def _expand_stubs(msg: "_Msg") -> None:
    """Replace each text part of msg that holds only stub lines by one part per line."""
    parts: List[_Part] = []
    for part in msg.parts:
        if part.kind == "result":
            # A result paged in place (observation masking) holds its stub: it keeps its place and pair.
            lines = _stub_lines(part.text)
            if len(lines) == 1:
                part.stub_id = lines[0][1]
            parts.append(part)
            continue
        lines = _stub_lines(part.text) if part.kind == "text" else []
        if not lines:
            parts.append(part)
            continue
        for line, stub_id in lines:
            parts.append(_Part("text", part.raw, part.where, text=line, pos=part.pos,
                               stub_id=stub_id, source=part))
    msg.parts = parts


def _sole(parts: List[_Part], count: int) -> List[_Part]:
    """Mark the only part of a one-part message (its block takes the message id)."""
    if count == 1:
        for part in parts:
            part.pos = 0
    return parts


def _drop(msg: _Msg, part: _Part, repairs: List[str], why: str) -> None:
    """Remove part from msg and report why."""
    msg.parts.remove(part)
    msg.repaired = True
    repairs.append(f"{part.where} {why}; dropped")


def _runs(msgs: List[_Msg]) -> List[List[_Msg]]:
    """Return msgs grouped into runs of consecutive same-role messages."""
    runs: List[List[_Msg]] = []
    for msg in msgs:
        if runs and runs[-1][0].role == msg.role:
            runs[-1].append(msg)
        else:
            runs.append([msg])
    return runs


def _assign_ids(msgs: List[_Msg], used: Optional[set] = None) -> None:
    """Give every part a unique block id (see the module docstring).

    A repeated native id (SWE-agent reuses tool call ids) gets ``~`` and 6 hex digits of its
    content id.  A repeated content id (the same text again) gets ``~t<turn>`` (the turn it sits
    in), then ``.2``, ``.3``... within that turn: turns are numbered by the human's messages,
    which a pass never evicts, so evicting an earlier copy in another turn cannot renumber a
    later one.
    """
    used = set() if used is None else used
    # The ids the pager's own stubs name come first: a kept copy of the same text that the
    # output puts before its paged twin's stub (two messages merged) must not take that id.
    named = {_safe_id(part.stub_id) for msg in msgs for part in msg.parts if part.stub_id is not None}
    named -= used
    used |= named

    def take(want: str, turn: int, content: Callable[[], str]) -> str:
        if want not in used:
            used.add(want)
            return want
        if not want.startswith(CONTENT_ID_PREFIX):  # a native id used again (SWE-agent): by content
            want = f"{want}~{content()[len(CONTENT_ID_PREFIX):len(CONTENT_ID_PREFIX) + 6]}"
            if want not in used:
                used.add(want)
                return want
        base = f"{want}~t{turn}"
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}.{n}"
        used.add(name)
        return name

    for msg in msgs:
        mid = _safe_id(msg.mid) if isinstance(msg.mid, str) and msg.mid else None
        for part in msg.parts:
            if part.stub_id is not None:
                want = _safe_id(part.stub_id)
                if want in named:  # reserved above for this stub (the first that names it)
                    named.discard(want)
                    part.bid = want
                    continue
            elif part.kind == "call" and part.key and part.key != LEGACY_FUNCTION_KEY:
                want = _safe_id(part.key)
            elif part.kind == "result" and part.partner is not None:
                want = part.partner.bid + ":result"
            elif part.pos == 0 and mid:
                want = mid
            else:
                want = _content_id(msg.role, part.kind, part.text, part.raw)
            if want not in used:
                used.add(want)
                part.bid = want
                continue
            # The content id is worked out again only for a native id used twice, not for every part.
            part.bid = take(want, part.turn, lambda: _content_id(msg.role, part.kind, part.text, part.raw))

def _assign_units(msgs: List[_Msg], units: Optional[Callable[[List[_Msg]], None]]) -> None:
    """Group parts that must share one directive: each call with its results, plus the format's ``units``."""
    for msg in msgs:
        links: Dict[str, str] = {}
        for part in msg.parts:
            if part.kind == "call":
                part.unit = f"tool:{part.bid}"
            elif part.link is not None:
                part.unit = links.setdefault(part.link, f"tool:{part.bid}")
    if units is not None:
        units(msgs)
    for msg in msgs:
        for part in msg.parts:
            if part.kind == "result" and part.partner is not None:
                part.unit = part.partner.unit


# How mini-swe-agent's saved trajectory (``.traj.json``: ``info`` and a ``messages`` list) names its
# layout in ``trajectory_format``: a trajectory (format swe-agent), not a request body.
MINI_SWE_AGENT_LAYOUT = "mini-swe-agent"


def _is_mini_swe_agent_run(value: Any) -> bool:
    """Return True for a saved mini-swe-agent run: an object whose ``trajectory_format`` names its
    layout, or a bare message list with a command's output sent as a user message (its 1.x runs
    saved just the messages).  Every user message after its task is the harness's, the last one
    often the submitted diff, so it is read as a trajectory (format swe-agent), not a request."""
    if isinstance(value, dict):
        layout = value.get("trajectory_format")
        return isinstance(layout, str) and layout.startswith(MINI_SWE_AGENT_LAYOUT)
    return isinstance(value, list) and any(
        isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str)
        and m["content"].startswith(_MARKUP.rows["mini-swe-agent"].text) for m in value)


# Part types the pager knows beyond text, media, calls, results and thinking (carried as they are).
KNOWN_OTHER_PARTS = frozenset({"server_tool_use", "compaction", "refusal", "container_upload",
                               "search_result"}) | RESPONSES_ITEM_TYPES
# Parts carried as they are whose text says what they hold: a refusal, a server tool's or MCP call
# (name and input).  Any other such part (a web search's results, a code run's output object, a
# hosted tool's item) is read by a label only: block kind OPAQUE, never paged, like a picture.
WHOLE_TEXT_PARTS = frozenset({"refusal", "server_tool_use", "mcp_tool_use"})


def _is_instruction(msg: _Msg, part: _Part) -> bool:
    """Return True if ``part`` is instructions the harness sent as a user message (HARNESS_MARKUP).

    The model follows them as it follows the system prompt (a repository's AGENTS.md rules, the
    working directory and sandbox), so a pass without a budget keeps them like it (``protected``
    INSTRUCTIONS): evicted, they would be gone for good.
    """
    return (msg.role == "user" and part.kind == "text" and part.stub_id is None
            and part.text.lstrip().startswith(_MARKUP.instructions))


def _is_agent_report(msg: _Msg, part: _Part) -> bool:
    """Return True if text ``part`` of user message ``msg`` is a coding agent's tool report (see
    HARNESS_MARKUP), or the block right after a report's bare header, and relays no human words."""
    text = part.text.lstrip()
    if not _MARKUP.is_report(text):
        at = msg.parts.index(part)
        before = msg.parts[at - 1] if at else None
        if before is None or before.kind != "text" or not _MARKUP.is_report(before.text, whole=True):
            return False
    return not any(tag in text for tag in _MARKUP.relayed)


def _is_human(msg: _Msg, part: _Part) -> bool:
    """Return True if ``part`` of ``msg`` is text a human wrote (see human_requests).

    Judged per text part, not per message: the Anthropic body a pass writes merges a user's
    words into the user message before them (tool results, a paged note).
    """
    if msg.role != "user" or msg.harness or part.harness or msg.item or part.kind != "text" \
            or part.stub_id is not None or _is_agent_report(msg, part):
        return False
    # A slash command's tags are the harness's, but the arguments after it are what the human typed;
    # so are the words after an IDE's context in the same block.
    return not _MARKUP.opens_harness_text(part.text) or _MARKUP.typed_command(part.text) is not None \
        or _MARKUP.after_context(part.text) is not None


def _is_pager_note(msg: _Msg) -> bool:
    """Return True for the user note the pager inserts where the APIs need a user message."""
    return (msg.role == "user" and len(msg.parts) == 1 and msg.parts[0].kind == "text"
            and msg.parts[0].text.strip() == OMITTED_NOTE)


def _number_turns(msgs: List[_Msg], turn: int = 0) -> int:
    """Number turns by the human's requests: each opens the next turn; the rest join the current one.
    Return the turn the last message leaves open (``turn``: the one open before the first).

    A request is a text part a human wrote, not a message: the Anthropic body a pass writes merges
    consecutive user messages (a slash command and the request after it), and the turns must not
    change when it is read back.
    A message holding a stub takes the turn its stub recorded (the stub stands where the message
    was), so a later pass numbers every block as the pass that paged it did.  The human's messages
    are never evicted (they are paged at worst), so the count survives a pass.
    """
    for msg in msgs:
        if msg.role == "user":
            for part in msg.parts:
                part.human = _is_human(msg, part)
            msg.human = any(p.human for p in msg.parts)
        else:  # no part of another role's message is (_is_human); the defaults say so
            for part in msg.parts:
                part.human = False
            msg.human = False
        if msg.human and not any(p.stub_id is not None for p in msg.parts):
            # Each request opens the next turn.  Before the first, what the harness wrote (a tool
            # result, its text: lines of their own before the pass merged them) stays in the turn
            # before; anything else (a picture the human attached) opens the new one.
            ahead = True
            for part in msg.parts:
                if part.human:
                    turn += 1
                    ahead = False
                part.turn = turn + 1 if ahead and part.kind not in ("text", "result") else turn
        else:
            for part in msg.parts:
                if part.stub_id is not None:
                    match = STUB_LINE_RE.match(part.text)
                    turn = int(match.group(2)) if match else turn
                elif part.human:
                    turn += 1
                part.turn = turn
        msg.turn = msg.parts[0].turn if msg.parts else turn  # 0 before the first request
    return turn


def _floor_parts(msgs: List[_Msg], found: Optional[Dict[int, str]] = None,
                 last: Optional[_Part] = None) -> Tuple[Dict[int, str], Optional[_Part]]:
    """Return (id(part) -> "summary", "conclusion" or "human" for the parts a pass pages at worst,
    the assistant's last text no human message has followed yet).

    A compaction summary's text, what a human attached, and each assistant's conclusion: the
    last text part the assistant wrote before the human's next message (or the end: the second
    item, a conclusion too while no message follows it); a spoken reply, which no stub can stand
    for, is kept whole.  ``found`` and ``last`` are what the messages before ``msgs`` gave.
    """
    found = {} if found is None else found
    for msg in msgs:
        # An assistant's words: its text, or its spoken reply (Chat audio output, kept whole).
        texts = [p for p in msg.parts if (p.kind == "text" or _is_reply_audio(p)) and p.stub_id is None]
        if msg.human:
            if last is not None:
                found[id(last)] = "conclusion"
            last = None
            for part in msg.parts:  # what the human attached (a screenshot, a file) is theirs too
                if part.kind == "media" and part.stub_id is None:
                    found[id(part)] = "human"
        elif msg.role == "user" and (msg.summary or (texts and texts[0].text.lstrip().startswith(_MARKUP.summaries))):
            for part in texts:
                found[id(part)] = "summary"
        elif msg.role == "assistant" and texts:
            last = texts[-1]
    return found, last


def _media_inside(value: Any) -> List[Any]:
    """Return the picture/document/file parts inside a tool result's content."""
    if isinstance(value, dict):
        if isinstance(value.get("type"), str) and value["type"] in MEDIA_PART_TYPES:
            return [value]
        return _media_inside(value.get("content")) if "content" in value else []
    if isinstance(value, list):
        return [m for item in value for m in _media_inside(item)]
    return []


def _is_compaction_part(part: _Part) -> bool:
    """Return True for a provider's compaction (an Anthropic ``compaction`` block, a Responses or
    Codex ``compaction`` item): the model's whole past before it, in a form only the provider reads."""
    return part.kind == "other" and isinstance(part.raw, dict) and part.raw.get("type") == COMPACTION


def _part_kind_of_block(part: _Part) -> Optional[str]:
    """Return the block kind the engine sees: ``media`` for a picture/file or a result holding one,
    ``opaque`` for a part carried as it is whose text is only a label (see WHOLE_TEXT_PARTS)."""
    if part.kind == "media":
        return "media"
    if part.kind == "other" and isinstance(part.raw, dict) and part.raw.get("type") not in WHOLE_TEXT_PARTS \
            and not _is_compaction_part(part):
        return OPAQUE
    if part.kind == "result" and isinstance(part.raw, dict):
        inner = part.raw.get("content", part.raw.get("output"))
        if _media_inside(inner):
            return "media"
    return None


# A text part's own keys: its text (a refusal part's is "refusal"), its type, a cache marker.
TEXT_PART_KEYS = ("type", "text", "refusal", "cache_control")
_TEXT_PART_KEYSET = frozenset(TEXT_PART_KEYS)


def _own_tokens(part: _Part) -> Optional[int]:
    """Return a part's own token count when its text is not its whole size, else None.

    Pictures and files count what the provider charges for them; a part the pager carries as it
    is (kind "other") counts its JSON.  A tool call and a tool
    result each also send the call id that pairs them (Codex and Responses ids run to 30
    characters and more), so a part with one counts it beside its text; so does a Responses
    reasoning item its own id.
    """
    ids = estimate_tokens(part.key) if part.key and part.kind in ("call", "result") else 0
    if part.kind == "reasoning" and isinstance(part.raw, dict) and isinstance(part.raw.get("id"), str):
        ids = estimate_tokens(part.raw["id"])  # a Responses reasoning item's id (rs_ and 50 characters)
    if part.kind == "text" and isinstance(part.raw, dict):
        # What a text part carries beside its text is sent with it (an Anthropic block's citations,
        # a Responses output_text's annotations): counted as its JSON.
        if part.raw.keys() <= _TEXT_PART_KEYSET:  # nothing beside it (the usual text part)
            return None
        extra = {k: v for k, v in part.raw.items() if k not in TEXT_PART_KEYS and v not in (None, "", [], {})}
        return estimate_tokens(part.text) + estimate_tokens(_compact_json(extra)) if extra else None
    if part.kind == "media":
        return _media_tokens(part.raw)
    if part.kind == "other" and isinstance(part.raw, dict):
        # Carried as it is (a server tool's result, an MCP call, a compaction): its text is only a
        # label, and all of it is sent.
        return estimate_tokens(_compact_json(part.raw))
    if part.kind == "result" and isinstance(part.raw, dict):
        media = _media_inside(part.raw.get("content", part.raw.get("output")))
        if media:
            return ids + estimate_tokens(part.text) + sum(_media_tokens(m) for m in media)
    return ids + estimate_tokens(part.text) if ids else None


def _part_tokens(part: _Part) -> Optional[int]:
    """Return a part's token count when its text is not its whole size, else None: what
    _own_tokens says, plus what its message carries beside it (``carried``)."""
    own = _own_tokens(part)
    if not part.carried:
        return own
    return (own if own is not None else estimate_tokens(part.text)) + part.carried


def _unknown_types(msgs: List[_Msg]) -> Dict[str, int]:
    """Return how many parts of each type the pager does not know (carried through untouched)."""
    found: Dict[str, int] = {}
    for msg in msgs:
        for part in msg.parts:
            if part.kind != "other":
                continue
            kind = part.raw.get("type") if isinstance(part.raw, dict) else None
            if isinstance(kind, str) and kind not in KNOWN_OTHER_PARTS and not kind.endswith(ANTHROPIC_MARKER_SUFFIX):
                found[kind] = found.get(kind, 0) + 1
    return found


def _archive_blocks(archive: List[_Msg], used: set) -> List[Dict[str, Any]]:
    """Return the blocks of messages before a compaction boundary: pages, never emitted.

    Their calls and results pair loosely (by id, nothing dropped: nothing here is sent again);
    ids are taken after the live history's, so the live ids never depend on the archive.
    """
    calls: Dict[str, _Part] = {}
    for msg in archive:
        for part in msg.parts:
            if part.kind == "call" and part.key:
                calls.setdefault(part.key, part)
            elif part.kind == "result" and part.key in calls:
                part.partner = calls.pop(part.key)
    for msg in archive:
        _expand_stubs(msg)
    _number_turns(archive)
    _assign_ids(archive, used)
    # A human's text keeps its mark in ``kind`` (see human_requests); its turn is 0: not live.
    return [{"id": part.bid, "turn": 0, "role": "tool" if part.kind == "result" else msg.role,
             "text": part.text, "tokens": _part_tokens(part), "pinned": False, "protected": ARCHIVED,
             "unit": None, "stub": False,
             "kind": "human" if part.human else _part_kind_of_block(part)}
            for msg in archive for part in msg.parts if part.stub_id is None]


# What a request body sends beside its messages, on every request, and the pager never pages: its
# tool definitions (and Chat's older ``functions``).  The provider charges them as input, so under a
# budget they are spoken for before any block (see _Scorer.reserve).
DEFINITION_KEYS = ("tools", "functions")


def _definitions_tokens(shell: Any) -> int:
    """Return the tokens of the tool definitions a request body ``shell`` carries (0 for none)."""
    if not isinstance(shell, dict):
        return 0
    return sum(estimate_tokens(_compact_json(shell[key])) for key in DEFINITION_KEYS if shell.get(key))


def _continues_response(shell: Any) -> bool:
    """Return True for a Responses body that continues state the server holds (RESPONSES_STATE_KEYS)."""
    return isinstance(shell, dict) and any(shell.get(key) not in (None, "", {}) for key in RESPONSES_STATE_KEYS)


def _part_block(msg: _Msg, part: _Part, floor: Optional[str], notes: Dict[int, List[_Part]],
                task_seen: bool) -> Dict[str, Any]:
    """Return the block of ``part`` of ``msg`` (see _finish); ``floor``: its _floor_parts mark."""
    # (only a text part is instructions, only an "other" part a compaction; a text's block kind is None)
    text_part = part.kind == "text"
    protected = "system" if msg.role in SYSTEM_ROLES else INSTRUCTIONS if text_part and _is_instruction(msg, part) \
        else COMPACTION if not text_part and _is_compaction_part(part) else None
    kind = None if text_part else _part_kind_of_block(part)
    role = "tool" if part.kind == "result" else msg.role
    unit = part.unit
    turn = part.turn
    if part.human:
        protected = kind = "human" if task_seen else "task"
    elif floor is not None:
        protected = floor
        kind = kind if kind in UNPAGEABLE_KINDS else protected  # an attachment stays media: never paged
    elif part.harness:
        kind = HARNESS
    if part.stub_id is None:
        part.tokens = _part_tokens(part)
    else:
        # A stub keeps the role it was paged under; the lines of one note were one unit.
        match = STUB_LINE_RE.match(part.text)
        role = match.group(3) if match and match.group(3) else role
        turn = int(match.group(2)) if match else msg.turn
        note = notes.get(id(part.source), [])
        if part.kind != "result":  # a result paged in place stays in its call's unit
            unit = f"note:{note[0].bid}" if len(note) > 1 else None
    # A result whose call the history does not hold answers a stored response's call (see
    # _Responses.pair), and a Responses item_reference may name such a call: leaving either
    # out would leave a call unanswered or an output without its call, so both are pinned.
    stored = part.stub_id is None and ((part.kind == "result" and part.partner is None) or (
        isinstance(part.raw, dict) and part.raw.get("type") == "item_reference"))
    return {"id": part.bid, "turn": turn, "role": role, "text": part.text, "tokens": part.tokens,
            "pinned": stored, "protected": protected, "unit": unit, "stub": part.stub_id is not None, "kind": kind}


def _finish(fmt: str, msgs: List[_Msg], head: List[_Msg], shell: Any, repairs: List[str],
            skipped: int = 0, archive: Optional[List[_Msg]] = None,
            harness_texts: Container[str] = (), held: bool = False,
            memo: Optional[_FinishMemo] = None) -> Conversation:
    """Pair calls with results, repair, name and group the parts (as format ``fmt``'s class says); return the Conversation.

    The pager's own note is dropped (the writer puts it back where it is needed); turns are
    numbered by the human's messages; the first human message's text is the task statement
    (``protected="task"``), every other human message's text ``protected="human"`` (the
    engine pages such a block at worst, never evicts it).  ``archive`` holds the messages before
    a compaction boundary: their blocks (``protected="archived"``) come last.  ``harness_texts``
    holds the content ids of user texts a contract recorded as the harness's (see HARNESS);
    ``held`` says the server holds the earlier turns (see _Responses.pair), as a body's own keys may.
    ``memo`` (a library Pager's): the last read's _FinishMemo, whose messages these may continue
    (then only the new ones are finished; _NoResume where that cannot be told), or a blank one;
    the Conversation then carries its own memo for the next read.
    """
    spec = _FORMATS[fmt]
    held = held or _continues_response(shell)
    prints = key = None
    if memo is not None and archive is None and not harness_texts:
        prints = _message_prints([msg.raw for msg in msgs])
        key = _memo_key(fmt, held, head, shell) if prints is not None else None
    past = memo if memo is not None and memo.continued_by(key, prints) else None
    if past is not None:
        new = msgs[len(past.prints):]
        if repairs or any(p.key in past.keys for m in new for p in m.parts if p.key):
            raise _NoResume  # a repair the parse made, or a call id an earlier message holds
        head, state = past.head, past
        lead: List[_Msg] = []  # the head's blocks are the memo's
    else:
        new, state, lead = msgs, _FinishMemo(), head
    msgs = [m for m in new if not _is_pager_note(m)]
    for msg in lead + msgs:
        _expand_stubs(msg)
    if past is not None and any(p.stub_id is not None for m in msgs for p in m.parts):
        raise _NoResume  # a stub line names a block id: the ids are reserved over the whole list
    if harness_texts:
        for msg in msgs:
            for part in msg.parts:
                if msg.role == "user" and part.kind == "text" and part.stub_id is None \
                        and _content_id(msg.role, part.kind, part.text) in harness_texts:
                    part.harness = True
    turn = _number_turns(msgs, state.turn)
    found: List[str] = []
    spec.pair(msgs, found if past is not None else repairs, held)
    if found:
        raise _NoResume
    kept = []
    for msg in msgs:
        if msg.parts:
            kept.append(msg)
        elif not msg.item:  # an emptied item was already reported with its part
            repairs.append(f"{msg.where} has no content left; dropped")
    _assign_ids(lead + kept, state.used)
    _assign_units(kept, spec.units)
    floors, pending = _floor_parts(kept, dict(state.floors), state.pending)
    marks = dict(floors)
    if pending is not None:
        marks[id(pending)] = "conclusion"
    blocks = list(state.blocks)
    if state.pending is not None and id(state.pending) not in floors and pending is not state.pending:
        # The conclusion read last was the assistant's last words; new words of its came after them.
        at = next(i for i in range(len(blocks) - 1, -1, -1) if blocks[i]["id"] == state.pending.bid)  # ids are unique
        owner = next(m for m in reversed(state.msgs) if state.pending in m.parts)
        blocks[at] = _part_block(owner, state.pending, None, {}, state.task_seen)
    notes: Dict[int, List[_Part]] = {}  # the stub lines of each note a pass wrote
    for msg in lead + kept:
        for part in msg.parts:
            if part.source is not None:
                notes.setdefault(id(part.source), []).append(part)
    task_seen = state.task_seen
    for msg in lead + kept:
        for part in msg.parts:
            blocks.append(_part_block(msg, part, marks.get(id(part)), notes, task_seen))
            task_seen = task_seen or part.human
    archived = _archive_blocks(archive, state.used) if archive else []
    unknown = dict(state.unknown)
    for kind, count in _unknown_types(kept + (archive or [])).items():
        unknown[kind] = unknown.get(kind, 0) + count
    kept = state.msgs + kept
    conv = Conversation(fmt=fmt, blocks=archived + blocks, emit_format=spec.emits_as, skipped_lines=skipped,
                        repairs=repairs, _msgs=kept, _head=head, _shell=shell)
    conv.archived = len(archived)
    conv.unknown_parts = unknown
    conv.definitions_tokens = _definitions_tokens(shell)
    if prints is not None and key is not None:
        answered = {id(p.partner) for m in msgs for p in m.parts if p.partner is not None}
        open_call = any(p.kind == "call" and id(p) not in answered for m in msgs for p in m.parts)
        conv._memo = _FinishMemo(
            key, prints, state.raws + [m.raw for m in new], fmt, held, shell, head, kept, blocks, floors,
            pending, turn, state.used, task_seen, state.keys | {p.key for m in msgs for p in m.parts if p.key},
            unknown, not repairs and not open_call and bool(kept) and not spec.may_join(kept[-1]))
    return conv


def _is_item_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(x, dict) for x in value)


_SERVER_TOOL_VERSION = re.compile(r"_\d{8}$")  # an Anthropic server tool's type: web_search_20250305


def _says_anthropic(body: Dict[str, Any]) -> bool:
    """Return True if a chat request body's own keys are the Messages API's: a top-level ``system``,
    a tool with an ``input_schema`` or a dated server tool type, or a ``tool_choice`` object of
    Anthropic's shape (``{"type": "auto" | "any" | "tool" | "none"}``; OpenAI's names a function)."""
    if "system" in body:
        return True
    tools = body.get("tools")
    if isinstance(tools, list) and any(isinstance(t, dict) and ("input_schema" in t or (
            isinstance(t.get("type"), str) and _SERVER_TOOL_VERSION.search(t["type"]))) for t in tools):
        return True
    choice = body.get("tool_choice")
    return isinstance(choice, dict) and choice.get("type") in ("auto", "any", "tool", "none") and "function" not in choice


# Request parameters only the Messages API has (Chat Completions names them otherwise: ``stop``,
# ``reasoning_effort``), and the model family it serves. Weaker than _says_anthropic: an
# OpenAI-compatible server may accept one of them too, so a message's own OpenAI marker outweighs them.
ANTHROPIC_ONLY_PARAMS = ("stop_sequences", "top_k", "anthropic_version", "anthropic_beta")
ANTHROPIC_MODEL_PREFIX = "claude-"


def _hints_anthropic(body: Dict[str, Any]) -> bool:
    """Return True if a chat request body carries a parameter only the Messages API has, an
    Anthropic ``thinking`` setting (``{"type": "enabled" | "disabled" | "adaptive"}``) or a
    ``claude-*`` model name (an OpenAI-compatible router names it ``anthropic/claude-*``)."""
    thinking = body.get("thinking")
    model = body.get("model")
    return (any(k in body for k in ANTHROPIC_ONLY_PARAMS)
            or (isinstance(thinking, dict) and thinking.get("type") in ("enabled", "disabled", "adaptive"))
            or (isinstance(model, str) and model.startswith(ANTHROPIC_MODEL_PREFIX)))


def _chat_messages(value: Any) -> Optional[Tuple[List[Any], Dict[str, Any]]]:
    """Return (messages, the request body around them: empty for a bare list) for a chat-shaped value, else None.

    Asked after the narrower shapes in probe order (_PROBE_ORDER), so it need not rule them out.
    """
    if isinstance(value, dict):
        return (value["messages"], value) if isinstance(value.get("messages"), list) else None
    return (value, {}) if _is_item_list(value) and all("role" in x for x in value) else None


def _str_in(value: Any, names: Container[str]) -> bool:
    """Return True if ``value`` is a string in ``names`` (an object or list from the input is no name)."""
    return isinstance(value, str) and value in names


def _chat_kind(messages: List[Any], body: Dict[str, Any]) -> str:
    """Return ``anthropic`` or ``openai`` for a chat message list in a request ``body``.

    A body whose own keys are Anthropic's (_says_anthropic) -> anthropic; else any OpenAI-only role,
    field or part type (OPENAI_MARKER_*) -> openai; else any Anthropic-only block type
    (ANTHROPIC_MARKER_BLOCKS, a server tool's ``*_tool_result``) -> anthropic; else (plain
    user/assistant text fits both) a body hinting at Anthropic (_hints_anthropic) -> anthropic;
    else openai.
    """
    if _says_anthropic(body):
        return "anthropic"
    anthropic = False
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        if _str_in(msg.get("role"), OPENAI_MARKER_ROLES) or any(f in msg for f in OPENAI_MARKER_FIELDS):
            return "openai"
        content = msg.get("content")
        for part in content if isinstance(content, list) else ():
            kind = part.get("type") if isinstance(part, dict) and isinstance(part.get("type"), str) else None
            if kind in OPENAI_MARKER_PARTS:
                return "openai"
            if kind in ANTHROPIC_MARKER_BLOCKS or (kind or "").endswith(ANTHROPIC_MARKER_SUFFIX):
                anthropic = True
    return "anthropic" if anthropic or _hints_anthropic(body) else "openai"


class _Chat(_Format):
    """The family of chat message lists (Anthropic Messages, Chat Completions): a bare list of role
    messages or a request body with ``messages``; _chat_kind tells the two apart."""

    def claims(self, value: Any) -> bool:
        found = _chat_messages(value)
        return found is not None and _chat_kind(*found) == self.name


def _directive(value: Any, block: Dict[str, Any]) -> Tuple[str, Optional[str]]:
    """Return (verb, text) from one decision value, checked.

    text is the stub for page, the full text restoring a stub block for retain, else None.
    """
    bid = block["id"]
    if isinstance(value, str):
        verb, stub = value, None
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        verb, stub = value
    else:
        shown = _show(value if not isinstance(value, tuple) else list(value))
        raise PagerError(f'decisions["{bid}"] must be a (directive, stub) pair (got {shown})')
    if verb not in ACTIONS:
        raise PagerError(f'decisions["{bid}"]: unknown directive {_show(verb)} (expected retain, page or evict)')
    if verb == "evict":
        return verb, None
    if verb == "retain":
        if stub is not None and not isinstance(stub, str):
            raise PagerError(f'decisions["{bid}"]: retained text must be a string or null (got {_show(stub)})')
        # Only a stub block has a text to restore; any other block is written as it was.
        if block["stub"] and stub is not None and stub.strip():
            return "retain", stub
        return "retain", None
    if stub is not None and not isinstance(stub, str):
        raise PagerError(f'decisions["{bid}"]: stub must be a string (got {_show(stub)})')
    if not stub or not stub.strip():
        stub = block["text"] if block["stub"] else STUB_FALLBACK.format(
            id=bid, turn=block["turn"], role=block["role"])
    return "page", stub


def _effective(conv: Conversation,
               decisions: Dict[str, Any]) -> Dict[str, Tuple[str, Optional[str]]]:
    """Return block id -> (verb, stub) after settling units (see the module docstring)."""
    if not isinstance(decisions, dict):
        raise PagerError(f"decisions must map block ids to directives (got {_type_name(decisions)})")
    known = [b["id"] for b in conv.blocks]
    unknown = sorted(set(decisions) - set(known) - {b["id"] for b in conv.aside}, key=str)  # aside: never sent
    if unknown:
        raise PagerError(f'decisions: unknown block id {_show(unknown[0])}')
    own = {b["id"]: _directive(decisions.get(b["id"], ("retain", None)), b)
           for b in conv.blocks}
    if _FORMATS[conv.fmt].per_block:
        return own
    units: Dict[str, List[str]] = {}
    for block in conv.blocks:
        if block["unit"] is not None:
            units.setdefault(block["unit"], []).append(block["id"])
    results = {b["id"] for b in conv.blocks if b["role"] == "tool"}
    effective = dict(own)
    for ids in units.values():
        verb = max((own[i][0] for i in ids), key=ACTION_RANK.__getitem__)
        if verb == "page":
            stubs: List[str] = []
            for i in ids:
                if own[i][0] == "page" and own[i][1] not in stubs:
                    stubs.append(own[i][1])
            effective[ids[0]] = ("page", "\n".join(stubs))
            for i in ids[1:]:
                effective[i] = ("evict", None)
        else:
            for i in ids:
                if verb == "retain" and own[i][0] == "page" and i in results:
                    effective[i] = (MASK, own[i][1])  # the call stays: its result's stub stands in its place
                else:
                    # A stub retained with its full text keeps it (a note's lines are one unit).
                    effective[i] = own[i] if own[i][0] == verb == "retain" else (verb, None)
    return effective


def _masked(raw: Any, text: str) -> Any:
    """Return a tool result's JSON with its payload replaced by ``text``: a stub, or what a stub restores.

    Its call id and every other field stay, so the result still answers its call.
    """
    if not isinstance(raw, dict):
        return text
    new = dict(raw)
    new["output" if "output" in raw and "content" not in raw else "content"] = text
    return new


def _result_piece(raw: Any, verb: str, text: Optional[str]) -> Any:
    """Return what a tool result writes back as: itself, its stub in place (MASK), or its restored text."""
    if verb == MASK or (verb == "retain" and text is not None):
        return _masked(raw, text)  # type: ignore[arg-type]
    return raw


def _rebuild(msg: _Msg, effective: Dict[str, Tuple[str, Optional[str]]],
             make_text: Callable[[str], Any]) -> Tuple[List[Any], bool]:
    """Return the message's new content pieces and whether anything changed.

    A piece is an original part written back verbatim or make_text(text) for a new text.
    """
    pieces: List[Any] = []
    touched = msg.repaired
    index = 0
    while index < len(msg.parts):
        part = msg.parts[index]
        if part.source is None:
            index += 1
            verb, stub = effective[part.bid]
            if verb == "retain" or verb == MASK:
                pieces.append(_result_piece(part.raw, verb, stub) if part.kind == "result" else part.raw)
                touched = touched or verb == MASK or stub is not None
            else:
                touched = True
                if verb == "page":
                    pieces.append(make_text(stub))
            continue
        # The stub lines read from one text part: verbatim unless one of them changes.
        end = index
        while end < len(msg.parts) and msg.parts[end].source is part.source:
            end += 1
        group, index = msg.parts[index:end], end
        wanted = [effective[p.bid] for p in group]
        if all(w == ("retain", None) for w in wanted):
            pieces.append(part.source.raw)
            continue
        touched = True
        lines: List[str] = []
        for member, (verb, text) in zip(group, wanted):
            if verb == "page":
                lines.append(text or member.text)
            elif verb == "retain" and text is None:
                lines.append(member.text)
            elif verb == "retain":
                # A restored block is its own text part; the stubs around it stay stubs.
                if lines:
                    pieces.append(make_text("\n".join(lines)))
                    lines = []
                pieces.append(make_text(text))
        if lines:
            pieces.append(make_text("\n".join(lines)))
    return pieces, touched


def _content_problem(content: Any, where: str) -> Optional[str]:
    """Return why a chat content value is empty or malformed, or None."""
    if isinstance(content, str):
        return None if content.strip() else f"{where}.content is empty"
    if isinstance(content, list):
        if not content:
            return f"{where}.content is empty"
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                return f"{where}.content[{j}] must be an object with a type"
            if part["type"] in TEXT_PART_TYPES and not str(part.get("text") or "").strip():
                return f"{where}.content[{j}] is an empty text part"
        return None
    return f"{where}.content must be a string or an array"


# --- pager: the pager's own history JSON ---


class _PagerFormat(_Format):
    """The pager's own history JSON: an object with a ``blocks`` list, each checked by _block_problem."""

    name = emits_as = "pager"
    per_block = True

    def claims(self, value: Any) -> bool:
        return isinstance(value, dict) and isinstance(value.get("blocks"), list)

    def _problems(self, blocks: List[Any]) -> Iterator[str]:
        seen: Dict[str, int] = {}
        for i, raw in enumerate(blocks):
            problem = _block_problem(i, raw) or _duplicate_problem(i, raw["id"], seen)
            if problem is not None:
                yield problem

    def read(self, document: Any, held: bool = False, memo: Optional[_FinishMemo] = None) -> Conversation:
        if not self.claims(document):
            raise PagerError("pager history must be an object with a blocks list")
        problem = next(self._problems(document["blocks"]), None)
        if problem is not None:
            raise PagerError(problem)
        blocks = [{"id": raw["id"], "turn": raw["turn"], "role": raw["role"], "text": raw["text"],
                   "tokens": raw.get("tokens"), "pinned": raw.get("pinned", False),
                   "protected": "system" if raw.get("protected") is None and raw["role"] in SYSTEM_ROLES
                   else raw.get("protected"), "unit": raw.get("unit"), "stub": raw.get("stub", False),
                   "kind": raw.get("kind")} for raw in document["blocks"]]
        return Conversation(fmt="pager", blocks=blocks, emit_format="pager", _shell=document)

    def write(self, conv: Conversation, effective: Dict[str, Tuple[str, Optional[str]]]) -> Any:
        blocks = []
        for raw in conv._shell["blocks"]:
            verb, stub = effective[raw["id"]]
            if verb == "retain" and stub is None:
                blocks.append(raw)
            elif verb == "retain":  # a stub restored: its text back, its stub mark gone
                blocks.append({**{k: v for k, v in raw.items() if k != "stub"}, "text": stub})
            elif verb == "page":
                blocks.append({**raw, "text": stub, "stub": True})
        return {**conv._shell, "blocks": blocks}

    def check(self, obj: Any) -> List[str]:
        if not self.claims(obj):
            return ["top level must be an object with a blocks array"]
        return list(self._problems(obj["blocks"]))


# --- openai: Chat Completions messages ---


def _openai_parts(msg: Dict[str, Any], where: str) -> Tuple[List[_Part], bool]:
    """Return the content parts of an OpenAI message and whether content was a string."""
    content = msg.get("content")
    if content is None:
        return [], False
    if isinstance(content, str):
        return ([_text_part(where + ".content", content, content, 1)]
                if content.strip() else []), True
    if not isinstance(content, list):
        raise PagerError(f"{where}.content must be a string, an array of parts or null (got {_type_name(content)})")
    parts = []
    for j, raw in enumerate(content):
        w = f"{where}.content[{j}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            raise PagerError(f"{w} must be an object with a type")
        text = _part_text(raw)
        if raw["type"] in ("text", "refusal"):
            if text.strip():
                parts.append(_text_part(w, raw, text, j + 1))
        else:
            kind = "media" if raw["type"] in MEDIA_PART_TYPES else "other"
            parts.append(_Part(kind, raw, w, text=text, pos=j + 1))
    return parts, False


# An assistant message's reasoning as OpenAI-compatible servers send it back beside the content:
# DeepSeek, Moonshot and vLLM name it ``reasoning_content``, OpenRouter ``reasoning`` (text) and
# ``reasoning_details`` (entries of text, summary or encrypted data).  All of it is sent, so all of
# it is one part: counted, paged or evicted with the message's tool calls (see _Openai.units).
CHAT_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_details")
# What a Chat reply's message says about its content as the response gave it: a refusal (read as a
# refusal part) and url-citation annotations (positions in that content).  Written back as they came
# while the message is untouched, else left out (a kept refusal goes back as a part of the content).
CHAT_REPLY_FIELDS = ("refusal", "annotations")


def _chat_reasoning(raw: Dict[str, Any], where: str) -> Optional[_Part]:
    """Return the reasoning fields of an assistant message as one ``reasoning`` part, else None.

    Its text is every readable string in them (an encrypted entry's data is not text).

    Example:
        >>> _chat_reasoning({"role": "assistant", "reasoning_content": "Check the docs."}, "m").text
        'Check the docs.'
    """
    fields = {k: raw[k] for k in CHAT_REASONING_FIELDS if raw.get(k) not in (None, "", [])}
    if not fields:
        return None
    texts: List[str] = []
    for value in fields.values():
        for entry in value if isinstance(value, list) else [value]:
            if isinstance(entry, str):
                texts.append(entry)
            elif isinstance(entry, dict):
                texts += [entry[k] for k in ("text", "summary") if isinstance(entry.get(k), str)]
    text = "\n".join(t for t in texts if t.strip()) or "[reasoning]"
    return _Part("reasoning", fields, f"{where}.{next(iter(fields))}", text=text)


def _load_openai(value: Any, harness: Container[int] = (), harness_texts: Container[str] = (),
                 memo: Optional[_FinishMemo] = None) -> Conversation:
    """Return the Conversation for an OpenAI Chat Completions message list or request body.

    ``harness`` holds the positions of user messages the harness wrote (no human's words);
    ``harness_texts`` the content ids of texts a contract recorded as the harness's, ``memo`` a
    running Pager's last read (see _finish).
    """
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        shell, messages = value, value["messages"]
    elif isinstance(value, list):
        shell, messages = None, value
    else:
        raise PagerError("openai input must be a messages array or an object with a messages "
                          "array")
    repairs: List[str] = []
    msgs = []
    for i, raw in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(raw, dict):
            raise PagerError(f"{where} must be an object (got {_type_name(raw)})")
        role = raw.get("role")
        if role not in OPENAI_ROLES:
            raise PagerError(f"{where}.role must be one of {', '.join(OPENAI_ROLES)} (got {_show(role)})")
        if role in ("tool", "function"):
            key = raw.get("tool_call_id") if role == "tool" else LEGACY_FUNCTION_KEY
            if not isinstance(key, str):
                raise PagerError(f"{where}.tool_call_id must be a string (got {_show(key)})")
            content = raw.get("content")
            if content is not None and not isinstance(content, (str, list)):
                raise PagerError(f"{where}.content must be a string or an array of parts")
            w = where + (".tool_call_id" if role == "tool" else "")
            part = _Part("result", raw, w, text=_flatten(content), key=key)
            msgs.append(_Msg(role, where, raw, [part], item=True))
            continue
        parts, is_string = _openai_parts(raw, where)
        refusal = raw.get("refusal") if role == "assistant" else None
        if isinstance(refusal, str) and refusal.strip():
            # A refusal the response gave beside its content (null): the assistant's turn, read as
            # the refusal part the content may hold instead (see _Openai.write).
            parts.append(_text_part(where + ".refusal", {"type": "refusal", "refusal": refusal}, refusal,
                                    len(parts) + 1))
        voice = _reply_audio(raw, where, len(parts) + 1) if role == "assistant" else None
        if voice is not None:
            parts.append(voice)
        annotations = raw.get("annotations") if role == "assistant" else None
        if annotations and parts:  # a search model's url citations: sent with the reply while it is untouched
            next((p for p in parts if p.kind == "text"), parts[0]).carried = estimate_tokens(_compact_json(annotations))
        content = raw.get("content")
        # An empty text part was skipped: the raw content must not be written back as is.
        repaired = isinstance(content, list) and len(parts) < len(content)
        reasoning = _chat_reasoning(raw, where) if role == "assistant" else None
        if reasoning is not None:
            parts.insert(0, reasoning)
        calls = raw.get("tool_calls") if role == "assistant" else None
        if calls is not None:
            if not isinstance(calls, list):
                raise PagerError(f"{where}.tool_calls must be an array")
            for j, call in enumerate(calls):
                w = f"{where}.tool_calls[{j}]"
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(call, dict) and isinstance(call.get("id"), str) and isinstance(call.get("custom"), dict):
                    custom = call["custom"]  # a custom tool call: free-form input
                    parts.append(_Part("call", call, w, text=f"{custom.get('name')}({custom.get('input')})",
                                       key=call["id"]))
                    continue
                if not isinstance(fn, dict) or not isinstance(call.get("id"), str):
                    raise PagerError(f"{w} must be an object with an id and a function")
                args = fn.get("arguments")
                text = f"{fn.get('name')}({args if isinstance(args, str) else _compact_json(args)})"
                parts.append(_Part("call", call, w, text=text, key=call["id"]))
        legacy = raw.get("function_call") if role == "assistant" else None
        if isinstance(legacy, dict):
            text = f"{legacy.get('name')}({legacy.get('arguments')})"
            parts.append(_Part("call", legacy, where + ".function_call", text=text,
                               key=LEGACY_FUNCTION_KEY))
        msgs.append(_Msg(role, where, raw, _sole(parts, len(parts)), string_content=is_string,
                         repaired=repaired, harness=i in harness))
    return _finish("openai", msgs, [], shell, repairs, harness_texts=harness_texts, memo=memo)


class _Openai(_Chat):
    """OpenAI Chat Completions: a message list, or a request body with ``messages``."""

    name = emits_as = tool_api = "openai"
    tool_call_type = "function"

    def read(self, document: Any, held: bool = False, memo: Optional[_FinishMemo] = None) -> Conversation:
        return _load_openai(document, memo=memo)

    def pair(self, msgs: List[_Msg], repairs: List[str], held: bool = False) -> None:
        """Pair assistant tool_calls with the tool messages that follow them; repair the rest."""
        owner: Optional[_Msg] = None
        calls: Dict[str, _Part] = {}
        answered: set = set()

        def close() -> None:
            # A call no tool message answers is dropped, in the final message too: the API refuses
            # a request that holds one.
            for key, call in calls.items():
                if key not in answered and owner is not None:
                    named = "function_call" if key == LEGACY_FUNCTION_KEY else key
                    _drop(owner, call, repairs, f'tool call "{named}" has no tool message answering it')

        for msg in msgs:
            if msg.role in ("tool", "function"):
                part = msg.parts[0]
                if part.key in calls and part.key not in answered:
                    part.partner = calls[part.key]
                    answered.add(part.key)
                else:
                    what = "function message" if part.key == LEGACY_FUNCTION_KEY else f'"{part.key}"'
                    _drop(msg, part, repairs, f"{what} has no matching tool call in the assistant message before it")
                continue
            close()
            owner, calls, answered = None, {}, set()
            if msg.role == "assistant":
                owner = msg
                for part in list(msg.parts):
                    if part.kind != "call":
                        continue
                    if part.key in calls:
                        _drop(msg, part, repairs, f'tool call id "{part.key}" repeats')
                    else:
                        calls[part.key] = part
        close()

    def units(self, msgs: List[_Msg]) -> None:
        """Put an assistant message's reasoning and its tool calls (with their results) in one unit:
        the servers that send reasoning back want it with the calls it led to."""
        for msg in msgs:
            if msg.role == "assistant" and msg.parts and msg.parts[0].kind == "reasoning" and \
                    any(p.kind == "call" for p in msg.parts):
                unit = f"turn:{msg.parts[0].bid}"
                for part in msg.parts:
                    if part.kind in ("reasoning", "call"):
                        part.unit = unit

    def write(self, conv: Conversation, effective: Dict[str, Tuple[str, Optional[str]]]) -> Any:
        """Return the OpenAI message list (or request body) with decisions applied."""
        out = []
        for msg in conv._msgs:
            if msg.role in ("tool", "function"):
                # A result is paged with its call (their unit's note sits with the call), or in place.
                verb, text = effective[msg.parts[0].bid]
                if verb in ("retain", MASK):
                    out.append(_result_piece(msg.raw, verb, text))
                continue
            voice = next((p for p in msg.parts if _is_reply_audio(p)), None)
            texts = [p for p in msg.parts if p.kind not in ("call", "reasoning") and p is not voice]
            calls = [p for p in msg.parts if p.kind == "call"]
            pieces, touched = _rebuild(_Msg(msg.role, msg.where, msg.raw, texts), effective,
                                       lambda s: {"type": "text", "text": s})
            kept_calls = [p for p in calls if effective[p.bid][0] == "retain"]
            unsent: Container[str] = ()  # the reasoning fields left out (see CHAT_REASONING_FIELDS)
            thought = False  # its reasoning is sent
            if msg.parts and msg.parts[0].kind == "reasoning":
                verb, stub = effective[msg.parts[0].bid]
                thought = verb == "retain"
                if not thought:
                    touched, unsent = True, msg.parts[0].raw
                if verb == "page":
                    pieces.insert(0, stub)
            spoken = voice is not None and effective[voice.bid][0] == "retain"  # its audio is sent (never paged)
            if voice is not None and not spoken:
                touched, unsent = True, (*unsent, CHAT_AUDIO_FIELD)
            for call in calls:
                verb, stub = effective[call.bid]
                if verb != "retain":
                    touched = True
                if verb == "page":
                    pieces.append({"type": "text", "text": stub})
            if not (touched or msg.repaired):
                out.append(msg.raw)
                continue
            # What described the content as it came: a refusal (kept, a part of the content now), annotations.
            unsent = (*unsent, *CHAT_REPLY_FIELDS)
            if not pieces and not kept_calls and not thought and not spoken:
                continue
            if not pieces:
                content = None if kept_calls or spoken else ""  # reasoning alone still needs a content
            elif isinstance(msg.raw.get("content"), list) or len(pieces) > 1 or \
                    (isinstance(pieces[0], dict) and "text" not in pieces[0]):
                # Separate parts: a stub joined to other text would not be found by the next load.
                content = [{"type": "text", "text": p} if isinstance(p, str) else p for p in pieces]
            else:
                content = pieces[0] if isinstance(pieces[0], str) else pieces[0]["text"]
            new = {}
            for key, value in msg.raw.items():
                if key == "content":
                    new["content"] = content
                elif key not in ("tool_calls", "function_call") and key not in unsent:
                    new[key] = value
            new.setdefault("content", content)
            tool_calls = [p.raw for p in kept_calls if p.key != LEGACY_FUNCTION_KEY]
            if tool_calls:
                new["tool_calls"] = tool_calls
            legacy = [p.raw for p in kept_calls if p.key == LEGACY_FUNCTION_KEY]
            if legacy:
                new["function_call"] = legacy[0]
            out.append(new)
        if not out:
            out = [{"role": "user", "content": OMITTED_NOTE}]
        if isinstance(conv._shell, dict):
            body = dict(conv._shell)
            body["messages"] = out
            return body
        return out

    def check(self, obj: Any) -> List[str]:
        """Return the problems of an OpenAI Chat Completions message list or request body."""
        messages = obj.get("messages") if isinstance(obj, dict) else obj
        if not isinstance(messages, list):
            return ["top level must be a messages array or an object with a messages array"]
        if not messages:
            return ["messages is empty"]
        problems: List[str] = []
        open_at, open_ids, answered = -1, [], set()  # the assistant tool_calls awaiting replies
        legacy_open = False

        def close() -> None:
            for cid in open_ids:
                if cid not in answered:
                    problems.append(f'messages[{open_at}].tool_calls id "{cid}" is not answered by a tool message')

        for i, msg in enumerate(messages):
            where = f"messages[{i}]"
            if not isinstance(msg, dict):
                problems.append(f"{where} must be an object")
                continue
            role = msg.get("role")
            if role not in OPENAI_ROLES:
                problems.append(f"{where}.role {_show(role)} is not a chat role")
                continue
            if role == "tool":
                cid = msg.get("tool_call_id")
                if cid not in open_ids:
                    problems.append(f"{where}.tool_call_id {_show(cid)} has no matching tool call in the assistant "
                                    "message before it")
                elif cid in answered:
                    problems.append(f'{where}.tool_call_id "{cid}" is answered twice')
                answered.add(cid)
                continue
            if role == "function":
                if not legacy_open:
                    problems.append(f"{where} follows no assistant function_call")
                legacy_open = False
                continue
            close()
            open_at, open_ids, answered, legacy_open = -1, [], set(), False
            if role != "assistant":
                problem = _content_problem(msg.get("content"), where)
                if problem:
                    problems.append(problem)
                continue
            calls = msg.get("tool_calls")
            if calls is not None:
                if not isinstance(calls, list) or not calls:
                    problems.append(f"{where}.tool_calls must be a non-empty array")
                    calls = []
                for j, call in enumerate(calls):
                    w = f"{where}.tool_calls[{j}]"
                    fn = call.get("function") if isinstance(call, dict) else None
                    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) \
                            or not isinstance(fn.get("arguments"), str):
                        problems.append(f"{w} needs a function with a name and string arguments")
                    cid = call.get("id") if isinstance(call, dict) else None
                    if not isinstance(cid, str):
                        problems.append(f"{w}.id must be a string")
                        continue
                    if cid in open_ids:  # within one message; SWE-agent reuses ids across turns
                        problems.append(f'{w}.id "{cid}" repeats a tool call id of its message')
                    open_ids.append(cid)
                open_at = i
            legacy_open = isinstance(msg.get("function_call"), dict)
            content = msg.get("content")
            if content in (None, "", []):
                if not (open_ids or legacy_open or msg.get("refusal") or msg.get(CHAT_AUDIO_FIELD)):
                    problems.append(f"{where} is an empty assistant message without tool_calls")
            else:
                problem = _content_problem(content, where)
                if problem:
                    problems.append(problem)
        close()  # the final message's calls too: the API refuses a call no tool message answers
        return problems

    def tool_definition(self, name: str, description: str, schema: Dict[str, Any]) -> Dict[str, Any]:
        """Return a tool's definition in this API's shape."""
        return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}

    def tool_call(self, call: Any) -> Tuple[Optional[str], Optional[str], Any]:
        """Return (call id, tool name, arguments) of a tool call in this API's shape."""
        fn = call.get("function") if isinstance(call, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        return (call.get("id") if isinstance(call, dict) else None), fn.get("name"), fn.get("arguments")

    def tool_result(self, call_id: Optional[str], text: str, failed: bool = False) -> Dict[str, Any]:
        """Return the message, item or block that answers tool call ``call_id`` with ``text``."""
        return {"role": "tool", "tool_call_id": call_id, "content": text}


# --- responses: Responses API input items ---


def _is_model_item(msg: _Msg) -> bool:
    """Return True for Responses items the model produced (anything but inputs and outputs)."""
    if not msg.item:
        return msg.role == "assistant"
    return msg.raw.get("type") not in RESPONSES_OUTPUTS


def _produced_item(item: Any) -> bool:
    """Return True for an item a reasoning item may precede: an assistant message or a model call."""
    if not isinstance(item, dict):
        return False
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "message":
        return item.get("role") == "assistant"
    return kind not in RESPONSES_OUTPUTS and kind not in (None, "reasoning", "item_reference", "compaction")


def _orphan_reasoning(items: List[Any]) -> List[int]:
    """Return the positions of reasoning items not followed (after a run of reasoning) by the item they produced."""
    orphans = []
    for index, item in enumerate(items):
        if not (isinstance(item, dict) and item.get("type") == "reasoning"):
            continue
        end = index + 1
        while end < len(items) and isinstance(items[end], dict) and items[end].get("type") == "reasoning":
            end += 1
        if end == len(items) or not _produced_item(items[end]):
            orphans.append(index)
    return orphans


def _responses_msg(item: Any, where: str, repairs: List[str]) -> _Msg:
    """Return the _Msg for one Responses input item.

    An assistant message's ``input_text`` part (a client that typed its own replies as input) is
    sent back as ``output_text``: the API refuses input parts in an assistant message.
    """
    if not isinstance(item, dict):
        raise PagerError(f"{where} must be an object (got {_type_name(item)})")
    kind = item.get("type")
    if kind is None and "role" in item:
        kind = "message"  # EasyInputMessage: {role, content} without a type
    if not isinstance(kind, str):
        raise PagerError(f"{where} has no type")
    if kind == "message":
        role = item.get("role")
        if role not in RESPONSES_ROLES:
            raise PagerError(f"{where}.role must be one of {', '.join(RESPONSES_ROLES)} (got {_show(role)})")
        content = item.get("content")
        if isinstance(content, str):
            parts = [_text_part(where + ".content", content, content, 0)] if content.strip() else []
            return _Msg(role, where, item, parts, mid=item.get("id"), string_content=True)
        if not isinstance(content, list):
            raise PagerError(f"{where}.content must be a string or an array of parts (got {_type_name(content)})")
        parts = []
        retyped = False
        for j, raw in enumerate(content):
            w = f"{where}.content[{j}]"
            if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
                raise PagerError(f"{w} must be an object with a type")
            text = _part_text(raw)
            if role == "assistant" and raw["type"] == "input_text":
                raw = dict(raw, type="output_text")
                retyped = True
            if raw["type"] in TEXT_PART_TYPES or raw["type"] == "refusal":
                if text.strip():
                    parts.append(_text_part(w, raw, text, j + 1))
            else:
                kind = "media" if raw["type"] in MEDIA_PART_TYPES else "other"
                parts.append(_Part(kind, raw, w, text=text, pos=j + 1))
        if retyped:
            repairs.append(f"{where} is an assistant message with input_text parts; sent as output_text")
        return _Msg(role, where, item, _sole(parts, len(content)), mid=item.get("id"),
                    repaired=retyped or len(parts) < len(content))
    call_id = item.get("call_id")
    if kind in RESPONSES_CALLS and isinstance(call_id, str):
        if kind == "function_call":
            text = f"{item.get('name')}({item.get('arguments')})"
        elif kind == "custom_tool_call":
            text = f"{item.get('name')}({item.get('input')})"
        elif kind == "apply_patch_call":  # its patch is under "operation", not "action"
            text = f"apply_patch({_compact_json(item.get('operation'))})"
        elif kind == "local_shell_call":
            action = item.get("action") if isinstance(item.get("action"), dict) else {}
            command = action.get("command")
            text = f"shell({' '.join(command) if isinstance(command, list) else _compact_json(action)})"
        else:
            text = f"{kind}({_compact_json(item.get('action'))})"
        return _Msg("assistant", where, item, [_Part("call", item, where + ".call_id",
                                                     text=text, key=call_id)], item=True)
    if kind in RESPONSES_OUTPUTS:
        if not isinstance(call_id, str):
            raise PagerError(f"{where}.call_id must be a string (got {_show(call_id)})")
        return _Msg("tool", where, item, [_Part("result", item, where + ".call_id",
                                                text=_output_text(item.get("output")),
                                                key=call_id)], item=True)
    if kind == "reasoning":
        texts = [_part_text(p) for key in ("summary", "content")
                 for p in (item.get(key) if isinstance(item.get(key), list) else [])]
        text = "\n".join(t for t in texts if t) or "[reasoning]"
        return _Msg("assistant", where, item, [_Part("reasoning", item, where, text=text)],
                    mid=item.get("id"), item=True)
    role = item.get("role") if item.get("role") in RESPONSES_ROLES else "assistant"
    return _Msg(role, where, item, [_Part("other", item, where, text=f"[{kind}]")],
                mid=item.get("id") if isinstance(item.get("id"), str) else None, item=True)


def _strict_schema(schema: Dict[str, Any]) -> Dict[str, Any]:
    """Return a copy of a tool's parameter schema as strict function calling takes it (the Responses
    API's default, the Agents SDK's): every property required, an optional one's value may be null
    (the tools read null as left out).

    Example:
        >>> _strict_schema({"type": "object", "properties": {"ids": {"type": "array"}, "from": {"type": "string"}},
        ...                 "required": ["ids"], "additionalProperties": False})["properties"]["from"]
        {'type': ['string', 'null']}
    """
    strict = json.loads(json.dumps(schema))
    for key, field in strict["properties"].items():
        if key not in schema["required"]:
            field["type"] = [field["type"], "null"]
    strict["required"] = list(strict["properties"])
    return strict


class _Responses(_Format):
    """OpenAI Responses: an input item list, or a request body with ``input`` (and ``instructions``)."""

    name = emits_as = tool_api = "responses"
    tool_call_type = "function_call"

    def claims(self, value: Any) -> bool:
        """Return True for a Responses request body (``input``) or a list holding a Responses item type."""
        if isinstance(value, dict):
            return isinstance(value.get("input"), (list, str)) and "messages" not in value
        return _is_item_list(value) and any(isinstance(x.get("type"), str) and x["type"] in RESPONSES_ITEM_TYPES
                                            for x in value)

    def read(self, value: Any, held: bool = False, memo: Optional[_FinishMemo] = None) -> Conversation:
        """Return the Conversation for a Responses input item list or request body.

        ``held``: the server holds the earlier turns (the library's ``server_state``), as a body's
        ``previous_response_id`` or ``conversation`` says of itself (see _Responses.pair).
        """
        head: List[_Msg] = []
        if isinstance(value, dict) and isinstance(value.get("input"), (list, str)):
            shell, items = value, value["input"]
            if isinstance(items, str):  # a bare string input is one user message
                items = [{"role": "user", "content": items}]
            instructions = value.get("instructions")
            if isinstance(instructions, str) and instructions.strip():
                part = _text_part("instructions", instructions, instructions, 0)
                head.append(_Msg("system", "instructions", {"content": instructions}, [part],
                                 mid="instructions", string_content=True))
        elif isinstance(value, list):
            shell, items = None, value
        else:
            raise PagerError("responses input must be an item array or an object with an input "
                              "array")
        repairs: List[str] = []
        msgs = [_responses_msg(item, f"input[{i}]", repairs) for i, item in enumerate(items)]
        # An item_reference names an item the server stored: the call an output answers may be one.
        held = held or any(isinstance(item, dict) and item.get("type") == "item_reference" for item in items)
        return _finish(self.name, msgs, head, shell, repairs, held=held, memo=memo)

    def may_join(self, msg: _Msg) -> bool:
        """A reasoning item's unit takes the model items after it (see units): any model item may be followed by more."""
        return _is_model_item(msg)

    def pair(self, msgs: List[_Msg], repairs: List[str], held: bool = False) -> None:
        """Pair calls with outputs by call_id (output after call); repair the rest.

        When the server holds the earlier turns (``held``: a body that continues a stored response,
        see _continues_response) an output whose call is not in the input answers a call of that
        response: it stays, unpaired (the pass keeps it verbatim).
        """
        calls: Dict[str, Tuple[int, _Msg, _Part]] = {}
        answered = set()
        for index, msg in enumerate(msgs):
            if not msg.item:
                continue
            part = msg.parts[0]
            if part.kind == "call":
                if part.key in calls:
                    _drop(msg, part, repairs, f'"{part.key}" repeats an earlier call')
                else:
                    calls[part.key] = (index, msg, part)
            elif part.kind == "result":
                found = calls.get(part.key)
                fits = found and msg.raw.get("type") in RESPONSES_CALLS[found[1].raw.get("type")]
                if fits and part.key not in answered:
                    part.partner = found[2]
                    answered.add(part.key)
                elif held and found is None and part.key not in answered:
                    answered.add(part.key)  # it answers the stored response's call
                else:
                    _drop(msg, part, repairs, f'"{part.key}" has no matching earlier call')
        for key, (index, msg, part) in calls.items():
            if key not in answered:  # at the end too: the API refuses a call with no output
                _drop(msg, part, repairs, f'"{key}" has no output')
        live = [m for m in msgs if m.parts]
        for index in _orphan_reasoning([m.raw if m.parts[0].stub_id is None else {} for m in live]):
            _drop(live[index], live[index].parts[0], repairs, "is a reasoning item without the item it produced")

    def units(self, msgs: List[_Msg]) -> None:
        """Put a reasoning item, the model items it produced and their outputs in one unit."""
        for index, msg in enumerate(msgs):
            if not (msg.item and msg.parts[0].kind == "reasoning"):
                continue
            unit = f"turn:{msg.parts[0].bid}"
            msg.parts[0].unit = unit
            for follower in msgs[index + 1:]:
                if not _is_model_item(follower) or (follower.item and
                                                    follower.parts[0].kind == "reasoning"):
                    break
                for part in follower.parts:
                    if part.stub_id is None:
                        part.unit = unit

    def write(self, conv: Conversation, effective: Dict[str, Tuple[str, Optional[str]]]) -> Any:
        """Return the Responses item list (or request body) with decisions applied."""
        items = []
        for msg in conv._msgs:
            if msg.item:
                verb, stub = effective[msg.parts[0].bid]
                if verb in ("retain", MASK):
                    items.append(_result_piece(msg.raw, verb, stub) if msg.parts[0].kind == "result" else msg.raw)
                elif verb == "page":
                    items.append({"type": "message", "role": "assistant",
                                  "content": [{"type": "output_text", "text": stub}]})
                continue
            part_type = "output_text" if msg.role == "assistant" else "input_text"
            pieces, touched = _rebuild(msg, effective, lambda s: {"type": part_type, "text": s})
            if not pieces:
                continue
            if not touched:
                items.append(msg.raw)
                continue
            # The rewritten message is no longer the stored item its id names.
            new = {k: v for k, v in msg.raw.items() if k != "id"}
            if msg.string_content and len(pieces) == 1:
                new["content"] = pieces[0] if isinstance(pieces[0], str) else pieces[0]["text"]
            else:
                new["content"] = [{"type": part_type, "text": p} if isinstance(p, str) else p
                                  for p in pieces]
            items.append(new)
        # A reasoning item must precede the item it produced; a pass that removed that item
        # (a unit is never split, but a stub is a message) drops the reasoning too.
        for index in reversed(_orphan_reasoning(items)):
            del items[index]
        if not items:
            items = [{"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": OMITTED_NOTE}]}]
        if not isinstance(conv._shell, dict):
            return items
        body = dict(conv._shell)
        body["input"] = items
        for head in conv._head:
            pieces, touched = _rebuild(head, effective, lambda s: s)
            if not pieces:
                body.pop("instructions", None)
            elif touched:
                body["instructions"] = "\n\n".join(pieces)
        return body

    def check(self, obj: Any) -> List[str]:
        """Return the problems of a Responses input item list or request body."""
        items = obj.get("input") if isinstance(obj, dict) else obj
        if not isinstance(items, list):
            return ["top level must be an item array or an object with an input array"]
        if not items:
            return ["input is empty"]
        problems: List[str] = []
        calls: Dict[str, Tuple[int, str]] = {}
        answered = set()
        stored = _continues_response(obj) or any(isinstance(item, dict) and item.get("type") == "item_reference"
                                                 for item in items)
        for i, item in enumerate(items):
            where = f"input[{i}]"
            if not isinstance(item, dict):
                problems.append(f"{where} must be an object")
                continue
            kind = item.get("type") or ("message" if "role" in item else None)
            if kind == "message":
                if item.get("role") not in RESPONSES_ROLES:
                    problems.append(f"{where}.role {_show(item.get('role'))} is not a message role")
                problem = _content_problem(item.get("content"), where)
                if problem:
                    problems.append(problem)
            elif kind in RESPONSES_CALLS:
                cid = item.get("call_id")
                if not isinstance(cid, str):
                    problems.append(f"{where}.call_id must be a string")
                    continue
                if cid in calls:
                    problems.append(f'{where}.call_id "{cid}" repeats an earlier call')
                calls[cid] = (i, kind)
                if kind == "function_call" and not (isinstance(item.get("name"), str)
                                                    and isinstance(item.get("arguments"), str)):
                    problems.append(f"{where} needs a string name and string arguments")
            elif kind in RESPONSES_OUTPUTS:
                cid = item.get("call_id")
                found = calls.get(cid) if isinstance(cid, str) else None
                if found is None and stored and isinstance(cid, str) and cid not in answered:
                    pass  # it answers a call of the stored response
                elif found is None or kind not in RESPONSES_CALLS[found[1]]:
                    problems.append(f'{where}.call_id {_show(cid)} has no earlier matching call')
                elif cid in answered:
                    problems.append(f'{where}.call_id "{cid}" is answered twice')
                answered.add(cid)
            elif not isinstance(kind, str):
                problems.append(f"{where} has no type")
        for cid, (index, kind) in calls.items():
            if cid not in answered:  # at the end too: the API refuses a call with no output
                problems.append(f'input[{index}] {kind} "{cid}" has no output')
        for index in _orphan_reasoning(items):
            problems.append(f"input[{index}] is a reasoning item without the item it produced after it")
        return problems

    def tool_definition(self, name: str, description: str, schema: Dict[str, Any]) -> Dict[str, Any]:
        # The Responses API checks a function's schema strictly unless told otherwise: strict it is.
        return {"type": "function", "name": name, "description": description, "parameters": _strict_schema(schema),
                "strict": True}

    def tool_call(self, call: Any) -> Tuple[Optional[str], Optional[str], Any]:
        return call.get("call_id"), call.get("name"), call.get("arguments")

    def tool_result(self, call_id: Optional[str], text: str, failed: bool = False) -> Dict[str, Any]:
        return {"type": "function_call_output", "call_id": call_id, "output": text}


# --- anthropic: Messages API request bodies ---


def _thinking_problem(block: Dict[str, Any]) -> Optional[str]:
    """Return why the API refuses a thinking or redacted_thinking block, or None if it is sendable.

    The model signs its thinking; a thinking block goes back with its ``signature`` (a non-empty
    string: a log written through another model's endpoint can hold ``""`` or none), a redacted
    one with its ``data``. One rule for the reader (which drops such a block, as a repair) and the
    validator.

    Example:
        >>> _thinking_problem({"type": "thinking", "thinking": "hm", "signature": ""})
        'a thinking block without its signature'
    """
    if block.get("type") == "thinking":
        if not isinstance(block.get("thinking"), str):
            return "a thinking block without its thinking text"
        if not isinstance(block.get("signature"), str) or not block["signature"]:
            return "a thinking block without its signature"
    elif not isinstance(block.get("data"), str) or not block["data"]:
        return "a redacted_thinking block without its data"
    return None


def _anthropic_parts(content: Any, where: str, repairs: List[str],
                     start: int = 0) -> Tuple[List[_Part], bool]:
    """Return the parts of an Anthropic content value and whether it was a string."""
    if isinstance(content, str):  # blank: white space alone (isspace, not a stripped copy, tells)
        return ([_text_part(where, content, content, start + 1)]
                if content and not content.isspace() else []), True
    if not isinstance(content, list):
        raise PagerError(f"{where} must be a string or an array of blocks (got {_type_name(content)})")
    parts = []
    for j, raw in enumerate(content, start + 1):
        w = f"{where}[{j - start - 1}]"
        pos = j
        kind = raw.get("type") if type(raw) is dict else None
        if type(kind) is not str:
            if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
                raise PagerError(f"{w} must be an object with a type")
            kind = raw["type"]
        if kind == "text":
            text = raw.get("text")
            if not isinstance(text, str):
                raise PagerError(f"{w}.text must be a string (got {_show(text)})")
            if text and not text.isspace():
                parts.append(_text_part(w, raw, text, pos))
            else:
                repairs.append(f"{w} is an empty text block; dropped")
        elif kind == "tool_use":
            if not isinstance(raw.get("id"), str):
                raise PagerError(f"{w}.id must be a string (got {_show(raw.get('id'))})")
            text = f"{raw.get('name')}({_compact_json(raw.get('input', {}))})"
            parts.append(_Part("call", raw, w, text=text, key=raw["id"], pos=pos))
        elif kind == "tool_result":
            key = raw.get("tool_use_id")
            if not isinstance(key, str):
                raise PagerError(f"{w}.tool_use_id must be a string (got {_show(key)})")
            text = _flatten(raw.get("content"))
            if raw.get("is_error"):
                text = "[error] " + text
            parts.append(_Part("result", raw, w, text=text, key=key, pos=pos))
        elif kind in THINKING_TYPES:
            unsendable = _thinking_problem(raw)
            if unsendable:  # the API refuses the whole request for it: no output could hold it
                repairs.append(f"{w} is {unsendable}; dropped")
                continue
            text = raw.get("thinking") if kind == "thinking" else REDACTED_THINKING
            parts.append(_Part("thinking", raw, w, text=text if isinstance(text, str) else "",
                               pos=pos))
        elif kind in ("server_tool_use", "mcp_tool_use"):  # answered in the same turn by its *_tool_result
            text = f"{raw.get('name')}({_compact_json(raw.get('input', {}))})"
            parts.append(_Part("other", raw, w, text=text, link=raw.get("id"), pos=pos))
        elif kind.endswith("_tool_result") and isinstance(raw.get("tool_use_id"), str):
            text = _flatten(raw.get("content")) or f"[{kind}]"
            parts.append(_Part("other", raw, w, text=text, link=raw["tool_use_id"], pos=pos))
        else:
            parts.append(_Part("media" if kind in MEDIA_PART_TYPES else "other", raw, w,
                               text=_part_text(raw), pos=pos))
    return parts, False


def _api_fields(raw: Dict[str, Any], kind: Any, foreign: Dict[str, int]) -> Dict[str, Any]:
    """Return ``raw`` (a message, or a block of type ``kind``) with only the fields the API takes
    (ANTHROPIC_FIELDS; other kinds are returned as they are), counting the keys left out in ``foreign``."""
    allowed = ANTHROPIC_FIELDS.get(kind) if isinstance(kind, str) else None
    if allowed is None or all(key in allowed for key in raw):
        return raw
    for key in raw:
        if key not in allowed:
            foreign[key] = foreign.get(key, 0) + 1
    return {key: value for key, value in raw.items() if key in allowed}


def _load_anthropic(value: Any, harness_texts: Container[str] = (), memo: Optional[_FinishMemo] = None) -> Conversation:
    """Return the Conversation for an Anthropic Messages request body (or message list).

    ``harness_texts``: the content ids of texts a contract recorded as the harness's; ``memo``: a
    running Pager's last read (see _finish).
    """
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        shell, messages = value, value["messages"]
    elif isinstance(value, list):
        shell, messages = None, value
    else:
        raise PagerError("anthropic input must be an object with a messages array")
    repairs: List[str] = []
    head = []
    if isinstance(shell, dict) and shell.get("system") not in (None, "", []):
        system = shell["system"]
        parts, is_string = _anthropic_parts(system, "system", repairs)
        if parts:
            for part in parts:
                if part.kind != "text":
                    raise PagerError(f"{part.where} must be a text block")
            count = 1 if is_string else len(system)
            head.append(_Msg("system", "system", {"content": system}, _sole(parts, count),
                             mid="system", string_content=is_string))
    msgs = []
    foreign: Dict[str, int] = {}  # keys the API does not take, left out: "metrics" -> how many
    for i, raw in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(raw, dict):
            raise PagerError(f"{where} must be an object (got {_type_name(raw)})")
        role = raw.get("role")
        if role not in ANTHROPIC_ROLES:
            raise PagerError(f"{where}.role must be user or assistant (got {_show(role)})")
        raw = _api_fields(raw, "message", foreign)
        content = raw.get("content")
        if isinstance(content, list):
            cleaned = [_api_fields(block, block.get("type"), foreign) if isinstance(block, dict) else block
                       for block in content]
            if any(new is not old for new, old in zip(cleaned, content)):  # copy the message only when a block changed
                content = cleaned
                raw = {**raw, "content": content}
        parts, is_string = _anthropic_parts(content, where + ".content", repairs)
        count = 1 if is_string else len(content)
        msgs.append(_Msg(role, where, raw, _sole(parts, count), string_content=is_string))
    if foreign:
        repairs.append("fields the Messages API does not take were left out: "
                       + ", ".join(f"{key} ({n})" for key, n in sorted(foreign.items())))
    return _finish("anthropic", msgs, head, shell, repairs, harness_texts=harness_texts, memo=memo)


def _as_blocks(content: Any) -> List[Any]:
    """Return Anthropic content as a block list."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _leading_thinking(blocks: List[Any]) -> int:
    """Return how many blocks at the start of blocks are thinking blocks."""
    n = 0
    while (n < len(blocks) and isinstance(blocks[n], dict)
           and blocks[n].get("type") in THINKING_TYPES):
        n += 1
    return n


def _is_result_block(block: Any) -> bool:
    """Return True for an Anthropic tool_result block."""
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _results_first(blocks: List[Any]) -> List[Any]:
    """Return blocks with tool_result blocks moved to the front, order otherwise kept."""
    # Tool results must open the user message that answers the calls.
    return ([b for b in blocks if _is_result_block(b)]
            + [b for b in blocks if not _is_result_block(b)])


def _split_blocks(msg: Dict[str, Any], heads: List[Any], rest: List[Any]) -> None:
    """Add msg's blocks to a run being merged: what must open the merged message to ``heads``, the rest to ``rest``.

    A user message opens with its tool results (they must answer the calls first); a thinking
    turn must start with its thinking blocks (each message's leading ones).
    """
    blocks = _as_blocks(msg["content"])
    if msg["role"] == "user":
        for block in blocks:
            (heads if _is_result_block(block) else rest).append(block)
    else:
        a = _leading_thinking(blocks)
        heads.extend(blocks[:a])
        rest.extend(blocks[a:])


def _merge_same_role(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Return messages with same-role neighbours merged into one message (the first one's fields)."""
    out: List[Dict[str, Any]] = []
    # A run of same-role messages is merged once, at its end: merging pairwise rebuilt the
    # whole run's blocks for each message (quadratic in a run of hundreds of user messages).
    heads: List[Any] = []  # the run's tool results (user) or leading thinking blocks (assistant)
    rest: List[Any] = []   # the run's other blocks, in order
    merging = False        # the last message of out opens a run of two or more
    for msg in messages:
        if not out or out[-1]["role"] != msg["role"]:
            if merging:
                out[-1] = dict(out[-1], content=heads + rest)
                heads, rest, merging = [], [], False
            out.append(msg)
            continue
        if not merging:  # the run's second message: the first one's blocks come first
            _split_blocks(out[-1], heads, rest)
            merging = True
        _split_blocks(msg, heads, rest)
    if merging:
        out[-1] = dict(out[-1], content=heads + rest)
    return out


class _Anthropic(_Chat):
    """Anthropic Messages: a message list, or a request body with ``messages`` (and ``system``)."""

    name = emits_as = tool_api = "anthropic"
    tool_call_type = "tool_use"

    def read(self, document: Any, held: bool = False, memo: Optional[_FinishMemo] = None) -> Conversation:
        return _load_anthropic(document, memo=memo)

    def may_join(self, msg: _Msg) -> bool:
        """A run of assistant messages is one turn (see pair and units): another may join it."""
        return msg.role == "assistant"

    def pair(self, msgs: List[_Msg], repairs: List[str], held: bool = False) -> None:
        """Pair tool_use with tool_result across adjacent assistant/user runs; repair the rest."""
        runs = _runs(msgs)
        for index, run in enumerate(runs):
            if run[0].role == "assistant":
                seen = set()
                for msg in run:
                    for part in list(msg.parts):
                        if part.kind == "result":
                            _drop(msg, part, repairs, f'tool_result "{part.key}" sits in an assistant message')
                        elif part.kind == "call":
                            if part.key in seen:
                                _drop(msg, part, repairs, f'tool_use id "{part.key}" repeats in its turn')
                            seen.add(part.key)
                continue
            before = runs[index - 1] if index else []
            calls = {p.key: p for m in before for p in m.parts if p.kind == "call"}
            answered = set()
            for msg in run:
                for part in list(msg.parts):
                    if part.kind == "call":
                        _drop(msg, part, repairs, f'tool_use "{part.key}" sits in a user message')
                    elif part.kind == "result":
                        if part.key in calls and part.key not in answered:
                            part.partner = calls[part.key]
                            answered.add(part.key)
                        else:
                            _drop(msg, part, repairs, f'tool_result "{part.key}" has no matching tool_use in '
                                  'the previous assistant message')
            for key, call in calls.items():
                if key not in answered:
                    owner = next(m for m in before if call in m.parts)
                    _drop(owner, call, repairs, f'tool_use "{key}" has no tool_result in the next user message')
        # A final assistant run keeps its unanswered calls: it is awaiting their results.

    def units(self, msgs: List[_Msg]) -> None:
        """Put a thinking turn's thinking, its tool calls and their results in one unit."""
        for run in _runs(msgs):
            if run[0].role != "assistant":
                continue
            parts = [p for m in run for p in m.parts]
            if any(p.kind == "thinking" for p in parts):
                unit = f"turn:{parts[0].bid}"
                for part in parts:
                    if part.kind in ("thinking", "call") or part.link is not None:
                        part.unit = unit

    def write(self, conv: Conversation, effective: Dict[str, Tuple[str, Optional[str]]]) -> Any:
        """Return the Anthropic Messages object with decisions applied."""
        def text_block(stub: str) -> Dict[str, str]:
            return {"type": "text", "text": stub}

        body = dict(conv._shell) if isinstance(conv._shell, dict) else {}
        for head in conv._head:
            pieces, touched = _rebuild(head, effective, text_block)
            if not pieces:
                body.pop("system", None)
            elif head.string_content and not touched:
                body["system"] = pieces[0]
            else:
                body["system"] = [text_block(p) if isinstance(p, str) else p for p in pieces]
        messages = []
        for msg in conv._msgs:
            pieces, touched = _rebuild(msg, effective, text_block)
            if not pieces:
                continue
            new = dict(msg.raw)
            if msg.string_content and not touched:
                new["content"] = pieces[0]
            else:
                blocks = [text_block(p) if isinstance(p, str) else p for p in pieces]
                if msg.role == "user":
                    blocks = _results_first(blocks)
                new["content"] = blocks
            messages.append(new)
        messages = _merge_same_role(messages)
        if messages and messages[0]["role"] != "user":
            messages.insert(0, {"role": "user", "content": OMITTED_NOTE})
        if not messages:
            messages = [{"role": "user", "content": OMITTED_NOTE}]
        if isinstance(conv._shell, list):
            return messages
        body["messages"] = messages
        return body

    def check(self, obj: Any) -> List[str]:
        """Return the problems of an Anthropic Messages object."""
        if isinstance(obj, dict):
            messages = obj.get("messages")
        else:
            messages = obj
        if not isinstance(messages, list):
            return ["top level must be an object with a messages array"]
        problems: List[str] = []
        if isinstance(obj, dict) and "system" in obj:
            system = obj["system"]
            if isinstance(system, list):
                for j, block in enumerate(system):
                    if not (isinstance(block, dict) and block.get("type") == "text"
                            and str(block.get("text") or "").strip()):
                        problems.append(f"system[{j}] must be a non-empty text block")
            elif not isinstance(system, str):
                problems.append("system must be a string or an array of text blocks")
        if not messages:
            return problems + ["messages is empty"]
        prev_role, prev_calls = None, []
        use_ids = set()
        for i, msg in enumerate(messages):
            where = f"messages[{i}]"
            if not isinstance(msg, dict) or msg.get("role") not in ANTHROPIC_ROLES:
                problems.append(f"{where} must be an object with role user or assistant")
                prev_role, prev_calls = None, []
                continue
            role = msg["role"]
            if i == 0 and role != "user":
                problems.append(f"messages[0].role must be user (got {role})")
            if role == prev_role:
                problems.append(f"{where} has the same role as messages[{i - 1}] ({role}); roles must alternate")
            problem = _content_problem(msg.get("content"), where)
            if problem:
                problems.append(problem)
            content = msg.get("content")
            blocks = content if isinstance(content, list) else []
            types = [b.get("type") if isinstance(b, dict) else None for b in blocks]
            calls = []
            if role == "user":
                answered = set()
                for j, block in enumerate(blocks):
                    if types[j] in ("tool_use",) + THINKING_TYPES:
                        problems.append(f"{where}.content[{j}] is a {types[j]} in a user message")
                    if types[j] != "tool_result":
                        continue
                    if any(t != "tool_result" for t in types[:j]):
                        problems.append(f"{where}.content[{j}] tool_result must come before other blocks")
                    tid = block.get("tool_use_id")
                    if tid not in prev_calls:
                        problems.append(f"{where}.content[{j}].tool_use_id {_show(tid)} has no matching tool_use in "
                                        "the previous assistant message")
                    elif tid in answered:
                        problems.append(f'{where}.content[{j}].tool_use_id "{tid}" is answered twice')
                    answered.add(tid)
                for cid in prev_calls:
                    if cid not in answered:
                        problems.append(f'messages[{i - 1}] tool_use "{cid}" is not answered in {where}')
            else:
                for cid in prev_calls:
                    problems.append(f'messages[{i - 1}] tool_use "{cid}" is not answered: {where} is not a user message')
                if types and types[0] not in THINKING_TYPES and any(t in THINKING_TYPES for t in types):
                    problems.append(f"{where} holds thinking but starts with {_show(types[0])}: "
                                    "the API wants thinking first")
                for j, block in enumerate(blocks):
                    if types[j] == "tool_result":
                        problems.append(f"{where}.content[{j}] is a tool_result in an assistant message")
                    elif types[j] in THINKING_TYPES and (unsendable := _thinking_problem(block)):
                        problems.append(f"{where}.content[{j}] is {unsendable}")
                    if types[j] != "tool_use":
                        continue
                    cid = block.get("id")
                    if not isinstance(cid, str) or not isinstance(block.get("name"), str):
                        problems.append(f"{where}.content[{j}] tool_use needs a string id and name")
                        continue
                    if cid in use_ids:
                        problems.append(f'{where}.content[{j}] tool_use id "{cid}" repeats')
                    use_ids.add(cid)
                    calls.append(cid)
            prev_role, prev_calls = role, calls
        # Calls left in the final assistant message are awaiting results: allowed.
        return problems

    def tool_definition(self, name: str, description: str, schema: Dict[str, Any]) -> Dict[str, Any]:
        return {"name": name, "description": description, "input_schema": schema}

    def tool_call(self, call: Any) -> Tuple[Optional[str], Optional[str], Any]:
        return call.get("id"), call.get("name"), call.get("input")

    def tool_result(self, call_id: Optional[str], text: str, failed: bool = False) -> Dict[str, Any]:
        result: Dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
        if failed:
            result["is_error"] = True
        return result


# --- claude-code: Claude Code session logs (JSONL), written back as anthropic ---


def _is_conversation_line(obj: Dict[str, Any], sidechain: bool = False) -> bool:
    """Return True for a user/assistant transcript line of the main chain (or, for a subagent log, of its side chain)."""
    return (obj.get("type") in ("user", "assistant") and isinstance(obj.get("message"), dict)
            and bool(obj.get("isSidechain")) == sidechain)


def _is_boundary(obj: Dict[str, Any]) -> bool:
    """Return True for a Claude Code compaction boundary line."""
    return obj.get("type") == "system" and obj.get("subtype") == "compact_boundary"


def _result_ids(obj: Dict[str, Any]) -> List[str]:
    """Return the tool_use ids a user line answers."""
    content = obj["message"].get("content")
    return [b.get("tool_use_id") for b in content if isinstance(b, dict)
            and b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)] if isinstance(content, list) else []


def _use_ids(obj: Dict[str, Any]) -> List[str]:
    """Return the tool_use ids an assistant line calls."""
    content = obj["message"].get("content")
    return [b.get("id") for b in content if isinstance(b, dict)
            and b.get("type") == "tool_use" and isinstance(b.get("id"), str)] if isinstance(content, list) else []


def _walk_branch(records: List[Tuple[int, Dict[str, Any]]], by_uuid: Dict[str, Tuple[int, Dict[str, Any]]],
                 start: Tuple[int, Dict[str, Any]], sidechain: bool,
                 repairs: List[str]) -> Tuple[List[Tuple[int, Dict[str, Any]]], Optional[Tuple[int, Dict[str, Any]]]]:
    """Return (the branch's conversation lines in file order, the compaction boundary it stops at or None).

    Walk parentUuid back from ``start``; the walk stops at a compact_boundary (what came before
    it is not in the model's context).  A parent missing from the file (a line the log never
    wrote, or a copy left out) does not end the walk when an earlier line with a uuid is on the
    same chain: the walk goes on from the nearest such line, since Claude Code appends in order;
    only the first line's missing parent starts the branch.  Parallel tool calls fork the chain
    (a result's parent is its own tool_use line), so lines hanging off the branch are added back
    when they belong to it: assistant lines sharing a message.id with the branch, and user lines
    whose every tool_result answers a not-yet-answered tool_use of the branch.
    """
    branch: Dict[int, Dict[str, Any]] = {}
    seen = set()
    boundary = None
    chained: Optional[List[Tuple[int, Dict[str, Any]]]] = None  # for a missing parent (see below)
    chained_at: List[int] = []
    current: Optional[Tuple[int, Dict[str, Any]]] = start
    while current is not None:
        number, obj = current
        if number in seen:
            repairs.append(f"line {number}: parentUuid chain loops back; walk stopped")
            break
        seen.add(number)
        kind = obj.get("type")  # each rule below asks for its own type first
        if kind == "system" and _is_boundary(obj):
            boundary = current
            break
        if kind in ("user", "assistant") and _is_conversation_line(obj, sidechain):
            branch[number] = obj
        parent = obj.get("parentUuid")
        if not isinstance(parent, str):
            break
        current = by_uuid.get(parent)
        if current is None:
            if chained is None:  # built on the first miss only: the lines with a uuid on this chain, in file order
                chained = [r for r in records
                           if isinstance(r[1].get("uuid"), str) and bool(r[1].get("isSidechain")) == sidechain]
                chained_at = [n for n, _ in chained]
            at = bisect_left(chained_at, number)
            current = chained[at - 1] if at else None
            if current is None:
                repairs.append(f'line {number}: parent "{parent}" is not in the file; the branch starts there')
            else:
                repairs.append(f'line {number}: parent "{parent}" is not in the file; the walk goes on from '
                               f'line {current[0]}, the line before it')
    low = boundary[0] if boundary is not None else 0
    # Only conversation lines after the boundary and off the branch can join it: a linear log has none.
    loose = [(number, obj) for number, obj in records
             if number not in branch and number > low and _is_conversation_line(obj, sidechain)]
    if not loose:
        return sorted(branch.items()), boundary
    uuids = {o.get("uuid") for o in branch.values() if isinstance(o.get("uuid"), str)}
    message_ids = {o["message"].get("id") for o in branch.values()
                   if o["type"] == "assistant" and isinstance(o["message"].get("id"), str)}
    calls = {i for o in branch.values() if o["type"] == "assistant" for i in _use_ids(o)}
    answered = {i for o in branch.values() if o["type"] == "user" for i in _result_ids(o)}
    grew = True
    while grew:
        grew = False
        for number, obj in loose:
            if number in branch or not _str_in(obj.get("parentUuid"), uuids):
                continue
            if obj["type"] == "assistant":
                if not _str_in(obj["message"].get("id"), message_ids):
                    continue
                calls.update(_use_ids(obj))
            else:
                ids = _result_ids(obj)
                if not ids or any(i not in calls or i in answered for i in ids):
                    continue
                answered.update(ids)
            branch[number] = obj
            if isinstance(obj.get("uuid"), str):
                uuids.add(obj["uuid"])
            grew = True
    return sorted(branch.items()), boundary


def _live_branch(records: List[Tuple[int, Dict[str, Any]]], repairs: List[str]
                 ) -> Tuple[List[Tuple[int, Dict[str, Any]]], List[Tuple[int, Dict[str, Any]]]]:
    """Return (the live context's conversation lines, the lines before its compaction boundaries).

    The live context is what follows the newest compaction boundary on the branch of the newest
    line (its first line is the compaction summary); a log whose lines name no parent is read in
    file order.  What came before a boundary is walked from
    the boundary's logicalParentUuid when that line is in the file, else it is every
    conversation line before the boundary; both go to the second list (older boundaries first).
    A subagent log (every line on a side chain) is read as the subagent's own conversation.
    """
    by_uuid: Dict[str, Tuple[int, Dict[str, Any]]] = {}
    for record in records:
        uuid = record[1].get("uuid")
        if isinstance(uuid, str) and uuid not in by_uuid:
            by_uuid[uuid] = record
    sidechain = False
    leaf = next((r for r in reversed(records) if _is_conversation_line(r[1])), None)
    if leaf is None:
        sidechain = True  # a subagent's log: its own conversation is the side chain
        leaf = next((r for r in reversed(records) if _is_conversation_line(r[1], True)), None)
    if leaf is None:
        raise PagerError("claude-code transcript has no user or assistant lines")
    if not any(isinstance(obj.get("parentUuid"), str) for _, obj in records):
        # No line names a parent (a log written by a tool or by hand, or a one-line session):
        # the file's order is the conversation's.
        lines = [r for r in records if _is_conversation_line(r[1], sidechain)]
        last = max((number for number, obj in records if _is_boundary(obj)), default=-1)
        return [r for r in lines if r[0] > last], [r for r in lines if r[0] < last]
    live, boundary = _walk_branch(records, by_uuid, leaf, sidechain, repairs)
    archived: List[Tuple[int, Dict[str, Any]]] = []
    taken = {number for number, _ in live}
    while boundary is not None:
        number, obj = boundary
        parent = by_uuid.get(obj.get("logicalParentUuid")) if isinstance(obj.get("logicalParentUuid"), str) else None
        if parent is not None and parent[0] < number:
            part, boundary = _walk_branch(records, by_uuid, parent, sidechain, repairs)
        else:
            part = [r for r in records if r[0] < number and r[0] not in taken
                    and _is_conversation_line(r[1], sidechain)]
            boundary = None
        part = [r for r in part if r[0] not in taken]
        taken.update(n for n, _ in part)
        archived = part + archived
    return live, sorted(archived)


# Claude Code line types that are not conversation (counted in Conversation.other_lines).
CLAUDE_OTHER_LINES = ("progress", "file-history-snapshot", "queue-operation", "system", "summary")


def _claude_messages(lines: List[Tuple[int, Dict[str, Any]]], repairs: List[str]) -> List[_Msg]:
    """Return the messages of Claude Code conversation lines (an API response's lines joined by message.id)."""
    msgs: List[_Msg] = []
    by_message_id: Dict[str, _Msg] = {}
    counts: Dict[int, int] = {}  # id(msg) -> content blocks seen so far
    for number, obj in lines:
        message = obj["message"]
        role = obj["type"]
        get = obj.get
        meta, summary = get("isMeta"), get("isCompactSummary")
        message_id = message.get("id") if role == "assistant" else None
        msg = by_message_id.get(message_id) if isinstance(message_id, str) else None
        if msg is None:
            # No message id: Claude Code's ids do not survive the Anthropic body a pass writes,
            # so every block takes a content id (tool calls keep theirs).
            msg = _Msg(role, f"line {number}", {"role": role}, [],
                       harness=bool(meta or summary), summary=bool(summary))
            msgs.append(msg)
            if isinstance(message_id, str):
                by_message_id[message_id] = msg
            start = 0
        else:
            start = counts[id(msg)]
        content = message.get("content")
        parts, is_string = _anthropic_parts(content, f"line {number}.message.content", repairs, start)
        seen = counts[id(msg)] = start + (1 if is_string else len(content))
        if meta and not summary:
            for part in parts:
                part.harness = part.kind == "text"  # only this line's metadata says so (see HARNESS)
        msg.parts += parts
        msg.string_content = is_string and seen == 1
    for msg in msgs:
        if counts[id(msg)] == 1:
            _sole(msg.parts, 1)
    return msgs


def _claude_usage(lines: List[Tuple[int, Dict[str, Any]]]) -> Dict[str, int]:
    """Return the context the log recorded: input + cache-read + cache-creation tokens of the last and first call.

    Claude Code writes one line per content block of a response, each with the response's
    usage; ``output_tokens`` on them is a streaming count (often 1), never a block's size.
    """
    def context(obj: Dict[str, Any]) -> Optional[int]:
        """Return the context tokens the line's call recorded, or None (not a call, or no usable usage)."""
        usage = obj["message"].get("usage") if obj["type"] == "assistant" else None
        if isinstance(usage, dict):
            parts = [usage.get(k) for k in ("input_tokens", "cache_read_input_tokens",
                                            "cache_creation_input_tokens")]
            if all(v is None or _is_int(v) for v in parts) and any(v is not None for v in parts):
                # no call sees an empty context: all zeros (a log written through another
                # model's endpoint) means the usage was not recorded
                return sum(v or 0 for v in parts) or None
        return None

    # Only the first and the last call count: look from each end, not at every line.
    first = next((c for c in map(context, (obj for _, obj in lines)) if c is not None), None)
    if first is None:
        return {}
    last = next(c for c in map(context, (obj for _, obj in reversed(lines))) if c is not None)
    return {"recorded_context_tokens": last, "recorded_baseline_tokens": first}


def _aside_text(obj: Dict[str, Any]) -> str:
    """Return the text of a Claude Code attachment or queued-input line: its kind, then its strings ('' if none).

    Example:
        >>> _aside_text({"type": "attachment", "attachment": {"type": "queued_command", "prompt": "Add it to plan.md"}})
        '[queued_command] Add it to plan.md'
        >>> _aside_text({"type": "attachment", "attachment": {"type": "task_reminder", "content": []}})
        ''
    """
    value = obj.get("attachment") if obj.get("type") == "attachment" else {"type": "queued input",
                                                                           "content": obj.get("content")}
    if not isinstance(value, dict):
        return ""
    found: List[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, str) and item.strip():
            found.append(item)
        elif isinstance(item, list):
            for x in item:
                walk(x)
        elif isinstance(item, dict):
            for key, x in item.items():
                if key != "type":
                    walk(x)
    walk(value)
    return f"[{value.get('type')}] " + "\n".join(dict.fromkeys(found)) if found else ""


def _aside_blocks(records: List[Tuple[int, Dict[str, Any]]], msgs: List[_Msg]) -> List[Dict[str, Any]]:
    """Return the blocks of a Claude Code log's attachment lines and queued input (ASIDE_KIND): pages, never emitted.

    Each takes the turn of the message before it, and an id from its line's uuid (else its number).
    """
    starts: Optional[List[Tuple[int, int]]] = None  # (line, turn) of each message: worked out at the first aside
    blocks = []
    for number, obj in records:
        kind = obj.get("type")
        if kind != "attachment" and not (kind == "queue-operation" and obj.get("operation") == "enqueue"):
            continue
        text = _aside_text(obj)
        if not text:
            continue
        if starts is None:
            starts = sorted((int(m.where.split()[-1]), m.turn) for m in msgs if m.where.startswith("line "))
        before = bisect_right(starts, (number, _MAX_COUNT)) - 1
        key = obj.get("uuid") if isinstance(obj.get("uuid"), str) else f"line {number}"
        blocks.append({"id": "a-" + hashlib.sha256(f"{key}\n{text}".encode("utf-8")).hexdigest()[:12], "turn": starts[before][1] if before >= 0 else 0,
                       "role": "user", "text": text, "tokens": estimate_tokens(text), "pinned": False,
                       "protected": ARCHIVED, "unit": None, "stub": False, "kind": ASIDE_KIND})
    return blocks


class _ClaudeCode(_Anthropic):
    """Claude Code session logs (JSONL), written back as Anthropic Messages."""

    name, jsonl = "claude-code", True

    def claims_line(self, record: Dict[str, Any]) -> bool:
        return isinstance(record.get("type"), str) and any(k in record for k in CLAUDE_MARKER_KEYS)

    def read(self, text: str, held: bool = False) -> Conversation:
        """Return the Conversation for a Claude Code session transcript (JSONL).

        The live context is read (see _live_branch); the lines before a compaction boundary become
        archived blocks (pages, never written back).  ``isMeta`` and compaction-summary lines stay
        (the model saw them) but are the harness's, not the human's.
        """
        with _collector_held():
            records, skipped = _jsonl_records(text)
            repairs: List[str] = []
            live, before = _live_branch(records, repairs)
            other: Dict[str, int] = {}
            for _, obj in records:
                if obj.get("type") not in ("user", "assistant") or not isinstance(obj.get("message"), dict):
                    name = str(obj.get("type"))
                    other[name] = other.get(name, 0) + 1
            msgs = _claude_messages(live, repairs)
            archive = _claude_messages(before, []) if before else None
            conv = _finish(self.name, msgs, [], None, repairs, skipped, archive)
        conv.recorded = _claude_usage(live)
        conv.other_lines = other
        conv.aside = _aside_blocks(records, conv._msgs)
        return conv

    def read_back(self, value: Any, harness_texts: Container[str] = ()) -> Conversation:
        return _load_anthropic(value, harness_texts)


# --- codex: Codex CLI rollouts (JSONL), written back as responses ---


def _is_codex_header(obj: Dict[str, Any]) -> bool:
    """Return True for the first line of an older Codex rollout: {id, timestamp, instructions?, git?}."""
    return ("type" not in obj and isinstance(obj.get("id"), str) and "timestamp" in obj
            and ("instructions" in obj or "git" in obj))


def _codex_usage(payload: Dict[str, Any]) -> Optional[int]:
    """Return the input tokens of a token_count event's last call (cached ones are part of them), or None."""
    info = payload.get("info")
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    value = last.get("input_tokens") if isinstance(last, dict) else None
    return value if _is_int(value) and value > 0 else None  # 0: not recorded (no call sees an empty context)


def _codex_item(item: Any) -> Any:
    """Return a rollout item as a request holds it: without Codex's own metadata (CODEX_METADATA_KEYS)."""
    if isinstance(item, dict) and any(key in item for key in CODEX_METADATA_KEYS):
        return {key: value for key, value in item.items() if key not in CODEX_METADATA_KEYS}
    return item


class _Codex(_Responses):
    """Codex CLI rollouts (JSONL), written back as Responses input items."""

    name, jsonl = "codex", True
    claims = _Format.claims  # a rollout is JSONL: it claims no whole document, as Responses would

    def claims_line(self, obj: Dict[str, Any]) -> bool:
        """Return True for a line of a Codex rollout: an envelope {type, payload}, or an older rollout's header, state line or bare item."""
        kind = obj.get("type")
        if (isinstance(kind, str) and kind in CODEX_LINE_TYPES and "payload" in obj) or _is_codex_header(obj) \
                or set(obj) == {"record_type"}:
            return True
        return isinstance(kind, str) and (kind in RESPONSES_ITEM_TYPES or kind in CODEX_SKIPPED_ITEMS) and "payload" not in obj

    def read(self, text: str, held: bool = False) -> Conversation:
        """Return the Conversation for a Codex CLI rollout (JSONL).

        ``response_item`` payloads are Responses items (ghost_snapshot undo records are skipped);
        session_meta, turn_context and event_msg lines are counted as other lines (a token_count
        event gives the context the last call used).  Older rollouts (a first line
        ``{id, timestamp, instructions, git}``, ``{"record_type": ...}`` lines, bare items) read the
        same way.  A ``compacted`` line ends the context before it, as Codex does on resume: with
        ``replacement_history`` the live history becomes those items; without it (older rollouts)
        the earlier user/developer/system messages stay and the summary ``message`` is appended as a
        user message.  Whatever the compaction took out is archived (stored as pages, never written
        back).  Lines that do not parse, and lines whose payload is not an object, count as skipped.
        """
        records, skipped = _jsonl_records(text)
        items: List[Tuple[str, Dict[str, Any]]] = []
        archive: List[Tuple[str, Dict[str, Any]]] = []
        other: Dict[str, int] = {}
        usage: List[int] = []
        for number, obj in records:
            kind, payload = obj.get("type"), obj.get("payload")
            if "payload" not in obj and isinstance(kind, str) and kind in RESPONSES_ITEM_TYPES | set(CODEX_SKIPPED_ITEMS):
                kind, payload = "response_item", obj  # an older rollout's bare item
            if kind not in ("response_item", "compacted"):
                name = "record_type" if "record_type" in obj else "header" if _is_codex_header(obj) else str(kind)
                other[name] = other.get(name, 0) + 1
                if kind == "event_msg" and isinstance(payload, dict) and payload.get("type") == "token_count":
                    found = _codex_usage(payload)
                    if found is not None:
                        usage.append(found)
                continue
            if not isinstance(payload, dict):
                skipped += 1
                continue
            if kind == "response_item":
                if payload.get("type") not in CODEX_SKIPPED_ITEMS:
                    items.append((f"line {number}.payload" if payload is not obj else f"line {number}", payload))
                continue
            history = payload.get("replacement_history")
            if isinstance(history, list):
                archive += items
                items = [(f"line {number}.payload.replacement_history[{j}]", it)
                         for j, it in enumerate(history)
                         if not (isinstance(it, dict) and it.get("type") in CODEX_SKIPPED_ITEMS)]
                continue
            kept = [(w, it) for w, it in items if isinstance(it, dict)
                    and it.get("type", "message") == "message"
                    and it.get("role") in ("user", "developer", "system")]
            archive += [(w, it) for w, it in items if (w, it) not in kept]
            items = kept
            summary = payload.get("message")
            if isinstance(summary, str) and summary.strip():
                items.append((f"line {number}.payload.message",
                              {"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": summary}]}))
        if not items:
            raise PagerError("codex rollout has no conversation items (response_item lines or bare items): nothing to page")
        repairs: List[str] = []
        msgs = [_responses_msg(_codex_item(item), where, repairs) for where, item in items]
        for msg in msgs:
            if msg.where.endswith("payload.message"):
                msg.harness = msg.summary = True  # the compaction summary: the harness's words
        old = [_responses_msg(_codex_item(item), where, []) for where, item in archive]  # never sent again
        conv = _finish(self.name, msgs, [], None, repairs, skipped, old or None)
        conv.other_lines = other
        if usage:
            conv.recorded = {"recorded_context_tokens": usage[-1], "recorded_baseline_tokens": usage[0]}
        return conv


# --- swe-agent: SWE-agent trajectories (.traj), written back as openai ---

# SWE-agent's own keys on a history message, which the Chat Completions API does not take
# (``thinking_blocks`` and ``provider_specific_fields`` are what LiteLLM hands back beside a reply:
# no Chat Completions fields); a .traj without its run record still has these.  mini-swe-agent's
# ``extra`` (the raw response, the command's raw output) is its bookkeeping too: it strips the key
# before every call.
SWE_AGENT_EXTRA_KEYS = ("agent", "message_type", "thought", "action", "is_demo", "tool_call_ids", "cache_control",
                        "thinking_blocks", "provider_specific_fields", "extra")
SWE_AGENT_MARKS = ("agent", "message_type")  # on every message SWE-agent writes
# The last message of a mini-swe-agent trajectory, of role ``exit``, records how the run ended and
# never went to the model.
MINI_SWE_AGENT_EXIT_ROLE = "exit"


def _trajectory_messages(value: Any) -> Optional[List[Any]]:
    """Return the message list of a saved trajectory: SWE-agent's ``history``, or a mini-swe-agent
    run's messages (see _is_mini_swe_agent_run); else None."""
    if _is_mini_swe_agent_run(value):
        messages = value.get("messages") if isinstance(value, dict) else value
    else:
        messages = value.get("history") if isinstance(value, dict) else None
    return messages if isinstance(messages, list) else None


def _user_text_ids(msg: Dict[str, Any]) -> List[str]:
    """Return the content ids of a Chat user message's text parts (as _finish names their blocks)."""
    try:
        parts, _ = _openai_parts(msg, "")
    except PagerError:
        return []
    return [_content_id("user", "text", part.text) for part in parts if part.kind == "text"]


def _swe_agent_harness(messages: List[Any], demos: Container[int] = (), harness_texts: Container[str] = ()) -> set:
    """Return the positions of the user messages SWE-agent's harness wrote among Chat ``messages``.

    The task is the first user message that is not a demonstration (position in ``demos``,
    opening with SWE-agent's ``demonstration`` (HARNESS_MARKUP), or a text the contract recorded as the harness's:
    ``harness_texts``, see _SweAgent.read) nor the pager's own text (a stub, the omitted-part
    note); every other user message is the harness's: demonstrations, and each command's output
    after the task.  The same rule reads a .traj and its written-back form (a pass's --emit output,
    which has no ``is_demo`` left), so a round trip finds the same task.  A stub stands where its
    block was: one recorded in turn 1 or later (the task opens turn 1) means the task came before,
    so a paged task does not make the next user message the task.
    """
    harness: set = set()
    task_seen = False
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        content = msg.get("content")
        text = content if isinstance(content, str) else ""
        stubs = _stub_lines(text)
        if any(int(STUB_LINE_RE.match(line).group(2)) >= 1 for line, _ in stubs):  # type: ignore[union-attr]
            task_seen = True
        if task_seen or i in demos or text.startswith((_MARKUP.rows["SWE-agent"].demonstration, OMITTED_NOTE)) or stubs \
                or (harness_texts and any(cid in harness_texts for cid in _user_text_ids(msg))):
            harness.add(i)
        else:
            task_seen = True
    return harness


def _swe_agent_messages(history: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], set]:
    """Return the history as Chat Completions messages, and the positions of its demonstrations.

    SWE-agent's own keys are left out; a tool message answering several calls
    (``tool_call_ids``) becomes one tool message per id: the content on the first, a pointer to
    it on the others.  SWE-agent writes as the user: its demonstrations (``is_demo``), the task
    (the first other user message) and, without function calling, every command's output after
    it.  So the task is the only user message a human's words fill; the rest are the harness's
    (see _swe_agent_harness).  mini-swe-agent's closing ``exit`` record is left out.
    """
    out: List[Dict[str, Any]] = []
    demos: set = set()
    for msg in history:
        if msg.get("role") == MINI_SWE_AGENT_EXIT_ROLE:
            continue  # how the run ended (counted in other_lines): not a message the model saw
        clean = {k: v for k, v in msg.items() if k not in SWE_AGENT_EXTRA_KEYS}
        ids = msg.get("tool_call_ids")
        if msg.get("role") == "tool" and "tool_call_id" not in msg and isinstance(ids, list) and ids:
            for n, cid in enumerate(ids):
                one = dict(clean)
                one["tool_call_id"] = cid
                if n:
                    one["content"] = f"[output given with tool call {ids[0]}]"
                out.append(one)
            continue
        if msg.get("role") == "assistant" and not msg.get("tool_calls"):
            clean.pop("tool_calls", None)  # SWE-agent writes an empty list; the API rejects it
        if msg.get("role") == "user" and msg.get("is_demo") is True:
            demos.add(len(out))
        out.append(clean)
    return out, demos


class _SweAgent(_Openai):
    """SWE-agent trajectories (.traj) and mini-swe-agent runs, written back as Chat Completions."""

    name = "swe-agent"

    def claims(self, value: Any) -> bool:
        """Return True for a SWE-agent trajectory or a mini-swe-agent run: a list of role messages.

        SWE-agent's list is its ``history``; beside it is the run record (``trajectory``, ``info``,
        ``replay_config``), or, in a trajectory saved without one (SWE-agent's demonstrations),
        SWE-agent's own keys on the messages (SWE_AGENT_MARKS).  mini-swe-agent's is its
        ``messages``, or the whole value (see _is_mini_swe_agent_run).
        """
        history = _trajectory_messages(value)
        if not history or not all(isinstance(m, dict) and "role" in m for m in history):
            return False
        return (_is_mini_swe_agent_run(value) or any(k in value for k in ("trajectory", "info", "replay_config"))
                or any(k in m for m in history for k in SWE_AGENT_MARKS))

    def read(self, value: Any, held: bool = False) -> Conversation:
        """Return the Conversation for a SWE-agent trajectory: its ``history``, read as Chat Completions messages."""
        if not self.claims(value):
            raise PagerError("swe-agent input must be a trajectory object with a history list of role messages "
                             "(mini-swe-agent: a messages list and its trajectory_format)")
        history = _trajectory_messages(value)
        messages, demos = _swe_agent_messages(history)
        # A demonstration's text is the harness's by its mark (``is_demo``), which the written-back
        # form loses: its blocks take kind HARNESS, so the contract carries the mark.
        texts = {cid for i in demos for cid in _user_text_ids(messages[i])}
        conv = _load_openai(messages, _swe_agent_harness(messages, demos), texts)
        conv.fmt = self.name
        conv.other_lines = {k: 1 for k in value if value[k] is not history} if isinstance(value, dict) else {}
        ended = sum(1 for m in history if m.get("role") == MINI_SWE_AGENT_EXIT_ROLE)
        if ended:
            conv.other_lines[f"{MINI_SWE_AGENT_EXIT_ROLE} message"] = ended
        return conv

    def read_back(self, value: Any, harness_texts: Container[str] = ()) -> Conversation:
        """Return the Conversation of a SWE-agent session's written-back form (Chat Completions messages,
        a pass's --emit output), its user messages told apart by SWE-agent's rule (_swe_agent_harness)."""
        messages = value.get("messages") if isinstance(value, dict) else value
        return _load_openai(value, _swe_agent_harness(messages if isinstance(messages, list) else [], (), harness_texts),
                            harness_texts)


# --- gemini: Gemini API generateContent request bodies, and gemini-cli: Gemini CLI chat files, written back as gemini ---

# A generateContent body (ai.google.dev/api/generate-content): ``contents``, a list of Content
# ``{role: user | model, parts}``, an optional ``systemInstruction`` Content; a part holds one of
# text, inlineData, fileData, functionCall ``{id?, name, args}``, functionResponse
# ``{id?, name, response}``; ``thought: true`` marks a text part as the model's thought summary.
# It is read through the Chat Completions model (a model turn is an assistant message, its
# functionCall parts its tool_calls; each functionResponse a tool message) and written back in its
# own shape: what came in untouched goes out as it came (a part's thoughtSignature with it).
GEMINI_ROLES = ("user", "model")
GEMINI_DATA_KEYS = ("text", "inlineData", "fileData", "functionCall", "functionResponse",
                    "executableCode", "codeExecutionResult")  # a part holds exactly one of these
GEMINI_CALL_ID = "gemini-call-{}"  # the id given a functionCall that has none (a content hash)
GEMINI_IMAGE = "image/"            # an inlineData part of this type is read as a Chat image, else as a file

# Gemini CLI's chat files (~/.gemini/tmp/<project hash>/chats/session-*.json or .jsonl; its
# chatRecordingService): one object ``{sessionId, projectHash, startTime, lastUpdated, messages}``,
# or JSONL: a header line with the same keys and no messages, one message record a line (a record
# written again under the same id replaces the earlier copy in its place), ``{"$set": {...}}``
# metadata updates (``messages`` in one replaces them all) and ``{"$rewindTo": id}``, which drops
# that message and every later one.  A message is ``{id, timestamp, type, content, displayContent?}``;
# a ``gemini`` reply carries ``toolCalls`` (``{id, name, args, result, status, ...}``: each call and
# its result parts, sent back as the next user turn), ``thoughts`` and ``tokens``.  The user
# texts the CLI writes itself are its row of HARNESS_MARKUP ("Gemini CLI").
GEMINI_CLI_HEADER = ("sessionId", "projectHash")   # on the header line and the one-object file
GEMINI_CLI_TYPES = ("user", "gemini", "info", "error", "warning")
GEMINI_CLI_NOT_RESUMED = ("/", "?", "<session_context>", "<hook_context>")  # user texts its resume leaves out


def _gemini_parts(content: Any, where: str) -> List[Dict[str, Any]]:
    """Return a Content's ``parts`` (a string or a single part is a list of one, as the SDK reads them)."""
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, dict):
        return [content]
    if not isinstance(content, list):
        raise PagerError(f"{where} must be a list of parts (got {_type_name(content)})")
    return [{"text": p} if isinstance(p, str) else p for p in content]


def _gemini_response_text(response: Any) -> str:
    """Return a functionResponse's ``response`` as a tool message's text: its ``output`` string alone, else its JSON."""
    if isinstance(response, dict) and list(response) == ["output"] and isinstance(response["output"], str):
        return response["output"]
    return _compact_json(response)


def _gemini_chat_part(part: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Return the Chat content part for a user-side Gemini part (text or inline data), else None."""
    if isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    data = part.get("inlineData")
    if isinstance(data, dict) and isinstance(data.get("data"), str):
        mime = str(data.get("mimeType", "application/octet-stream"))
        url = f"data:{mime};base64,{data['data']}"
        if mime.startswith(GEMINI_IMAGE):
            return {"type": "image_url", "image_url": {"url": url}}
        return {"type": "file", "file": {"file_data": url}}
    return None


def _gemini_inline(part: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Return the Gemini part for a Chat content part written by _gemini_chat_part (or a pass's text)."""
    if part.get("type") == "text":
        return {"text": part.get("text", "")}
    url = (part.get("image_url") or {}).get("url") if part.get("type") == "image_url" else \
        (part.get("file") or {}).get("file_data") if part.get("type") == "file" else None
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        mime, data = url[5:].split(";base64,", 1)
        return {"inlineData": {"mimeType": mime, "data": data}}
    return None


class _GeminiShell(NamedTuple):
    """What a Gemini body holds beside its turns, for writing it back: the body's other keys and
    the original call and response parts by call id (sent back as they came while untouched)."""

    body: Dict[str, Any]
    calls: Dict[str, Dict[str, Any]]
    responses: Dict[str, Dict[str, Any]]
    names: Dict[str, str]


def _gemini_chat(body: Dict[str, Any], repairs: List[str]) -> Tuple[List[Dict[str, Any]], _GeminiShell]:
    """Return a generateContent body's turns as Chat Completions messages, and its shell.

    A functionCall without an id gets GEMINI_CALL_ID of a hash of its turn, position, name and
    args; a functionResponse without one takes the id of the first call of that name in the model
    turn before it not yet answered.  Thought parts are left out (the API does not read thought
    summaries back); a part of another kind is dropped with a repair.
    """
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise PagerError("gemini input must be an object with a contents list (a generateContent request)")
    shell = _GeminiShell({k: v for k, v in body.items() if k != "contents"}, {}, {}, {})
    messages: List[Dict[str, Any]] = []
    system = body.get("systemInstruction", body.get("system_instruction"))
    if system is not None:
        parts = _gemini_parts(system.get("parts") if isinstance(system, dict) else system, "systemInstruction.parts")
        texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if texts:
            messages.append({"role": "system", "content": texts[0] if len(texts) == 1 else
                             [{"type": "text", "text": t} for t in texts]})
    open_calls: List[Tuple[str, str]] = []  # (id, name) of the last model turn's calls
    for i, turn in enumerate(contents):
        where = f"contents[{i}]"
        if not isinstance(turn, dict):
            raise PagerError(f"{where} must be an object (got {_type_name(turn)})")
        role = turn.get("role", "user")
        if role not in GEMINI_ROLES:
            raise PagerError(f"{where}.role must be one of {', '.join(GEMINI_ROLES)} (got {_show(role)})")
        chat_parts: List[Dict[str, Any]] = []
        calls: List[Dict[str, Any]] = []
        results: List[Dict[str, Any]] = []
        for j, part in enumerate(_gemini_parts(turn.get("parts"), where + ".parts")):
            w = f"{where}.parts[{j}]"
            if not isinstance(part, dict):
                raise PagerError(f"{w} must be an object (got {_type_name(part)})")
            if part.get("thought") is True:
                continue  # a thought summary: shown, never read back by the model
            call, answer = part.get("functionCall"), part.get("functionResponse")
            if role == "model" and isinstance(call, dict) and isinstance(call.get("name"), str):
                cid = call.get("id")
                if not isinstance(cid, str) or not cid:
                    cid = GEMINI_CALL_ID.format(hashlib.sha256(f"{i}\0{j}\0{call['name']}\0{_compact_json(call.get('args'))}"
                                                               .encode("utf-8")).hexdigest()[:CONTENT_ID_DIGITS])
                shell.calls[cid], shell.names[cid] = part, call["name"]
                args = call.get("args", {})
                calls.append({"id": cid, "type": "function",
                              "function": {"name": call["name"], "arguments": json.dumps(args, ensure_ascii=False)}})
                continue
            if role == "user" and isinstance(answer, dict) and isinstance(answer.get("name"), str):
                cid = answer.get("id")
                if not isinstance(cid, str) or not cid:
                    cid = next((c for c, n in open_calls if n == answer["name"]), answer["name"])
                open_calls = [(c, n) for c, n in open_calls if c != cid]
                shell.responses[cid] = part
                results.append({"role": "tool", "tool_call_id": cid,
                                "content": _gemini_response_text(answer.get("response"))})
                continue
            chat = _gemini_chat_part(part)
            if chat is None:
                kinds = [k for k in part if k in GEMINI_DATA_KEYS] or list(part)[:1]
                repairs.append(f"{w} ({', '.join(kinds) or 'empty'}) is not a part the pager reads; dropped")
                continue
            chat_parts.append(chat)
        messages += results
        if role == "model":
            msg: Dict[str, Any] = {"role": "assistant"}
            texts = [p for p in chat_parts if p["type"] == "text"]
            if texts:
                msg["content"] = texts[0]["text"] if len(texts) == 1 else texts
            elif not calls:
                continue
            if calls:
                msg.setdefault("content", None)
                msg["tool_calls"] = calls
            open_calls = [(c["id"], c["function"]["name"]) for c in calls]
            messages.append(msg)
        elif chat_parts:
            text_only = len(chat_parts) == 1 and chat_parts[0]["type"] == "text"
            messages.append({"role": "user", "content": chat_parts[0]["text"] if text_only else chat_parts})
    return messages, shell


def _is_gemini_body(value: Any) -> bool:
    """Return True for a generateContent body: an object with a ``contents`` list of role/parts objects."""
    contents = value.get("contents") if isinstance(value, dict) else None
    return isinstance(contents, list) and all(isinstance(c, dict) and ("parts" in c or "role" in c) for c in contents)


def _load_gemini(value: Any, harness_texts: Container[str] = (), memo: Optional[_FinishMemo] = None) -> Conversation:
    """Return the Conversation for a Gemini API generateContent request body (``memo``: see _finish)."""
    if not _is_gemini_body(value):
        raise PagerError("gemini input must be an object with a contents list (a generateContent request)")
    repairs: List[str] = []
    messages, shell = _gemini_chat(value, repairs)
    conv = _load_openai(messages, (), harness_texts, memo)
    conv.repairs[:0] = repairs
    conv.fmt, conv.emit_format = "gemini", "gemini"
    conv._shell = shell
    conv.definitions_tokens = _definitions_tokens(value)
    return conv


def _emit_gemini(conv: Conversation, effective: Dict[str, Tuple[str, Optional[str]]]) -> Any:
    """Return the generateContent body with decisions applied (written as Chat messages, then as Gemini turns).

    Consecutive turns of one role become one Content (the tool results of a model turn and the
    user's next words share the user turn); a call or a result left as it came is its original
    part; the Chat system message is the ``systemInstruction``.  If the first turn is the model's,
    a user turn holding OMITTED_NOTE goes before it.
    """
    shell: _GeminiShell = conv._shell
    chat = _FORMATS["openai"].write(dataclasses.replace(conv, _shell=None), effective)
    system: List[Dict[str, Any]] = []
    contents: List[Dict[str, Any]] = []

    def add(role: str, parts: List[Dict[str, Any]]) -> None:
        parts = [p for p in parts if not (set(p) == {"text"} and not p["text"])]
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    def pieces(content: Any) -> List[Dict[str, Any]]:
        if isinstance(content, str):
            return [{"text": content}]
        found = [_gemini_inline(p) for p in content or () if isinstance(p, dict)]
        return [p for p in found if p is not None]

    for msg in chat:
        role = msg["role"]
        if role in SYSTEM_ROLES:
            system += pieces(msg.get("content"))
        elif role == "tool":
            cid = msg["tool_call_id"]
            original = shell.responses.get(cid)
            text = _flatten(msg.get("content"))
            if original is not None and _gemini_response_text(original["functionResponse"].get("response")) == text:
                part = dict(original)
                part["functionResponse"] = dict(original["functionResponse"], id=cid)
            else:
                part = {"functionResponse": {"id": cid, "name": shell.names.get(cid, ""), "response": {"output": text}}}
            add("user", [part])
        elif role == "assistant":
            parts = pieces(msg.get("content"))
            for call in msg.get("tool_calls") or ():
                original = shell.calls.get(call["id"])
                if original is not None:
                    parts.append(dict(original, functionCall=dict(original["functionCall"], id=call["id"])))
                else:
                    parts.append({"functionCall": {"id": call["id"], "name": call["function"]["name"],
                                                   "args": json.loads(call["function"]["arguments"] or "{}")}})
            add("model", parts)
        else:
            add("user", pieces(msg.get("content")))
    if not contents or contents[0]["role"] != "user":
        contents.insert(0, {"role": "user", "parts": [{"text": OMITTED_NOTE}]})
    body: Dict[str, Any] = {}
    for key, value in shell.body.items():
        if key not in ("systemInstruction", "system_instruction"):
            body[key] = value
        elif system:
            body[key] = dict(value, parts=system) if isinstance(value, dict) else {"parts": system}
    if system and not any(k in body for k in ("systemInstruction", "system_instruction")):
        body["systemInstruction"] = {"parts": system}
    body["contents"] = contents
    return body


def _validate_gemini(obj: Any) -> List[str]:
    """Return what the Gemini API would refuse in a generateContent body (its API reference and
    function-calling guide): turns of role user or model with non-empty parts, each part one
    non-empty datum; every functionCall of a model turn answered in the very next turn, a user
    turn, by functionResponse parts with the same ids and names (a model turn that ends the
    conversation may wait for them), and no functionResponse that answers no call of the turn
    before it."""
    if not isinstance(obj, dict) or not isinstance(obj.get("contents"), list):
        return ["top level must be an object with a contents list"]
    contents = obj["contents"]
    if not contents:
        return ["contents is empty"]
    problems: List[str] = []
    system = obj.get("systemInstruction", obj.get("system_instruction"))
    if system is not None:
        parts = system.get("parts") if isinstance(system, dict) else None
        if not isinstance(parts, list) or not parts or not all(
                isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"] for p in parts):
            problems.append("systemInstruction must hold non-empty text parts")
    waiting: Dict[str, str] = {}  # the previous model turn's calls: id -> name
    for i, turn in enumerate(contents):
        where = f"contents[{i}]"
        if not isinstance(turn, dict) or turn.get("role") not in GEMINI_ROLES:
            problems.append(f"{where}.role must be one of {', '.join(GEMINI_ROLES)}")
            continue
        parts = turn.get("parts")
        if not isinstance(parts, list) or not parts:
            problems.append(f"{where}.parts must be a non-empty list")
            continue
        calls: Dict[str, str] = {}
        answered: Dict[str, str] = {}
        for j, part in enumerate(parts):
            w = f"{where}.parts[{j}]"
            data = [k for k in GEMINI_DATA_KEYS if isinstance(part, dict) and k in part]
            if len(data) != 1:
                problems.append(f"{w} must hold exactly one of {', '.join(GEMINI_DATA_KEYS)}")
                continue
            if data[0] == "text" and (not isinstance(part["text"], str) or not part["text"]):
                problems.append(f"{w}.text must be a non-empty string")
            for key, into, role in (("functionCall", calls, "model"), ("functionResponse", answered, "user")):
                if data[0] != key:
                    continue
                value = part[key]
                if turn["role"] != role:
                    problems.append(f"{w}: a {key} belongs in a {role} turn")
                elif not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
                    problems.append(f"{w}.{key}.name must be a non-empty string")
                elif str(value.get("id", value["name"])) in into:
                    problems.append(f"{w}.{key}.id {_show(value.get('id'))} is repeated in the turn")
                else:
                    into[str(value.get("id", value["name"]))] = value["name"]
        if answered or waiting:
            for cid, name in answered.items():
                if waiting.get(cid) != name:
                    problems.append(f"{where}: functionResponse {_show(cid)} ({name}) answers no functionCall "
                                    "of the turn before it")
            missing = [cid for cid in waiting if cid not in answered]
            if missing:
                problems.append(f"contents[{i - 1}]: functionCall {', '.join(map(_show, missing))} not answered "
                                "in the next turn")
        waiting = calls
    return problems


def _gemini_cli_messages(text: str) -> Tuple[List[Dict[str, Any]], Dict[str, int], int]:
    """Return the messages of a Gemini CLI chat file as its resume reads them, the other records by
    kind, and the unreadable lines (see the comment above _gemini_parts for the two layouts)."""
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        whole = None
    if isinstance(whole, dict) and "messages" in whole:
        messages = whole["messages"]
        if not isinstance(messages, list):
            raise PagerError(f"gemini-cli chat file: messages must be an array (got {_type_name(messages)})")
        return [m for m in messages if isinstance(m, dict)], {}, 0
    records, skipped = _jsonl_records(text)
    found: Dict[str, Dict[str, Any]] = {}  # by id, in the place of the first copy
    other: Dict[str, int] = {}
    for _, obj in records:
        if "$rewindTo" in obj:
            if not isinstance(obj["$rewindTo"], str):  # no message id to rewind to: unreadable
                skipped += 1
                continue
            ids = list(found)
            cut = ids.index(obj["$rewindTo"]) if obj["$rewindTo"] in found else 0
            for mid in ids[cut:]:
                del found[mid]
            other["$rewindTo record"] = other.get("$rewindTo record", 0) + 1
        elif "$set" in obj:
            update = obj["$set"] if isinstance(obj["$set"], dict) else {}
            if isinstance(update.get("messages"), list):
                found = {m["id"]: m for m in update["messages"] if isinstance(m, dict) and isinstance(m.get("id"), str)}
            other["$set record"] = other.get("$set record", 0) + 1
        elif isinstance(obj.get("id"), str) and "type" in obj:
            if obj["id"] in found:
                other["earlier copy of a message"] = other.get("earlier copy of a message", 0) + 1
            found[obj["id"]] = obj
        elif all(k in obj for k in GEMINI_CLI_HEADER):
            other["header"] = other.get("header", 0) + 1
        else:
            skipped += 1
    return list(found.values()), other, skipped


def _gemini_cli_text(content: Any) -> str:
    """Return the text parts of a message's content, joined (as the CLI reads a user message)."""
    parts = content if isinstance(content, list) else [content]
    return "".join(p if isinstance(p, str) else p.get("text", "") if isinstance(p, dict) and
                   isinstance(p.get("text"), str) else "" for p in parts)


def _gemini_cli_body(messages: List[Dict[str, Any]], other: Dict[str, int]) -> Tuple[Dict[str, Any], set]:
    """Return the generateContent body Gemini CLI resumes a session with, and its harness texts.

    As the CLI rebuilds its history: info, error and warning messages and the user texts it
    does not resume (GEMINI_CLI_NOT_RESUMED) are left out; a reply is a model turn of its text and
    its tool calls, followed by a user turn of their results (a string result as
    ``{output: ...}``, a list of parts as they are).  The harness texts (content ids) are the
    user text parts the CLI wrote: one opening with its mark (HARNESS_MARKUP), and in a user message whose
    ``displayContent`` shows other words than it sent (a slash command's prompt, a function
    response it answered), every part but the one the user typed.
    """
    contents: List[Dict[str, Any]] = []
    harness: set = set()
    for msg in messages:
        kind = msg.get("type")
        if kind not in ("user", "gemini"):  # info, error and warning messages: shown, never sent
            key = f"{kind} message"
            other[key] = other.get(key, 0) + 1
            continue
        parts = _gemini_parts(msg.get("content") if msg.get("content") is not None else [], f"message {msg.get('id')}")
        if kind == "user":
            sent = _gemini_cli_text(msg.get("content")).strip()
            if not sent or sent.startswith(GEMINI_CLI_NOT_RESUMED):
                other["user message not resumed"] = other.get("user message not resumed", 0) + 1
                continue
            shown = msg.get("displayContent")
            typed = _gemini_cli_text(shown).strip() if shown is not None else None
            for part in parts:
                text = part.get("text") if isinstance(part, dict) else None
                if isinstance(text, str) and (text.lstrip().startswith(_MARKUP.rows["Gemini CLI"].text)
                                              or (typed is not None and text.strip() != typed)):
                    harness.add(_content_id("user", "text", text))
            contents.append({"role": "user", "parts": parts})
            continue
        thoughts = msg.get("thoughts")
        if isinstance(thoughts, list) and thoughts:
            other["thought summary"] = other.get("thought summary", 0) + len(thoughts)
        calls = msg.get("toolCalls")
        calls = [c for c in (calls if isinstance(calls, list) else ()) if isinstance(c, dict) and isinstance(c.get("name"), str)]
        model = [p for p in parts if not (isinstance(p, dict) and set(p) == {"text"} and not p["text"])]
        if not any(isinstance(p, dict) and "functionCall" in p for p in model):
            model += [{"functionCall": {"id": c.get("id"), "name": c["name"], "args": c.get("args", {})}}
                      for c in calls]
        if model:
            contents.append({"role": "model", "parts": model})
        answers: List[Dict[str, Any]] = []
        for call in calls:
            result = call.get("result")
            if isinstance(result, str):
                answers.append({"functionResponse": {"id": call.get("id"), "name": call["name"],
                                                     "response": {"output": result}}})
            elif isinstance(result, list):
                answers += [p if isinstance(p, dict) else {"text": str(p)} for p in result]
            elif isinstance(result, dict):
                answers.append(result)
        if answers:
            contents.append({"role": "user", "parts": answers})
    return {"contents": contents}, harness


def _load_gemini_cli(text: str) -> Conversation:
    """Return the Conversation for a Gemini CLI chat file (one-object JSON or JSONL)."""
    messages, other, skipped = _gemini_cli_messages(text)
    body, harness = _gemini_cli_body(messages, other)
    if not body["contents"]:
        raise PagerError("gemini-cli chat file has no user or gemini message the CLI would resume: nothing to page")
    conv = _load_gemini(body, harness)
    conv.fmt, conv.skipped_lines, conv.other_lines = "gemini-cli", skipped, other
    return conv


class _Gemini(_Format):
    """Gemini API generateContent request bodies, read through the Chat Completions model."""

    name = emits_as = "gemini"
    # Read as Chat Completions messages (_gemini_chat, _load_openai): paired and grouped as those are.
    write = staticmethod(_emit_gemini)
    check = staticmethod(_validate_gemini)

    claims = staticmethod(_is_gemini_body)

    def read(self, document: Any, held: bool = False, memo: Optional[_FinishMemo] = None) -> Conversation:
        return _load_gemini(document, memo=memo)

    def read_back(self, value: Any, harness_texts: Container[str] = ()) -> Conversation:
        """Return the Conversation of a written-back body, the harness's texts told by the contract's record."""
        return _load_gemini(value, harness_texts)


class _GeminiCli(_Gemini):
    """Gemini CLI chat files (one-object JSON or JSONL), written back as a generateContent body."""

    name = "gemini-cli"
    jsonl = True

    def claims(self, value: Any) -> bool:
        """Return True for the one-object chat file: its header keys and a list of typed messages."""
        return isinstance(value, dict) and all(k in value for k in GEMINI_CLI_HEADER) \
            and isinstance(value.get("messages", []), list) and "chatMessages" not in value

    def claims_line(self, record: Dict[str, Any]) -> bool:
        """Return True for a line of the JSONL chat file: the header, a message, a $set or $rewindTo record."""
        if "$set" in record or "$rewindTo" in record:
            return len(record) == 1
        if all(k in record for k in GEMINI_CLI_HEADER):
            return True
        return isinstance(record.get("id"), str) and record.get("type") in GEMINI_CLI_TYPES \
            and "content" in record and "timestamp" in record

    def read(self, document: Any, held: bool = False) -> Conversation:
        return _load_gemini_cli(document)


# --- copilot-cli: GitHub Copilot CLI session events (JSONL) and its legacy session file, written back as openai ---

# Copilot CLI keeps a session as events (~/.copilot/session-state/<session id>/events.jsonl), one
# ``{type, data, id, timestamp, parentId}`` a line; the conversation is in four of them:
# ``system.message`` (the system prompt, sent again with each request: the last one stands),
# ``user.message`` (``content`` as typed, ``transformedContent`` as sent: the typed words inside
# the harness's date and reminders; a ``source`` says the harness sent it), ``assistant.message``
# (``content`` and ``toolRequests``) and ``tool.execution_complete`` (``result.content``, or
# ``error``).  Every other event (session, hook, permission, usage, turn and tool-start events)
# is the harness's bookkeeping, and so are a sub-agent's own events (``parentToolCallId``: its
# result reaches this conversation as the result of the call that started it).  Its legacy file
# (~/.copilot/history-session-state/*.json) is ``{sessionId, startTime, chatMessages, timeline}``:
# the Chat Completions messages it sent, and a timeline whose ``user`` entries hold the words the
# user typed.  The texts it wraps around them are its row of HARNESS_MARKUP ("GitHub Copilot CLI").
COPILOT_ENVELOPE = ("type", "data", "id", "timestamp")   # the keys of every event line
COPILOT_CONVERSATION = ("system.message", "user.message", "assistant.message", "tool.execution_complete")
COPILOT_FAILED_TOOL = "the tool failed"                  # a failed tool's result when its error has no message


def _is_copilot_event(record: Dict[str, Any]) -> bool:
    """Return True for an event line: its envelope, a dotted type and a data object."""
    return all(k in record for k in COPILOT_ENVELOPE) and isinstance(record.get("type"), str) \
        and "." in record["type"] and isinstance(record.get("data"), dict)


def _is_copilot_legacy(value: Any) -> bool:
    """Return True for the legacy session file: a sessionId and a chatMessages list."""
    return isinstance(value, dict) and "sessionId" in value and isinstance(value.get("chatMessages"), list)


def _copilot_split(sent: str, typed: str) -> Tuple[List[Dict[str, Any]], set]:
    """Return a user message's text as Chat text parts, the typed words one of them, and the
    content ids of the others (the harness's words around them); the parts join to ``sent``."""
    typed = typed.strip()
    at = sent.find(typed) if typed else -1
    if at < 0:
        return [{"type": "text", "text": sent}], {_content_id("user", "text", sent)}
    before, after = sent[:at], sent[at + len(typed):]
    pieces = [before, typed, after]
    if not before.strip():
        pieces[1], pieces[0] = before + typed, ""
    if not after.strip():
        pieces[1], pieces[2] = pieces[1] + after, ""
    harness = {_content_id("user", "text", p) for i, p in enumerate(pieces) if p and i != 1}
    return [{"type": "text", "text": p} for p in pieces if p], harness


def _copilot_user(sent: str, typed: Optional[str]) -> Tuple[Dict[str, Any], set]:
    """Return a Chat user message for what was sent, and its harness texts: all of it without
    typed words, else the words around them (see _copilot_split)."""
    if typed is None or not typed.strip():
        return {"role": "user", "content": sent}, {_content_id("user", "text", sent)}
    parts, harness = _copilot_split(sent, typed)
    return {"role": "user", "content": parts[0]["text"] if len(parts) == 1 else parts}, harness


def _copilot_event_messages(text: str) -> Tuple[List[Dict[str, Any]], set, Dict[str, int], int]:
    """Return the Chat messages of a Copilot CLI event log, their harness texts, the other events
    by type and the unreadable lines.  A tool result follows the assistant message that asked for
    it, in the order of its requests."""
    records, skipped = _jsonl_records(text)
    system: Optional[str] = None
    turns: List[Tuple[Dict[str, Any], List[str]]] = []  # a message, and the calls it awaits
    results: Dict[str, Dict[str, Any]] = {}
    harness: set = set()
    other: Dict[str, int] = {}
    for _, event in records:
        kind, data = event.get("type"), event.get("data")
        if not _is_copilot_event(event):
            skipped += 1
            continue
        if isinstance(data.get("parentToolCallId"), str):  # a sub-agent's own turn: not this conversation's
            other["sub-agent event"] = other.get("sub-agent event", 0) + 1
            continue
        if kind not in COPILOT_CONVERSATION:
            other[kind] = other.get(kind, 0) + 1
        elif kind == "system.message":
            if isinstance(data.get("content"), str):
                if system is not None:
                    other["earlier system.message"] = other.get("earlier system.message", 0) + 1
                system = data["content"]
        elif kind == "user.message":
            sent = data.get("transformedContent")
            sent = sent if isinstance(sent, str) and sent.strip() else data.get("content")
            if not isinstance(sent, str) or not sent.strip():
                other["empty user.message"] = other.get("empty user.message", 0) + 1
                continue
            typed = None if data.get("source") else data.get("content")
            msg, marks = _copilot_user(sent, typed if isinstance(typed, str) else None)
            harness |= marks
            turns.append((msg, []))
        elif kind == "assistant.message":
            calls = []
            requests = data.get("toolRequests")
            for request in requests if isinstance(requests, list) else ():
                if not isinstance(request, dict) or not isinstance(request.get("toolCallId"), str):
                    continue
                args = request.get("arguments", {})
                calls.append({"id": request["toolCallId"], "type": "function",
                              "function": {"name": str(request.get("name")),
                                           "arguments": args if isinstance(args, str) else
                                           json.dumps(args, ensure_ascii=False)}})
            content = data.get("content") if isinstance(data.get("content"), str) else ""
            if not content and not calls:
                other["empty assistant.message"] = other.get("empty assistant.message", 0) + 1
                continue
            msg = {"role": "assistant", "content": content or None}
            if calls:
                msg["tool_calls"] = calls
            turns.append((msg, [c["id"] for c in calls]))
        elif isinstance(data.get("toolCallId"), str):
            result = data.get("result") if isinstance(data.get("result"), dict) else {}
            error = data.get("error") if isinstance(data.get("error"), dict) else {}
            body = result.get("content") if isinstance(result.get("content"), str) else \
                str(error.get("message", COPILOT_FAILED_TOOL))
            results[data["toolCallId"]] = {"role": "tool", "tool_call_id": data["toolCallId"], "content": body}
    messages = [{"role": "system", "content": system}] if system is not None else []
    for msg, awaited in turns:
        messages.append(msg)
        messages += [results[cid] for cid in awaited if cid in results]
    return messages, harness, other, skipped


def _copilot_legacy_messages(value: Dict[str, Any]) -> Tuple[List[Dict[str, Any]], set, Dict[str, int]]:
    """Return a legacy Copilot CLI file's chat messages, the user ones split into the typed words
    (its timeline's ``user`` entries, in order) and the harness's, and its harness texts.  The
    file keeps a reply's parallel calls as one assistant message each, after the one with its
    text: an assistant message with no content joins the one before it."""
    timeline = value.get("timeline") if isinstance(value.get("timeline"), list) else []
    typed = [e.get("text") for e in timeline
             if isinstance(e, dict) and e.get("type") == "user" and isinstance(e.get("text"), str)]
    messages: List[Dict[str, Any]] = []
    harness: set = set()
    for msg in value["chatMessages"]:
        if isinstance(msg, dict) and msg.get("role") == "user" and isinstance(msg.get("content"), str):
            words = next((t for t in typed if t.strip() and t.strip() in msg["content"]), None)
            if words is not None:
                typed.remove(words)
            msg, marks = _copilot_user(msg["content"], words)
            harness |= marks
        last = messages[-1] if messages else None
        if isinstance(msg, dict) and isinstance(last, dict) and msg.get("role") == last.get("role") == "assistant" \
                and not msg.get("content") and isinstance(last.get("tool_calls", []), list) \
                and isinstance(msg.get("tool_calls") or [], list):
            # One reply's parallel calls, kept one assistant message each: the model's one message.
            last = messages[-1] = dict(last)
            last["tool_calls"] = [*last.get("tool_calls", []), *(msg.get("tool_calls") or [])]
            if not last["tool_calls"]:
                del last["tool_calls"]
            continue
        messages.append(msg)
    other = {"timeline entry": len(timeline)} if timeline else {}
    return messages, harness, other


def _load_copilot(text: str) -> Conversation:
    """Return the Conversation for a Copilot CLI session: its event log, or its legacy file."""
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        whole = None
    skipped = 0
    if _is_copilot_legacy(whole):
        messages, harness, other = _copilot_legacy_messages(whole)
    else:
        messages, harness, other, skipped = _copilot_event_messages(text)
    if not any(m.get("role") != "system" for m in messages if isinstance(m, dict)):
        raise PagerError("copilot-cli session has no user, assistant or tool message: nothing to page")
    conv = _load_openai(messages, (), harness)
    conv.fmt, conv.skipped_lines, conv.other_lines = "copilot-cli", skipped, other
    return conv


class _CopilotCli(_Openai):
    """GitHub Copilot CLI sessions (events JSONL, or the legacy file), written back as Chat Completions."""

    name = "copilot-cli"
    jsonl = True
    claims = staticmethod(_is_copilot_legacy)
    claims_line = staticmethod(_is_copilot_event)

    def read(self, document: Any, held: bool = False) -> Conversation:
        return _load_copilot(document)

    def read_back(self, value: Any, harness_texts: Container[str] = ()) -> Conversation:
        """Return the Conversation of the written-back Chat messages, the harness's texts told by the
        contract's record of them."""
        return _load_openai(value, (), harness_texts)


# --- opencode: OpenCode sessions (``opencode export`` JSON), written back as openai ---

# ``opencode export <session>`` writes ``{info, messages}``: the session's info and each message
# as ``{info, parts}`` (``info.role`` user or assistant; an assistant message that failed has
# ``info.error``).  What OpenCode sends the model from them (its toModelMessages), read here the
# same way: a user message's text parts (``synthetic`` ones the harness wrote; ``ignored`` ones
# not sent), its files and its compaction request; an assistant message is one model step per
# ``step-start`` part, each step's text and tool parts (a tool part holds the call, ``state.input``,
# and its result, ``state.output``, or ``state.error``) becoming an assistant message followed by
# its tool results.  Reasoning is not sent back in Chat Completions; step, patch, snapshot and
# agent parts are OpenCode's bookkeeping.  A tool output OpenCode pruned (``state.time.compacted``)
# is sent as its placeholder; a call left pending or running as interrupted.  The user texts it
# writes itself are its row of HARNESS_MARKUP ("OpenCode").
OPENCODE_PRUNED = "[Old tool result content cleared]"       # the text a pruned tool output is sent as
OPENCODE_INTERRUPTED = "[Tool execution was interrupted]"   # a call that never finished
OPENCODE_ABORTED = "MessageAbortedError"                    # an error after which the parts are still sent
OPENCODE_COMPACTION_ASK = _MARKUP.rows["OpenCode"].text[-1]  # the user turn a compaction part stands for


def _is_opencode_export(value: Any) -> bool:
    """Return True for an OpenCode export: an ``info`` object and ``messages`` of ``{info, parts}``."""
    messages = value.get("messages") if isinstance(value, dict) else None
    return isinstance(value, dict) and isinstance(value.get("info"), dict) and isinstance(messages, list) \
        and all(isinstance(m, dict) and isinstance(m.get("info"), dict) and isinstance(m.get("parts"), list)
                for m in messages)


def _opencode_tool(part: Dict[str, Any], cid: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Return the Chat tool call and tool message of an OpenCode tool part (see the comment above)."""
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    args = state.get("input", {})
    call = {"id": cid, "type": "function",
            "function": {"name": str(part.get("tool")), "arguments": json.dumps(args, ensure_ascii=False)}}
    status = state.get("status")
    if status == "completed":
        compacted = isinstance(state.get("time"), dict) and state["time"].get("compacted")
        output = OPENCODE_PRUNED if compacted else state.get("output")
        output = output if isinstance(output, str) else _compact_json(output)
    elif status == "error":
        output = str(state.get("error"))
    else:
        output = OPENCODE_INTERRUPTED
    return call, {"role": "tool", "tool_call_id": cid, "content": output}


def _opencode_messages(value: Dict[str, Any]) -> Tuple[List[Dict[str, Any]], set, Dict[str, int]]:
    """Return an OpenCode export's messages as Chat Completions messages, the harness texts (its
    synthetic and compaction texts) and the parts not sent, by type.

    A tool part's call id is its ``callID``; one already used (or missing) gets ``~<n>`` after it,
    so each call pairs with its own result."""
    messages: List[Dict[str, Any]] = []
    harness: set = set()
    other: Dict[str, int] = {}
    used: Dict[str, int] = {}

    def count(key: str) -> None:
        other[key] = other.get(key, 0) + 1

    for entry in value["messages"]:
        info, parts = entry["info"], [p for p in entry["parts"] if isinstance(p, dict)]
        if info.get("role") == "user":
            content: List[Dict[str, Any]] = []
            for part in parts:
                kind = part.get("type")
                if kind == "text" and isinstance(part.get("text"), str) and not part.get("ignored"):
                    content.append({"type": "text", "text": part["text"]})
                    if part.get("synthetic"):
                        harness.add(_content_id("user", "text", part["text"]))
                elif kind == "compaction":
                    content.append({"type": "text", "text": OPENCODE_COMPACTION_ASK})
                    harness.add(_content_id("user", "text", OPENCODE_COMPACTION_ASK))
                elif kind == "file" and str(part.get("mime", "")).startswith("image/") \
                        and str(part.get("url", "")).startswith("data:"):
                    content.append({"type": "image_url", "image_url": {"url": part["url"]}})
                else:
                    count(f"user {kind} part")
            if content:
                single = len(content) == 1 and content[0]["type"] == "text"
                messages.append({"role": "user", "content": content[0]["text"] if single else content})
            continue
        error = info.get("error")
        if isinstance(error, dict) and error.get("name") != OPENCODE_ABORTED:
            count("failed assistant message")
            continue
        steps: List[List[Dict[str, Any]]] = [[]]
        for part in parts:
            if part.get("type") == "step-start" and steps[-1]:
                steps.append([])
            steps[-1].append(part)
        for step in steps:
            texts, calls, results = [], [], []
            for part in step:
                kind = part.get("type")
                if kind == "text" and isinstance(part.get("text"), str) and part["text"].strip() \
                        and not part.get("ignored"):
                    texts.append(part["text"])
                elif kind == "tool":
                    base = part.get("callID") if isinstance(part.get("callID"), str) and part["callID"] else "call"
                    used[base] = used.get(base, 0) + 1
                    cid = base if used[base] == 1 else f"{base}~{used[base]}"
                    call, result = _opencode_tool(part, cid)
                    calls.append(call)
                    results.append(result)
                else:
                    count(f"{kind} part")
            if not texts and not calls:
                continue
            msg: Dict[str, Any] = {"role": "assistant",
                                   "content": "".join(texts) if len(texts) == 1 else
                                   ([{"type": "text", "text": t} for t in texts] if texts else None)}
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
            messages += results
    return messages, harness, other


def _load_opencode(value: Any) -> Conversation:
    """Return the Conversation for an OpenCode export."""
    if not _is_opencode_export(value):
        raise PagerError("opencode input must be an `opencode export` object: info and a messages list of {info, parts}")
    messages, harness, other = _opencode_messages(value)
    if not messages:
        raise PagerError("opencode export has no message OpenCode would send: nothing to page")
    conv = _load_openai(messages, (), harness)
    conv.fmt, conv.other_lines = "opencode", other
    return conv


class _OpenCode(_Openai):
    """OpenCode sessions (``opencode export`` JSON), written back as Chat Completions."""

    name = "opencode"
    claims = staticmethod(_is_opencode_export)

    def read(self, document: Any, held: bool = False) -> Conversation:
        return _load_opencode(document)

    def read_back(self, value: Any, harness_texts: Container[str] = ()) -> Conversation:
        """Return the Conversation of the written-back Chat messages, its synthetic texts told by the
        contract's record of them."""
        return _load_openai(value, (), harness_texts)


# --- the registry and its entry points ---

_FORMATS.update((f.name, f) for f in (_PagerFormat(), _Openai(), _Responses(), _Anthropic(), _ClaudeCode(),
                                        _Codex(), _SweAgent(), _Gemini(), _GeminiCli(), _CopilotCli(),
                                        _OpenCode()))
FORMATS = tuple(_FORMATS)  # every format the pager reads, as --format names them
# The order detection asks the formats (detect_format), the first claim winning: a narrower shape before a
# wider one that would also take it (the pager's ``blocks`` object and a Responses body before a chat body,
# a trajectory before the chat lists: a mini-swe-agent run is a bare message list; Claude Code before Codex).
# A Gemini CLI file and an OpenCode export (objects with a messages list) come before the chat bodies.
_PROBE_ORDER = ("pager", "responses", "gemini-cli", "opencode", "swe-agent", "anthropic", "openai", "gemini",
                "copilot-cli", "claude-code", "codex")


def _format(name: str) -> _Format:
    """Return the format class registered as ``name``, or raise a PagerError naming FORMATS."""
    if name not in _FORMATS:
        raise PagerError(f"unknown format \"{name}\" (expected one of {', '.join(FORMATS)})")
    return _FORMATS[name]


_UNREAD = object()  # _Detected.value when the text is not one JSON value


class _Detected(NamedTuple):
    """What detection found and parsed, for ``_load`` to read on from instead of parsing again."""

    fmt: str
    value: Any                   # the text's one JSON value, or _UNREAD
    head: Optional[_JsonlHead]   # a JSONL text's first records, or None


def _detect(text: str) -> _Detected:
    """Return the format of a raw history file (detect_format's rules) and what telling it parsed."""
    if not isinstance(text, str):
        raise PagerError(f"input must be text (got {type(text).__name__})")
    if not text or text.isspace():  # strip() would copy the whole input to tell
        raise PagerError("input is empty: nothing to detect")
    # Why the text is not one JSON value, as a message: the exception itself is not kept, since its
    # traceback would hold this frame, and the text with it, in a cycle only the collector frees.
    whole_error: Optional[str] = None
    value: Any = _UNREAD
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError):
            whole_error = (f"invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg}) "
                           "and no line is a Claude Code or Codex record")
        else:
            problem = _decode_problem(exc)
            whole_error = (f"the JSON holds {problem}" if problem is not None
                           else f"a JSON text matches none of {', '.join(FORMATS)}")
    else:
        for name in _PROBE_ORDER:
            if _FORMATS[name].claims(value):
                return _Detected(name, value, None)
    head = _jsonl_head(text, DETECT_LINES)
    counts: Dict[str, int] = {}  # in order of the first counted line, which wins a tie
    for _, obj in head.records:
        for name in _PROBE_ORDER:
            if _FORMATS[name].claims_line(obj):
                counts[name] = counts.get(name, 0) + 1
                break
    if counts:
        return _Detected(max(counts, key=counts.__getitem__), value, head)
    if whole_error is not None:
        raise PagerError(f"not a known history format: {whole_error}")
    if isinstance(value, dict):
        keys = ", ".join(_show(k) for k in list(value)[:6])
        raise PagerError(f"not a known history format: a JSON object with keys {keys or '(none)'} matches "
                         f"none of {', '.join(FORMATS)}")
    raise PagerError(f"not a known history format: a JSON {_type_name(value)} matches none of {', '.join(FORMATS)}")


def detect_format(text: str) -> str:
    """Return the format of a raw history file.

    The whole text as one JSON value: the first format in _PROBE_ORDER whose ``claims`` takes it.
    Otherwise the text is read as JSONL (its first DETECT_LINES records): each record counts for
    the first format whose ``claims_line`` takes it; more lines wins, a tie goes to the kind of the
    first counted line.  No counted line -> PagerError.

    Example:
        >>> detect_format('{"blocks": []}')
        'pager'
    """
    return _detect(text).fmt


def _load(text: str, fmt: Union[str, _Detected]) -> Conversation:
    """Return the Conversation of ``text`` in a format, or in the format detection found (reading on from its parse)."""
    found = fmt if isinstance(fmt, _Detected) else None
    name = found.fmt if found is not None else fmt
    spec = _format(name)  # type: ignore[arg-type]
    if not isinstance(text, str) or not text or text.isspace():
        raise PagerError(f"{name} input is empty")
    if not spec.jsonl:
        return spec.read(found.value if found is not None and found.value is not _UNREAD else _parse_json(text))
    if found is None or found.head is None:
        return spec.read(text)
    _JSONL_HEADS[id(text)] = found.head
    try:
        return spec.read(text)
    finally:
        _JSONL_HEADS.pop(id(text), None)


def load(text: str, fmt: str) -> Conversation:
    """Return the Conversation read from ``text`` in format ``fmt`` (one of FORMATS, or ``auto``).

    ``auto`` detects the format (detect_format) and reads on from what detection parsed: each
    line of a JSONL log, or a JSON file, is parsed once.

    Example:
        >>> conv = load('[{"role": "user", "content": "Weather in Oslo?"}]', "openai")
        >>> [(b["role"], b["text"]) for b in conversation_blocks(conv)]
        [('user', 'Weather in Oslo?')]
        >>> load('{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "Hi"}}', "auto").fmt
        'claude-code'
    """
    if fmt == "auto":
        return _load(text, _detect(text))
    return _load(text, fmt)


def conversation_blocks(conv: Conversation) -> List[Dict[str, Any]]:
    """Return copies of conv's blocks, in order, to hand to the engine.

    Each has exactly the keys id, turn, role, text, tokens, pinned, protected, unit and stub.
    """
    return [dict(block) for block in conv.blocks]


def _transcript_params(conv: Optional[Conversation], params: Params) -> Params:
    """Return ``params`` for a pass over ``conv``: what "recent" means in a transcript, unless keep_recent is given.

    A transcript's turn is a human request and all the work after it: protecting the whole
    current turn would keep everything.  Without a budget the last message's own blocks stay
    (its trailing blocks that are not stubs); under a budget nothing is protected for being
    recent (the budget keeps the best, newest first).  And a block its stub would not shorten
    stays (``keep_small``): an agent's many short lines ("Let me run the tests.") would each
    grow into a stub longer than themselves.
    """
    if conv is None:
        return params
    if params.keep_small is None:
        params = dataclasses.replace(params, keep_small=True)
    if params.keep_recent is not None:
        return params
    final = conv._msgs[-1].parts if conv._msgs else []
    fresh = 0
    while fresh < len(final) and final[len(final) - 1 - fresh].stub_id is None:
        fresh += 1
    return dataclasses.replace(params, keep_recent=0 if params.budget is not None else fresh)


def human_requests(conv: Conversation) -> List[Dict[str, Any]]:
    """Return what a human wrote in ``conv``, in order: one dict per text block of a human's message.

    Each is ``{"id", "turn", "text", "live"}``; ``live`` is False for a request from before a
    compaction boundary (no longer in the model's context).  A human's message is a user message
    that is not a tool result, not the harness's (Claude Code ``isMeta`` and compaction-summary
    lines) and does not open with what HARNESS_MARKUP says a harness writes (task notifications, system reminders,
    command echoes and output, hook feedback, Codex environment and instructions...).  The first
    is the session's task statement, the last the request the agent works on now (the pass's
    intent when no other is given).

    Example:
        >>> conv = load('[{"role": "user", "content": "<system-reminder>x</system-reminder>"},'
        ...             ' {"role": "user", "content": "Fix the invoice rounding."}]', "openai")
        >>> [r["text"] for r in human_requests(conv)]
        ['Fix the invoice rounding.']
    """
    found = []
    for block in conv.blocks:
        archived = block["protected"] == ARCHIVED
        if (_human_text(block["protected"], block["kind"]) or (archived and block["kind"] == "human")) \
                and not block["stub"]:
            found.append({"id": block["id"], "turn": block["turn"], "text": block["text"], "live": not archived})
    return found


def emit(conv: Conversation, decisions: Dict[str, Any]) -> Any:
    """Return the history rebuilt with decisions applied, in the format conv is written back in.

    Example: emit(conv, {"m-3f2a9c1b7d4e": ("page", "[tests ran: 2 failed]"),
                         "call_7": ("evict", None)})
    """
    return _FORMATS[conv.fmt].write(conv, _effective(conv, decisions))


def validate(fmt_out: str, obj: Any) -> List[str]:
    """Return the problems that would make the API reject obj; [] means valid.

    ``fmt_out`` names a format; its class's API rules apply (claude-code is checked as the
    anthropic history it is written as, codex as responses). A tool call with no result is
    accepted only at the very end of the conversation, where the history awaits results.
    """
    return _format(fmt_out).check(obj)


def _is_pager_history(source: _HistorySource) -> bool:
    """Return True if the history is a JSON object with a ``blocks`` field (read only up to it)."""
    try:
        with source.open() as fp:
            js = _JsonStream(fp, source.name)
            if js.peek() != "{":
                return False
            js.take("{")
            while js.peek() == '"':
                key = js.value()
                if key == "blocks":
                    return True
                js.take(":")
                js.value()
                if js.peek() != ",":
                    return False
                js.take(",")
    except (PagerError, UnicodeDecodeError):
        return False
    return False


class _Reading(NamedTuple):
    """What a history turned out to be: its format, how that was known, and how to read it."""

    fmt: str
    detected: bool
    source: _HistorySource                   # pager JSON, or a transcript's blocks (from_blocks)
    conversation: Optional["Conversation"]  # the transcript, for --emit in its own format


def _agreed_format(text: str, detected: str, recorded: Optional[str]) -> str:
    """Return the format to read ``text`` in, given what detection found and what the contract recorded.

    A contract's ``pager-format`` F accepts F itself and the format F is written back in (a
    pass's --emit output); a plain-text chat list, which detection calls openai, is read as
    anthropic when F is written back as anthropic.  A bare list detected as F but written back as
    another format (a mini-swe-agent run: its written-back form is the same kind of list) is read
    as the written-back form, so a round trip reads the format the pass wrote, by the session's
    rule (F's read_back).  Anything else is refused: the same session must not silently change
    format.
    """
    spec = _FORMATS.get(recorded) if isinstance(recorded, str) else None
    if spec is not None and detected == spec.name != spec.emits_as and spec.read_back is not None \
            and not spec.jsonl and text.lstrip().startswith("["):
        return spec.emits_as
    if spec is None or detected in (spec.name, spec.emits_as):
        return detected
    if spec.emits_as == "anthropic" and detected == "openai":
        try:
            found = _chat_messages(json.loads(text))
        except (ValueError, RecursionError):
            found = None
        if found is not None and _chat_kind(*found) == "openai" and all(
                isinstance(m, dict) and m.get("role") in ANTHROPIC_ROLES
                and not any(f in m for f in OPENAI_MARKER_FIELDS) for m in found[0]):
            return "anthropic"
    raise PagerError(f"the contract's session is in {spec.name} format (written back as {spec.emits_as}), "
                     f"but this history looks like {detected}; pass --format to say which, or use another contract")


def _open_history(path: str, fmt: str, recorded: Optional[str] = None,
                  harness_texts: Container[str] = (), aside: bool = False) -> _Reading:
    """Return the Reading of the history at ``path`` in format ``fmt`` ('auto' detects it).

    ``recorded`` is the format the contract recorded for the session (see _agreed_format), and
    ``harness_texts`` the texts it recorded as the harness's (ContractState.harness); with
    ``aside`` the blocks the reader does not send (Conversation.aside) come first.
    """
    source = _HistorySource(path)
    if fmt == "pager" or (fmt == "auto" and _is_pager_history(source)):
        if fmt == "auto" and recorded not in (None, "pager"):
            raise PagerError(f"{source.name}: the contract's session is in {recorded} format, but this history is "
                             "in the pager's own format; pass --format to say which, or use another contract")
        return _Reading("pager", fmt == "auto", source, None)
    try:
        size = len(source._stdin) if source._stdin is not None else os.path.getsize(path)
    except OSError:
        size = 0  # read_text says what is wrong with the path
    if size > MAX_TRANSCRIPT_BYTES:
        raise PagerError(f"{source.name}: a {'transcript' if fmt == 'auto' else fmt + ' history'} is read whole, "
                         f"and this one is {size:,} bytes; the limit is {MAX_TRANSCRIPT_BYTES:,} "
                         "(MAX_TRANSCRIPT_BYTES; see the README)")
    text = source.read_text()
    detected = fmt == "auto"
    found: Optional[_Detected] = None  # what detection parsed: the reader goes on from it
    try:
        if detected:
            found = _detect(text)
            fmt = _agreed_format(text, found.fmt, recorded)
        if fmt == "pager":
            return _Reading("pager", detected, source, None)
        spec = _FORMATS.get(recorded) if recorded is not None else None
        if spec is not None and spec.read_back is not None and fmt == spec.emits_as:
            value = found.value if found is not None and found.value is not _UNREAD else _parse_json(text)
            conv = spec.read_back(value, harness_texts)  # the session's reading of its written-back form
            value = None
        else:
            conv = _load(text, found._replace(fmt=fmt) if found is not None else fmt)
        found = None  # the parsed value lives on in the Conversation alone
    except PagerError as exc:
        raise PagerError(f"{source.name}: {exc}") from None
    blocks = []
    for block in conversation_blocks(conv):
        if block["tokens"] is None:
            del block["tokens"]
        blocks.append(block)
    if aside:  # before a compaction: the lines the reader does not send are stored too
        blocks = [dict(block) for block in conv.aside] + blocks
    return _Reading(fmt, detected, _HistorySource.from_blocks(source.name, blocks), conv)


# ===== Page store =====

_STORE_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    block     TEXT PRIMARY KEY,
    turn      INTEGER NOT NULL,
    role      TEXT NOT NULL,
    kind      TEXT,
    tokens    INTEGER NOT NULL,
    keywords  TEXT NOT NULL,   -- JSON list of the intent keywords it matched
    sha256    TEXT NOT NULL,   -- of the UTF-8 text
    paged_at  TEXT NOT NULL,
    summary   TEXT NOT NULL,   -- '' until first read: made from the text and keywords
    text      TEXT NOT NULL
);
"""


# --- search: ranked pages holding the words of a query ---
#
# One ranking for two ways of finding candidates: the store's FTS5 index where the SQLite build
# has it (built on first search, kept in step with the pages), else a scan of every page. The
# candidates are a superset of the matching pages either way; the same pure matcher and BM25
# below then count and rank them, so both ways give the same hits in the same order.

SEARCH_LIMIT = 10          # hits a search returns by default
BM25_K1 = 1.2              # BM25: how fast repeated occurrences of a term stop adding
BM25_B = 0.75              # BM25: how much a long page's length discounts its counts
SEARCH_LINE_CHARS = 200    # characters of a hit's matching line shown around the first match
PARTIAL_WEIGHT = 0.25      # an identifier's shorter forms, however many, count this share of the name itself
_QUERY_WORD = re.compile(r"[\w./-]+")
_NOT_ALNUM = re.compile(r"[\W_]+")


class _Term(NamedTuple):
    """One term of a search query: what it is, how to count it in a page, how FTS5 finds candidates."""

    word: str      # the term as matched: a stem, an identifier or a file name
    kind: str      # "word" (by stem), "name" (an identifier, as a programmer reads it) or "file"
    pattern: "re.Pattern[str]"
    fts: str       # an FTS5 expression true of every page that holds the term (and maybe more)
    partial: Optional["re.Pattern[str]"] = None  # a name's shorter forms (line_total in test_line_total_v2)
    exact: str = ""  # a word as written: it counts whole, another word of its stem as a partial match


def _fts_all(text: str) -> str:
    """Return the FTS5 expression "every alphanumeric part of ``text`` is a token of the page"."""
    parts = [p for p in _NOT_ALNUM.split(text) if p]
    return " AND ".join(f'"{p}"' for p in parts)


def _query_terms(query: str) -> List[_Term]:
    """Return the distinct terms of a search query, in the order written; stop words dropped.

    A path is matched whole and by its file name (``src/billing/totals.py``, ``totals.py``); a word
    holding ``.`` or ``-`` is matched as written (``totals.py``, ``off-by-one``); an identifier
    (``line_total``, ``lineTotal``) as ``_identifier_in`` reads it (``test_line_total`` holds
    it); any other word by its stem ("retained" finds "retain").

    Example:
        >>> [(t.word, t.kind) for t in _query_terms("Fix lineTotal in src/billing/totals.py, the TypeError")]
        [('fix', 'word'), ('line_total', 'name'), ('src/billing/totals.py', 'file'), ('totals.py', 'file'), ('type_error', 'name')]
    """
    terms: Dict[str, _Term] = {}
    for raw in _QUERY_WORD.findall(query):
        raw = raw.strip("./-")
        pieces = [raw]
        if "/" in raw:  # a path: itself, and its file name
            pieces.append(next(part for part in reversed(raw.split("/")) if part).strip(".-"))
        for raw in pieces:
            if not raw:
                continue
            if "." in raw or "-" in raw or "/" in raw:
                word = raw.lower()
                if not _NOT_ALNUM.sub("", word):
                    continue
                pattern = re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)")
                term = _Term(word, "file", pattern, _fts_all(word))
            else:
                word = _snake(raw)
                if word in STOP_WORDS or not word.strip("_"):
                    continue
                if "_" in word.strip("_"):
                    word = word.strip("_")
                    snakes, joined = _identifier_forms(word)
                    around = r"(?<![^\W_])(?:%s)(?![^\W_])"  # a whole token, or "_"-separated parts of one
                    alternatives = [around % re.escape(word)]
                    fts = [f"({_fts_all(form)})" for form in snakes]
                    if joined:
                        alternatives.append(r"(?<!\w)" + re.escape(joined) + r"(?!\w)")
                        fts.append(f'"{joined}"')
                    shorter = [re.escape(form) for form in snakes if form != word]
                    term = _Term(word, "name", re.compile("|".join(alternatives)), " OR ".join(fts),
                                 re.compile(around % "|".join(shorter)) if shorter else None)
                else:
                    word = word.strip("_")
                    stem_ = _stem(word)
                    needle = _needle(stem_)
                    term = _Term(stem_, "word", re.compile(r"(?<!\w)" + re.escape(needle) + r"\w*"), f'"{needle}"*',
                                 exact=word)
            terms.setdefault(term.word, term)
    return list(terms.values())


def _term_count(term: _Term, lowered: str) -> int:
    """Return how many times ``term`` occurs in lowercased text ``lowered`` (a name: itself or a shorter form)."""
    if term.partial is not None:
        rest, whole = term.pattern.subn(" ", lowered)
        return whole + len(term.partial.findall(rest))
    if term.kind != "word":
        return len(term.pattern.findall(lowered))
    stems = _STEMS
    return sum(1 for token in term.pattern.findall(lowered) if (stems.get(token) or _stem(token)) == term.word)


def _term_counts(term: _Term, lowered: str) -> Tuple[int, int]:
    """Return how many times ``term`` occurs in lowercased text ``lowered``, and its shorter forms elsewhere."""
    if term.partial is not None:
        rest, whole = term.pattern.subn(" ", lowered)
        return whole, len(term.partial.findall(rest))
    if term.exact:
        stems = _STEMS
        tokens = [t for t in term.pattern.findall(lowered) if (stems.get(t) or _stem(t)) == term.word]
        whole = tokens.count(term.exact)
        return whole, len(tokens) - whole
    return _term_count(term, lowered), 0


def _matching_line(text: str, terms: Sequence[_Term]) -> str:
    """Return the line of ``text`` holding the most distinct terms (the first such), cut to SEARCH_LINE_CHARS."""
    best, best_line, where = 0, "", 0
    for line in text.splitlines():
        lowered = line.lower()
        found = [t for t in terms if _term_count(t, lowered)]
        if len(found) > best:
            best, best_line = len(found), line
            where = min(m.start() for t in found for m in (t.pattern.search(lowered),
                                                            t.partial and t.partial.search(lowered)) if m)
            if best == len(terms):
                break
    line = " ".join(best_line.split()) if len(best_line) <= SEARCH_LINE_CHARS else best_line
    if len(line) > SEARCH_LINE_CHARS:  # a long line: the part around its first match
        start = max(0, where - SEARCH_LINE_CHARS // 4)
        line = ("..." if start else "") + " ".join(line[start:start + SEARCH_LINE_CHARS].split()) + "..."
    return line


def _rank_pages(rows: Iterable[Tuple[str, int, str, Optional[str], int, str]], terms: Sequence[_Term],
                total: int, mean_tokens: float, limit: int) -> List[Dict[str, Any]]:
    """Return the ``limit`` best hits among ``rows`` (block, turn, role, kind, tokens, text) by BM25, best first.

    ``total`` pages in all, ``mean_tokens`` their mean length (the page's estimated tokens):
    the corpus statistics, the same whichever way the rows were found. A page holding none
    of the terms is no hit. Ties go to the later turn, then the block id.
    """
    counted = []
    df: Counter = Counter()
    for block, turn, role, kind, tokens, text in rows:
        lowered = text.lower()
        counts = [_term_counts(term, lowered) for term in terms]
        if any(w or p for w, p in counts):
            counted.append((block, turn, role, kind, tokens, text, counts))
            df.update(i for i, (w, p) in enumerate(counts) if w or p)
    idf = [math.log(1.0 + (total - df[i] + 0.5) / (df[i] + 0.5)) for i in range(len(terms))]
    mean = mean_tokens if mean_tokens > 0 else 1.0
    scored = []
    for block, turn, role, kind, tokens, text, counts in counted:
        norm = BM25_K1 * (1.0 - BM25_B + BM25_B * tokens / mean)
        # A name's shorter forms saturate apart, at PARTIAL_WEIGHT: many of them weigh less than the name once.
        score = sum(idf[i] * (w * (BM25_K1 + 1.0) / (w + norm) + PARTIAL_WEIGHT * p * (BM25_K1 + 1.0) / (p + norm))
                    for i, (w, p) in enumerate(counts) if w or p)
        scored.append((-round(score, 9), -turn, block, role, kind, text))
    scored.sort()
    return [{"id": block, "turn": -neg_turn, "kind": kind, "role": role, "line": _matching_line(text, terms),
             "score": round(-neg, 4)} for neg, neg_turn, block, role, kind, text in scored[:limit]]


_FTS5: Optional[bool] = None  # whether this Python's SQLite has FTS5, once asked


def _fts_available() -> bool:
    """Return True if this Python's SQLite has FTS5 (checked once)."""
    global _FTS5
    if _FTS5 is None:
        try:
            probe = sqlite3.connect(":memory:")
            try:
                probe.execute("CREATE VIRTUAL TABLE probe USING fts5(text)")
                _FTS5 = True
            finally:
                probe.close()
        except sqlite3.Error:
            _FTS5 = False
    return _FTS5


# The search index inside a page store: an FTS5 table of the pages' text (own rowids, so a VACUUM
# that renumbers the pages' rowids cannot break it), and which page each row is, with the SHA-256
# of the text it indexed.
SEARCH_TABLE = "search_text"
SEARCH_ROWS = "search_rows"
_SEARCH_SCHEMA = f"""
CREATE VIRTUAL TABLE IF NOT EXISTS {SEARCH_TABLE} USING fts5(text, tokenize = 'unicode61 remove_diacritics 0');
CREATE TABLE IF NOT EXISTS {SEARCH_ROWS} (
    block   TEXT PRIMARY KEY,
    id      INTEGER NOT NULL,   -- the rowid of its text in {SEARCH_TABLE}
    sha256  TEXT NOT NULL
);
"""
# Every table the index adds: FTS5 keeps its parts in tables named after its own.
_SEARCH_TABLES = frozenset({SEARCH_TABLE, SEARCH_ROWS} | {f"{SEARCH_TABLE}_{part}" for part in
                                                         ("data", "idx", "content", "docsize", "config")})
# The contract (size and modification time) as it was when a pass left the store holding exactly
# its paged blocks: while it is unchanged, the store's rows are the paged list, no parse needed.
MATCH_TABLE = "contract_match"
_MATCH_SCHEMA = f"CREATE TABLE IF NOT EXISTS {MATCH_TABLE} (stamp TEXT NOT NULL)"


def _contract_stamp(path: str) -> str:
    """Return the contract file's size and modification time: an append changes them (see PageStore.matches)."""
    st = os.stat(path)
    return f"{st.st_size}:{st.st_mtime_ns}"


def _default_store_path(contract: str) -> str:
    """Return the page store's default path: beside the contract, ``C.limn`` -> ``C.pages.sqlite3``."""
    base = contract[:-5] if contract.endswith(".limn") else contract
    return base + STORE_SUFFIX


def _text_sha256(text: str) -> str:
    """Return the hex SHA-256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_STORE_COLUMNS = ("block", "turn", "role", "kind", "tokens", "keywords", "sha256", "paged_at", "summary", "text")


def _store_error(path: str, exc: sqlite3.Error, doing: str) -> PagerError:
    """Return the one-line PagerError for an SQLite failure while ``doing`` something to the store."""
    if "full" in str(exc):  # SQLITE_FULL: "database or disk is full"
        return PagerError(f"{path}: no space left while {doing} the page store")
    return PagerError(f"{path}: can't use the page store while {doing} it ({exc})")


def _refuse_link(path: str, what: str) -> None:
    """Raise PagerError if ``path`` is a symbolic link: the pager never writes through one."""
    if os.path.islink(path):
        raise PagerError(f"{path}: the {what} is a symbolic link; the pager does not follow links "
                         "(name the file itself)")


def _check_output_file(path: str, flag: str) -> None:
    """Refuse a file a flag names for the pass to write: a link, a directory, or one in a missing folder."""
    _refuse_link(path, f"{flag} path")
    if os.path.isdir(path):
        raise PagerError(f"{path}: {flag} names a directory; name the file to write")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        owner = flag + ("'" if flag.endswith("s") else "'s")
        raise PagerError(f"{path}: {owner} folder {_show(parent)} does not exist")


class PageStore:
    """The SQLite file holding paged blocks' original text; owner-only, evicted text wiped.

    Deleted rows are zeroed (``secure_delete``) and, once a pass has deleted or replaced
    rows, the file is rebuilt (``VACUUM``) so no older copy of a text stays in free
    space; the rollback journal is deleted at each commit (no WAL file to linger).
    """

    def __init__(self, path: str, connection: sqlite3.Connection) -> None:
        self.path, self._db = path, connection
        self.stub_words = DEFAULT_STUB_WORDS  # for summaries of pages stored without one
        self.created = False  # this process created the file (a failed pass removes it)
        self.wiped = False    # rows were deleted or replaced since the last VACUUM
        self.indexed = False  # the file holds a search index (made by the first search)

    @classmethod
    def open(cls, path: str, create: bool, stub_words: int = DEFAULT_STUB_WORDS) -> Optional["PageStore"]:
        """Open the store at ``path``; create it (mode 0600) if ``create``, else return None if absent.

        An existing file must already be a page store (an SQLite file with the pages
        table), or empty: nothing is written into any other file.
        """
        _refuse_link(path, "page store")
        created = False
        if not os.path.exists(path):
            if not create:
                return None
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600))
                created = True
            except FileExistsError:
                pass  # another pass created it first
            except OSError as exc:
                raise PagerError(f"{path}: can't create the page store ({exc.strerror})") from None
        elif os.path.isdir(path):
            raise PagerError(f"{path}: is a directory, not a page store")
        elif not create and os.path.getsize(path) == 0:
            return None  # created by a pass that stopped before it stored anything
        try:
            db = sqlite3.connect(path, isolation_level=None, timeout=30)
        except sqlite3.Error as exc:
            raise PagerError(f"{path}: not a usable page store ({exc})") from None
        try:
            store = cls._checked(path, db, create)
        except BaseException:
            db.close()
            if created:
                os.unlink(path)
            raise
        store.stub_words, store.created = stub_words, created
        return store

    @classmethod
    def _checked(cls, path: str, db: sqlite3.Connection, create: bool) -> "PageStore":
        """Return the store over ``db`` once its schema and journal mode are the pager's."""
        try:
            tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            if ("pages" not in tables or set(tables) - _SEARCH_TABLES - {"pages", MATCH_TABLE}) and (tables or not create):
                raise PagerError(f"{path}: not the pager's page store (it holds the tables "
                                 f"{', '.join(map(_show, tables)) or '(none)'}, not just pages and its search index)")
            if tables:
                columns = tuple(row[1] for row in db.execute("PRAGMA table_info(pages)"))
                if columns != _STORE_COLUMNS:
                    raise PagerError(f"{path}: not the pager's page store (its pages table has other columns)")
            db.execute("PRAGMA secure_delete = ON")  # deleted rows are zeroed where they lie
            db.execute("PRAGMA synchronous = FULL")
            # A store another program switched to WAL keeps old pages in the -wal file: switch back
            # (which checkpoints and removes it), or refuse when that program still holds it open.
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "delete":
                busy = f"{path}: the page store is in another journal mode and open elsewhere; close the other program first"
                db.execute("PRAGMA busy_timeout = 1000")  # the other program may be about to close it
                try:
                    if db.execute("PRAGMA journal_mode = DELETE").fetchone()[0] != "delete":
                        raise PagerError(busy)
                except sqlite3.OperationalError:
                    raise PagerError(busy) from None
                db.execute("PRAGMA busy_timeout = 30000")
            if not tables:
                db.executescript(_STORE_SCHEMA)
        except sqlite3.Error as exc:
            if "full" in str(exc):
                raise _store_error(path, exc, "creating") from None
            raise PagerError(f"{path}: not a usable page store ({exc})") from None
        store = cls(path, db)
        store.indexed = SEARCH_ROWS in tables
        return store

    def row(self, block: str) -> Optional[StoredPage]:
        """Return the row stored for ``block`` as it is (a range page's text: its member ids), or None."""
        row = self._db.execute("SELECT block, turn, role, kind, tokens, keywords, sha256, paged_at, summary, "
                               "text FROM pages WHERE block = ?", (block,)).fetchone()
        if row is None:
            return None
        return StoredPage(row[0], row[1], row[2], row[3], row[4], tuple(json.loads(row[5])), *row[6:])

    def get(self, block: str) -> Optional[StoredPage]:
        """Return the stored page of ``block``, or None.

        A range page comes back with its blocks' texts as its text, in order, a blank line
        between (what it stands for when a later pass reads its line back), and the SHA-256
        of that text.
        """
        page = self.row(block)
        if page is None:
            return None
        if page.kind == RANGE:
            texts = [member.text for member in self.range_pages(block)]
            text = "\n\n".join(texts)
            return page._replace(text=text, sha256=_text_sha256(text))
        return _with_summary(page, self.stub_words)

    def note_contract(self, stamp: str) -> None:
        """Record that the store's rows are now exactly the paged blocks of the contract stamped ``stamp``."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(_MATCH_SCHEMA)
            self._db.execute(f"DELETE FROM {MATCH_TABLE}")
            self._db.execute(f"INSERT INTO {MATCH_TABLE} VALUES (?)", (stamp,))
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self.rollback()
            raise _store_error(self.path, exc, "writing") from None

    def matches(self, stamp: str) -> bool:
        """Return True if a pass left the rows as the paged blocks of the contract stamped ``stamp``."""
        try:
            row = self._db.execute(f"SELECT stamp FROM {MATCH_TABLE}").fetchone()
        except sqlite3.OperationalError:  # no such table: no pass noted one
            return False
        return row is not None and row[0] == stamp

    def sizes(self) -> List[Tuple[str, int, int]]:
        """Return (block, turn, tokens) of every stored block's page, in one query (range pages' rows left out)."""
        return self._db.execute("SELECT block, turn, tokens FROM pages WHERE kind IS NOT ?", (RANGE,)).fetchall()

    def _columns_of(self, columns: str, blocks: Sequence[str]) -> List[tuple]:
        """Return ``columns`` of the stored pages of ``blocks``, a few queries in all."""
        rows: List[tuple] = []
        for start in range(0, len(blocks), _PAGE_ROWS // 2):
            part = blocks[start:start + _PAGE_ROWS // 2]
            rows += self._db.execute(f"SELECT {columns} FROM pages WHERE block IN (%s)"
                                     % ",".join("?" * len(part)), part).fetchall()
        return rows

    def texts(self, blocks: Sequence[str]) -> List[Tuple[str, int, Optional[str], str]]:
        """Return (block, turn, kind, text) of the pages of ``blocks`` that are stored, a few queries in all."""
        return self._columns_of("block, turn, kind, text", blocks)

    def tokens_of(self, blocks: Sequence[str]) -> Dict[str, int]:
        """Return block -> its page's tokens, for the stored ones of ``blocks`` (their texts unread)."""
        return dict(self._columns_of("block, tokens", blocks))

    def count(self) -> int:
        """Return how many pages the store holds (range pages' rows left out), in one query."""
        try:
            return self._db.execute("SELECT count(*) FROM pages WHERE kind IS NOT ?", (RANGE,)).fetchone()[0]
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc, "reading") from None

    def newest(self, tokens: int, among: Optional[Container[str]] = None
               ) -> List[Tuple[str, int, str, Optional[str], str]]:
        """Return (block, turn, role, kind, text) of the pages of blocks ``among`` (None: every page), newest
        first, until their tokens reach ``tokens`` (range pages left out).

        Newest is the order the passes stored them, which is the session's order (a pass stores its
        pages in the history's order; a page stored again moves to the end).
        """
        rows: List[Tuple[str, int, str, Optional[str], str]] = []
        read = 0
        try:
            cursor = self._db.execute("SELECT block, turn, role, kind, tokens, text FROM pages WHERE kind IS NOT ? "
                                      "ORDER BY rowid DESC", (RANGE,))
            for block, turn, role, kind, size, text in cursor:
                if read >= tokens:
                    break
                if among is None or block in among:
                    rows.append((block, turn, role, kind, text))
                    read += size
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc, "reading") from None
        return rows

    def range_members(self, range_id: str) -> List[str]:
        """Return the ids of the blocks the range page ``range_id`` holds, in order ([] if it is none).

        A member that is itself a range page (read back from an earlier request and paged
        into a coarser range) gives its own members in its place.
        """
        page = self.row(range_id)
        if page is None or page.kind != RANGE:
            return []
        out: List[str] = []
        for member in page.text.split("\n"):
            inner = self.row(member)
            out.extend(self.range_members(member) if inner is not None and inner.kind == RANGE else [member])
        return out

    def range_pages(self, range_id: str) -> List[StoredPage]:
        """Return the stored page of every block of the range page ``range_id``, in order."""
        pages = []
        for member in self.range_members(range_id):
            page = self.get(member)
            if page is None:
                raise PagerError(f"{self.path}: no stored text for {_show(member)} of range page {_show(range_id)}")
            pages.append(page)
        return pages

    def shas(self) -> Dict[str, str]:
        """Return block id -> SHA-256 of every stored page."""
        return dict(self._db.execute("SELECT block, sha256 FROM pages"))

    def begin(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def put(self, pages: Iterable[StoredPage]) -> None:
        """Insert or replace pages (inside the caller's transaction)."""
        self.put_rows([(p.block, p.turn, p.role, p.kind, p.tokens, json.dumps(list(p.keywords)), p.sha256,
                        p.paged_at, p.summary, p.text) for p in pages])

    def put_rows(self, rows: List[tuple]) -> None:
        """Insert or replace rows in the table's column order, keywords as a JSON list."""
        before = self._db.total_changes
        try:
            if self.indexed:  # a replaced text leaves the index now; the next search indexes the new one
                self._unindex([row[0] for row in rows])
            before = self._db.total_changes
            self._db.executemany("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            # A replaced row counts twice (its delete, then the insert): its old text needs wiping.
            if self._db.total_changes - before > len(rows):
                self.wiped = True
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc, "writing") from None

    def commit(self) -> None:
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc, "writing") from None

    def rollback(self) -> None:
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite rolls back a failed transaction itself when it can't be asked to

    def discard(self) -> None:
        """Close the store and remove its file if this process created it (a failed first pass)."""
        self.close()
        if self.created:
            for path in (self.path, self.path + "-journal"):
                try:
                    os.unlink(path)
                except OSError:
                    pass

    def keep_only(self, keep: Iterable[str], among: Optional[Iterable[str]] = None) -> int:
        """Delete every page whose block is not in ``keep``; return how many went.

        With ``among``, only those blocks are candidates (the rows a pass found before
        it added its own), which spares reading every row back.
        """
        keep = set(keep)
        rows = ((b,) for b in among) if among is not None else self._db.execute("SELECT block FROM pages")
        gone = [b for (b,) in rows if b not in keep]
        try:
            if gone:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany("DELETE FROM pages WHERE block = ?", [(b,) for b in gone])
                if self.indexed:  # evicted text is never searchable
                    self._unindex(gone)
                self._db.execute("COMMIT")
                self.wiped = True
            self.wipe()
        except sqlite3.Error as exc:
            self.rollback()
            raise _store_error(self.path, exc, "removing evicted pages from") from None
        return len(gone)

    def wipe(self) -> None:
        """Rebuild the file if rows were deleted or replaced: no old copy of a text stays in it.

        ``secure_delete`` zeroes a deleted row where it lies, but SQLite moves rows
        between pages as the tree rebalances, leaving earlier copies in free space of
        pages still in use; VACUUM writes every page afresh from the live rows.
        """
        if self.wiped:
            if self.indexed:  # merge the index into one segment: a deleted text's words leave it too
                self._db.execute(f"INSERT INTO {SEARCH_TABLE}({SEARCH_TABLE}) VALUES ('optimize')")
            self._db.execute("VACUUM")
            self.wiped = False

    # -- search --

    def _unindex(self, blocks: Sequence[str]) -> None:
        """Remove ``blocks``' texts from the search index (inside the caller's transaction)."""
        db = self._db
        ids = [row for b in blocks for row in db.execute(f"SELECT id FROM {SEARCH_ROWS} WHERE block = ?", (b,))]
        if ids:
            db.executemany(f"DELETE FROM {SEARCH_TABLE} WHERE rowid = ?", ids)
            db.executemany(f"DELETE FROM {SEARCH_ROWS} WHERE block = ?", [(b,) for b in blocks])
            self.wiped = True

    def _sync_index(self) -> None:
        """Create the search index if missing and bring it in step with the pages (by SHA-256)."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            if not self.indexed:
                for statement in _SEARCH_SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                self.indexed = True
            pages = dict(db.execute("SELECT block, sha256 FROM pages"))
            listed = {block: sha for block, _, sha in db.execute(f"SELECT block, id, sha256 FROM {SEARCH_ROWS}")}
            stale = [block for block, sha in listed.items() if pages.get(block) != sha]
            if stale:
                self._unindex(stale)
            fresh = [block for block, sha in pages.items() if listed.get(block) != sha]
            for start in range(0, len(fresh), _PAGE_ROWS):
                for block, text, sha in db.execute(
                        "SELECT block, text, sha256 FROM pages WHERE block IN (%s)"
                        % ",".join("?" * len(fresh[start:start + _PAGE_ROWS])), fresh[start:start + _PAGE_ROWS]):
                    rowid = db.execute(f"INSERT INTO {SEARCH_TABLE}(text) VALUES (?)", (text,)).lastrowid
                    db.execute(f"INSERT INTO {SEARCH_ROWS} VALUES (?, ?, ?)", (block, rowid, sha))
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            self.rollback()
            self.indexed = SEARCH_ROWS in {name for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            raise _store_error(self.path, exc, "indexing") from None
        self.wipe()

    def search(self, query: str, limit: int = SEARCH_LIMIT, among: Optional[Container[str]] = None,
               scan: Optional[bool] = None) -> List[Dict[str, Any]]:
        """Return the pages best matching ``query``, best first: dicts of id, turn, kind, role, line, score.

        ``among``: only these blocks may be hits (the contract's paged ones). ``scan``: read
        every page instead of asking the FTS5 index (default: scan only where SQLite has no
        FTS5); both ways give the same hits in the same order (see _rank_pages).
        """
        terms = _query_terms(query)
        if not terms:
            return []
        if scan is None:
            scan = not _fts_available()
        # A range page's row holds its members' ids, not text: the members' own pages are what match.
        columns = "SELECT p.block, p.turn, p.role, p.kind, p.tokens, p.text FROM pages p"
        try:
            total, mean = self._db.execute("SELECT count(*), avg(tokens) FROM pages WHERE kind IS NOT ?",
                                           (RANGE,)).fetchone()
            if scan:
                rows = self._db.execute(f"{columns} WHERE p.kind IS NOT ?", (RANGE,))
            else:
                self._sync_index()
                match = " OR ".join(f"({term.fts})" for term in terms)
                rows = self._db.execute(
                    f"{columns} JOIN {SEARCH_ROWS} r ON r.block = p.block WHERE p.kind IS NOT ? AND r.id IN "
                    f"(SELECT rowid FROM {SEARCH_TABLE} WHERE {SEARCH_TABLE} MATCH ?)", (RANGE, match))
            if among is not None:
                rows = (row for row in rows if row[0] in among)
            return _rank_pages(rows, terms, total, mean or 0.0, limit)
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc, "searching") from None

    def close(self) -> None:
        self._db.close()


def _verified_text(page: StoredPage, store: str) -> str:
    """Return ``page``'s text after checking it against its stored SHA-256."""
    if _text_sha256(page.text) != page.sha256:
        raise PagerError(f"{store}: the text of {_show(page.block)} fails its SHA-256 check (the store was altered)")
    return page.text


# ===== The contract file =====


_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # where the platform has it: never open through a link


def _read_contract_bytes(path: str) -> Optional[bytes]:
    _refuse_link(path, "contract")
    try:
        with open(os.open(path, os.O_RDONLY | _O_NOFOLLOW), "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise PagerError(f"{path}: is a directory, not a contract file") from None
    except OSError as exc:
        raise PagerError(f"{path}: can't read ({exc.strerror})") from None


def _decode_contract(path: str, data: Optional[bytes]) -> str:
    if data is None:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PagerError(f"{path}: not valid UTF-8 text (byte {exc.start})") from None


# The words a Liminate statement can open with (the interpreter's verbs and declarations, ``when``
# blocks and the statement-initial ``inherited``, as liminate 0.18 reads them): a line opening with
# any other word is not Liminate, so the file is not a contract (a JSON file, a transcript, notes).
_LIMINATE_OPENERS = frozenset((
    "remember", "show", "filter", "keep", "count", "gather", "sum", "each", "choose", "finish", "add",
    "remove", "weakens", "require", "forbid", "permit", "assign", "expect", "sort", "compare",
    "transform", "about", "define", "when", "inherited"))
_PAGER_OPENINGS = ("add ", "remember ", "remove ")  # the pager's own lines: no word split needed


def _check_liminate_lines(path: str, text: str) -> None:
    """Raise PagerError unless every line of ``text`` opens as a Liminate statement (or is blank or a comment).

    An unterminated last line may be cut anywhere in its first word (a crash mid-line): a prefix of
    an opener passes here and is judged by read_contract_state.
    """
    lines = text.splitlines()
    last = len(lines) - 1
    for number, line in enumerate(lines):
        if line.startswith(_PAGER_OPENINGS) or _is_liminate_comment(line):
            continue
        words = _liminate_words(line)
        first = words[0] if words else ""
        if first in _LIMINATE_OPENERS:
            continue
        if (number == last and text[-1] not in _LINE_BREAKS and first
                and any(opener.startswith(first) for opener in _LIMINATE_OPENERS)):
            continue
        raise PagerError(f"{path}: not a Liminate contract: line {number + 1} is not a Liminate statement "
                         f"({_show(line, 60)}); --contract takes a .limn contract, an empty file or a new path")


def _state_of(path: str, text: str) -> ContractState:
    _check_liminate_lines(path, text)
    try:
        return read_contract_state(text)
    except PagerError as exc:
        raise PagerError(f"{path}: {exc}") from None


def _contract_text(path: str) -> str:
    """Return the text of the contract at ``path`` (missing means empty)."""
    return _decode_contract(path, _read_contract_bytes(path))


def contract_state(path: str) -> ContractState:
    """Read the contract at ``path`` (missing means empty) and return its state."""
    return _state_of(path, _contract_text(path))


def _read_fd(fd: int, size: int) -> bytes:
    # lseek + read rather than pread, which Windows lacks; O_APPEND writes still go to the end.
    os.lseek(fd, 0, os.SEEK_SET)
    chunks, offset = [], 0
    while offset < size:
        chunk = os.read(fd, size - offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


_IOV_MAX = 1024  # pieces one writev may take (POSIX guarantees at least 16; Linux and macOS take 1024)


def _append_pieces(fd: int, pieces: List[bytes], size: int, path: str) -> None:
    """Write every piece at the end of ``fd``, in order: ``writev`` where the platform has it.

    A short write resumes where it stopped. On a failure the file is cut back to
    ``size`` (never half a pass behind) and PagerError says so.
    """
    views = [memoryview(piece) for piece in pieces if piece]
    first = 0  # views before this one are written
    try:
        while first < len(views):
            if hasattr(os, "writev"):
                written = os.writev(fd, views[first: first + _IOV_MAX])
            else:  # pragma: no cover - Windows
                written = os.write(fd, views[first])
            while first < len(views) and written >= len(views[first]):
                written -= len(views[first])
                first += 1
            if written:
                views[first] = views[first][written:]
    except OSError as exc:
        os.ftruncate(fd, size)
        if exc.errno == errno.ENOSPC:
            raise PagerError(f"{path}: no space left while writing the contract; contract left as it was") from None
        raise PagerError(f"{path}: write failed ({exc.strerror}); contract left as it was") from None


def _fsync_dir(path: str) -> None:
    try:
        dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


class _LockedContract:
    """The contract held under an exclusive lock for one append.

    Entering creates the file if missing, locks it (``flock``, where the
    platform has it), and reads its state. ``append`` writes the payload with one
    write, then fsync; a failed write is truncated back. Leaving without an
    append removes a file that entering created, so an error leaves no trace.
    """

    def __init__(self, path: str, known: Optional[Tuple[str, ContractState]] = None) -> None:
        self.path = path
        self.known = known  # (a text read before, its state): that text found under the lock is not parsed again
        self.state = ContractState()
        self._fd = -1
        self._created = False
        self._appended = False
        self._size = 0

    def __enter__(self) -> "_LockedContract":
        while not self._open_and_lock():
            pass
        try:
            self._size = os.fstat(self._fd).st_size
            self._created = self._created and self._size == 0
            text = _decode_contract(self.path, _read_fd(self._fd, self._size))
            known = self.known
            self.state = known[1] if known is not None and known[0] == text else _state_of(self.path, text)
        except BaseException:
            self._release(failed=True)
            raise
        return self

    def _open_and_lock(self) -> bool:
        """Open and lock the contract; return False (and close) if the path no longer names that file.

        A pass that created the file and failed removes it; a pass that opened it in
        between must not append to the removed file, so it opens the path again.
        """
        _refuse_link(self.path, "contract")
        if os.path.isdir(self.path):
            raise PagerError(f"{self.path}: is a directory, not a contract file")
        existed = os.path.exists(self.path)
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | _O_NOFOLLOW, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a link put there after the check above
                raise PagerError(f"{self.path}: the contract is a symbolic link; the pager does not "
                                 "follow links (name the file itself)") from None
            raise PagerError(f"{self.path}: can't open for writing ({exc.strerror})") from None
        try:
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                same = os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(self._fd).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(self._fd)
            raise
        if not same:
            os.close(self._fd)
            return False
        self._created = not existed
        return True

    def append(self, payload: _Payload) -> None:
        """Append ``payload``'s pieces (one ``writev`` for up to _IOV_MAX of them), then fsync."""
        _append_pieces(self._fd, payload.pieces, self._size, self.path)
        try:
            os.fsync(self._fd)
        except OSError as exc:
            os.ftruncate(self._fd, self._size)
            raise PagerError(f"{self.path}: write failed ({exc.strerror}); contract left as it was") from None
        if self._created:
            _fsync_dir(self.path)
        self._appended = True

    @property
    def appended(self) -> bool:
        """Whether this lock's append went through."""
        return self._appended

    def fileno(self) -> int:
        return self._fd

    def __exit__(self, exc_type, exc, tb) -> None:
        self._release(failed=exc_type is not None and not self._appended)

    def _release(self, failed: bool) -> None:
        try:
            if failed and self._created and os.fstat(self._fd).st_size == 0:
                os.unlink(self.path)
        except OSError:
            pass
        finally:
            os.close(self._fd)  # closing releases the lock


def _append_to_contract(path: str, render: Callable[[ContractState], _Payload]) -> Tuple[ContractState, _Payload]:
    """Lock the contract, render the payload from its current state, and append it atomically.

    On any failure the file is left byte-identical (or absent, if it was absent).
    Returns the state the payload was rendered against, and the payload.
    """
    with _LockedContract(path) as contract:
        payload = render(contract.state)
        contract.append(payload)
    return contract.state, payload


# ===== Recording a pass: pages, compacted history, contract =====


def _cli_hint(args: argparse.Namespace) -> Callable[[str], str]:
    """Return block id -> the CLI's recall hint, naming the contract (and a --store) by absolute path.

    With the script's absolute path (RECALL_COMMAND) the hint runs from any folder.
    """
    contract = os.path.abspath(args.contract)
    store = os.path.abspath(args.store) if args.store else None
    return lambda block: _recall_hint(block, contract, store)


def _normalize_now(text: Optional[str]) -> str:
    """Return the pass timestamp: ``text`` parsed as ISO-8601 in UTC, or the clock's time."""
    if text is None:
        moment = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    else:
        raw = text.strip()
        if raw.endswith(("Z", "z")):
            raw = raw[:-1] + "+00:00"
        try:
            moment = datetime.datetime.fromisoformat(raw)
        except ValueError:
            raise PagerError(f"--now must be an ISO-8601 timestamp like 2026-05-17T03:08:12+00:00 (got {_show(text)})") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.timezone.utc)
        try:
            moment = moment.astimezone(datetime.timezone.utc)
        except OverflowError:  # e.g. 9999-12-31T23:59:59-23:59 is past year 9999 in UTC
            raise PagerError(f"--now is out of range once converted to UTC (got {_show(text)})") from None
    return moment.isoformat()


def _final_paged(state: ContractState, plan: PassPlan) -> List[str]:
    """Return every block the contract lists as paged once this pass is recorded.

    In contract order: blocks it listed before keep their place, new ones follow in
    the pass's order. Only the paged blocks are gathered, not every block's directive:
    on a large pass that table would sit beside the contract payload at the peak.
    """
    blocks, actions = _column(plan.decisions, "block"), _column(plan.decisions, "action")
    known = state.directives
    now = {block: action for block, action in zip(blocks, actions) if block in known}
    new_ranges, ended = _range_changes(plan, state)
    gone = set(ended)
    paged = [block for block, action in known.items() if now.get(block, action) == "page" and block not in gone]
    paged += [block for block, action in zip(blocks, actions) if action == "page" and block not in known]
    paged += [r.id for r in new_ranges]
    return paged


_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]

# Numbers carry six decimals, as Decision.to_dict rounds them.
_RECORD = ('{"block": %s, "kind": %s, "role": %s, "turn": %d, "tokens": %d, "matched": [%s], '
           '"similarity": %.6f, "own": %.6f, "neighbour": %.6f, "recency": %.6f, "delta_t": %d, "R": %.6f, "action": "%s", "reason": %s, "stub": %s}')


def _record_line(d: Decision) -> str:
    """Return ``d``'s JSON record as one line; ``json.loads`` of it equals ``d.to_dict()``.

    Formatted by hand because a pass writes one per block and json.dumps of a
    dict costs several times more.
    """
    enc = _encode_str
    block, turn, role, kind, tokens, matched, sim, own, near, rec, delta_t, r, action, reason, stub = d
    return _RECORD % (enc(block), "null" if kind is None else enc(kind), enc(role), turn, tokens,
                      ", ".join([enc(k) for k in matched]) if matched else "",
                      sim, own, near, rec, delta_t, r, action, enc(reason), "true" if stub else "false")


def _write_records(out: io.TextIOBase, decisions: Iterable[Decision]) -> None:
    """Write every decision's record (_record_line) to ``out``, one line each, _PAYLOAD_PIECE lines per write.

    Python's stderr has no buffer under its text layer, so a write per record would
    be a system call per block; a few hundred lines a write keep the joined text small.
    """
    lines = map(_record_line, decisions)
    while True:
        batch = list(islice(lines, _PAYLOAD_PIECE))
        if not batch:
            return
        batch.append("")  # the last line's end
        out.write("\n".join(batch))


class _Materializer:
    """The second read of a history: stores new pages' text and writes the compacted history.

    It parses only the blocks it needs (new pages, and with --emit the retained
    ones), picking them out by the offsets the first read noted.
    """

    def __init__(self, plan: PassPlan, store: Optional[PageStore], now: str, stub_words: int,
                 hint: Callable[[str], str], emit: Optional[io.TextIOBase], keep_pages: bool = False) -> None:
        self.plan, self.store, self.now, self.stub_words = plan, store, now, stub_words
        self.hint, self.emit = hint, emit
        self.known = store.shas() if store is not None else {}
        # With keep_pages, block id -> the page this pass stored, as the store would give it back
        # (a transcript's stubs are made from them: its texts are in memory anyway).
        self.fresh: Optional[Dict[str, StoredPage]] = {} if keep_pages else None
        self.pending: List[StoredPage] = []
        self.stored = 0
        self.first = True

    def run(self, source: _HistorySource) -> None:
        """Store new pages' text, and write every surviving block if emitting."""
        if self.emit is None:
            self._store_pages(source)
            return
        decisions = self.plan.decisions
        texts = self.plan.texts
        kept = {k: texts[k] for k, d in enumerate(decisions) if d.action == "page"} if texts is not None else {}
        wanted = [k for k, d in enumerate(decisions) if d.action == "retain" or
                  (d.action == "page" and not d.stub and kept.get(k) is None)]
        raws = self._raws(source, wanted)
        range_of = self.plan.range_of()
        lines = dict(zip((r.id for r in self.plan.ranges), range_stubs(self.plan.ranges, self.hint)))
        for k, d in enumerate(decisions):
            raw = raws.get(k)
            if raw is None and d.action != "page":
                continue
            text = raw["text"] if raw is not None else kept.get(k)  # type: ignore[index]
            page = self._page(d, text)  # type: ignore[arg-type]
            r = range_of.get(k)
            if r is None:
                self._write(self._emitted(d, raw, page))
            elif r.positions[0] == k:  # a range page stands where its first block was
                self._write({"id": r.id, "turn": r.first_turn, "role": RANGE,
                             "text": lines[r.id], "stub": True})
        self.flush()

    def _raws(self, source: _HistorySource, wanted: List[int]) -> Dict[int, Dict[str, object]]:
        """Return decision index -> block object, for the wanted decisions, read again from the history."""
        decisions = self.plan.decisions
        items = _decision_items(len(decisions), source.skipped) if source.skipped else None
        raws: Dict[int, Dict[str, object]] = {}
        for k, (item, raw) in zip(wanted, source.blocks_at(items[k] if items else k for k in wanted)):
            if type(raw) is not dict or raw.get("id") != decisions[k].block:  # type: ignore[union-attr]
                raise PagerError(f"{source.name}: blocks[{item}] changed while the pass was reading the history")
            raws[k] = raw  # type: ignore[assignment]
        return raws

    def _store_pages(self, source: _HistorySource) -> None:
        """Store every new page's text: from what the first read kept, else read again."""
        decisions = self.plan.decisions
        block, turn, role, kind, tokens, matched, action, stub = (_column(decisions, name) for name in (
            "block", "turn", "role", "kind", "tokens", "matched", "action", "stub"))
        pages = [k for k, a in enumerate(action) if a == "page" and not stub[k]]
        kept = self.plan.texts
        known, now = self.known, self.now
        listed = {m: json.dumps(list(m)) for m in set(map(matched.__getitem__, pages))}
        sha256 = hashlib.sha256
        rows: List[tuple] = []

        def put(k: int, text: str) -> None:
            nonlocal rows
            sha = sha256(text.encode("utf-8")).hexdigest()
            if known.get(block[k]) == sha:
                return  # stored by an earlier pass, unchanged
            rows.append((block[k], turn[k], role[k], kind[k], tokens[k], listed[matched[k]], sha, now, "", text))
            if self.fresh is not None:
                self.fresh[block[k]] = StoredPage(block[k], turn[k], role[k], kind[k], tokens[k], matched[k],
                                                  sha, now, "", text)
            if len(rows) >= _PAGE_ROWS:
                self._put_rows(rows)
                rows = []

        missing = [k for k in pages if kept is None or kept[k] is None]
        # Not kept by the first read (a bound there was loose): read again first, so that the pages are
        # stored in the history's order (the injected index reads the newest from that order).
        again = {k: raw["text"] for k, raw in self._raws(source, missing).items()} if missing else {}
        for k in pages:  # one text at a time: never every page's text at once
            put(k, again.pop(k) if k in again else kept[k])  # type: ignore[index]
        self._put_rows(rows)

    def _put_rows(self, rows: List[tuple]) -> None:
        if rows and self.store is not None:
            self.store.put_rows(rows)
        self.stored += len(rows)

    def _page(self, d: Decision, text: Optional[str]) -> Optional[StoredPage]:
        """Return the stored page of a paged or stub block, storing a newly paged one's text."""
        if d.stub:
            return self.store.get(d.block) if self.store is not None else None
        if d.action != "page":
            return None
        sha = _text_sha256(text)  # type: ignore[arg-type]
        if self.known.get(d.block) == sha and self.store is not None:
            return self.store.get(d.block) if self.emit is not None else None
        # The summary is left to whoever reads the page (index, stubs): most pages are never shown.
        page = StoredPage(d.block, d.turn, d.role, d.kind, d.tokens, d.matched, sha, self.now, "", text)  # type: ignore[arg-type]
        self.pending.append(page)
        self.stored += 1
        if len(self.pending) >= 1024:
            self.flush()
        return page

    def flush(self) -> None:
        if self.pending and self.store is not None:
            self.store.put(self.pending)
        self.pending = []

    def _emitted(self, d: Decision, raw: Optional[Dict[str, object]], page: Optional[StoredPage]
                 ) -> Dict[str, object]:
        if d.action == "retain":
            if not d.stub:
                return raw  # type: ignore[return-value]
            restored = {k: v for k, v in raw.items() if k != "stub"}  # type: ignore[union-attr]
            restored["text"] = _verified_text(page, self.store.path)  # type: ignore[arg-type,union-attr]
            if page.tokens != estimate_tokens(page.text):  # type: ignore[union-attr]
                restored["tokens"] = page.tokens  # type: ignore[union-attr]
            return restored
        stub: Dict[str, object] = {"id": d.block, "turn": d.turn, "role": d.role}
        if d.kind is not None:
            stub["kind"] = d.kind
        stub["text"] = make_stub(_with_summary(page, self.stub_words), self.hint(d.block),  # type: ignore[arg-type]
                                 _newer_copy(d.reason), _giant_edge(d.tokens, self.plan.params.budget))
        stub["stub"] = True
        return stub

    def _write(self, block: Dict[str, object]) -> None:
        self.emit.write(("" if self.first else ",\n") + json.dumps(block, ensure_ascii=False))  # type: ignore[union-attr]
        self.first = False


def _index_header(count: int, contract_hint: str) -> str:
    return f"Paged blocks: {count} (recall one with: {contract_hint})"


def _index_block(pages: List[StoredPage], contract_hint: str) -> Dict[str, object]:
    text = "\n".join([_index_header(len(pages), contract_hint)] + index_lines(pages))
    return {"id": "pager-index", "turn": 0, "role": "system", "text": text, INDEX_FLAG: True}


def _index_reserve(args: argparse.Namespace, locked: Optional[_LockedContract], store: Optional[PageStore],
                   seen: Container[str]) -> int:
    """Return the tokens the emitted page index takes beyond this history's own pages.

    Its header, plus the lines of blocks that earlier passes paged and this history
    does not hold (as the contract reads under the pass's lock); each page of this
    history prices its own line.
    """
    if not args.with_index:
        return 0
    header = _index_header(10 ** 6, _cli_hint(args)("ID"))
    state = locked.state if locked is not None else contract_state(args.contract)
    earlier = [b for b, a in state.directives.items() if a == "page" and b not in seen]
    pages = [p for p in (store.get(b) for b in earlier) if p is not None] if store is not None else []
    return estimate_tokens(header) + sum(estimate_tokens(line) + 1 for line in index_lines(pages))


def _paged_pages(final: Mapping[str, str], store: Optional[PageStore], store_path: str) -> List[StoredPage]:
    """Return the stored page of every block ``final`` lists as paged, in contract order."""
    paged = [block for block, action in final.items() if action == "page"]
    if paged and store is None:
        raise PagerError(f"{store_path}: the page store is missing, but the contract lists {len(paged)} paged blocks")
    pages = []
    for block in paged:
        page = store.get(block)  # type: ignore[union-attr]
        if page is None:
            raise PagerError(f"{store_path}: no stored text for paged block {_show(block)}")
        pages.append(page)
    return pages


def _with_index_pages(final: Iterable[str], store: Optional[PageStore], store_path: str) -> List[StoredPage]:
    """Return the pages the page index lists: every paged block, a range page's blocks by its one line."""
    pages = _paged_pages(dict.fromkeys(final, "page"), store, store_path)
    inside = {m for p in pages if p.kind == RANGE for m in store.range_members(p.block)}  # type: ignore[union-attr]
    return [p for p in pages if p.block not in inside]


def _write_pager_history(out: io.TextIOBase, header: Mapping[str, object], blocks_file: io.TextIOBase,
                         index: Optional[Dict[str, object]]) -> None:
    """Write the compacted pager-format history: its header fields, the page index, then the blocks."""
    out.write("{")
    for key, value in header.items():
        out.write(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}, ")
    out.write('"blocks": [\n')
    if index is not None:
        out.write(json.dumps(index, ensure_ascii=False) + (",\n" if blocks_file.tell() else ""))
    blocks_file.seek(0)
    while True:
        chunk = blocks_file.read(1 << 20)
        if not chunk:
            break
        out.write(chunk)
    out.write("\n]}\n")


def _range_directives(plan: PassPlan, out: Dict[str, Tuple[str, Optional[str]]],
                      hint: Callable[[str], str]) -> Dict[str, Tuple[str, Optional[str]]]:
    """Return emit's directives ``out`` with each range page standing in for its blocks.

    The first block of a range page is paged with the range's line as its stub; the others are
    left out of the request (the contract still lists them as paged: the line lists them).  A
    range never splits a tool unit, so the writers' unit rules keep every call with its results.
    """
    blocks = _column(plan.decisions, "block")
    for r, line in zip(plan.ranges, range_stubs(plan.ranges, hint)):
        out[blocks[r.positions[0]]] = ("page", line)
        for i in r.positions[1:]:
            out[blocks[i]] = ("evict", None)
    return out


def _transcript_directives(plan: PassPlan, store: Optional[PageStore], hint: Callable[[str], str],
                           fresh: Optional[Mapping[str, StoredPage]] = None) -> Dict[str, Tuple[str, Optional[str]]]:
    """Return what ``emit`` needs per block: the directive, with a stub or a restored text.

    ``fresh`` holds the pages this pass stored (see _Materializer): they are not read back.
    """
    out: Dict[str, Tuple[str, Optional[str]]] = {}
    ranged = {i for r in plan.ranges for i in r.positions}
    for k, d in enumerate(plan.decisions):
        page = None
        if k in ranged and d.action == "page":
            out[d.block] = ("page", None)  # see _range_directives
            continue
        if store is not None and (d.action == "page" or d.stub):
            page = fresh.get(d.block) if fresh else None
            page = store.get(d.block) if page is None else _with_summary(page, store.stub_words)
        if d.action == "page":
            if page is None:
                raise PagerError(f"no stored text for paged block {_show(d.block)}")
            out[d.block] = ("page", make_stub(page, hint(d.block), _newer_copy(d.reason),
                                              _giant_edge(d.tokens, plan.params.budget)))
        elif d.action == "retain" and d.stub:
            out[d.block] = ("retain", _verified_text(page, store.path))  # type: ignore[arg-type,union-attr]
        else:
            out[d.block] = (d.action, None)
    return _range_directives(plan, out, hint)


def _previous_ranges(state: ContractState, store: Optional[PageStore]) -> Dict[str, Tuple[Tuple[str, ...], str]]:
    """Return the range pages the contract lists as paged: id -> (its blocks' ids, its summary)."""
    out: Dict[str, Tuple[Tuple[str, ...], str]] = {}
    if store is None:
        return out
    for rid in state.ranges:
        page = store.row(rid) if state.directives.get(rid) == "page" else None
        if page is not None and page.kind == RANGE:
            out[rid] = (tuple(page.text.split("\n")), page.summary)
    return out


def _store_ranges(store: PageStore, plan: PassPlan, now: str, known: Optional[Mapping[str, str]] = None) -> None:
    """Store the pass's range pages (inside the caller's transaction): id, turns, line, member ids.

    A range page read back from an earlier request is one of the pass's blocks and is stored
    already; one stored before with the same blocks and line is left as it is.
    """
    known = store.shas() if known is None else known
    blocks = set(_column(plan.decisions, "block"))
    rows = []
    for r in plan.ranges:
        if r.id in blocks:
            continue
        page = r.page()
        old = store.row(r.id) if known.get(r.id) == page.sha256 else None
        if old is None or old.summary != page.summary:
            rows.append(page._replace(paged_at=now))
    store.put(rows)


def _record_pass(args: argparse.Namespace, locked: _LockedContract, plan: PassPlan, reading: _Reading,
                 store: Optional[PageStore], store_path: str, now: str, render: Callable[[ContractState], _Payload]):
    """Store new pages, append the contract, write the compacted history: in that order, under the lock.

    The store commits before the contract append, so a block the contract lists as
    paged is always recallable; rows the contract does not list as paged are
    deleted after the append (a crash in between leaves harmless rows, which the
    next pass removes). A failure before the append leaves every file as it was:
    the store's transaction rolls back, and a store this pass created is removed.
    """
    state = locked.state
    needs_text = bool(plan.ranges) or any(a == "page" and not stub for a, stub in zip(
        _column(plan.decisions, "action"), _column(plan.decisions, "stub")))
    if store is None and needs_text:
        store = PageStore.open(store_path, create=True, stub_words=plan.params.stub_words)
    stored = 0
    work = None
    blocks_file = None
    try:
        with _file_beside(args.emit) as out:
            if store is not None:
                store.begin()
            hint = _cli_hint(args)
            transcript = reading.conversation
            if needs_text or out is not None:
                if out is not None and transcript is None:
                    blocks_file = tempfile.TemporaryFile("w+", encoding="utf-8", errors=JSON_ESCAPE_ERRORS)
                work = _Materializer(plan, store, now, plan.params.stub_words, hint, blocks_file,
                                     keep_pages=out is not None and transcript is not None)
                work.run(reading.source)
                stored = work.stored
            if store is not None and plan.ranges:
                _store_ranges(store, plan, now, work.known if work is not None else None)
            if plan.texts is not None:
                plan.texts.clear()  # stored: let the memory go before the contract is rendered
            final = _final_paged(state, plan)
            if out is not None and transcript is not None:
                compacted = emit(transcript, _transcript_directives(plan, store, hint,
                                                                    work.fresh if work is not None else None))
                problems = validate(transcript.emit_format, compacted)
                if problems:  # the emitter must never write what the API rejects...
                    kept = validate(transcript.emit_format, emit(transcript, {}))
                    if kept:  # ...unless the history itself, written back whole, breaks the API's rules
                        raise PagerError(f"{reading.source.name}: the history breaks the {transcript.emit_format} "
                                         f"API's rules, so no valid compacted history can be written: {kept[0]}")
                    raise AssertionError(f"emitted {transcript.emit_format} history is invalid: {problems[:3]}")
                json.dump(compacted, out, ensure_ascii=False, indent=1)
                out.write("\n")
            elif out is not None:
                index = None
                if args.with_index:
                    index = _index_block(_with_index_pages(final, store, store_path), _cli_hint(args)("ID"))
                _write_pager_history(out, plan.header, blocks_file, index)  # type: ignore[arg-type]
            payload = render(state)
            if out is not None:  # on disk before the contract says the pass happened
                out.flush()
                os.fsync(out.fileno())
            if store is not None:
                store.commit()
            locked.append(payload)
    except BaseException as exc:
        if store is not None and not locked.appended:
            store.rollback()
            if store.created:
                store.discard()
        if isinstance(exc, OSError):  # the compacted history or a temporary file could not be written
            what = "no space left" if exc.errno == errno.ENOSPC else f"write failed ({exc.strerror})"
            after = ("the contract holds the whole pass, but the file was not replaced" if locked.appended
                     else "nothing was changed")
            raise PagerError(f"{args.emit or tempfile.gettempdir()}: {what} while writing the compacted "
                             f"history; {after}") from None
        raise
    finally:
        if blocks_file is not None:
            blocks_file.close()
    if store is not None and (work is None or work.known):
        # Rows this pass added are all pages; only rows found before it can be stale
        # (none when the store was empty before it).
        try:
            store.keep_only(final,
                            among=list(work.known) if work is not None else None)
        except PagerError as exc:
            raise PagerError(f"{exc}; the contract holds the whole pass, and the next pass "
                             "removes the pages it no longer lists") from None
    if store is not None:  # the rows are the contract's paged blocks now (read by the injected index)
        store.note_contract(_contract_stamp(args.contract))
    return state, payload, stored, store


def _not_paged(block: str, action: Optional[str]) -> str:
    """Return why ``block`` can't be recalled: its directive (``action``, None if never seen) is not page."""
    where = "was never seen by the pager" if action is None else f"is {LIST_OF_ACTION[action].split('-')[0]}"
    return f"block {_show(block)} is not paged (it {where})"


def _same_file(a: str, b: str) -> bool:
    """Return True if paths ``a`` and ``b`` name one file: the same inode, or (not yet made) the same path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _check_paths(history: Optional[str], contract: str, store: Optional[str], emit: Optional[str]) -> None:
    """Refuse output paths the pass must not write: links, folders, missing folders, one file twice.

    Checked before anything is read or written, so a refusal leaves every file as it was.
    """
    for path in (history, contract, store, emit):
        if path is not None:
            try:
                path.encode("utf-8")
            except UnicodeEncodeError:  # bytes that are not UTF-8, kept by Python as surrogates
                raise PagerError(f"{_show(path)}: a path must be valid UTF-8") from None
    _refuse_link(contract, "contract")
    if store is not None:
        _refuse_link(store, "page store")
    if emit is not None:
        _check_output_file(emit, "--emit")
    named = [(what, path) for what, path in (("--history", history if history != "-" else None),
                                             ("--contract", contract), ("the page store", store),
                                             ("--emit", emit)) if path is not None]
    for i, (what, path) in enumerate(named):
        for other, other_path in named[i + 1:]:
            if _same_file(path, other_path):
                raise PagerError(f"{other_path}: {other} and {what} name the same file; give each its own")


def _recorded_stub_words(state: ContractState) -> int:
    words = state.values.get("pager-stub-words")
    return words if _is_int(words) and words > 0 else DEFAULT_STUB_WORDS  # type: ignore[return-value]


def _resolve_store(contract: str, store: Optional[str], state: ContractState) -> str:
    """Return the page store's path: ``store`` if given, else the contract's pager-store value, else the default."""
    recorded = state.values.get("pager-store")
    return store or (recorded if isinstance(recorded, str) else _default_store_path(contract))


class RecallLeft(NamedTuple):
    """What a recall bounded by ``max_tokens`` left for a later call: how many blocks, their tokens,
    and the first of them (where ``--from`` goes on)."""

    blocks: int
    tokens: int
    next: str


def _recall_bound(blocks: List[str], sizes_of: Callable[[List[str]], Mapping[str, int]], max_tokens: Optional[int],
                  start: Optional[str]) -> Tuple[List[str], Optional[RecallLeft]]:
    """Return the part of ``blocks`` (in recall order) a bounded recall gives back, and what it left.

    ``start``: begin at that block (PagerError if it is not one of them). ``max_tokens``: keep
    blocks while their sizes (``sizes_of`` the blocks from ``start`` on, asked only with a bound)
    stay within it, the first whatever its size.

    Example:
        >>> sizes = {"a": 50, "b": 40, "c": 30, "d": 5}
        >>> _recall_bound(["a", "b", "c", "d"], lambda blocks: sizes, 70, "b")
        (['b', 'c'], RecallLeft(blocks=1, tokens=5, next='d'))
    """
    if start is not None:
        if start not in blocks:
            raise PagerError(f"--from {_show(start)} is not one of the blocks these ids give back")
        blocks = blocks[blocks.index(start):]
    if max_tokens is None or not blocks:
        return blocks, None
    known = sizes_of(blocks)
    sizes = [known.get(b, 0) for b in blocks]  # (a block not stored is an error where its text is read)
    kept, spent = 1, sizes[0]
    while kept < len(blocks) and spent + sizes[kept] <= max_tokens:
        spent += sizes[kept]
        kept += 1
    if kept == len(blocks):
        return blocks, None
    return blocks[:kept], RecallLeft(len(blocks) - kept, sum(sizes[kept:]), blocks[kept])


def _recall_stopped(max_tokens: int, left: RecallLeft) -> str:
    """Return the line that ends a bounded recall: what it left, and where ``--from`` goes on."""
    return (f"[recall stopped within {max_tokens} tokens: {left.blocks} more blocks ({left.tokens} tokens) "
            f"are still paged; go on with --from {_shell_word(left.next)}]")


def _recall_pages(contract: str, ids: Iterable[str], store: Optional[str], now: str,
                  max_tokens: Optional[int] = None, start: Optional[str] = None
                  ) -> Tuple[str, List[StoredPage], List[str], Optional[RecallLeft]]:
    """Bring paged blocks back: their exact text (checked against its SHA-256), the page-in recorded.

    Under the contract's lock: every id must be listed as paged, its text is read from the
    store, and ``remove``/``add`` statements move it to the retained list, with ``last-recall``.
    Recall is idempotent: a block already back (retained, its page still in the store, as after
    a recall) gives its text again and records nothing; a call that pages nothing in appends nothing.
    A range page's id gives each of its blocks, in order, and moves those still paged too.
    ``start``: begin at that block of the ones the ids give (a bounded recall going on).
    ``max_tokens``: give blocks back, in order, while their tokens stay within it (the first one
    whatever its size); the rest stay paged, a range page too until all its blocks are back.
    Returns the store's path, the pages and their texts, in the order of ``ids`` (repeats once),
    and what a bound left (None when nothing was left).
    """
    ids = list(dict.fromkeys(ids))
    for block in ids:
        _check_quotable(block, f"recall id {_show(block)}")
    _refuse_link(contract, "contract")
    if not os.path.exists(contract):
        raise PagerError(f"{contract}: no such contract")
    with _LockedContract(contract) as locked:
        state = locked.state
        for block in ids:
            action = state.directives.get(block)
            if action not in ("page", "retain"):
                raise PagerError(f"{contract}: {_not_paged(block, action)}")
        store_path = _resolve_store(contract, store, state)
        _check_paths(None, contract, store_path, None)
        opened = PageStore.open(store_path, create=False, stub_words=_recorded_stub_words(state))
        if opened is None:
            raise PagerError(f"{store_path}: the page store does not exist")
        try:
            back = [block for block in ids if state.directives[block] == "retain"]
            for block in back:  # retained: back already, if the store still holds its page
                if opened.get(block) is None:
                    raise PagerError(f"{contract}: {_not_paged(block, 'retain')}")
            # A range page gives its blocks, in order (a block of it no longer stored is left out).
            blocks: List[str] = []
            held_by: Dict[str, List[str]] = {}  # a range page's id -> its blocks
            for block in ids:
                members = held_by[block] = opened.range_members(block) if block in state.ranges else []
                blocks += [m for m in members if state.directives.get(m) == "page"
                           or (state.directives.get(m) == "retain" and opened.row(m) is not None)] \
                    if members else [block]
            blocks = list(dict.fromkeys(blocks))
            try:
                blocks, left = _recall_bound(blocks, opened.tokens_of, max_tokens, start)
            except PagerError as exc:
                raise PagerError(f"{contract}: {exc}") from None
            pages = _paged_pages({block: "page" for block in blocks}, opened, store_path)
            texts = [_verified_text(page, store_path) for page in pages]
        finally:
            opened.close()
        statements = []
        back_now = set(blocks)
        for block in dict.fromkeys(ids + blocks):
            if any(state.directives.get(m) == "page" and m not in back_now for m in held_by.get(block, ())):
                continue  # a range page stays paged while any of its blocks is (left for a later call)
            if state.directives.get(block) == "page":
                statements.append(_statement_remove(block, "page", "recalled"))
                statements.append(_statement_add(block, "retain", "recalled"))
        if statements:
            statements.append(_statement_value("last-recall", now))
            _check_statements(statements)
            locked.append(_encode_batches(state, [statements]))
    return store_path, pages, texts, left


def _search_checked(query: Any, limit: Any) -> None:
    """Raise PagerError unless ``query`` is text and ``limit`` a positive integer."""
    if not isinstance(query, str):
        raise PagerError(f"the search query must be text (got {_show(query)})")
    if not _is_int(limit) or limit < 1:
        raise PagerError(f"the search limit must be a positive integer (got {_show(limit)})")


def _search_contract(contract: str, query: str, store: Optional[str] = None, limit: int = SEARCH_LIMIT,
                     scan: Optional[bool] = None) -> Tuple[str, List[Dict[str, Any]]]:
    """Return (the store's path, the hits of ``query`` among the blocks ``contract`` lists as paged)."""
    _search_checked(query, limit)
    _refuse_link(contract, "contract")
    if not os.path.exists(contract):
        raise PagerError(f"{contract}: no such contract")
    state = contract_state(contract)
    store_path = _resolve_store(contract, store, state)
    _check_paths(None, contract, store_path, None)
    paged = {block for block, action in state.directives.items() if action == "page"}
    opened = PageStore.open(store_path, create=False, stub_words=_recorded_stub_words(state)) if paged else None
    if opened is None:
        return store_path, []
    try:
        return store_path, opened.search(query, limit, paged, scan)
    finally:
        opened.close()


# ===== Report =====
#
# ``pager.py report`` draws what the contract says (and the page store and, if given, the history
# hold) as one self-contained HTML file: a timeline with a cell per block coloured by its current
# directive, the passes with their settings, pressure and moves, and the page index with a filter.
# The functions here are pure: the command line reads the files and writes the page.

REPORT_HEAD_LINES = 8        # lines of a block's text its details show
REPORT_HEAD_CHARS = 360      # ...and at most this many characters of them
REPORT_TOPICS = 5            # names a page-index row lists as its topics (the rarest among the pages)
REPORT_MOVES_SHOWN = 40      # moved blocks a pass's row names per kind of move; the rest are counted
REPORT_SUMMARY_PAGES = 20    # page-index lines the plain-text summary prints; the rest are counted
REPORT_WIDTH_STEPS = 10      # a timeline cell's width class: 0 (one token) up to this, by powers of two
REPORT_INTENT_CHARS = 160    # characters of a pass's recorded intent the passes table shows
_RANGE_PAGE_RE = re.compile(r"r-[0-9a-f]{12}\Z")  # a range page's id (one page standing for a run of blocks)
# The names of a part's kind a reader knows it by, and the kinds of block the engine marks.
_REPORT_KIND_LABEL = {"call": "tool call", "result": "tool result", "thinking": "thinking",
                      "reasoning": "reasoning", "media": "media", "other": "other part",
                      "human": "human request", "task": "task statement", HARNESS: "harness text",
                      "summary": "compaction summary", "conclusion": "conclusion", OPAQUE: "opaque part",
                      INSTRUCTIONS: "instructions", COMPACTION: "compaction"}
# Settings a passes-table row shows, in order, with their column heading.
_REPORT_SETTINGS = (("pager-alpha", "alpha"), ("pager-beta", "beta"), ("pager-retain-cut", "retain cut"),
                    ("pager-evict-cut", "evict cut"), ("pager-similarity", "similarity"),
                    ("pager-keep-recent", "keep recent"), ("pager-stub-words", "stub words"),
                    ("pager-format", "format"), ("pager-intent-source", "intent from"))


class _ReportPass(NamedTuple):
    """One recorded event of a contract: a pass (``last-pager-pass``) or a recall (``last-recall``)."""

    number: int                   # 1-based, in contract order
    event: str                    # "pass" or "recall"
    time: str                     # the timestamp the event recorded
    values: Dict[str, object]     # every named value as the contract reads once the event is recorded
    written: Tuple[str, ...]      # the names of the values this event wrote (the rest stand from before)
    new: Dict[str, int]           # blocks first listed by this event, per directive
    moved: Tuple[Tuple[str, str, str], ...]  # (block, from directive, to directive), in contract order
    ranges: Tuple[int, int] = (0, 0)  # range pages this event (made, ended): pages, not blocks, so never in new/moved

    def to_dict(self) -> Dict[str, object]:
        return {"number": self.number, "event": self.event, "time": self.time, "values": dict(self.values),
                "written": list(self.written), "new": dict(self.new), "moved": [list(m) for m in self.moved],
                "ranges": {"made": self.ranges[0], "ended": self.ranges[1]}}


class _ReportBlock(NamedTuple):
    """One block as the report shows it: its current directive and what is known of it."""

    block: str
    directive: str                # retain | page | evict, as the contract reads now
    reason: str                   # the reason its last directive was given
    turn: Optional[int]           # None: neither the store nor the history holds the block
    role: str                     # "" when unknown
    kind: str                     # a reader's name for it (human request, tool call, ...); "" when unknown
    tokens: Optional[int]
    head: str                     # its first lines ("" when unknown)
    recall: str                   # the command that recalls it ("" unless paged)
    group: Optional[str]          # the range page it belongs to, if any (a range page is never a _ReportBlock)

    def to_row(self) -> list:
        return [self.block, self.directive, self.reason, self.turn, self.role, self.kind, self.tokens,
                self.head, self.recall, self.group]


class _SessionReport(NamedTuple):
    """What ``pager.py report`` shows: the blocks in order, the passes, the pages with their topics."""

    contract: str
    store: Optional[str]          # the --store path the recall commands name (None: the contract finds it)
    blocks: Tuple[_ReportBlock, ...]  # the conversation's blocks: range pages are not among them
    passes: Tuple[_ReportPass, ...]
    pages: Tuple[Tuple[StoredPage, Tuple[str, ...]], ...]  # (page, topics), in contract order
    missing_pages: int            # blocks listed as paged whose text the store does not hold
    unlisted: int                 # blocks of the given history the contract has no directive for
    stored: Dict[str, int]        # a pass's time -> the pages the store holds from it (their paged_at)
    ranges: Tuple[Tuple[str, str, str, int], ...] = ()  # paged range pages: (id, reason, recall, members known)

    def to_dict(self) -> Dict[str, object]:
        """Return the summary as JSON data: the directives' counts, every event, every page with its topics."""
        counts = Counter(b.directive for b in self.blocks)
        return {"contract": self.contract, "blocks": len(self.blocks), **{a: counts[a] for a in ACTIONS},
                "ranges": [{"id": rid, "reason": why, "recall": recall, "members": n}
                           for rid, why, recall, n in self.ranges],
                "events": [p.to_dict() for p in self.passes], "missing_pages": self.missing_pages,
                "unlisted": self.unlisted, "stored": dict(sorted(self.stored.items())),
                "pages": [{"block": page.block, "turn": page.turn, "role": page.role, "tokens": page.tokens,
                           "topics": list(topics), "summary": page.summary,
                           "recall": _recall_hint(page.block, self.contract, self.store)}
                          for page, topics in self.pages]}


def _contract_events(text: str) -> Tuple[List[_ReportPass], List[str], Dict[str, str]]:
    """Return the contract's passes and recalls, every block in the order first listed, and each block's last reason.

    ``text`` must already read as a contract (read_contract_state), so a line is one of the
    pager's statements exactly when its unquoted segments are (_SEGMENTS) or it remembers one
    of the pager's numbers; every other line is another tool's, a comment or blank. A range
    page (_RANGE_PAGE_RE) is no block: an event counts it as made or ended, never as new or moved.
    """
    events: List[_ReportPass] = []
    order: Dict[str, None] = {}
    reasons: Dict[str, str] = {}
    values: Dict[str, object] = {}
    written: List[str] = []
    new: Counter = Counter()
    moved: List[Tuple[str, str, str]] = []
    taken: Dict[str, str] = {}  # block -> the directive a remove of this event took it from
    made = 0                    # range pages this event listed as paged
    number_form = "remember a number called "
    for line in text.splitlines():
        parts = line.rstrip().split('"')
        form = _SEGMENTS.get(tuple(parts[0::2]))
        if form == "add":
            block, action = parts[1], ACTION_OF_LIST[parts[2].split(" ")[2]]
            reasons[block] = parts[3]
            order.setdefault(block, None)
            if _RANGE_PAGE_RE.match(block):
                if action == "page":  # made (or made again); a range recalled whole stays in taken: ended
                    taken.pop(block, None)
                    made += 1
                else:
                    taken.setdefault(block, "page")
                continue
            if block in taken:
                moved.append((block, taken.pop(block), action))
            else:
                new[action] += 1
            order.setdefault(block, None)
            continue
        if form == "remove":
            taken[parts[1]] = ACTION_OF_LIST[parts[2].split(" ")[2]]
            continue
        if form == "text":
            name, value = parts[0].split(" ")[4], parts[1]
        elif form is None and line.startswith(number_form) and line.split(" ")[4] in NUMBER_VALUES:
            words = line.rstrip().split(" ")
            name, value = words[4], _parse_number(words[6])
        else:
            continue
        values[name] = value
        written.append(name)
        if name in (PASS_MARKER, "last-recall"):
            ended = sum(1 for block in taken if _RANGE_PAGE_RE.match(block))
            moved += [(block, action, "gone") for block, action in taken.items() if not _RANGE_PAGE_RE.match(block)]
            events.append(_ReportPass(len(events) + 1, "pass" if name == PASS_MARKER else "recall", str(value),
                                      dict(values), tuple(dict.fromkeys(written)), {a: new[a] for a in ACTIONS},
                                      tuple(moved), (made, ended)))
            written, new, moved, taken, made = [], Counter(), [], {}, 0
    return events, list(order), reasons


def _report_head(text: str) -> str:
    """Return the first lines of ``text`` a block's details show (REPORT_HEAD_LINES, REPORT_HEAD_CHARS)."""
    lines = text.strip("\n").split("\n", REPORT_HEAD_LINES)
    head = "\n".join(lines[:REPORT_HEAD_LINES])
    cut = len(lines) > REPORT_HEAD_LINES or len(head) > REPORT_HEAD_CHARS
    return (head[:REPORT_HEAD_CHARS].rstrip() + " ...") if cut else head


def _report_kind(block: Mapping[str, object], part_kind: Optional[str]) -> str:
    """Return a reader's name for a block's kind: the engine's mark, else its part's kind, else from its role."""
    kind = block.get("kind") or (part_kind if part_kind not in (None, "text") else None)
    if kind is None:
        role = block.get("role")
        if role == "tool":
            kind = "result"
        elif role in SYSTEM_ROLES:
            return "system prompt"
        elif isinstance(block.get("text"), str) and block["text"].startswith(REDACTED_THINKING):  # type: ignore[union-attr]
            kind = "thinking"
        else:
            return f"{role} text" if isinstance(role, str) else ""
    return _REPORT_KIND_LABEL.get(kind, str(kind))  # type: ignore[arg-type]


def _page_topics(pages: Sequence[StoredPage]) -> List[Tuple[str, ...]]:
    """Return each page's topics: its names (_names_of) held by the fewest pages, fewest first, then by name."""
    names = [sorted(_names_of(page.text)) for page in pages]
    held = Counter(chain.from_iterable(names))
    return [tuple(sorted(found, key=lambda n: (held[n], n))[:REPORT_TOPICS]) for found in names]


def _session_report(contract_text: str, state: ContractState, contract: str, pages: Mapping[str, StoredPage],
                   history: Optional[Sequence[Mapping[str, object]]] = None,
                   ranges: Optional[Mapping[str, Sequence[str]]] = None, store: Optional[str] = None,
                   part_kinds: Optional[Mapping[str, str]] = None) -> _SessionReport:
    """Return the _SessionReport of a contract's text and its state (read_contract_state), given its stored pages.

    ``pages`` maps a paged block's id to its StoredPage.
    ``history`` (the session's blocks, pager schema) tells what the contract and the store
    do not: retained and evicted blocks' size, role, kind and text. ``ranges`` maps a range
    page's id to its member blocks (PageStore.range_members); ``part_kinds`` a transcript
    block's id to its part's kind. A range page is not a block of the conversation: the
    report lists its members, each grouped under it, and the range in ``ranges``.
    ``contract`` and ``store`` are the paths the recall commands name. Pure: no I/O.

    Example:
        >>> text = ('add "b1" to retained-blocks because "R=0.700 sim=0.571 rec=1.000 dt=0"\\n'
        ...         'remember a value called last-pager-pass with "2026-05-17T03:08:12+00:00"\\n')
        >>> text = 'remember a list called retained-blocks\\n' + text
        >>> r = _session_report(text, read_contract_state(text), "C.limn", {})
        >>> r.blocks[0].directive, r.passes[0].new["retain"]
        ('retain', 1)
    """
    if not state.directives and not any(name in state.values for name in (PASS_MARKER, "last-recall")):
        raise PagerError("not a pager contract: it records no pass (no pager statement at all)")
    events, order, reasons = _contract_events(contract_text)
    known = {b["id"]: b for b in history or () if isinstance(b.get("id"), str)}
    part_kinds = part_kinds or {}
    group_of: Dict[str, str] = {}
    for range_id, members in sorted((ranges or {}).items()):
        for member in members:
            group_of.setdefault(member, range_id)
    blocks = []
    for block in order:
        action = state.directives.get(block)
        if action is None or _RANGE_PAGE_RE.match(block):
            continue  # removed and not added again (a recall's page-in re-adds), or a range page: not a block
        page, seen = pages.get(block), known.get(block)
        turn: Optional[int] = None
        role = kind = head = ""
        tokens: Optional[int] = None
        if seen is not None:
            text = seen.get("text") if isinstance(seen.get("text"), str) else ""
            turn = seen.get("turn") if _is_int(seen.get("turn")) else None  # type: ignore[assignment]
            role = str(seen.get("role") or "")
            tokens = seen.get("tokens") if _is_int(seen.get("tokens")) else estimate_tokens(text)  # type: ignore[assignment,arg-type]
            kind, head = _report_kind(seen, part_kinds.get(block)), _report_head(text)  # type: ignore[arg-type]
        if page is not None:
            turn, role, tokens = page.turn, page.role, page.tokens
            kind = kind or _report_kind({"role": page.role, "kind": page.kind, "text": page.text},
                                        part_kinds.get(block))
            head = _report_head(page.text)
        recall = _recall_hint(block, contract, store) if action == "page" else ""
        group = group_of.get(block)
        blocks.append(_ReportBlock(block, action, reasons.get(block, ""), turn, role, kind, tokens, head, recall,
                                  group))
    listed = [pages[b] for b in state.directives if state.directives[b] == "page" and b in pages]
    missing = sum(1 for b, a in state.directives.items() if a == "page" and b not in pages)
    unlisted = sum(1 for b in known if b not in state.directives)
    stored = Counter(page.paged_at for page in listed)
    paged_ranges = tuple((rid, reasons.get(rid, ""), _recall_hint(rid, contract, store),
                          len((ranges or {}).get(rid, ())))
                         for rid, action in state.directives.items() if action == "page" and _RANGE_PAGE_RE.match(rid))
    return _SessionReport(contract, store, tuple(blocks), tuple(events), tuple(zip(listed, _page_topics(listed))),
                          missing, unlisted, dict(stored), paged_ranges)


_HTML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"})
# What embedded JSON must not hold as itself: "</script>" and "<!--" end or bend a script element,
# and U+2028/U+2029 end a line in older JavaScript. Each is written as its JSON escape instead.
_SCRIPT_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                                 "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _h(value: object) -> str:
    """Return ``value`` as HTML text: the one escaper every text of the report goes through.

    Example:
        >>> _h('<img src=x onerror="alert(1)">')
        '&lt;img src=x onerror=&quot;alert(1)&quot;&gt;'
    """
    return str(value).translate(_HTML_ESCAPES)


def _script_json(value: object) -> str:
    """Return ``value`` as JSON that can stand inside a ``<script>`` element whatever its strings hold.

    Example:
        >>> _script_json(["</script><!--\\u2028"])
        '["\\\\u003c/script\\\\u003e\\\\u003c!--\\\\u2028"]'
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_SCRIPT_ESCAPES)


def _width_class(tokens: Optional[int]) -> int:
    """Return a timeline cell's width step: log2 of its tokens, rounded down, 0 to REPORT_WIDTH_STEPS."""
    if not tokens or tokens < 2:
        return 0
    return min(REPORT_WIDTH_STEPS, tokens.bit_length() - 1)


def _kind_class(kind: str) -> str:
    """Return the CSS class of a block's kind label (``human request`` -> ``k-human-request``)."""
    return "k-" + re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-") if kind else "k-unknown"


def _pressure(value: object) -> str:
    """Return a recorded pressure with two decimals (``?`` if the contract holds none)."""
    return f"{value:.2f}" if isinstance(value, (int, float)) else "?"


def _number(value: object) -> str:
    if isinstance(value, float):
        return _format_number(value)
    return f"{value:,}" if _is_int(value) else str(value)


_REPORT_CSS = """
:root{--retain:#2f855a;--page:#d69e2e;--evict:#a0aec0;--ink:#1a202c;--mute:#5a6473;--line:#e2e8f0;
--bg:#f7f8fa;--panel:#fff;--accent:#2b6cb0}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);background:var(--bg)}
header{padding:18px 28px 10px;background:#1f2933;color:#f5f7fa}
header h1{margin:0 0 4px;font-size:20px;font-weight:600}
header .sub{color:#cbd2d9;font-size:13px;word-break:break-all}
main{padding:14px 28px 40px;max-width:1400px}
section{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:14px 0}
h2{font-size:16px;margin:0 0 10px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:130px;background:#fbfcfd}
.card b{display:block;font-size:20px}
.card span{color:var(--mute);font-size:12px}
.legend{display:flex;flex-wrap:wrap;gap:14px;margin:0 0 10px;color:var(--mute);font-size:12px}
.legend i{display:inline-block;width:14px;height:14px;border-radius:2px;vertical-align:-2px;margin-right:4px}
.legend i.u{height:5px;vertical-align:2px;border-bottom:5px solid transparent;border-radius:0}
.wrap{display:flex;gap:16px;align-items:flex-start}
#timeline{flex:1;display:flex;flex-wrap:wrap;gap:2px;align-content:flex-start;max-height:62vh;overflow:auto;
padding:4px;border:1px solid var(--line);border-radius:6px;background:#fdfdfe}
#timeline .b{display:block;height:22px;border-radius:2px;cursor:pointer;border-bottom:4px solid transparent}
#timeline .b:hover,#timeline .b.sel{outline:2px solid var(--ink);outline-offset:1px}
.d-retain{background:var(--retain)}.d-page{background:var(--page)}.d-evict{background:var(--evict)}
.k-human-request,.k-task-statement{border-bottom-color:#6b46c1!important}
.k-tool-call{border-bottom-color:#2c5282!important}.k-tool-result{border-bottom-color:#4a5568!important}
.k-thinking,.k-reasoning{border-bottom-color:#b83280!important}
.k-harness-text,.k-instructions,.k-system-prompt{border-bottom-color:#c05621!important}
.k-compaction-summary,.k-conclusion{border-bottom-color:#00838f!important}
.range{display:flex;flex-wrap:wrap;gap:1px;padding:1px;border:1px dashed var(--ink);border-radius:3px}
.legend i.range-key{border:1px dashed var(--ink)}
.w0{width:6px}.w1{width:7px}.w2{width:8px}.w3{width:9px}.w4{width:11px}.w5{width:13px}.w6{width:16px}
.w7{width:20px}.w8{width:25px}.w9{width:31px}.w10{width:38px}
#details{width:400px;flex:none;position:sticky;top:10px;border:1px solid var(--line);border-radius:6px;
padding:10px 12px;background:#fbfcfd;min-height:120px}
#details .hint{color:var(--mute)}
#details h3{margin:0 0 6px;font-size:14px;word-break:break-all}
#details dl{display:grid;grid-template-columns:auto 1fr;gap:2px 10px;margin:0 0 8px;font-size:13px}
#details dt{color:var(--mute)}#details dd{margin:0;word-break:break-word}
pre,code{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
#details pre{white-space:pre-wrap;word-break:break-word;background:#f1f3f6;padding:8px;border-radius:4px;
max-height:240px;overflow:auto;margin:6px 0}
.tag{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-size:12px}
.tag.retain{background:var(--retain)}.tag.page{background:var(--page)}.tag.evict{background:var(--evict)}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
td{overflow-wrap:anywhere}td.t,td.n,td.new{white-space:nowrap;overflow-wrap:normal}
#pages,#passtable{table-layout:fixed}
#pages th:nth-child(1){width:25%}#pages th:nth-child(2){width:5%}#pages th:nth-child(3){width:7%}
#pages th:nth-child(4){width:6%}#pages th:nth-child(5){width:19%}
#passtable th:nth-child(1){width:3%}#passtable th:nth-child(2){width:5%}#passtable th:nth-child(3){width:15%}
#passtable th:nth-child(5){width:6%}#passtable th:nth-child(6){width:10%}#passtable th:nth-child(7){width:8%}
#passtable th:nth-child(8){width:8%}#passtable th:nth-child(9){width:13%}#passtable th:nth-child(10){width:6%}
th{color:var(--mute);font-weight:600;background:#fbfcfd;position:sticky;top:0}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.carried{color:#a0aec0}.settings span{margin-right:10px;display:inline-block}.settings .intent span{display:inline}
.intent{margin-top:3px}
td.moved code{display:block;font-size:11px;word-break:break-all;max-height:160px;overflow:auto;margin-top:3px}
.scroll{max-height:70vh;overflow:auto}
#pages tbody tr{cursor:pointer}#pages tbody tr:hover{background:#f1f5fb}
#filter{width:100%;max-width:420px;padding:6px 10px;border:1px solid #cbd2d9;border-radius:5px;font:inherit;margin:0 0 8px}
.note{color:var(--mute);font-size:12px;margin:6px 0 0}
details summary{cursor:pointer;color:var(--accent)}
@media print{#details,#filter{display:none}#timeline,.scroll{max-height:none;overflow:visible}
header{background:none;color:#000}header .sub{color:#333}section{break-inside:avoid}}
"""

# Vanilla JS: one delegated listener per list (never one per block), details built with textContent.
_REPORT_JS = """
(function(){
var data=JSON.parse(document.getElementById('report-data').textContent);
var B=data.blocks,details=document.getElementById('details'),pinned=null,current=null;
function el(tag,text,cls){var e=document.createElement(tag);if(text!==undefined)e.textContent=text;if(cls)e.className=cls;return e;}
function show(i){
 var b=B[i];if(!b||current===i)return;current=i;
 details.textContent='';details.appendChild(el('h3',b[0]));
 var dl=el('dl');
 function row(k,v){if(v===null||v===undefined||v==='')return;dl.appendChild(el('dt',k));dl.appendChild(el('dd',String(v)));}
 var t=el('span',b[1],'tag '+b[1]);dl.appendChild(el('dt','directive'));var dd=el('dd');dd.appendChild(t);dl.appendChild(dd);
 row('turn',b[3]);row('role',b[4]);row('kind',b[5]);row('tokens',b[6]===null?'unknown':b[6]);
 var m=/R=([0-9.]+) sim=([0-9.]+)(?: \\(nb; own=([0-9.]+)\\))? rec=([0-9.]+) dt=([0-9]+)/.exec(b[2]||'');
 if(m){row('score R',m[1]+(data.alpha!==null?' = '+data.alpha+' \u00d7 sim + '+data.beta+' \u00d7 recency':''));row('sim',m[2]+(m[3]?' (own '+m[3]+', the rest from neighbours)':''));row('recency',m[4]+' (dt '+m[5]+')');}
 var why=(b[2]||'').replace(/(^|; )?R=.*$/,'');row('reason',why||'score');row('recorded',b[2]);
 var r=b[9]&&data.ranges?data.ranges[b[9]]:null;row('range',b[9]?b[9]+(r&&r[0]?' ('+r[0]+')':''):'');
 details.appendChild(dl);
 if(b[8]){details.appendChild(el('div','recall:'));details.appendChild(el('pre',b[8],'recall'));}
 if(r&&r[1]){details.appendChild(el('div','recall the whole range:'));details.appendChild(el('pre',r[1],'recall'));}
 if(b[7]){details.appendChild(el('div','first lines:'));details.appendChild(el('pre',b[7]));}
 else details.appendChild(el('p','(text not in the store or the history)','hint'));
}
function pick(e){var t=e.target.closest?e.target.closest('[data-i]'):null;return t?+t.getAttribute('data-i'):null;}
var tl=document.getElementById('timeline');
tl.addEventListener('mouseover',function(e){if(pinned===null){var i=pick(e);if(i!==null)show(i);}});
tl.addEventListener('click',function(e){var i=pick(e);if(i===null)return;
 var old=tl.querySelector('.sel');if(old)old.classList.remove('sel');
 if(pinned===i){pinned=null;return;}pinned=i;current=null;show(i);e.target.closest('[data-i]').classList.add('sel');});
var pt=document.getElementById('pages');
if(pt){pt.addEventListener('click',function(e){var i=pick(e);if(i===null)return;pinned=i;current=null;show(i);
 var c=tl.querySelector('[data-i="'+i+'"]');var old=tl.querySelector('.sel');if(old)old.classList.remove('sel');
 if(c){c.classList.add('sel');c.scrollIntoView({block:'nearest'});}});}
var f=document.getElementById('filter'),rows=null,texts=null,timer=null;
if(f&&pt){f.addEventListener('input',function(){clearTimeout(timer);timer=setTimeout(function(){
 if(rows===null){rows=pt.tBodies[0].rows;texts=[];for(var k=0;k<rows.length;k++)texts.push(rows[k].textContent.toLowerCase());}
 var q=f.value.toLowerCase().trim(),n=0;
 for(var k=0;k<rows.length;k++){var hit=!q||texts[k].indexOf(q)>=0;rows[k].hidden=!hit;if(hit)n++;}
 document.getElementById('shown').textContent=String(n);},120);});}
document.documentElement.setAttribute('data-ready','1');
})();
"""


def _render_report(report: _SessionReport) -> str:
    """Return the report as one self-contained HTML page (inline CSS and JS, no network). Pure.

    Every text goes through _h; the block data the script reads goes through _script_json.
    """
    blocks = report.blocks
    counts = Counter(b.directive for b in blocks)
    tokens = Counter()
    for b in blocks:
        tokens[b.directive] += b.tokens or 0
    out: List[str] = []
    add = out.append
    add('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>Session report: {_h(report.contract)}</title><style>{_REPORT_CSS}</style></head><body>\n")
    last = report.passes[-1] if report.passes else None
    add(f'<header><h1>Session report</h1><div class="sub">contract {_h(report.contract)}'
        f"{' &middot; last ' + _h(last.event) + ' ' + _h(last.time) if last else ''}"
        f" &middot; prosecode context pager {_h(__version__)}</div></header>\n<main>\n")
    # Cards
    add('<section id="overview"><h2>Overview</h2><div class="cards">')
    cards = [(f"{len(blocks):,}", "blocks"), *[(f"{counts[a]:,}", f"{a} ({tokens[a]:,} tokens)") for a in ACTIONS],
             (f"{sum(1 for p in report.passes if p.event == 'pass'):,}", "passes"),
             (f"{sum(1 for p in report.passes if p.event == 'recall'):,}", "recalls"), (f"{len(report.pages):,}", "pages stored")]
    if report.ranges:
        cards.append((f"{len(report.ranges):,}", "range pages (framed)"))
    if last is not None and "pressure-after" in last.values:
        cards.append((f"{_pressure(last.values.get('pressure-before'))} &rarr; {_pressure(last.values.get('pressure-after'))}",
                      f"pressure of {_h(_number(last.values.get('token-budget')))} tokens"))
    for big, small in cards:
        add(f"<div class=\"card\"><b>{big if '&rarr;' in big else _h(big)}</b><span>{_h(small)}</span></div>")
    add("</div>")
    notes = []
    if report.missing_pages:
        notes.append(f"{report.missing_pages:,} paged blocks have no text in the store.")
    if report.unlisted:
        notes.append(f"{report.unlisted:,} blocks of the history have no directive in the contract yet (not shown).")
    if not any(b.turn is not None for b in blocks if b.directive != "page"):
        notes.append("Retained and evicted blocks show only their id and reason: give --history for their size and text.")
    for note in notes:
        add(f'<p class="note">{_h(note)}</p>')
    add("</section>\n")
    # Timeline
    add('<section id="session"><h2>Timeline</h2><div class="legend">'
        '<span><i class="d-retain"></i>retain (verbatim)</span><span><i class="d-page"></i>page (stub; recallable)</span>'
        '<span><i class="d-evict"></i>evict (gone)</span><span>width: tokens (log scale)</span>'
        '<span>underline:</span><span><i class="u k-human-request"></i>human request</span>'
        '<span><i class="u k-tool-call"></i>tool call</span><span><i class="u k-tool-result"></i>tool result</span>'
        '<span><i class="u k-thinking"></i>thinking</span><span><i class="u k-harness-text"></i>harness, system</span>'
        '<span><i class="u k-compaction-summary"></i>summary, conclusion</span>'
        '<span><i class="range-key"></i>range page: its blocks, framed</span>'
        '</div>'
        '<div class="wrap"><div id="timeline">')
    # A range page frames its members; members a retained block separates get one frame per run.
    group = None
    for i, b in enumerate(blocks):
        if b.group != group:
            if group is not None:
                add("</span>")
            if b.group is not None:
                add(f'<span class="range" data-range="{_h(b.group)}" title="range page {_h(b.group)}">')
            group = b.group
        add(f'<i class="b d-{b.directive} {_kind_class(b.kind)} w{_width_class(b.tokens)}" data-i="{i}"></i>')
    if group is not None:
        add("</span>")
    add('</div><aside id="details"><p class="hint">Hover over a block for its first lines, score and reason; '
        "click to pin it.</p></aside></div></section>\n")
    # Passes
    add('<section id="passes"><h2>Passes</h2><div class="scroll"><table id="passtable"><thead><tr><th>#</th><th>event</th>'
        '<th>time</th><th>settings</th><th class="n">budget</th><th class="n">tokens</th><th class="n">pressure</th>'
        '<th>new</th><th>moved</th><th class="n" title="pages the store holds from this pass">stored</th>'
        "</tr></thead><tbody>")
    for p in report.passes:
        v, written = p.values, set(p.written)

        def shown(name: str, text: str) -> str:
            css = "" if name in written else ' class="carried" title="unchanged since an earlier pass"'
            return f"<span{css}>{_h(text)}</span>"
        settings = [shown(name, f"{label} {_number(v[name])}") for name, label in _REPORT_SETTINGS if name in v]
        intent = v.get("pager-intent")
        if isinstance(intent, str):
            short = intent if len(intent) <= REPORT_INTENT_CHARS else intent[:REPORT_INTENT_CHARS] + " ..."
            settings.append(f'<div class="intent">{shown("pager-intent", f"intent: {short}")}</div>')
        budget = shown("token-budget", _number(v["token-budget"])) if "token-budget" in v else ""
        size = (shown("tokens-after", f"{_number(v.get('tokens-before', '?'))} \u2192 {_number(v['tokens-after'])}")
                if "tokens-after" in v else "")
        rho = (shown("pressure-after", f"{_pressure(v.get('pressure-before'))} \u2192 {_pressure(v['pressure-after'])}")
               if "pressure-after" in v else "")
        new = "<br>".join([_h(f"{a} {p.new[a]:,}") for a in ACTIONS if p.new.get(a)]
                          + [_h(f"range pages {what} {n:,}") for what, n in zip(("made", "ended"), p.ranges) if n])
        moves = Counter(f"{a} \u2192 {b}" for _, a, b in p.moved)
        moved = ", ".join(f"{k} {n:,}" for k, n in sorted(moves.items()))
        if p.moved:
            kinds: Dict[str, List[str]] = {}
            for block, a, b in p.moved:
                kinds.setdefault(f"{a} \u2192 {b}", []).append(block)
            named = []
            for kind, ids in sorted(kinds.items()):
                more = f" and {len(ids) - REPORT_MOVES_SHOWN:,} more" if len(ids) > REPORT_MOVES_SHOWN else ""
                named.append(f"<code>{_h(kind)}: {_h(', '.join(ids[:REPORT_MOVES_SHOWN]) + more)}</code>")
            moved = f"<details><summary>{_h(moved)}</summary>{''.join(named)}</details>"
        add(f'<tr><td class="n">{p.number}</td><td>{_h(p.event)}</td><td class="t">{_h(p.time)}</td>'
            f'<td class="settings">{" ".join(settings)}</td><td class="n">{budget}</td><td class="n">{size}</td>'
            f'<td class="n">{rho}</td><td class="new">{new or "&ndash;"}</td><td class="moved">{moved or "&ndash;"}</td>'
            f'<td class="n">{report.stored.get(p.time, 0) if p.event == "pass" else "&ndash;"}</td></tr>')
    add("</tbody></table></div>"
        '<p class="note">Grey values were recorded by an earlier pass and still stand: a pass writes only what changed.</p>'
        "</section>\n")
    # Pages
    index_of = {b.block: i for i, b in enumerate(blocks)}
    hint = _recall_hint("ID", report.contract, report.store) if report.pages else ""
    add(f'<section id="index"><h2>Pages (<span id="shown">{len(report.pages):,}</span> of {len(report.pages):,})</h2>')
    if report.pages:
        add(f'<input id="filter" type="search" placeholder="Filter pages: id, topic, words..." aria-label="Filter pages">'
            f'<p class="note">Recall one with: <code>{_h(hint)}</code> (click a row for its details)</p>'
            '<div class="scroll"><table id="pages"><thead><tr><th>page</th><th class="n">turn</th><th>role</th>'
            '<th class="n">tokens</th><th>topics</th><th>summary</th></tr></thead><tbody>')
        for page, topics in report.pages:
            add(f'<tr data-i="{index_of.get(page.block, -1)}"><td><code>{_h(page.block)}</code></td>'
                f'<td class="n">{page.turn}</td><td>{_h(page.role)}</td><td class="n">{page.tokens:,}</td>'
                f"<td>{_h(', '.join(topics))}</td><td>{_h(page.summary)}</td></tr>")
        add("</tbody></table></div>")
    else:
        add('<p class="note">No page is stored.</p>')
    add("</section>\n</main>\n")
    add('<script type="application/json" id="report-data">')
    weights = last.values if last is not None else {}
    add(_script_json({"alpha": weights.get("pager-alpha"), "beta": weights.get("pager-beta"),
                      "blocks": [b.to_row() for b in blocks],
                      "ranges": {rid: [why, recall] for rid, why, recall, _ in report.ranges}}))
    add(f"</script>\n<script>{_REPORT_JS}</script>\n</body></html>\n")
    return "".join(out)


def _report_summary(report: _SessionReport) -> str:
    """Return the report as plain text for an agent: the totals, one line per pass, the first pages. Pure."""
    blocks = report.blocks
    counts = Counter(b.directive for b in blocks)
    passes = [p for p in report.passes if p.event == "pass"]
    lines = [f"report: {report.contract}: {len(blocks):,} blocks (retain {counts['retain']:,}, page "
             f"{counts['page']:,}, evict {counts['evict']:,}); "
             + (f"{len(report.ranges):,} range page{'' if len(report.ranges) == 1 else 's'}; " if report.ranges else "")
             + f"{len(passes):,} pass{'' if len(passes) == 1 else 'es'}, "
             f"{len(report.passes) - len(passes):,} recall{'' if len(report.passes) - len(passes) == 1 else 's'}; "
             f"{len(report.pages):,} page{'' if len(report.pages) == 1 else 's'} stored"]
    for p in report.passes:
        v = p.values
        parts = [f"{p.event} {p.number} at {p.time}"]
        if p.event == "pass":
            parts.append(f"alpha {_number(v.get('pager-alpha', '?'))} beta {_number(v.get('pager-beta', '?'))}")
            if "token-budget" in v:
                parts.append(f"budget {_number(v['token-budget'])}, pressure {_pressure(v.get('pressure-before'))}"
                             f" -> {_pressure(v.get('pressure-after'))} ({_number(v.get('tokens-before', '?'))}"
                             f" -> {_number(v.get('tokens-after', '?'))} tokens)")
        new = ", ".join(f"{a} {p.new[a]:,}" for a in ACTIONS if p.new.get(a))
        parts.append(f"new: {new or 'none'}")
        moves = Counter(f"{a} -> {b}" for _, a, b in p.moved)
        parts.append("moved: " + (", ".join(f"{k} {n:,}" for k, n in sorted(moves.items())) or "none"))
        if any(p.ranges):
            parts.append(f"range pages: made {p.ranges[0]:,}, ended {p.ranges[1]:,}")
        if p.event == "pass":
            parts.append(f"pages stored: {report.stored.get(p.time, 0):,}")
        lines.append("  " + "; ".join(parts))
    if report.missing_pages:
        lines.append(f"  {report.missing_pages:,} paged blocks have no text in the store")
    if report.pages:
        lines.append(f"pages (recall one with: {_recall_hint('ID', report.contract, report.store)}):")
        shown = [page._replace(summary=f"[{', '.join(topics)}] {page.summary}" if topics else page.summary)
                 for page, topics in report.pages[:REPORT_SUMMARY_PAGES]]
        lines += ["  " + line for line in index_lines(shown)]
        if len(report.pages) > REPORT_SUMMARY_PAGES:
            lines.append(f"  ... and {len(report.pages) - REPORT_SUMMARY_PAGES:,} more (pager.py index lists them all)")
    return "\n".join(lines) + "\n"


# ===== Library: compact, Pager, the recall tool =====
#
# The engine for code that holds a conversation as Python objects: a framework's message list
# before a model call.  ``compact(messages, budget=...)`` takes a Chat Completions message list
# (or request body), an Anthropic ``{"system", "messages"}`` dict or bare list, a Responses
# input list (or body) or the pager's own ``{"blocks": [...]}`` dict, and returns the same shape
# with the pass applied, plus a report.  The decisions are the CLI's for the same input and flags.
#
# A ``Pager`` keeps what one agent needs between calls: the pages (in memory unless a contract or
# a store is given, so nothing is written by default) and a cache of each block's scoring
# features, keyed by every field of the block and by the pass settings that shape them, so a
# conversation that grew by a few messages costs the new blocks' scoring plus a walk over the
# rest.  Stubs name the recall tool (``RECALL_TOOL_NAME``); ``Pager.run_tool_call`` executes such
# a call and answers in the API's own tool-result shape, an error result for a bad id.

RECALL_TOOL_NAME = "recall_pages"
RECALL_TOOL_DESCRIPTION = ("Return the exact original text of blocks the context pager paged out. A paged "
                           "block appears as a line '[paged ID | turn T | role | N tokens] summary'; pass "
                           "its ID. A range (ID r-...) gives all its blocks: pass max_tokens to get them in "
                           "parts, then 'from' as the last line says.")
_SEARCH_TOOL_NAME = "search_pages"
_SEARCH_TOOL_DESCRIPTION = ("Find blocks the context pager paged out by words or names (files, functions, "
                           "commands, errors): the best pages first, each with its ID and the line that "
                           "matches. Then recall a page's exact text by its ID.")
# The tool-use shapes the recall tool speaks: the formats that are an API's own (their tool_api).
TOOL_APIS = tuple(name for name, spec in _FORMATS.items() if spec.tool_api == name)
# The formats compact takes as objects: a document written back in its own shape.
LIBRARY_FORMATS = tuple(name for name, spec in _FORMATS.items() if spec.emits_as == name and not spec.jsonl)
def _read_value(fmt: str, value: Any, held: bool = False, memo: Optional[_FinishMemo] = None) -> Conversation:
    """Return the Conversation of a history already parsed from JSON, in format ``fmt``.

    ``held``: the server holds the earlier turns (Responses only; see _Responses.pair); ``memo``:
    a running Pager's last read (see _finish).
    """
    try:
        return _FORMATS[fmt].read(value, held, memo)
    except PagerError as exc:
        raise PagerError(f"{fmt} messages: {exc}") from None


def _detect_value(value: Any) -> Optional[str]:
    """Return the format of a history already parsed from JSON (the formats' claims, in _PROBE_ORDER), or None.

    A bare list that a file would hold as a saved run (a mini-swe-agent run's messages: format
    swe-agent) is, handed over live, the agent's messages themselves: read in the format such a
    run is written back in.
    """
    for spec in map(_FORMATS.__getitem__, _PROBE_ORDER):
        if spec.claims(value):
            if spec.name in LIBRARY_FORMATS:
                return spec.name
            return spec.emits_as if isinstance(value, list) and spec.emits_as in LIBRARY_FORMATS else None
    return None
_RECALL_SCHEMA = {"type": "object",
                  "properties": {"ids": {"type": "array", "items": {"type": "string"},
                                         "description": "ids of paged blocks, as their stubs show them"},
                                 "max_tokens": {"type": "integer", "minimum": 1,
                                                "description": "give a long range back in parts of at most this "
                                                               "many tokens; the last line says where to go on"},
                                 "from": {"type": "string",
                                          "description": "go on from this block (what a part's last line names)"}},
                  "required": ["ids"], "additionalProperties": False}


_SEARCH_TOOL_SCHEMA = {"type": "object",
                       "properties": {"query": {"type": "string",
                                                "description": "words or names to look for in the paged blocks"},
                                      "limit": {"type": "integer", "minimum": 1,
                                                "description": f"most pages to return (default {SEARCH_LIMIT})"}},
                       "required": ["query"], "additionalProperties": False}


def _tool_recall_hint(block: str) -> str:
    """Return the recall hint a library stub carries: the recall tool with this block's id.

    Example:
        >>> _tool_recall_hint("m-3f2a9c1b7d4e")
        'the recall_pages tool with ids ["m-3f2a9c1b7d4e"]'
    """
    return f"the {RECALL_TOOL_NAME} tool with ids {json.dumps([block], ensure_ascii=False)}"


def _tool_definition(api: str, name: str, description: str, schema: Dict[str, Any]) -> Dict[str, Any]:
    """Return a tool's definition in ``api``'s shape, with a fresh copy of ``schema``."""
    if api in TOOL_APIS:
        return _FORMATS[api].tool_definition(name, description, json.loads(json.dumps(schema)))  # callers may edit theirs
    raise PagerError(f"api must be one of {', '.join(TOOL_APIS)} (got {_show(api)})")


def recall_tool(api: str = "openai") -> Dict[str, Any]:
    """Return the recall tool's definition for ``api``: openai (Chat Completions), responses or anthropic.

    Example:
        >>> recall_tool("anthropic")["input_schema"]["required"]
        ['ids']
    """
    return _tool_definition(api, RECALL_TOOL_NAME, RECALL_TOOL_DESCRIPTION, _RECALL_SCHEMA)


def _search_tool(api: str = "openai") -> Dict[str, Any]:
    """Return the search tool's definition for ``api`` (the recall tool's companion: find, then recall).

    Example:
        >>> _search_tool("responses")["name"], _search_tool("anthropic")["input_schema"]["required"]
        ('search_pages', ['query'])
    """
    return _tool_definition(api, _SEARCH_TOOL_NAME, _SEARCH_TOOL_DESCRIPTION, _SEARCH_TOOL_SCHEMA)


def _search_text(hits: Sequence[Mapping[str, Any]], query: str) -> str:
    """Return search hits as text, one line each (id | turn | role | kind | the matching line).

    Example:
        >>> _search_text([{"id": "b4", "turn": 8, "role": "tool", "kind": "tool_result",
        ...                "line": "FAILED test_line_total", "score": 2.1}], "line_total")
        'b4 | turn 8 | tool | tool_result | FAILED test_line_total'
        >>> _search_text([], "zebra")
        'no paged block holds "zebra"'
    """
    if not hits:
        return f"no paged block holds {_show(query)}"
    return "\n".join(f"{h['id']} | turn {h['turn']} | {h['role']} | {h['kind'] or 'text'} | {h['line']}"
                     for h in hits)


def _tool_search(search: Callable[[str, int], List[Dict[str, Any]]], arguments: Any) -> Tuple[str, bool]:
    """Return (result text, failed) for a search call's arguments (a JSON text or an object)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return f"error: the arguments are not JSON (got {_show(arguments)})", True
    query = arguments.get("query") if isinstance(arguments, dict) else None
    limit = arguments.get("limit") if isinstance(arguments, dict) else None
    limit = SEARCH_LIMIT if limit is None else limit  # a strict call sends null for a field it leaves out
    if not isinstance(query, str) or not query.strip():
        return f"error: query must be a non-empty text (got {_show(query)})", True
    try:
        return _search_text(search(query, limit), query), False
    except PagerError as exc:
        return f"error: {exc}", True



class _CachedScorer(_Scorer):
    """A _Scorer that takes each block's features from a cache when the same block was scored before.

    The cache maps every field of a block (its items: id, turn, role, text, kind, tokens, unit,
    pinned, protected, ...) to what scoring it produced (tokens, matched terms, stub cost, names); its owner drops it
    whenever the pass settings that shape those features change.  What depends on the other
    blocks (rarity, neighbour credit, recency, budget) is computed afresh in ``finish``.  Stub
    blocks are always scored afresh: they are scored on their stored page.
    """

    def __init__(self, cache: Dict[tuple, tuple], counter: Optional[Callable[[str], int]],
                 *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cache, self.fresh, self.hits = cache, {}, 0
        self.counter = counter

    def add_all(self, first: int, batch: List[object]) -> None:
        """Record ``batch``: runs of blocks seen before a column at a time, the others one by one."""
        cache, fresh, hits = self.cache, self.fresh, []
        for index, raw in enumerate(batch, first):
            key = self._key(raw)
            try:
                entry = cache.get(key) if key is not None else None
            except TypeError:  # an unhashable field: the full check names it
                key = entry = None
            if entry is None:
                if hits:
                    self._replay(hits)
                    hits = []
                self.add(index, raw)
            else:
                fresh[key] = entry
                hits.append((index, raw, entry))
        if hits:
            self._replay(hits)

    @staticmethod
    def _key(raw: object) -> Optional[tuple]:
        """Return the cache key of a block: all its fields, names and values; None for one never cached."""
        if type(raw) is not dict or raw.get("stub", False) is not False or raw.get(INDEX_FLAG) is True:
            return None  # a stub is scored on its stored page; the page index is skipped
        return tuple(raw.items())

    def _keep_text(self, text: str, turn: int, role: str, matched: tuple, unit: Optional[str]) -> Optional[str]:
        return text  # every text: pages and stubs are made from the messages in memory

    def _stub_cost(self, block_id: str, turn: int, role: str, kind: Optional[str], tokens: int,
                   matched: Tuple[str, ...], text: str, newer: Optional[str] = None) -> int:
        if self.counter is None:
            return super()._stub_cost(block_id, turn, role, kind, tokens, matched, text, newer)
        summary = stub_summary(text, matched, self.params.stub_words)
        page = StoredPage(block_id, turn, role, kind, tokens, matched, "", "", summary, text)
        return self.counter(self._render_stub(page, newer, _giant_edge(tokens, self.params.budget)))

    def _stub_floor(self, position: int) -> int:
        # A token counter of the caller's own may count a stub at anything: no bound but 0.
        return 0 if self.counter is not None else super()._stub_floor(position)

    def _least_stub(self) -> int:
        # A caller's own counter or recall hint may price the shortest stub at anything.
        return 0

    def add(self, index: int, raw: object) -> None:
        """Score one block as _Scorer.add does, and remember its features under its key."""
        position = len(self._ids)
        super().add(index, raw)
        key = self._key(raw)
        if key is not None and len(self._ids) > position:
            cost = self._stub_cost_at(position) if self.stub_text is not None else 0
            try:
                names = self._names[position] if self.with_names else None
                self.fresh[key] = (self._tokens[position], self._matched[position], cost, names)
            except TypeError:  # a field the checks accept but a key cannot hold: not cached
                pass

    def _replay(self, hits: List[Tuple[int, Dict[str, Any], tuple]]) -> None:
        """Record blocks seen before with the same fields, a column at a time, as ``_Scorer.add`` did."""
        ids = [raw["id"] for _, raw, _ in hits]
        seen = self._seen
        if not seen.isdisjoint(ids) or len(set(ids)) != len(ids):
            for index, raw, _ in hits:  # the full check names the first repeated id
                self.add(index, raw)
            return
        seen.update(ids)
        self.hits += len(hits)
        position = len(self._ids)
        turns = [raw["turn"] for _, raw, _ in hits]
        roles = [raw["role"] for _, raw, _ in hits]
        tokens = [entry[0] for _, _, entry in hits]
        for offset, (_, raw, _) in enumerate(hits):
            if len(raw) > 4:  # optional fields: unit, pinned, protected, kind
                unit = raw.get("unit")
                if unit is not None:
                    self._units[position + offset] = unit
            self._protect(position + offset, roles[offset], raw.get("kind"), raw.get("pinned", False),
                          raw.get("protected"))
        if self.stub_text is not None:
            self._stub_tokens.extend([entry[2] for _, _, entry in hits])
        top = max(turns)
        if self.max_turn is None or top > self.max_turn:
            self.max_turn = top
        self.tokens_before += sum(t for t, (_, raw, _) in zip(tokens, hits) if raw.get("protected") != ARCHIVED)
        texts = [raw["text"] for _, raw, _ in hits]
        self._ids.extend(ids)
        self._turns.extend(turns)
        self._roles.extend(roles)
        self._kinds.extend([raw.get("kind") for _, raw, _ in hits])
        self._tokens.extend(tokens)
        self._matched.extend([entry[1] for _, _, entry in hits])
        self._lengths.extend(map(len, texts))
        self.texts.extend(texts)
        if self.with_names:  # an entry from a pass that read no names has none
            self._names.extend([entry[3] if entry[3] is not None else _names_of(text)
                                for (_, _, entry), text in zip(hits, texts)])
        note = self._note_text
        for offset, (_, raw, _) in enumerate(hits):  # in order: a later copy supersedes an earlier one
            note(position + offset, ids[offset], roles[offset], raw.get("unit"), texts[offset])


@dataclasses.dataclass
class CompactReport:
    """What one ``compact`` call did: counts, tokens, pressure and every block's decision."""

    format: str
    counts: Dict[str, int]             # blocks per directive: retain, page, evict
    tokens_before: int
    tokens_after: int                  # kept verbatim plus stubs
    budget: Optional[int]
    intent: List[str]
    intent_source: str
    decisions: Sequence[Decision]
    repairs: List[str]
    paged: List[str]                   # ids the recall tool can bring back now
    cached: int                        # blocks whose features came from the Pager's cache
    contract: Optional[str] = None
    store: Optional[str] = None
    pager: Any = dataclasses.field(default=None, repr=False, compare=False)  # the Pager that made it

    @property
    def pressure(self) -> Optional[Tuple[float, float]]:
        """Return (tokens_before, tokens_after) over the budget, or None without a budget."""
        if not self.budget:
            return None
        return self.tokens_before / self.budget, self.tokens_after / self.budget

    def to_dict(self) -> Dict[str, object]:
        """Return the report as JSON-ready data; decisions as the CLI's per-block records."""
        rho = self.pressure
        return {"format": self.format, "blocks": len(self.decisions), **self.counts,
                "tokens_before": self.tokens_before, "tokens_after": self.tokens_after, "budget": self.budget,
                "pressure_before": round(rho[0], 4) if rho else None,
                "pressure_after": round(rho[1], 4) if rho else None,
                "intent": list(self.intent), "intent_source": self.intent_source, "repairs": list(self.repairs),
                "paged": list(self.paged), "cached": self.cached, "contract": self.contract, "store": self.store,
                "decisions": [d.to_dict() for d in self.decisions]}


class Compacted(NamedTuple):
    """The result of ``compact``: the messages in the shape they came in, and the report."""

    messages: Any
    report: CompactReport

    def recall(self, ids: Any) -> Dict[str, str]:
        """Return block id -> exact original text of paged blocks (``Pager.recall``)."""
        return self.report.pager.recall(ids)  # type: ignore[union-attr]

    def run_tool_call(self, call: Any) -> Dict[str, Any]:
        """Execute a recall tool call against these pages (``Pager.run_tool_call``)."""
        return self.report.pager.run_tool_call(call)  # type: ignore[union-attr]


def _library_intent(intent: Any) -> Optional[Intent]:
    """Return the Intent of ``intent=``: free text (as --intent), a list of texts, or None."""
    if intent is None:
        return None
    if isinstance(intent, str):
        return Intent(intent_keywords([intent]), "intent")
    if isinstance(intent, (list, tuple)) and all(isinstance(x, str) for x in intent):
        return Intent(intent_keywords(list(intent)), "intent")
    raise PagerError(f"intent must be text or a list of texts (got {_show(intent)})")


_LANGCHAIN_MODULE = "langchain"  # LangChain's message classes live in modules under this name


def _is_langchain(messages: Any) -> bool:
    """Return True if ``messages`` is a LangChain message, or a list starting with one (LangChain not imported)."""
    first = messages[0] if isinstance(messages, (list, tuple)) and messages else messages
    return type(first).__module__.split(".")[0].startswith(_LANGCHAIN_MODULE)


def _detect_object_format(messages: Any) -> str:
    """Return the format of a conversation held as Python objects (see ``detect_format``).

    Example:
        >>> _detect_object_format([{"role": "user", "content": [{"type": "tool_result",
        ...                        "tool_use_id": "t1", "content": "ok"}]}])
        'anthropic'
    """
    kind = _detect_value(messages)
    if kind is None:
        if _is_langchain(messages):
            raise PagerError("messages are LangChain message objects: compact them with the LangChain adapter, "
                             "langchain_adapter.compact_messages(Pager(...), messages), or pager_middleware / "
                             "pre_model_hook in an agent (pip install \".[langchain]\")")
        raise PagerError(f"messages must be a message list or a request body of {', '.join(LIBRARY_FORMATS)} "
                         f"(got {_show(messages)})")
    return kind


def _tool_call_parts(call: Any) -> Tuple[str, Optional[str], Optional[str], Any]:
    """Return (api, call id, tool name, arguments) of a tool call in any of TOOL_APIS' shapes
    (the first API whose class takes it: takes_tool_call; Chat Completions, the first, when none)."""
    api = next((api for api in TOOL_APIS if _FORMATS[api].takes_tool_call(call)), TOOL_APIS[0])
    return (api,) + _FORMATS[api].tool_call(call)


def _tool_recall(recall: Callable[..., Tuple[Dict[str, str], Optional[RecallLeft]]], name: Any,
                 arguments: Any) -> Tuple[str, bool]:
    """Return (result text, failed) for a recall call's name and arguments (a JSON text or an object).

    ``recall(ids, max_tokens, start)`` maps ids to texts and says what a bound left (see
    _recall_bound), raising PagerError for an id it cannot give back. The arguments: ``ids``, and
    optionally ``max_tokens`` and ``from`` (a bounded recall going on), as ``pager.py recall`` takes them.
    """
    if name != RECALL_TOOL_NAME:
        return f"error: unknown tool {_show(name)} (this pager answers {RECALL_TOOL_NAME} and {_SEARCH_TOOL_NAME})", True
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return f"error: the arguments are not JSON (got {_show(arguments)})", True
    ids = arguments.get("ids") if isinstance(arguments, dict) else None
    if isinstance(ids, str):
        ids = [ids]
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        return f"error: ids must be a non-empty list of block ids (got {_show(ids)})", True
    max_tokens, start = arguments.get("max_tokens"), arguments.get("from")  # type: ignore[union-attr]
    if max_tokens is not None and (not _is_int(max_tokens) or max_tokens < 1):
        return f"error: max_tokens must be a positive integer (got {_show(max_tokens)})", True
    if start is not None and not isinstance(start, str):
        return f"error: from must be a block id (got {_show(start)})", True
    try:
        texts, left = recall(ids, max_tokens, start)
    except PagerError as exc:
        return f"error: {exc}", True
    if len(texts) == 1 and left is None:
        return next(iter(texts.values())), False
    text = "\n".join(f"==> {block} <==\n{text}" for block, text in texts.items())
    return (text + "\n" + _recall_stopped(max_tokens, left) if left is not None else text), False


class Pager:
    """A context pager for a running agent: ``compact`` before each model call, ``recall`` on demand.

    ``budget`` and the other Params fields (alpha, beta, retain_cut, evict_cut, similarity,
    stub_words, keep_recent, results_apart, trigger, target, work_steps) are the CLI's flags;
    ``work_steps`` defaults to 0 here (the CLI's 3 changes the intent at every step, which
    empties the per-block cache), and with a budget and ``target`` (default 0.8, as the CLI's;
    ``None``: re-fit every call) the last call's directives stand between compactions, as the
    contract's do for the CLI; the first call fills the whole budget.  Pages live in this object unless ``contract``
    (a ``.limn`` file the passes and recalls are appended to, with its page store beside it or at
    ``store``) or ``store`` alone (a SQLite page store) is given.  ``token_counter(text) -> int``
    replaces the token estimate of a block's text.  ``hint(block) -> str`` is what a stub says to recall it
    (default: the recall tool).  ``now`` fixes the pass timestamp (ISO-8601) for contracts.
    """

    def __init__(self, budget: Optional[int] = None, *, intent: Any = None, format: Optional[str] = None,
                 contract: Optional[str] = None, store: Optional[str] = None,
                 token_counter: Optional[Callable[[str], int]] = None,
                 hint: Optional[Callable[[str], str]] = None, now: Optional[str] = None, **params: Any) -> None:
        unknown = sorted(set(params) - {f.name for f in dataclasses.fields(Params)} - {"budget"})
        if unknown:
            raise PagerError(f"unknown parameter {unknown[0]!r} (expected budget or one of "
                             f"{', '.join(f.name for f in dataclasses.fields(Params) if f.name != 'budget')})")
        # The recent work changes the intent at every step, and the per-block cache is keyed by
        # the intent: the library reads the last user message alone unless work_steps is given.
        params.setdefault("work_steps", 0)
        self.params = Params(budget=budget, **params).validate()
        if format is not None and format not in LIBRARY_FORMATS:
            raise PagerError(f"format must be one of {', '.join(LIBRARY_FORMATS)} (got {_show(format)})")
        if token_counter is not None and not callable(token_counter):
            raise PagerError(f"token_counter must be a function of a text (got {_show(token_counter)})")
        self.intent, self.format, self.contract = _library_intent(intent), format, contract
        self.store = store if store is not None else (_default_store_path(contract) if contract else None)
        self._explicit_store = store
        self.token_counter, self.hint, self.now = token_counter, hint or _tool_recall_hint, now
        if now is not None:
            _normalize_now(now)  # a bad timestamp fails here, not at the first pass
        self._pages: Dict[str, StoredPage] = {}  # in memory: block -> page, for the blocks paged now
        self._stubs: Dict[str, str] = {}         # block -> its stub text, made once per page
        self._actions: Dict[str, str] = {}       # block -> directive of the last pass
        self._ranges: Dict[str, Tuple[Tuple[str, ...], str]] = {}  # range page -> (its blocks, its summary)
        self._cache: Dict[tuple, tuple] = {}
        self._cache_key: Optional[tuple] = None
        self._intent: Optional[Intent] = None  # the last call's intent: a call with no user message keeps it
        # The last call's messages as read: (format, held, their fingerprint, the Conversation).
        self._read: Optional[Tuple[str, bool, bytes, Conversation]] = None
        self._range_memory = _RangeMemory()  # the range pages the last call built (see _RangeMemory)

    # -- one pass --

    def compact(self, messages: Any, *, intent: Any = None, format: Optional[str] = None,
                server_state: bool = False) -> Compacted:
        """Return the messages compacted, in the shape and type they came in, with a report.

        ``intent`` (text or a list of texts) overrides the Pager's for this call; without
        either, the pager's own history's ``intent_ir``, else the last user message, is used,
        else (messages with no user message, as a server-held conversation's later calls send)
        the intent of this Pager's last call.  ``format`` overrides the Pager's (default:
        detected from the messages).  ``server_state``: the server holds the earlier turns (a
        Responses ``previous_response_id`` or ``conversation``, which a body given whole says
        itself): ``messages`` are only the new items, and an output whose call is not among them
        answers a stored call, so it is kept verbatim (pinned) instead of dropped as a repair.
        """
        if format is not None and format not in LIBRARY_FORMATS:
            raise PagerError(f"format must be one of {', '.join(LIBRARY_FORMATS)} (got {_show(format)})")
        fmt = format or self.format or _detect_object_format(messages)
        given = _library_intent(intent) if intent is not None else self.intent
        conv = self._conversation(fmt, messages, server_state)
        if fmt == "pager":
            blocks, header = messages["blocks"], {k: v for k, v in messages.items() if k != "blocks"}
        else:
            blocks, header = conv.blocks, {}
        if self.token_counter is not None:
            blocks = [self._counted(b, fmt != "pager") for b in blocks]
        store = self._open_store()
        try:
            plan, scorer = self._plan(blocks, header, given, store, conv if fmt != "pager" else None)
            items = _decision_items(len(plan.decisions), scorer.skipped) if scorer.skipped else None
            now = _normalize_now(self.now)
            if self.contract is not None:
                store = self._record(plan, fmt, conv, blocks, store, now)
            elif store is not None:
                self._store_pages(plan, store, now)
            directives = self._directives(plan, store, now)
        finally:
            if store is not None:
                store.close()
        if fmt == "pager":
            out = self._emit_pager(messages, blocks, plan, directives, items)
        else:
            out = emit(conv, directives)
            if isinstance(messages, list) and isinstance(out, dict):
                out = out["messages"]  # a bare list stays a list (Anthropic's emitter gives a body)
        self._actions = dict(zip(_column(plan.decisions, "block"), _column(plan.decisions, "action")))
        tokens_after = plan.tokens_after if plan.tokens_after is not None else self._tokens_after(plan, directives)
        report = CompactReport(fmt, plan.counts(), plan.tokens_before, tokens_after, self.params.budget,
                               list(plan.keywords), plan.intent_source, plan.decisions,
                               list(conv.repairs), [b for b, a in self._actions.items() if a == "page"]
                               + [r for r in self._ranges if r not in self._actions],
                               scorer.hits, self.contract, self.store, self)
        return Compacted(out, report)

    def _conversation(self, fmt: str, messages: Any, held: bool) -> Conversation:
        """Return the Conversation of ``messages``: the last call's when every field of every message
        is the same (an exact fingerprint, so a message changed in place is read afresh), else read:
        only the messages after the last call's, where they are the same and nothing before them
        can change (see _FinishMemo), else the whole list."""
        fingerprint = _fingerprint(messages)
        last = self._read
        if fingerprint is not None and last is not None and last[:3] == (fmt, held, fingerprint) and (
                last[3]._memo is None or last[3]._memo.intact()):  # (a pager-format read keeps no objects it emits)
            return last[3]
        memo = last[3]._memo if last is not None and last[:2] == (fmt, held) else None
        self._read = None  # a failed read leaves nothing behind
        try:
            conv = _read_value(fmt, messages, held, memo or _FinishMemo())
        except _NoResume:
            conv = _read_value(fmt, messages, held, _FinishMemo())
        if fingerprint is not None:
            self._read = (fmt, held, fingerprint, conv)
        return conv

    async def acompact(self, messages: Any, *, intent: Any = None, format: Optional[str] = None,
                       server_state: bool = False) -> Compacted:
        """``compact`` for async callers (it is CPU work: it runs inline, without awaiting)."""
        return self.compact(messages, intent=intent, format=format, server_state=server_state)

    def _counted(self, block: Dict[str, Any], transcript: bool) -> Dict[str, Any]:
        """Return ``block`` with its tokens by the token counter.

        The counter counts a block's text.  A transcript's picture or file keeps what the provider
        charges for it; a tool call or result keeps the estimate of the call id sent beside its text.
        A pager-format block with its own ``tokens`` keeps them.
        """
        counted = dict(block)
        given = block.get("tokens")
        if block.get("stub") or not isinstance(block.get("text"), str) or (given is not None and not transcript) \
                or block.get("kind") == "media":
            return counted
        tokens = self.token_counter(block["text"])  # type: ignore[misc]
        if not _is_int(tokens) or tokens < 0:
            raise PagerError(f"token_counter must return a non-negative integer (got {_show(tokens)} "
                             f"for block {_show(block.get('id'))})")
        counted["tokens"] = tokens + (given - estimate_tokens(block["text"]) if given is not None else 0)
        return counted

    def _open_store(self) -> Optional[PageStore]:
        if self.store is None:
            return None
        return PageStore.open(self.store, create=self.contract is None, stub_words=self.params.stub_words)

    def _page_of(self, store: Optional[PageStore]) -> Callable[[str], Optional[StoredPage]]:
        if self.store is None:
            return self._memory_page
        return store.get if store is not None else (lambda block: None)

    def _memory_page(self, block: str) -> Optional[StoredPage]:
        """Return the page of ``block`` kept in memory; a range page's text is its blocks' (see PageStore.get)."""
        if block not in self._ranges:
            return self._pages.get(block)
        members, summary = self._ranges[block]
        pages = [self._memory_page(m) for m in members]
        if any(p is None for p in pages):
            return None
        text = "\n\n".join(p.text for p in pages)  # type: ignore[union-attr]
        first = pages[0]
        return StoredPage(block, first.turn, RANGE, RANGE, sum(p.tokens for p in pages),  # type: ignore[union-attr]
                          (), _text_sha256(text), first.paged_at, summary, text)  # type: ignore[union-attr]

    def _plan(self, blocks: List[Any], header: Dict[str, Any], given: Optional[Intent],
              store: Optional[PageStore], conv: Optional[Conversation] = None) -> Tuple[PassPlan, _CachedScorer]:
        """Score the blocks (features from the cache where a block is unchanged); return the plan."""
        pages = self._page_of(store)
        notes = _WorkNotes(self.params.work_steps)  # the recent work, as the CLI reads it
        last = _LastRequest(pages)  # the last human (else user) message: the pass's own rule
        if given is None and "intent_ir" not in header:
            _note_blocks(blocks, last, notes)
        found, work = last.intent(), notes.work_keywords()
        kept = given is None and found is None and not work and "intent_ir" not in header and self._intent is not None
        if kept:  # no user message (a server-held conversation's later call): the last call's intent
            given = self._intent._replace(source=f"{self._intent.source} (the last call's)")  # type: ignore[union-attr]
        try:
            intent = _header_intent(header, given, found, work)
            current = _header_current_turn(header)
            params, hint = _transcript_params(conv, self.params), self.hint
            stub_text = lambda page, newer=None, edge=0: make_stub(page, hint(page.block), newer, edge)  # noqa: E731
            # The budget shapes a stub's cost (a giant's stub keeps a share of it as head and tail).
            settings = (tuple(intent.keywords), params.similarity, params.stub_words, params.budget)
            if settings != self._cache_key:
                self._cache, self._cache_key = {}, settings
            definitions = conv.definitions_tokens if conv is not None else 0
            scorer = _CachedScorer(self._cache, self.token_counter, intent.keywords, params, pages, stub_text,
                                   False, (lambda seen: definitions) if definitions else None, current)
            scorer.previous = self._actions  # the last pass's directives: with params.target they stand
            scorer.previous_ranges = self._ranges
            self._range_memory.start(hint)  # the range pages built before, served where nothing they read changed
            scorer.range_memory = self._range_memory
            scorer.use_work(intent.work)
            scorer.add_all(0, blocks)
            decisions = scorer.finish(current)
        except PagerError as exc:
            raise PagerError(f"messages: {exc}") from None
        self._range_memory.settle()
        self._cache = scorer.fresh  # only blocks of this conversation: a dropped one is forgotten
        self._intent = self._intent if kept else intent
        return PassPlan.of(decisions, scorer, current, params, header, intent), scorer

    def _page(self, fields: Tuple[str, int, str, Optional[str], int, Tuple[str, ...]], text: str,
              now: str) -> StoredPage:
        """Return the page of a newly paged block (``fields``: its block, turn, role, kind, tokens and
        matched terms), reusing the one made before if nothing changed."""
        old = self._pages.get(fields[0])
        if old is not None and old.text == text and (old.block, old.turn, old.role, old.kind, old.tokens,
                                                     old.keywords) == fields:
            return old
        page = StoredPage(*fields, _text_sha256(text), now, "", text)
        return _with_summary(page, self.params.stub_words)

    def _directives(self, plan: PassPlan, store: Optional[PageStore], now: str) -> Dict[str, Tuple[str, Optional[str]]]:
        """Return emit's directive per block: a stub for a page, the original for a stub kept verbatim."""
        out: Dict[str, Tuple[str, Optional[str]]] = {}
        pages: Dict[str, StoredPage] = {}
        stubs: Dict[str, str] = {}
        texts = plan.texts
        lookup = self._page_of(store)
        decisions = plan.decisions  # read by column: a Decision is built only for a page made anew
        blocks, actions, stubbed = (_column(decisions, n) for n in ("block", "action", "stub"))
        reasons, tokens = _column(decisions, "reason"), _column(decisions, "tokens")
        turns, roles, kinds, matched = (_column(decisions, n) for n in ("turn", "role", "kind", "matched"))
        for k, action in enumerate(actions):
            block = blocks[k]
            if action == "page":
                if stubbed[k] or store is not None:
                    page = lookup(block)
                    if page is None:
                        raise PagerError(f"no stored text for paged block {_show(block)}")
                else:
                    page = self._page((block, turns[k], roles[k], kinds[k], tokens[k], matched[k]),
                                      texts[k], now)  # type: ignore[arg-type, index]
                newer, edge = _newer_copy(reasons[k]), _giant_edge(tokens[k], plan.params.budget)
                # The one-line stub of a page is the same every call; one naming a newer copy or a giant's is not.
                same = self._pages.get(block) is page and newer is None and not edge
                stub = self._stubs.get(block) if same else None
                if stub is None:
                    stub = make_stub(_with_summary(page, self.params.stub_words), self.hint(block), newer, edge)
                pages[block], stubs[block] = page, stub
                out[block] = ("page", stub)
            elif action == "retain" and stubbed[k]:
                page = lookup(block)
                if page is None:
                    raise PagerError(f"no stored text for paged block {_show(block)}")
                out[block] = ("retain", _verified_text(page, self.store or "the pager's pages"))
            else:
                out[block] = (action, None)
        # A range page read back and paged again keeps its blocks recallable, in memory too.
        ranges = {r.id: (r.members, r.summary) for r in plan.ranges}
        old_ranges, old_pages = self._ranges, self._pages
        carry = [b for b in pages if b in old_ranges]
        while carry:
            rid = carry.pop()
            ranges.setdefault(rid, old_ranges[rid])
            for member in old_ranges[rid][0]:
                if member in old_ranges and member not in ranges:
                    carry.append(member)
                elif member in old_pages:
                    pages.setdefault(member, old_pages[member])
        self._pages, self._stubs = pages, stubs  # a block no longer paged can no longer be recalled
        self._ranges = ranges
        return _range_directives(plan, out, self.hint)

    def _store_pages(self, plan: PassPlan, store: PageStore, now: str) -> None:
        """Store-only mode: keep new pages' text in the SQLite store, drop pages no longer paged."""
        known = store.shas()
        fresh = []
        for k, d in enumerate(plan.decisions):
            if d.action == "page" and not d.stub:
                text = plan.texts[k]  # type: ignore[index]
                sha = _text_sha256(text)  # type: ignore[arg-type]
                if known.get(d.block) != sha:
                    fresh.append(StoredPage(d.block, d.turn, d.role, d.kind, d.tokens, d.matched, sha, now, "", text))  # type: ignore[arg-type]
        store.begin()
        try:
            store.put(fresh)
            _store_ranges(store, plan, now, known)
            store.commit()
        except BaseException:
            store.rollback()
            raise
        store.keep_only([b for b, a in zip(_column(plan.decisions, "block"), _column(plan.decisions, "action"))
                         if a == "page"] + [r.id for r in plan.ranges])

    def _record(self, plan: PassPlan, fmt: str, conv: Conversation, blocks: List[Any],
                store: Optional[PageStore], now: str) -> Optional[PageStore]:
        """Contract mode: store pages and append the pass to the contract, as the CLI's pass does."""
        args = argparse.Namespace(contract=self.contract, store=self._explicit_store, emit=None, with_index=False)
        converted = json.dumps({"blocks": blocks}, ensure_ascii=False)
        reading = _Reading(fmt, self.format is None, _HistorySource.from_text("messages", converted),
                          conv if fmt != "pager" else None)
        settings: Dict[str, object] = {"pager-stub-words": plan.params.stub_words, "pager-format": fmt,
                                       "pager-intent-source": plan.intent_source}
        if self._explicit_store:
            settings["pager-store"] = self._explicit_store
        if self.params.keep_recent is not None:
            settings["pager-keep-recent"] = self.params.keep_recent

        def render(state: ContractState) -> _Payload:
            return _encode_batches(state, _statement_batches(plan, state, now, settings))

        with _LockedContract(self.contract) as locked:  # type: ignore[arg-type]
            _, _, _, store = _record_pass(args, locked, plan, reading, store, self.store, now, render)  # type: ignore[arg-type]
        if store is not None:
            store.close()
        return PageStore.open(self.store, create=False, stub_words=self.params.stub_words)  # type: ignore[arg-type]

    def _emit_pager(self, history: Dict[str, Any], blocks: List[Any], plan: PassPlan,
                    directives: Dict[str, Tuple[str, Optional[str]]], items: Optional[List[int]]) -> Dict[str, Any]:
        """Return the pager history with the pass applied, block by block as the CLI's --emit writes it."""
        out = {k: v for k, v in history.items() if k != "blocks"}
        kept = []
        range_of = plan.range_of()
        for k, d in enumerate(plan.decisions):
            raw = history["blocks"][items[k] if items else k]
            verb, text = directives[d.block]
            r = range_of.get(k)
            if r is not None:  # a range page stands where its first block was
                if r.positions[0] == k:
                    kept.append({"id": r.id, "turn": r.first_turn, "role": RANGE, "text": text, "stub": True})
                continue
            if verb == "retain" and text is None:
                kept.append(raw)
            elif verb == "retain":  # a stub brought back verbatim
                restored = {key: value for key, value in raw.items() if key != "stub"}
                restored["text"] = text
                if d.tokens != estimate_tokens(text):
                    restored["tokens"] = d.tokens
                kept.append(restored)
            elif verb == "page":
                stub: Dict[str, object] = {"id": d.block, "turn": d.turn, "role": d.role}
                if d.kind is not None:
                    stub["kind"] = d.kind
                stub["text"], stub["stub"] = text, True
                kept.append(stub)
        out["blocks"] = kept
        return out

    def _tokens_after(self, plan: PassPlan, directives: Dict[str, Tuple[str, Optional[str]]]) -> int:
        """Return what the kept blocks and stubs cost, for a pass without a budget."""
        count = self.token_counter or estimate_tokens
        total = 0
        for d in plan.decisions:
            verb, text = directives[d.block]
            if verb == "retain":
                total += d.tokens
            elif verb == "page":
                total += count(text)  # type: ignore[arg-type]
        return total

    # -- recall --

    def recall(self, ids: Any) -> Dict[str, str]:
        """Return block id -> exact original text of paged blocks; PagerError for an id not paged now.

        With a contract the page-in is recorded there, as ``pager.py recall`` does.
        """
        return self.recall_parts(ids)[0]

    def recall_parts(self, ids: Any, max_tokens: Optional[int] = None,
                     start: Optional[str] = None) -> Tuple[Dict[str, str], Optional[RecallLeft]]:
        """Return ``recall``'s texts from block ``start`` on within ``max_tokens`` (the first block
        whatever its size; see _recall_bound), and what the bound left (None: nothing)."""
        wanted = [ids] if isinstance(ids, str) else list(ids)
        if not wanted or not all(isinstance(i, str) for i in wanted):
            raise PagerError(f"ids must be a non-empty list of block ids (got {_show(ids)})")
        wanted = list(dict.fromkeys(wanted))
        if self.contract is not None:
            _, pages, texts, left = _recall_pages(self.contract, wanted, self._explicit_store,  # type: ignore[arg-type]
                                                  _normalize_now(self.now), max_tokens, start)
            return {page.block: text for page, text in zip(pages, texts)}, left
        # A range page gives its blocks, in order (a block that is itself a range page, its own).
        expanded: List[str] = []
        for block in wanted:
            expanded += self._range_blocks(block) if block in self._ranges else [block]
        inside = set(expanded) - set(wanted)  # a range page's blocks: paged by an earlier pass, maybe
        wanted = list(dict.fromkeys(expanded))
        for block in wanted:
            action = self._actions.get(block)
            if action != "page" and not (block in inside and (block in self._pages or self.store is not None)):
                raise PagerError(_not_paged(block, action))
        if self.store is None:
            wanted, left = _recall_bound(wanted, lambda blocks: {b: self._pages[b].tokens for b in blocks},
                                         max_tokens, start)
            return {block: self._pages[block].text for block in wanted}, left
        store = PageStore.open(self.store, create=False, stub_words=self.params.stub_words)
        if store is None:
            raise PagerError(f"{self.store}: the page store does not exist")
        try:
            wanted, left = _recall_bound(wanted, store.tokens_of, max_tokens, start)
            pages = _paged_pages({block: "page" for block in wanted}, store, self.store)
            return {page.block: _verified_text(page, self.store) for page in pages}, left
        finally:
            store.close()

    def _range_blocks(self, range_id: str) -> List[str]:
        """Return the blocks of the last pass's range page ``range_id``, in order."""
        out: List[str] = []
        for member in self._ranges[range_id][0]:
            if member in self._ranges:
                out += self._range_blocks(member)
            elif self.store is not None and member.startswith(RANGE_PREFIX):
                store = PageStore.open(self.store, create=False, stub_words=self.params.stub_words)
                try:
                    out += store.range_members(member) or [member] if store is not None else [member]
                finally:
                    if store is not None:
                        store.close()
            else:
                out.append(member)
        return out

    def index(self) -> str:
        """Return the page index of the last pass: a header naming the recall tool, one line per page."""
        if self.store is not None:
            store = PageStore.open(self.store, create=False, stub_words=self.params.stub_words)
            paged = [b for b, a in self._actions.items() if a == "page"]
            try:
                pages = _paged_pages({b: "page" for b in paged}, store, self.store) if paged else []
            finally:
                if store is not None:
                    store.close()
        else:
            pages = [_with_summary(p, self.params.stub_words) for p in self._pages.values()]
        # A range page's blocks are listed by its one line.
        inside = {m for members, _ in self._ranges.values() for m in members}
        ranges = [StoredPage(rid, 0, RANGE, RANGE, 0, (), "", "", summary, "")
                  for rid, (_, summary) in self._ranges.items()]
        pages = [p for p in pages if p.block not in inside and p.block not in self._ranges] + ranges
        return "\n".join([_index_header(len(pages), self.hint("ID"))] + index_lines(pages))

    def search(self, query: str, limit: int = SEARCH_LIMIT) -> List[Dict[str, Any]]:
        """Return the paged blocks best matching ``query`` (words or names), best first.

        Each hit is ``{"id", "turn", "kind", "role", "line", "score"}``, ``line`` being the
        page's line that holds the most of the query's terms; as ``pager.py search``.
        """
        _search_checked(query, limit)
        if self.contract is not None:
            return _search_contract(self.contract, query, self._explicit_store, limit)[1]
        paged = {b for b, a in self._actions.items() if a == "page"}
        if self.store is not None:
            store = PageStore.open(self.store, create=False, stub_words=self.params.stub_words)
            if store is None or not paged:
                return []
            try:
                return store.search(query, limit, paged)
            finally:
                store.close()
        terms = _query_terms(query)
        pages = list(self._pages.values())
        if not terms or not pages:
            return []
        rows = ((p.block, p.turn, p.role, p.kind, p.tokens, p.text) for p in pages)
        return _rank_pages(rows, terms, len(pages), sum(p.tokens for p in pages) / len(pages), limit)

    def tools(self, api: str = "openai") -> List[Dict[str, Any]]:
        """Return the tool list to offer the model: the recall and search tools in ``api``'s shape."""
        return [recall_tool(api), _search_tool(api)]

    def recall_text(self, ids: Any, max_tokens: Optional[int] = None, start: Optional[str] = None) -> Tuple[str, bool]:
        """Return (the recall tool's answer for ``ids``, whether it is an error), within ``max_tokens``
        from block ``start`` on when given (see recall_parts). Never raises."""
        return _tool_recall(self.recall_parts, RECALL_TOOL_NAME, {"ids": ids, "max_tokens": max_tokens, "from": start})

    def run_tool_call(self, call: Any) -> Dict[str, Any]:
        """Execute a recall tool call; return the tool result in the call's API shape. Never raises.

        A search tool call (``search_pages``) answers with its hits, one line each.
        ``call`` is a Chat Completions tool call (``{"id", "function": {"name", "arguments"}}``),
        a Responses ``function_call`` item or an Anthropic ``tool_use`` block. One id gives its
        exact text; several give each under a ``==> ID <==`` line; a bad id or call gives an
        error result (Anthropic ``is_error``, else text starting with ``error:``).
        """
        api, call_id, name, arguments = _tool_call_parts(call)
        if name == _SEARCH_TOOL_NAME:
            text, failed = _tool_search(self.search, arguments)
        else:
            text, failed = _tool_recall(self.recall_parts, name, arguments)
        return _FORMATS[api].tool_result(call_id, text, failed)


def run_recall_tool(pager: Any, call: Any) -> Dict[str, Any]:
    """Execute a recall tool call against ``pager``'s pages; return the tool result (never raises)."""
    owner = pager.report.pager if isinstance(pager, Compacted) else pager
    return owner.run_tool_call(call)  # type: ignore[union-attr]


def compact(messages: Any, *, budget: Optional[int] = None, intent: Any = None, format: Optional[str] = None,
            contract: Optional[str] = None, store: Optional[str] = None,
            token_counter: Optional[Callable[[str], int]] = None, **params: Any) -> Compacted:
    """Return ``messages`` compacted (same shape and type) and a report; one pass of a new Pager.

    ``messages``: a Chat Completions list or body, an Anthropic body or bare list, a Responses
    input list or body, or the pager's ``{"blocks": [...]}``. ``budget`` and ``params`` (alpha,
    beta, retain_cut, evict_cut, similarity, stub_words, keep_recent, and ``hint``/``now`` as
    for Pager) are the CLI's flags. Nothing is written unless ``contract`` or ``store`` is
    given; the pages stay with the result (``result.recall(ids)``, ``result.run_tool_call``).

    Example:
        >>> msgs, report = compact([{"role": "user", "content": "Fix the invoice rounding."}], budget=100)
        >>> msgs == [{"role": "user", "content": "Fix the invoice rounding."}], report.counts["retain"]
        (True, 1)
    """
    pager = Pager(budget, intent=intent, format=format, contract=contract, store=store,
                  token_counter=token_counter, **params)
    return pager.compact(messages)





# ===== Command line =====

HELP_EPILOG = """\
commands:
  pager.py --history H.json --contract C.limn [flags]   run a paging pass (below)
  pager.py recall ID [ID ...] --contract C.limn        print paged blocks' original text, page them in
  pager.py index --contract C.limn                     list the paged blocks, one line each
  pager.py index --contract C.limn --tokens 2000 --intent TEXT
                                                       the index to inject after a compaction
  pager.py search "WORDS" --contract C.limn            find paged blocks by words or names, best first
  pager.py compaction --history ROLLOUT --contract C.limn
                                                       store a transcript whole before (or after) a
                                                       harness's compaction; print what to send next
  pager.py report --contract C.limn [--out R.html]     the session as one HTML page (or a text summary)

example:
  python3 scripts/pager.py --history assets/test-history.json \\
      --contract /tmp/session.limn --now 2026-05-17T03:08:12+00:00 --emit /tmp/compact.json

output:
  stdout  one summary line (or JSON with --json); with --dry-run, the statements first
  stderr  one JSON record per block, in input order (--records FILE: in FILE; --quiet: none),
          then warnings and repairs (always on stderr)

exit codes:
  0  the pass was recorded (or printed, with --dry-run)
  1  an unexpected bug (with a traceback)
  2  bad input: a flag, the history, the contract or the page store; nothing was written
"""


def _prog() -> str:
    """Return the command's name for usage lines: the console script as installed, else pager.py."""
    name = os.path.basename(sys.argv[0]) if sys.argv else ""
    return CONSOLE_SCRIPT if name.startswith(CONSOLE_SCRIPT) else "pager.py"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise PagerError(message)


def _number_flag(flag: str, what: str = "a number") -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be {what} (got {_show(text)})") from None
    return parse


def _target_flag(text: str) -> Union[float, str]:
    """Parse --target: a share of the budget, or "none" (no watermarks)."""
    return NO_TARGET if text == NO_TARGET else _number_flag("--target", f"a number or {NO_TARGET}")(text)


def _count_flag(flag: str, least: int = 1) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            kind = "a positive" if least == 1 else "a non-negative"
            raise argparse.ArgumentTypeError(f"{flag} must be {kind} integer (got {_show(text)})")
        return value
    return parse


def _build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of a paging pass."""
    parser = _Parser(prog=_prog(), description=__doc__.split("\n\n")[0],
                     epilog=HELP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", required=True, metavar="H.json",
                        help="the history: an agent's transcript or a request body in any format --format "
                             "names (detected from the content), or the pager's own JSON; '-' reads standard input")
    parser.add_argument("--contract", required=True, metavar="C.limn",
                        help="session contract to append to: a Liminate (.limn) file, created if missing; "
                             "a file that is not Liminate is refused")
    parser.add_argument("--alpha", type=_number_flag("--alpha"), default=DEFAULT_ALPHA,
                        help=f"weight of intent similarity (default {DEFAULT_ALPHA})")
    parser.add_argument("--beta", type=_number_flag("--beta"), default=DEFAULT_BETA,
                        help=f"weight of recency (default {DEFAULT_BETA})")
    parser.add_argument("--retain-cut", type=_number_flag("--retain-cut"), default=DEFAULT_RETAIN_CUT,
                        help=f"R at or above this retains (default {DEFAULT_RETAIN_CUT})")
    parser.add_argument("--evict-cut", type=_number_flag("--evict-cut"), default=DEFAULT_EVICT_CUT,
                        help=f"R below this evicts (default {DEFAULT_EVICT_CUT})")
    parser.add_argument("--format", choices=("auto",) + FORMATS, default="auto",
                        help="history format (default auto: detected from the content)")
    parser.add_argument("--intent", metavar="TEXT", help="what the agent is doing now, in free text")
    parser.add_argument("--intent-file", metavar="FILE", help="read the intent text from FILE")
    parser.add_argument("--keep-recent", type=_count_flag("--keep-recent", 0), metavar="N",
                        help="always retain the last N blocks (default: the current turn's blocks; for an "
                             "agent transcript, its last message's, none under --budget)")
    parser.add_argument("--no-protect-task", action="store_true",
                        help="do not keep a transcript's first human request (the task statement) like a pin; "
                             "it is then paged at worst, like every human message")
    parser.add_argument("--work-steps", type=_count_flag("--work-steps", 0), default=DEFAULT_WORK_STEPS,
                        metavar="N", help="with no --intent or intent_ir: names in the agent's last N steps "
                        f"(calls, results, errors) join the last user message's words (default {DEFAULT_WORK_STEPS}; "
                        "0: the user message alone)")
    parser.add_argument("--target", type=_target_flag, metavar="SHARE",
                        help="with --budget: cache-stable compaction. Keep the contract's last directives (new "
                             "blocks verbatim) until the history reaches --trigger times the budget, then compact "
                             f"down to SHARE of it (default {DEFAULT_TARGET}; a first pass fills the whole budget, and so does "
                             "a compaction when the passes grow by more than the room between SHARE and --trigger). "
                             "'none': fit the whole budget on every pass")
    parser.add_argument("--trigger", type=_number_flag("--trigger"), default=DEFAULT_TRIGGER, metavar="SHARE",
                        help=f"with --budget: the pressure that starts a compaction (default {DEFAULT_TRIGGER})")
    parser.add_argument("--index-share", type=_number_flag("--index-share"), default=DEFAULT_INDEX_SHARE,
                        metavar="SHARE", help="with --budget: the share of it the range pages' lines may take "
                        f"(default {DEFAULT_INDEX_SHARE}); the oldest ranges merge to stay within it")
    parser.add_argument("--recent-share", type=_number_flag("--recent-share"), default=DEFAULT_RECENT_SHARE,
                        metavar="SHARE", help="with --budget, in a history with tool calls: the share of the room "
                        "the newest blocks fill first, kept verbatim until one does not fit "
                        f"(default {DEFAULT_RECENT_SHARE}); value per token places older blocks in the rest")
    parser.add_argument("--page-small", action="store_true",
                        help="without --budget, page a transcript's blocks even where the stub is no shorter "
                             "(by default such a block stays, reason small); to store a session whole, as the "
                             "PreCompact hook does")
    parser.add_argument("--before-compaction", action="store_true",
                        help="the harness compacts right after this pass (its summary replaces the conversation): "
                             "page every block but the instructions, whatever its score, so all of it stays "
                             f"recallable; the contract gives the reason '{BEFORE_COMPACTION}'")
    parser.add_argument("--mask-results", action="store_true",
                        help="with --budget: a tool result larger than a tenth of the budget may be paged in "
                             "place while its call stays verbatim (in a transcript the result keeps its call id "
                             "and holds its stub, so the pair stays valid)")
    parser.add_argument("--similarity", choices=SIMILARITIES, default=SIMILARITIES[0],
                        help="weighted (default): rare keywords count more, stems match, neighbours share "
                             "credit; plain: the share of keywords present")
    parser.add_argument("--budget", type=_count_flag("--budget"), metavar="TOKENS",
                        help="fit retained blocks plus stubs into this many tokens (see the README)")
    parser.add_argument("--store", metavar="PATH",
                        help=f"page store (default: beside the contract, C.limn -> C{STORE_SUFFIX})")
    parser.add_argument("--emit", metavar="OUT.json",
                        help="write the compacted history: retained verbatim, paged as stubs, evicted gone")
    parser.add_argument("--with-index", action="store_true",
                        help="with --emit, put the page index first, as one system block")
    parser.add_argument("--stub-words", type=_count_flag("--stub-words"), default=DEFAULT_STUB_WORDS,
                        help=f"words of text a stub keeps (default {DEFAULT_STUB_WORDS})")
    parser.add_argument("--now", metavar="ISO-8601", help="pass timestamp (default: the clock, UTC)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the statements the pass would append; write no contract, store or history")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--records", metavar="FILE",
                        help="write the per-block JSON records to FILE instead of stderr")
    parser.add_argument("--quiet", action="store_true",
                        help="no per-block records on stderr (warnings and repairs still go there)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def _store_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--contract", required=True, metavar="C.limn", help="the session contract")
    parser.add_argument("--store", metavar="PATH",
                        help="page store (default: the contract's pager-store value, else beside the contract)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _build_recall_parser() -> argparse.ArgumentParser:
    """Return the parser of ``pager.py recall``."""
    parser = _Parser(prog=f"{_prog()} recall", description="Print paged blocks' exact original text "
                     "(checked against its SHA-256) and record the page-in in the contract.")
    parser.add_argument("ids", nargs="+", metavar="ID", help="block ids the contract lists as paged")
    _store_flags(parser)
    parser.add_argument("--max-tokens", type=_count_flag("--max-tokens"), metavar="N",
                        help="give blocks back in order while they stay within N tokens (the first whatever "
                        "its size); the rest stay paged, and the last line says where --from goes on")
    parser.add_argument("--from", dest="start", metavar="ID",
                        help="begin at this block of the ones the ids give back (a range's, say)")
    parser.add_argument("--now", metavar="ISO-8601", help="recall timestamp (default: the clock, UTC)")
    return parser


def _build_index_parser() -> argparse.ArgumentParser:
    """Return the parser of ``pager.py index``."""
    parser = _Parser(prog=f"{_prog()} index", description="List every paged block, one line each; with --tokens "
                     "or --intent, print the index to inject after a compaction instead: the distinctive names "
                     "most likely needed next (what the agent wrote and the files its tool calls named first, "
                     "newest first), each line with the id of a page, within a token cap.")
    _store_flags(parser)
    parser.add_argument("--tokens", type=_count_flag("--tokens"), metavar="N",
                        help=f"the injected index's cap in tokens (default {INDEX_TOKENS} with --intent)")
    parser.add_argument("--intent", metavar="TEXT",
                        help="what the agent does after the compaction (the summary's pending task, the human's "
                             "last request): the names it already says are left out")
    return parser


def _check_records_path(args: argparse.Namespace, store_path: str) -> None:
    """Refuse a --records path the pass must not write (a link, a folder, a missing folder, another file's path)."""
    path = args.records
    if path is None:
        return
    _check_output_file(path, "--records")
    for what, other in (("--history", args.history if args.history != "-" else None), ("--contract", args.contract),
                        ("the page store", store_path), ("--emit", args.emit)):
        if other is not None and _same_file(path, other):
            raise PagerError(f"{path}: --records and {what} name the same file; give each its own")


def _range_records(decisions: Sequence[Decision], ranges: Sequence[RangePage]) -> List[Decision]:
    """Return a record for each range page, after the blocks' own: kind and role RANGE, action
    ``page``, reason RANGE, its members' turns (the first) and tokens, stub true (its line stands in
    the request). A pass over the emitted request reads the line back as a block of that id, so the
    records of both passes name the same ids."""
    if not ranges or not decisions:
        return []
    now = decisions[0].turn + decisions[0].delta_t
    return [Decision(r.id, r.first_turn, RANGE, RANGE, r.tokens, (), 0.0, 0.0, 0.0, 0.0, now - r.first_turn, 0.0,
                     "page", RANGE, True) for r in ranges]


def _emit_records(args: argparse.Namespace, stderr, decisions: Sequence[Decision],
                  ranges: Sequence[RangePage] = ()) -> None:
    """Write the per-block records where the flags say: stderr (default), --records FILE, or nowhere
    (--quiet); then one for each range page (_range_records)."""
    decisions = chain(decisions, _range_records(decisions, ranges))  # type: ignore[assignment]
    if args.records is not None:
        try:
            with _file_beside(args.records) as out:
                _write_records(out, decisions)  # type: ignore[arg-type]
        except OSError as exc:
            raise PagerError(f"{args.records}: can't write the records ({exc.strerror}); "
                             f"the pass itself is recorded in {args.contract}") from None
    elif not args.quiet:
        _write_records(stderr, decisions)


def _injected_index(contract: str, store: Optional[str], intent: Optional[str], tokens: int) -> str:
    """Return the index to inject after a compaction (see compaction_index), read from the contract and store.

    The store says whether the last pass left it (its stamp): then every page in it is a paged
    block, counted in one query, and the contract is not read; else the contract says which blocks
    are paged. Then the text of the newest pages (up to INDEX_SCAN_TOKENS), whose names the index
    weighs, in one query read until that much.
    """
    _refuse_link(contract, "contract")
    if not os.path.exists(contract):
        raise PagerError(f"{contract}: no such contract")
    store_path = store or _default_store_path(contract)
    _check_paths(None, contract, store_path, None)
    opened = PageStore.open(store_path, create=False)
    among: Optional[Container[str]] = None  # the paged blocks, when not every page in the store is one
    if opened is not None and opened.matches(_contract_stamp(contract)):
        count = opened.count()  # a pass left them so: nothing since
    else:  # a recall or an older pager since: the contract says which blocks are paged
        if opened is not None:
            opened.close()
        state = contract_state(contract)
        store_path = _resolve_store(contract, store, state)
        _check_paths(None, contract, store_path, None)
        among = {block for block, action in state.directives.items() if action == "page"}
        count = len(among)
        opened = PageStore.open(store_path, create=False) if among else None
    hint = _recall_hint("ID", os.path.abspath(contract), os.path.abspath(store) if store else None)
    find = hint.replace(" recall ID ", ' search "NAME" ', 1)
    head = (f"[prosecode context pager] {count} blocks from before the compaction are stored verbatim. "
            f"Find one by a name below or any word: {find} ; read it: {hint}. Lines: turn: page ids: names.")
    if opened is None or not count:
        if opened is not None:
            opened.close()
        return compaction_index([], head, tokens)
    try:
        rows = opened.newest(INDEX_SCAN_TOKENS, among)
    finally:
        opened.close()
    words = _unescaped_breaks(intent or "").lower()
    known = frozenset(_NAME_RE.findall(words)).union(_names_of(words, compounds=True))
    return compaction_index(_index_names(rows, known), head, tokens)


def _flag_intent(args: argparse.Namespace) -> Optional[Intent]:
    """Return the intent given by --intent or --intent-file, or None."""
    if args.intent is not None and args.intent_file is not None:
        raise PagerError("give --intent or --intent-file, not both")
    if args.intent is not None:
        if not args.intent.strip():
            raise PagerError("--intent is empty: say what the agent is doing now, or leave --intent out "
                             "(the intent then comes from the history)")
        return Intent(intent_keywords([args.intent]), "--intent")
    if args.intent_file is not None:
        try:
            with open(args.intent_file, encoding="utf-8") as fh:
                return Intent(intent_keywords([fh.read()]), "--intent-file")
        except FileNotFoundError:
            raise PagerError(f"{args.intent_file}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise PagerError(f"{args.intent_file}: can't read the intent ({exc})") from None
    return None


def _settling(state: ContractState, params: Params, args: argparse.Namespace
              ) -> Optional[Tuple[Mapping[str, str], object]]:
    """Return (the contract's directives, its intent) when its last pass ran with these settings, else None."""
    if not state.directives:
        return None
    values = state.values
    wanted = {"pager-alpha": params.alpha, "pager-beta": params.beta, "pager-retain-cut": params.retain_cut,
              "pager-evict-cut": params.evict_cut, "pager-similarity": params.similarity,
              "pager-stub-words": params.stub_words, "token-budget": params.budget}
    if args.keep_recent is not None:
        wanted["pager-keep-recent"] = params.keep_recent
    for name, value in wanted.items():
        if name in NUMBER_VALUES and value is not None:
            value = _parse_number(_format_number(value))  # type: ignore[arg-type]
        if values.get(name) != value:
            return None
    return state.directives, values.get("pager-intent")


@contextmanager
def _pass_lock(args: argparse.Namespace, known: Optional[Tuple[str, ContractState]] = None
               ) -> Iterator[Optional[_LockedContract]]:
    """Hold the contract's lock for the whole pass (none for --dry-run, which writes nothing).

    Everything a pass decides from that another pass can change (the contract's state,
    the store's rows, stub texts, the page index's size) is read while it is held;
    ``known`` is a text read before and its state, reused if the contract still holds that text.
    """
    if args.dry_run:
        yield None
        return
    with _LockedContract(args.contract, known) as locked:
        yield locked


def _locked_pass(args: argparse.Namespace, params: Params, now: str, given: Optional[Intent], reading: _Reading,
                 store_path: str, locked: Optional[_LockedContract], stdout, stderr,
                 recorded: Optional[str] = None) -> int:
    """Plan and record the pass (under the contract's lock unless --dry-run); print the outcome."""
    source = reading.source
    conv = reading.conversation
    store = PageStore.open(store_path, create=False, stub_words=params.stub_words)
    hint = _cli_hint(args)
    try:
        # With --target the last directives stand between compactions: the contract's, read
        # under the lock the whole pass holds.
        previous = None
        if params.target is not None:
            previous = dict((locked.state if locked is not None else contract_state(args.contract)).directives)
        plan = _load_and_plan(source, params, store.get if store is not None else None,
                             lambda page, newer=None, edge=0: make_stub(
                                 page, hint(page.block), newer, edge),
                             args.with_index, lambda seen: _index_reserve(args, locked, store, seen)
                             + (conv.definitions_tokens if conv is not None else 0), given,
                             previous, _settling(locked.state if locked is not None else
                                                 contract_state(args.contract), params, args),
                             _previous_ranges(locked.state if locked is not None else contract_state(args.contract),
                                              store) if params.budget is not None else None)
        # The store's path is recorded when it was chosen, so recall and index find it; the
        # default is derived from the contract's path and is left out to keep contracts portable.
        # The session's format stays the one the contract recorded when this is its written-back form.
        session_format = recorded if isinstance(recorded, str) and conv is not None and recorded in _FORMATS \
            and reading.fmt == _FORMATS[recorded].emits_as else reading.fmt
        settings: Dict[str, object] = {"pager-stub-words": params.stub_words, "pager-format": session_format,
                                       "pager-intent-source": plan.intent_source}
        if args.store:
            settings["pager-store"] = args.store
        if args.keep_recent is not None:
            settings["pager-keep-recent"] = params.keep_recent

        def render(state: ContractState) -> _Payload:
            return _encode_batches(state, _statement_batches(plan, state, now, settings))

        if args.dry_run:
            state = contract_state(args.contract)
            payload = render(state)
            stored = 0
        else:
            state, payload, stored, store = _record_pass(args, locked, plan, reading, store, store_path, now, render)
    finally:
        if store is not None:
            store.close()
    lead = 1 if state.needs_newline else 0  # the line end owed to an unterminated last line
    changes = _count_changes(plan, state)
    _emit_records(args, stderr, plan.decisions, plan.ranges)
    counts = plan.counts()
    if args.dry_run:
        stdout.write(payload.tobytes()[lead:].decode("utf-8"))
    n_statements = payload.count(b"\n") - lead
    skipped = conv.skipped_lines if conv is not None else 0
    repairs = list(conv.repairs) if conv is not None else []
    for repair in repairs:
        stderr.write(f"pager: repair: {repair}\n")
    summary = {"blocks": len(plan.decisions), "format": reading.fmt, "format_detected": reading.detected,
               "intent_source": plan.intent_source, "intent": plan.keywords, **counts, **changes,
               "statements": n_statements, "contract": args.contract,
               "written": not args.dry_run, "pass": now, "stored": stored, "store": store_path,
               "emitted": args.emit if args.emit and not args.dry_run else None,
               "skipped_lines": skipped, "repairs": repairs,
               "intent_block": plan.intent_block, "intent_turn": plan.intent_turn,
               "estimated_context_tokens": plan.tokens_before}
    if conv is not None:
        summary.update({**conv.recorded, "other_lines": conv.other_lines, "unknown_parts": conv.unknown_parts,
                        "archived": conv.archived, "definitions_tokens": conv.definitions_tokens})
        if params.before_compaction:  # what a harness re-injects after its compaction: the human's own words
            asked = [r["text"].strip() for r in human_requests(conv) if r["text"].strip()]
            summary.update({"task": asked[0] if asked else None, "last_request": asked[-1] if asked else None})
    rho = plan.pressure()
    if rho is not None:
        summary.update({"budget": params.budget, "tokens_before": plan.tokens_before,
                        "tokens_after": plan.tokens_after, "pressure_before": round(rho[0], 4),
                        "pressure_after": round(rho[1], 4), "over_budget": rho[1] > 1.0})
        if plan.compacted is not None:
            summary["compacted"] = plan.compacted
            if plan.compacted:
                summary["compacted_to"], summary["grown"] = plan.compacted_to, plan.grown
        definitions = conv.definitions_tokens if conv is not None else 0
        summary["fixed_tokens"] = plan.fixed_tokens(definitions)
        summary["over_by"] = max(0, plan.tokens_after - params.budget)  # type: ignore[operator]
        if rho[1] > 1.0:  # one line: by how much, and whether anything but the fixed costs could go
            fixed = summary["fixed_tokens"]
            what = (f"fixed costs and floors take {fixed} tokens" if fixed > params.budget  # type: ignore[operator]
                    else f"the kept context takes {plan.tokens_after} tokens")
            stderr.write(f"pager: warning: {what}{f' ({definitions} of them tool definitions)' if definitions else ''}"
                         f", over the budget of {params.budget} by {summary['over_by']}; "
                         f"everything else was paged\n")
        kinds, actions = _column(plan.decisions, "kind"), _column(plan.decisions, "action")
        summary["floors_evicted"] = sum(1 for kind, action in zip(kinds, actions)
                                        if action == "evict" and kind in PAGE_FLOORS)
        if summary["floors_evicted"]:
            stderr.write(f"pager: warning: {summary['floors_evicted']} messages that are paged at worst (a human's "
                         f"requests, summaries, conclusions) were evicted: even their stubs do not fit the budget "
                         f"of {params.budget}\n")
    if args.json:
        stdout.write(json.dumps(summary, ensure_ascii=False) + "\n")
    else:
        verb = "would append" if args.dry_run else "appended"
        extra = ""
        if rho is not None:
            extra += (f"; pressure {rho[0]:.2f} -> {rho[1]:.2f} of {params.budget} tokens "
                      f"({plan.tokens_before} -> {plan.tokens_after})")
            if plan.compacted is not None:
                extra += (f"; compacted to {plan.compacted_to:g} of the budget" if plan.compacted
                          else f"; kept the last directives (under the trigger, {params.trigger:g})")
                if plan.compacted and plan.compacted_to != params.target:
                    extra += (f" (the history grew {plan.grown} tokens since the pass before, more than the "
                              f"{int(params.growth_room())} between --target and --trigger)")
        extra += f"; stored {stored} page{'' if stored == 1 else 's'} in {store_path}" if stored else ""
        extra += f"; wrote {args.emit}" if summary["emitted"] else ""
        if skipped:
            extra += f"; skipped {skipped} unreadable line{'' if skipped == 1 else 's'}"
        if repairs:
            extra += f"; {len(repairs)} repair{'' if len(repairs) == 1 else 's'} (see stderr)"
        how = "detected" if reading.detected else "given"
        which = f" {plan.intent_block} (turn {plan.intent_turn})" if plan.intent_block is not None else ""
        stdout.write(f"pager: {summary['blocks']} blocks ({reading.fmt} format, {how}; intent from "
                     f"{plan.intent_source}{which}): retain {counts['retain']}, page {counts['page']}, "
                     f"evict {counts['evict']} ({changes['new']} new, {changes['moved']} moved, "
                     f"{changes['unchanged']} unchanged); {verb} {n_statements} statement"
                     f"{'' if n_statements == 1 else 's'} to {args.contract}{extra}\n")
    return EXIT_OK


def _recorded_intent(state: Optional[ContractState], conv: Conversation) -> Optional[Intent]:
    """Return the contract's recorded intent when the transcript holds no block the contract has not seen.

    ``state`` is the contract's state (None: no contract yet). Nothing happened since that pass,
    so what the agent is doing has not changed either; the recent work, read again from the
    compacted history, would differ only by what the pass paged.
    """
    if state is None:
        return None
    words, source = state.values.get("pager-intent"), state.values.get("pager-intent-source")
    if (not state.directives or not isinstance(words, str) or not isinstance(source, str)
            or any(block["id"] not in state.directives for block in conv.blocks)):
        return None
    return Intent([] if words == "none" else words.split(" "), source)


def _cli_target(args: argparse.Namespace) -> Optional[float]:
    """Return Params.target from the flags: the default under a budget; --target none: no watermarks."""
    if args.target is not None and args.budget is None:
        raise PagerError("--target needs --budget")
    if args.target == NO_TARGET:
        return None
    return DEFAULT_TARGET if args.target is None else args.target


def _run_pass(args: argparse.Namespace, stdout, stderr) -> int:
    """Run one paging pass as the flags say; return the exit code."""
    params = Params(args.alpha, args.beta, args.retain_cut, args.evict_cut, args.similarity,
                    args.budget, args.stub_words, args.keep_recent, args.mask_results, args.trigger,
                    _cli_target(args),
                    args.work_steps, not args.no_protect_task, False if args.page_small else None,
                    index_share=args.index_share, recent_share=args.recent_share,
                    before_compaction=args.before_compaction).validate()
    if args.alpha == 0 and args.beta == 0:
        raise PagerError("--alpha and --beta are both 0: every block would score R = 0; give similarity or "
                         "recency a positive weight")
    now = _normalize_now(args.now)
    if args.with_index and not args.emit:
        raise PagerError("--with-index needs --emit")
    if args.store is not None:
        _check_quotable(args.store, "--store")  # it is recorded in the contract
    store_path = args.store or _default_store_path(args.contract)
    _check_paths(args.history, args.contract, store_path, args.emit)
    _check_records_path(args, store_path)
    given = _flag_intent(args)
    # Read once before the pass takes the lock, for the session's format and intent (under the
    # lock the pass reads it again for everything it decides, parsing it only if it changed).
    text = _contract_text(args.contract) if os.path.exists(args.contract) else None
    earlier = _state_of(args.contract, text) if text is not None else None
    recorded = earlier.values.get("pager-format") if earlier is not None else None
    recorded = recorded if isinstance(recorded, str) else None
    with _collector_held():  # reading builds a million objects on a long log, and no cycles (see _collector_held)
        reading = _open_history(args.history, args.format, recorded, earlier.harness if earlier is not None else (),
                                params.before_compaction)
    if args.with_index and reading.conversation is not None:
        raise PagerError(f"--with-index is for the pager format; for {reading.fmt}, list pages with "
                         "'pager.py index'")
    conv = reading.conversation
    if given is None and conv is not None:
        given = _recorded_intent(earlier, conv)
    if given is None and conv is not None:
        # The transcript is in memory: its last request is known now, and the blocks are read once.
        pages = PageStore.open(store_path, create=False, stub_words=args.stub_words)
        try:
            last = _LastRequest(pages.get if pages is not None else None)
            notes = _WorkNotes(params.work_steps)
            note = last.note
            if params.work_steps > 0:
                for block in conv.blocks:
                    note(block)
                    notes.see(block)
            else:  # no step of work is kept: only the last request is looked for
                for block in conv.blocks:
                    note(block)
            work = notes.work_keywords()
            if last.intent() is not None or work:
                given = _header_intent({}, None, last.intent(), work)
        finally:
            if pages is not None:
                pages.close()
    params = _transcript_params(conv, params)
    # Deciding, recording and emitting build many objects and no cycles to free: on a large
    # history a full collection would walk everything read so far for nothing.
    with _pass_lock(args, (text, earlier) if earlier is not None else None) as locked, _collector_held():
        return _locked_pass(args, params, now, given, reading, store_path, locked, stdout, stderr, recorded)


def _run_recall(args: argparse.Namespace, stdout, stderr) -> int:
    """Print paged blocks' original text and record the page-in; return the exit code."""
    store_path, pages, texts, left = _recall_pages(args.contract, args.ids, args.store, _normalize_now(args.now),
                                                   args.max_tokens, args.start)
    if args.json:
        out: Dict[str, Any] = {"contract": args.contract, "store": store_path, "recalled": [
            {"block": p.block, "turn": p.turn, "role": p.role, "tokens": p.tokens, "sha256": p.sha256,
             "text": text} for p, text in zip(pages, texts)]}
        if left is not None:
            out["left"] = left._asdict()
        stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
        return EXIT_OK
    if len(texts) == 1 and left is None:
        stdout.write(texts[0])
    else:
        stdout.write("\n".join(f"==> {p.block} <==\n{text}" for p, text in zip(pages, texts)) + "\n")
    if left is not None:
        stdout.write(_recall_stopped(args.max_tokens, left) + "\n")
    return EXIT_OK


def _run_index(args: argparse.Namespace, stdout, stderr) -> int:
    """Print the page index of a contract (or, with --tokens or --intent, the injected one); return the exit code."""
    if args.tokens is not None or args.intent is not None:
        text = _injected_index(args.contract, args.store, args.intent, args.tokens or INDEX_TOKENS)
        if args.json:
            stdout.write(json.dumps({"contract": args.contract, "text": text, "tokens": estimate_tokens(text)},
                                    ensure_ascii=False) + "\n")
        else:
            stdout.write(text + "\n")
        return EXIT_OK
    _refuse_link(args.contract, "contract")
    if not os.path.exists(args.contract):
        raise PagerError(f"{args.contract}: no such contract")
    state = contract_state(args.contract)
    store_path = _resolve_store(args.contract, args.store, state)
    _check_paths(None, args.contract, store_path, None)
    store = PageStore.open(store_path, create=False, stub_words=_recorded_stub_words(state))
    try:
        pages = _paged_pages(state.directives, store, store_path)
    finally:
        if store is not None:
            store.close()
    hint = _cli_hint(args)
    if args.json:
        stdout.write(json.dumps({"contract": args.contract, "store": store_path, "paged": [
            {"block": p.block, "turn": p.turn, "role": p.role, "tokens": p.tokens, "summary": p.summary,
             "recall": hint(p.block)} for p in pages]},
            ensure_ascii=False) + "\n")
    else:
        stdout.write(f"Paged blocks: {len(pages)} (recall one with: "
                     f"{hint('ID')})\n")
        for line in index_lines(pages):
            stdout.write(line + "\n")
    return EXIT_OK


def _build_search_parser() -> argparse.ArgumentParser:
    """Return the parser of ``pager.py search``."""
    parser = _Parser(prog=f"{_prog()} search", description="Find paged blocks by words or names (files, "
                     "functions, commands, errors): ranked by BM25, best first, each with the line that matches.")
    parser.add_argument("query", metavar="QUERY", help='words or names, e.g. "line_total src/billing/totals.py"')
    _store_flags(parser)
    parser.add_argument("--limit", type=_count_flag("--limit"), default=SEARCH_LIMIT, metavar="N",
                        help=f"most hits to print (default {SEARCH_LIMIT})")
    return parser


def _run_search(args: argparse.Namespace, stdout, stderr) -> int:
    """Print the paged blocks best matching the query; return the exit code (0, also for no hit)."""
    _, hits = _search_contract(args.contract, args.query, args.store, args.limit)
    if args.json:
        stdout.write(json.dumps(hits, ensure_ascii=False) + "\n")
    else:
        stdout.write(_search_text(hits, args.query) + "\n")
        if hits:
            stdout.write(f"(recall one with: {_cli_hint(args)('ID')})\n")
    return EXIT_OK


def _build_compaction_parser() -> argparse.ArgumentParser:
    """Return the parser of ``pager.py compaction``."""
    parser = _Parser(prog=f"{_prog()} compaction", description="For a harness that compacts without hooks (Codex "
                     "compacts server-side, with no readable summary): store the whole transcript as pages "
                     "(a --before-compaction pass) and print what to send as the first message of the next "
                     "turn: the human's first and last requests verbatim and the injected page index.")
    parser.add_argument("--history", required=True, metavar="ROLLOUT",
                        help="the transcript (a Codex rollout, a Claude Code session, any format the pager reads)")
    _store_flags(parser)
    parser.add_argument("--tokens", type=_count_flag("--tokens"), default=INDEX_TOKENS, metavar="N",
                        help=f"cap of the printed text in tokens (default {INDEX_TOKENS})")
    parser.add_argument("--intent", metavar="TEXT",
                        help="what comes next, beside the human's last request (a summary's pending task)")
    parser.add_argument("--now", metavar="ISO-8601", help="pass timestamp (default: the clock, UTC)")
    return parser


def _clipped(text: str, tokens: int) -> str:
    """Return ``text``, or its start and a note of what was cut, within ``tokens`` estimated tokens.

    Example:
        >>> _clipped("word " * 100, 20)
        'word word word word word word word word wor [... 457 more characters not shown]'
    """
    if estimate_tokens(text) <= tokens:
        return text
    keep = tokens * 3
    while keep > 0:
        shown = text[:keep] + f" [... {len(text) - keep} more characters not shown]"
        if estimate_tokens(shown) <= tokens:
            return shown
        keep = keep * 9 // 10
    return f"[{len(text)} characters not shown]"


class _DiagnosticsOnly(io.TextIOBase):
    """A stream passing on a pass's ``pager:`` lines (repairs, warnings) and dropping its per-block records."""

    def __init__(self, target) -> None:
        super().__init__()
        self.target = target

    def write(self, text: str) -> int:
        if not text.startswith("{"):  # records come in batches that start with one
            self.target.write(text)
        return len(text)


def _run_compaction(args: argparse.Namespace, stdout, stderr) -> int:
    """Run a --before-compaction pass, then print the requests and the injected index; return the exit code."""
    argv = [f"--history={args.history}", f"--contract={args.contract}", "--before-compaction", "--json",
            "--work-steps=0"] + ([f"--store={args.store}"] if args.store else []) + \
        ([f"--now={args.now}"] if args.now else [])
    out = io.StringIO()
    _run_pass(_build_parser().parse_args(argv), out, _DiagnosticsOnly(stderr))
    summary = json.loads(out.getvalue())
    task, last = summary.get("task"), summary.get("last_request")
    requests = [("Task statement and last human request (verbatim)", task)] if task == last else [
        ("Task statement, the human's first request (verbatim)", task), ("The human's last request (verbatim)", last)]
    parts = [f"{label}:\n{_clipped(text, args.tokens // 2 // len(requests))}" for label, text in requests if text]
    room = args.tokens - (estimate_tokens("\n\n".join(parts)) + 2 if parts else 0)
    intent = "\n".join(t for t in (args.intent, last) if t)
    index = _injected_index(args.contract, args.store, intent or None, max(1, room))
    text = "\n\n".join(parts + [index])
    while estimate_tokens(text) > args.tokens and "\n" in index:  # estimates are not additive
        index = index[:index.rindex("\n")]
        text = "\n\n".join(parts + [index])
    if args.json:
        stdout.write(json.dumps({"contract": args.contract, "pass": summary, "text": text}, ensure_ascii=False) + "\n")
    else:
        stdout.write(text + "\n")
    return EXIT_OK


def _build_report_parser() -> argparse.ArgumentParser:
    """Return the parser of ``pager.py report``."""
    parser = _Parser(prog=f"{_prog()} report", description="Show a session's passes: one self-contained HTML page "
                     "with --out (a timeline of every block, the passes, the page index), else a plain-text summary "
                     "(--json: the summary, every event and every page as one JSON object).")
    _store_flags(parser)
    parser.add_argument("--history", metavar="H",
                        help="the session's history, in any format a pass reads: the size, role and first lines of "
                             "retained and evicted blocks (the store holds only the paged ones')")
    parser.add_argument("--out", metavar="REPORT.html", help="write the HTML page here (replaced whole)")
    return parser


def _report_history(path: str, state: ContractState, contract: str
                    ) -> Tuple[List[Dict[str, Any]], Dict[str, str]]:
    """Return the blocks of the history at ``path`` (pager schema) and each transcript block's part kind."""
    recorded = state.values.get("pager-format")
    reading = _open_history(path, "auto", recorded if isinstance(recorded, str) else None, state.harness)
    conv = reading.conversation
    if conv is not None:
        kinds = {part.bid: part.kind for msg in chain(conv._head, conv._msgs) for part in msg.parts if part.bid}
        return conv.blocks, kinds
    data = _parse_json(reading.source.read_text(), reading.source.name)
    blocks = data.get("blocks") if isinstance(data, dict) else None
    if not isinstance(blocks, list):
        raise PagerError(f"{reading.source.name}: a pager history needs a \"blocks\" list")
    return [b for b in blocks if isinstance(b, dict)], {}


def _run_report(args: argparse.Namespace, stdout, stderr) -> int:
    """Write the session's HTML report (--out) or print its plain-text summary; return the exit code."""
    _refuse_link(args.contract, "contract")
    if not os.path.isfile(args.contract):
        what = "is a directory, not a contract file" if os.path.isdir(args.contract) else "no such contract"
        raise PagerError(f"{args.contract}: {what}")
    text = _contract_text(args.contract)
    state = _state_of(args.contract, text)
    store_path = _resolve_store(args.contract, args.store, state)
    _check_paths(args.history, args.contract, store_path, None)
    if args.out is not None:
        _refuse_link(args.out, "--out path")
        if os.path.isdir(args.out):
            raise PagerError(f"{args.out}: --out names a directory; name the file to write")
        if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
            raise PagerError(f"{args.out}: --out's folder {_show(os.path.dirname(os.path.abspath(args.out)))} does not exist")
        for what, path in (("--contract", args.contract), ("the page store", store_path), ("--history", args.history)):
            if path is not None and path != "-" and _same_file(args.out, path):
                raise PagerError(f"{args.out}: --out and {what} name the same file; give the report its own")
    history, kinds = _report_history(args.history, state, args.contract) if args.history else (None, {})
    pages: Dict[str, StoredPage] = {}
    ranges: Dict[str, List[str]] = {}
    store = PageStore.open(store_path, create=False, stub_words=_recorded_stub_words(state))
    if store is not None:
        try:
            members = getattr(store, "range_members", None)  # range pages, where the store records them
            for block, action in state.directives.items():
                if action == "page":
                    page = store.get(block)
                    if page is not None:
                        pages[block] = page
                    if members is not None and _RANGE_PAGE_RE.match(block):
                        ranges[block] = list(members(block))
        finally:
            store.close()
    try:
        report = _session_report(text, state, args.contract, pages, history, ranges, args.store, kinds)
    except PagerError as exc:
        raise PagerError(f"{args.contract}: {exc}") from None
    if args.out is None:
        stdout.write(json.dumps(report.to_dict(), ensure_ascii=False) + "\n" if args.json else _report_summary(report))
        return EXIT_OK
    html = _render_report(report)
    with _file_beside(args.out) as out:
        out.write(html)  # type: ignore[union-attr]
    size = len(html.encode("utf-8"))
    if args.json:
        stdout.write(json.dumps({"out": args.out, "blocks": len(report.blocks), "events": len(report.passes),
                                 "bytes": size}, ensure_ascii=False) + "\n")
    else:
        stdout.write(f"report: wrote {args.out} ({len(report.blocks):,} blocks, {len(report.passes):,} "
                     f"event{'' if len(report.passes) == 1 else 's'}, {size:,} bytes)\n")
    return EXIT_OK


COMMANDS = {"recall": (_build_recall_parser, _run_recall), "index": (_build_index_parser, _run_index),
            "search": (_build_search_parser, _run_search), "compaction": (_build_compaction_parser, _run_compaction),
            "report": (_build_report_parser, _run_report)}


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; return the exit code (0 ok, 1 bug, 2 bad input)."""
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    stdout, stderr = sys.stdout, sys.stderr
    try:
        if argv and argv[0] in COMMANDS:
            build, run = COMMANDS[argv[0]]
            return run(build().parse_args(argv[1:]), stdout, stderr)
        return _run_pass(_build_parser().parse_args(argv), stdout, stderr)
    except PagerError as exc:
        stderr.write(f"pager: error: {exc}\n")
        return EXIT_INPUT
    except RecursionError:  # a value nested just under the decoder's limit, deeper than later steps go
        stderr.write("pager: error: the input nests values too deeply to process (keep JSON under about "
                     "900 levels); nothing was changed\n")
        return EXIT_INPUT
    except MemoryError:  # files are written last and all-or-nothing, so nothing is half written
        stderr.write(f"pager: error: out of memory while paging; blocks may hold at most {MAX_BLOCK_CHARS:,} "
                     "characters (see the README's limits)\n")
        return EXIT_INPUT
    except BrokenPipeError:  # the reader left (``index | head``): what it asked for is printed, files written first
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())  # so the interpreter's last flush at exit finds no pipe
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
        return EXIT_OK


def _exit_after_main() -> NoReturn:
    """Run ``main``; end the process with its exit code once the output is flushed.

    ``python3 scripts/pager.py`` runs this from ``atexit``, not from the script's top level:
    CPython keeps the syntax tree of the file it runs as a script (28 MB for this one) until the
    top level returns, and a pass run from there carries it in its peak memory (a 100,000-block
    pass: 102 MB, 3.7x its history; run after the tree is freed, 73 MB, 2.7x). Run by other
    Python code (``runpy``, ``python3 -m cProfile``, ``coverage run``) or under ``python3 -i``,
    the script calls ``main`` in place instead, as that code expects (its own atexit work then
    runs too, and ``-i``'s prompt comes after the pass). The exit codes are
    Python's own: ``main``'s, a ``SystemExit``'s (argparse's 0 and 2), 1 with the traceback for
    a bug, 130 for an interrupt. ``os._exit`` ends it, as the hooks' ``exit_now`` does: every file
    the pass wrote is closed by then, and nothing is left to free one object at a time.
    """
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:  # noqa: BLE001 - a bug or Ctrl-C: shown as Python shows it
        import traceback  # here, not at the top: only a crash needs it (a few ms at every start)
        traceback.print_exc()
        code = 130 if isinstance(exc, KeyboardInterrupt) else 1  # 130: 128 + SIGINT, as a shell reports it
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): the message, exit 1
        sys.stderr.write(f"{code}\n")
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader left or closed the stream: nothing more can reach it
            pass
    os._exit(code)


if __name__ == "__main__":
    if sys._getframe().f_back is None and not sys.flags.inspect:
        atexit.register(_exit_after_main)  # CPython runs this file itself and holds its syntax tree: see there
    else:  # run by other Python code (runpy, a profiler, coverage), or under -i: main in place
        sys.exit(main())
