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

The file has three layers: a pure core (tokenize, score, classify, plan and
render a pass) that never touches files or the clock, the edges (history
loading, the contract reader and writer), and a thin ``main``.
Standard library only; Python 3.9+.
"""

from __future__ import annotations

import argparse
import array
import dataclasses
import datetime
import hashlib
import io
import json
import math
import os
import re
import sqlite3
import sys
import tempfile
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, NamedTuple, NoReturn, Optional, Tuple

try:  # advisory locks are POSIX; elsewhere the append still happens in one write
    import fcntl
except ImportError:  # pragma: no cover - exercised only on platforms without fcntl
    fcntl = None  # type: ignore[assignment]

__version__ = "0.1.0"

# --- constants ---

DEFAULT_ALPHA = 0.7        # weight of intent similarity in R
DEFAULT_BETA = 0.3         # weight of recency in R
DEFAULT_RETAIN_CUT = 0.55  # R at or above this keeps a block verbatim
DEFAULT_EVICT_CUT = 0.20   # R below this removes a block; between the cuts it is paged

ACTIONS = ("retain", "page", "evict")
LIST_OF_ACTION = {"retain": "retained-blocks", "page": "paged-blocks", "evict": "evicted-blocks"}
ACTION_OF_LIST = {name: action for action, name in LIST_OF_ACTION.items()}

SIMILARITIES = ("weighted", "plain")  # the default proxy first; plain is the engine issue's
NEIGHBOUR_DECAY = 0.7      # weighted sim: a block gets this share of an earlier block's match...
NEIGHBOUR_WINDOW = 2       # ...per step, from up to this many blocks before it (answers follow questions)
NEIGHBOUR_POWER = 1.5      # ...raised to this power: a block that clearly raised the topic lends more
DIALOGUE_ROLES = frozenset({"user", "assistant"})  # neighbour credit flows between these only
SYSTEM_ROLES = frozenset({"system", "developer"})  # always retained: the agent's instructions
ACTION_RANK = {"evict": 0, "page": 1, "retain": 2}  # a tool unit takes its strongest member's directive
LENGTH_WEIGHT = 0.25       # weighted sim: how much a long block's coverage is discounted (0 = none)
DEFAULT_STUB_WORDS = 40    # words of block text a page stub keeps
INDEX_SUMMARY_WORDS = 12   # words of a stub a page-index line keeps
STORE_SUFFIX = ".pages.sqlite3"  # C.limn -> C.pages.sqlite3 beside the contract
INDEX_FLAG = "pager_index"  # marks the page-index block --with-index prepends; passes skip it
RECALL_COMMAND = "python3 scripts/pager.py recall"  # relative to the skill root, as SKILL.md says

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

# Characters a quoted value can't hold: the quote (Liminate has no escape) and
# every character Python's str.splitlines() breaks on, which the interpreter uses.
FORBIDDEN_IN_QUOTES = frozenset('"\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029')
_FORBIDDEN_RE = re.compile('["\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]')
_LINE_BREAK_RE = re.compile('[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]')
_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?\Z")
_UNQUOTED_RE = re.compile(r"[a-z0-9 .-]*\Z")
_WORD_RE = re.compile(r"\w+")

EXIT_OK, EXIT_BUG, EXIT_INPUT = 0, 1, 2


class PagerError(Exception):
    """An expected failure: bad input, a bad flag, or a contract the pager can't read."""


# --- core: tokens, score, classify ---

def tokenize(text: str) -> List[str]:
    """Return the lowercase word tokens of ``text``.

    Example:
        >>> tokenize("Fixed the off-by-one in block_index()")
        ['fixed', 'the', 'off', 'by', 'one', 'in', 'block_index']
    """
    return _WORD_RE.findall(text.lower())


def intent_keywords(items: Iterable[str]) -> List[str]:
    """Return the intent keywords: tokens of ``items`` minus stop words, first occurrence order, once.

    Example:
        >>> intent_keywords(["Pager", "what is the retention score", "pager"])
        ['pager', 'retention', 'score']
    """
    seen: Dict[str, None] = {}
    for item in items:
        for token in tokenize(item):
            if token not in STOP_WORDS:
                seen.setdefault(token, None)
    return list(seen)


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

_SUFFIXES = (("ments", 3), ("ment", 3), ("ions", 3), ("ion", 3), ("ingly", 3), ("edly", 3),
             ("ings", 3), ("ing", 3), ("ies", 2), ("ied", 2), ("ed", 3), ("ly", 5), ("s", 3))
_VOWEL_RE = re.compile(r"[aeiouy]")
_STEMS: Dict[str, str] = {}   # memo: a session repeats its words
_STEMS_MAX = 500_000
_TOKEN_AT = re.compile(r"\w*").match


def stem(word: str) -> str:
    """Return a light English stem of a lowercase token, so "retained" meets "retain".

    It cuts one common suffix (keeping a few letters and a vowel), undoes a doubled
    final consonant, drops a final "e" and turns a final "y" into "i". Words of three
    letters or fewer, and tokens with digits or "_", are left alone.

    Example:
        >>> [stem(w) for w in ("retained", "retain", "retaining", "families", "family", "scores")]
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


def keyword_stems(keywords: Iterable[str]) -> List[str]:
    """Return the distinct stems of ``keywords``, first occurrence first."""
    return list(dict.fromkeys(stem(k) for k in keywords))


def _needle(stem_: str) -> str:
    # Every token whose stem is s starts with s, except that a final "y" became "i":
    # search for s without its final "i" then ("famili" is found through "famil").
    return stem_[:-1] if len(stem_) > 1 and stem_[-1] == "i" else stem_


def block_hits(lowered: str, stems: Iterable[str]) -> Tuple[str, ...]:
    """Return the stems that some whole token of ``lowered`` stems to, in the order given.

    Equal to checking ``stem(t)`` for every ``\\w+`` token ``t``, without tokenizing the
    block: it searches for each stem's prefix, keeps hits that start a token, and stems
    just that token.

    Example:
        >>> block_hits("we retained the families' scores", ["retain", "famili", "pager"])
        ('retain', 'famili')
    """
    found: Tuple[str, ...] = ()
    for s in stems:
        needle = _needle(s)
        if not needle or needle not in lowered:
            continue
        size = len(needle)
        i = lowered.find(needle)
        while i >= 0:
            if i and (lowered[i - 1].isalnum() or lowered[i - 1] == "_"):
                i = lowered.find(needle, i + size)  # inside a token, not at its start
                continue
            token = _TOKEN_AT(lowered, i).group()
            if (_STEMS.get(token) or stem(token)) == s:
                found += (s,)
                break
            i = lowered.find(needle, i + len(token) + 1)
    return found


def recency(delta_t: int) -> float:
    """Return the recency term ``1 / (1 + ln(1 + delta_t))``: 1 now, falling slowly with age."""
    return 1.0 / (1.0 + math.log1p(delta_t))


_CODE_MARKS = str.maketrans("", "", '{}[]()<>"\':;,=/\\|`$#*&+')
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
        marks = size - len(text.translate(_CODE_MARKS))
        return -(-size * 10 // 34) if marks * 8 > size else -(-size // 4)
    wide = len(_NON_LATIN.findall(text))
    return wide + -(-(size - wide) // 4)


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

    def validate(self) -> "Params":
        """Return self, or raise PagerError naming the first bad value."""
        if self.similarity not in SIMILARITIES:
            raise PagerError(f"--similarity must be one of {', '.join(SIMILARITIES)} (got {_show(self.similarity)})")
        if self.budget is not None and (not _is_int(self.budget) or self.budget < 1):
            raise PagerError(f"--budget must be a positive integer (got {_show(self.budget)})")
        if not _is_int(self.stub_words) or self.stub_words < 1:
            raise PagerError(f"--stub-words must be a positive integer (got {_show(self.stub_words)})")
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

    def score(self, sim: float, delta_t: int) -> Tuple[float, float]:
        """Return ``(R, recency)`` for a block with similarity ``sim`` and age ``delta_t``."""
        rec = recency(delta_t)
        return self.alpha * sim + self.beta * rec, rec

    def classify(self, r: float) -> str:
        """Return the directive for score ``r``: retain, page or evict."""
        if r >= self.retain_cut:
            return "retain"
        if r < self.evict_cut:
            return "evict"
        return "page"


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
        parts = _RATIONALE % (self.R, self.similarity, self.own, self.neighbour, self.recency, self.delta_t)
        return parts if self.reason == "score" else f"{self.reason}; {parts}"

    def to_dict(self) -> Dict[str, object]:
        """Return the JSON record of this decision."""
        return {"block": self.block, "kind": self.kind, "role": self.role, "turn": self.turn,
                "tokens": self.tokens, "matched": list(self.matched),
                "similarity": round(self.similarity, 6), "own": round(self.own, 6),
                "neighbour": round(self.neighbour, 6), "recency": round(self.recency, 6),
                "delta_t": self.delta_t, "R": round(self.R, 6), "action": self.action,
                "reason": self.reason, "stub": self.stub}


_RATIONALE = "R=%.3f sim=%.3f own=%.3f nb=%.3f rec=%.3f dt=%d"


class _Features(NamedTuple):
    block: str
    turn: int
    role: str
    kind: Optional[str]
    tokens: int
    matched: Tuple[str, ...]
    guard: Optional[str]  # why it must stay: "pinned" or "system"; None
    stub: bool
    length: int       # characters of the (original) text, for the weighted proxy
    stub_tokens: int  # what the block costs as a stub (budget mode), else 0
    unit: Optional[str]   # blocks sharing a unit (a tool call and its results) share one directive


def _show(value: object, limit: int = 60) -> str:
    """Return a short JSON rendering of a bad value for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_quotable(value: str, what: str) -> str:
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


class Scorer:
    """Scores blocks one at a time, then classifies them once the whole history is seen.

    Blocks go in through ``add`` (which validates each), decisions come out of
    ``finish``; only small per-block features are kept in between, so a caller
    streaming a large history never holds its text.
    """

    def __init__(self, keywords: List[str], params: Params,
                 pages: Optional[Callable[[str], Optional["StoredPage"]]] = None,
                 stub_text: Optional[Callable[["StoredPage"], str]] = None,
                 with_index: bool = False, reserve: Optional[Callable[[Mapping[str, int]], int]] = None) -> None:
        self.keywords = list(keywords)
        self.params = params
        self.weighted = params.similarity == "weighted"
        self.terms = keyword_stems(self.keywords) if self.weighted else self.keywords
        self.pages = pages  # id -> the stored original of a paged block, for blocks arriving as stubs
        # Budget mode prices every block as a stub; stub_text renders one (default hint: C.limn).
        if params.budget is not None and stub_text is None:
            stub_text = lambda page: make_stub(page, recall_hint(page.block, "C.limn", None))  # noqa: E731
        self.stub_text = stub_text if params.budget is not None else None
        self.with_index = with_index  # a page also costs its line in the emitted page index
        self.reserve = reserve        # ids seen -> budget tokens spoken for outside them (the index's rest)
        self._features: List[tuple] = []  # _Features-shaped plain tuples: cheaper to build
        self._seen: Dict[str, int] = {}
        self.skipped: List[int] = []  # positions of page-index blocks, which get no decision
        self._shared: Dict[object, object] = {}  # one copy of each role, kind and match tuple
        self.max_turn: Optional[int] = None
        self.tokens_before = 0  # what the history costs as it arrived (stubs at their own size)
        self.tokens_after: Optional[int] = None  # set by finish when a budget is fitted

    def add(self, index: int, raw: object) -> None:
        """Validate ``raw`` (the block at ``blocks[index]``) and record its features."""
        if type(raw) is not dict:
            raise PagerError(f"blocks[{index}] must be an object (got {_show(raw)})")
        if raw.get(INDEX_FLAG) is True:
            self.skipped.append(index)
            return  # the page index a previous --emit --with-index prepended: not conversation
        block_id, turn, role, text = raw.get("id"), raw.get("turn"), raw.get("role"), raw.get("text")
        kind, pinned, tokens = raw.get("kind"), raw.get("pinned", False), raw.get("tokens")
        if not (type(block_id) is str and type(turn) is int and type(role) is str and type(text) is str
                and (kind is None or type(kind) is str) and type(pinned) is bool
                and (tokens is None or type(tokens) is int)):
            self._explain(index, raw)
        if turn < 0:
            raise PagerError(f"blocks[{index}].turn must not be negative (got {turn})")
        if not role:
            raise PagerError(f"blocks[{index}].role must be a non-empty string (got \"\")")
        if tokens is None:
            tokens = estimate_tokens(text)
        elif tokens < 0:
            raise PagerError(f"blocks[{index}].tokens must be a non-negative integer (got {tokens})")
        if not block_id or not block_id.isascii() or _FORBIDDEN_RE.search(block_id):
            check_quotable(block_id, f"blocks[{index}].id")
        first = self._seen.setdefault(block_id, index)
        if first != index:
            raise PagerError(f"blocks[{index}].id {_show(block_id)} duplicates blocks[{first}].id")
        self.tokens_before += tokens
        stub = raw.get("stub", False)
        if stub is not False:
            if stub is not True:
                raise PagerError(f"blocks[{index}].stub must be true or false (got {_show(stub)})")
            # Never score a stub as if it were the block: score the original it stands for.
            page = self.pages(block_id) if self.pages is not None else None
            if page is None:
                raise PagerError(f"blocks[{index}] is the stub of {_show(block_id)}, but the page store "
                                 "holds no text for it (evicted since? pass the latest --emit output)")
            text, tokens = page.text, page.tokens
        matched: Tuple[str, ...] = ()
        if self.terms:
            lowered = text.lower()
            if self.weighted:
                found = block_hits(lowered, self.terms)
            else:
                found = tuple([k for k in self.terms if k in lowered and _has_token(lowered, k)])
            if found:
                matched = self._shared.setdefault(found, found)  # type: ignore[assignment]
        shared = self._shared
        role = shared.setdefault(role, role)  # type: ignore[assignment]
        if kind is not None:
            kind = shared.setdefault(kind, kind)  # type: ignore[assignment]
        stub_tokens = 0
        if self.stub_text is not None:
            summary = stub_summary(text, matched, self.params.stub_words,
                                   block_hits if self.weighted else None)
            page = StoredPage(block_id, turn, role, kind, tokens, matched, "", "", summary, text)
            stub_tokens = estimate_tokens(self.stub_text(page))
            if self.with_index:
                stub_tokens += estimate_tokens(index_lines([page])[0]) + 1
        unit = raw.get("unit")
        if unit is not None:
            if type(unit) is not str:
                raise PagerError(f"blocks[{index}].unit must be a string (got {_show(unit)})")
            unit = shared.setdefault(unit, unit)
        guard = "pinned" if pinned else "system" if role in SYSTEM_ROLES or raw.get("protected") == "system" else None
        self._features.append((block_id, turn, role, kind, tokens, matched, guard, stub,
                               len(text), stub_tokens, unit))  # _Features order
        if self.max_turn is None or turn > self.max_turn:
            self.max_turn = turn

    @staticmethod
    def _explain(index: int, raw: Dict[str, object]) -> None:
        """Raise the PagerError naming the first missing or mistyped field of a block."""
        where = f"blocks[{index}]"
        for field, ok, expected in (
                ("id", lambda v: type(v) is str, "a string"),
                ("turn", lambda v: type(v) is int, "an integer"),
                ("role", lambda v: type(v) is str, "a non-empty string"),
                ("text", lambda v: type(v) is str, "a string")):
            if field not in raw:
                raise PagerError(f"{where}.{field} is missing")
            if not ok(raw[field]):
                raise PagerError(f"{where}.{field} must be {expected} (got {_show(raw[field])})")
        for field, ok, expected in (
                ("kind", lambda v: v is None or type(v) is str, "a string"),
                ("pinned", lambda v: type(v) is bool, "true or false"),
                ("tokens", lambda v: v is None or type(v) is int, "a non-negative integer")):
            if field in raw and not ok(raw[field]):
                raise PagerError(f"{where}.{field} must be {expected} (got {_show(raw[field])})")
        raise AssertionError(f"{where} failed the fast check but no field explains why")  # a bug, not input

    def _similarities(self, features: List[tuple]) -> Tuple[Dict[int, float], Dict[int, float]]:
        """Return (own, neighbour) scores of the blocks that have any, by position.

        Weighted proxy: a keyword counts by its rarity in this history,
        ``idf(k) = ln(1 + (N - df + 0.5) / (df + 0.5))``; ``own`` is the idf share of the
        intent the block holds, divided by ``1 - b + b * length / mean length`` (b =
        LENGTH_WEIGHT) and capped at 1; a user or assistant block up to NEIGHBOUR_WINDOW
        blocks after a matching user or assistant block gets
        ``NEIGHBOUR_DECAY ** distance * own ** NEIGHBOUR_POWER`` of it. Keywords that occur
        nowhere are left out of the total. Plain proxy: ``own`` is the share of keywords
        present, no neighbour credit.
        """
        n_terms = len(self.terms)
        hits = [(i, f[5]) for i, f in enumerate(features) if f[5]]
        if not self.weighted:
            return {i: len(m) / n_terms for i, m in hits}, {}
        n = len(features)
        df: Dict[str, int] = dict.fromkeys(self.terms, 0)
        for _, matched in hits:
            for term in matched:
                df[term] += 1
        idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        total = sum(idf[t] for t, d in df.items() if d)
        own: Dict[int, float] = {}
        if not total:
            return own, {}
        mean_length = sum(f[8] for f in features) / n or 1.0
        for i, matched in hits:
            coverage = sum(idf[t] for t in matched) / total
            scaled = coverage / (1.0 - LENGTH_WEIGHT + LENGTH_WEIGHT * features[i][8] / mean_length)
            own[i] = scaled if scaled < 1.0 else 1.0
        # Dialogue turns lend and borrow credit; a tool result or system block has its own
        # content (and, with transcripts, its tool call) to go by, not its position.
        neighbour: Dict[int, float] = {}
        steps = [(d, NEIGHBOUR_DECAY ** d) for d in range(1, NEIGHBOUR_WINDOW + 1)]
        for i, score in own.items():
            if features[i][2] not in DIALOGUE_ROLES:
                continue
            lent = score ** NEIGHBOUR_POWER
            for d, factor in steps:
                credit = lent * factor
                j = i + d  # forward only: the topic is raised first, the answer follows
                if j < n and credit > neighbour.get(j, 0.0) and features[j][2] in DIALOGUE_ROLES:
                    neighbour[j] = credit
        return own, neighbour

    def finish(self, current_turn: Optional[int]) -> List["Decision"]:
        """Return one Decision per block, in input order."""
        if current_turn is None:
            current_turn = self.max_turn if self.max_turn is not None else 0
        features, self._features = self._features, []
        own, neighbour = self._similarities(features)
        recencies: Dict[int, Tuple[int, float]] = {}
        alpha, beta = self.params.alpha, self.params.beta
        retain_cut, evict_cut = self.params.retain_cut, self.params.evict_cut
        new_tuple = tuple.__new__  # builds a Decision without NamedTuple's Python-level __new__
        decisions = []
        append = decisions.append
        for index, f in enumerate(features):
            block, turn, role, kind, tokens, matched, guard, stub = f[:8]
            if turn > current_turn:
                position = _decision_items(index + 1, self.skipped)[index]
                raise PagerError(f"blocks[{position}].turn ({turn}) lies after current_turn ({current_turn})")
            aged = recencies.get(turn)
            if aged is None:
                aged = recencies[turn] = (current_turn - turn, recency(current_turn - turn))
            delta_t, rec = aged
            mine, near = own.get(index, 0.0), neighbour.get(index, 0.0)
            sim = mine if mine >= near else near
            r = alpha * sim + beta * rec
            if guard is not None:
                action, reason = "retain", guard
            else:  # Params.classify, inlined on the hot path
                action = "retain" if r >= retain_cut else "evict" if r < evict_cut else "page"
                reason = "score"
            append(new_tuple(Decision, (block, turn, role, kind, tokens, matched, sim, mine, near, rec,
                                        delta_t, r, action, reason, stub)))
        _protect_recent(decisions, current_turn, self.params.keep_recent)
        units = [f[10] for f in features]
        has_units = any(u is not None for u in units)
        if has_units:
            _join_units(decisions, units)
        if self.params.budget is not None:
            reserved = self.reserve(self._seen) if self.reserve is not None else 0
            room = max(0, self.params.budget - reserved)
            self.tokens_after = fit_budget(decisions, [f[9] for f in features], room,
                                           units if has_units else None) + reserved
        return decisions


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


def _guard(decisions: List[Decision], i: int, reason: str) -> None:
    d = decisions[i]
    if d.reason == "score":
        decisions[i] = d._replace(action="retain", reason=reason)


def _join_units(decisions: List[Decision], units: List[Optional[str]]) -> None:
    """Give every block of a unit its strongest member's directive (retain > page > evict)."""
    best: Dict[str, str] = {}
    for d, unit in zip(decisions, units):
        if unit is not None and ACTION_RANK[d.action] > ACTION_RANK[best.get(unit, "evict")]:
            best[unit] = d.action
    for i, unit in enumerate(units):
        if unit is not None and decisions[i].action != best[unit]:
            decisions[i] = decisions[i]._replace(action=best[unit], reason=f"unit {unit}")


PROTECTIONS = ("pinned", "system", "recent")  # reasons a block is kept whatever its score or the budget


def fit_budget(decisions: List[Decision], stub_tokens: List[int], budget: int,
               units: Optional[List[Optional[str]]] = None) -> int:
    """Fit ``decisions`` (changed in place) into ``budget`` tokens; return the tokens kept.

    What stays costs its tokens verbatim, or its stub's tokens when paged. Protected
    blocks (pinned, system, recent) always stay verbatim, and so does any unit
    holding one. A unit (a tool call and its results) competes as one piece: its
    tokens summed, its R the best of its members. The others compete by R, highest
    first (ties: later turn, then later position):
      1. each is kept verbatim while its tokens still fit (one that does not fit is
         skipped, so a smaller one after it may fit);
      2. the rest that classification did not evict become stubs while their stub
         still fits (a block under the evict cut is never worth a stub);
      3. what is left is evicted.
    So the budget, not the retain cut, decides what is kept verbatim: under pressure
    the lowest-R retained blocks are paged and the lowest-R pages evicted first, and
    with room to spare the best pages (then the most recent of the rest) are kept
    whole. Every change says so in its reason: "budget-kept", "budget-paged",
    "budget-evicted". When protected blocks alone exceed the budget the pass still
    completes (all else evicted) and the caller reports the overflow.
    """
    groups: Dict[object, List[int]] = {}
    for i in range(len(decisions)):
        key = units[i] if units is not None and units[i] is not None else i
        groups.setdefault(key, []).append(i)
    left = budget
    candidates = []
    for members in groups.values():
        cost = sum(decisions[i].tokens for i in members)
        if any(decisions[i].reason in PROTECTIONS for i in members):
            left -= cost
        else:
            best = max(members, key=lambda i: (decisions[i].R, decisions[i].turn, i))
            candidates.append((-decisions[best].R, -decisions[best].turn, -best, members, cost,
                               sum(stub_tokens[i] for i in members)))
    candidates.sort(key=lambda c: c[:3])
    verbatim = set()
    for *_, members, cost, _stubs in candidates:
        if cost <= left:
            left -= cost
            verbatim.add(members[0])
    for *_, members, cost, stubs in candidates:
        if members[0] in verbatim:
            action = "retain"
        elif decisions[members[0]].action != "evict" and stubs <= left:
            left -= stubs
            action = "page"
        else:
            action = "evict"
        for i in members:
            d = decisions[i]
            if action != d.action:
                decisions[i] = d._replace(action=action, reason="budget-" + {
                    "retain": "kept", "page": "paged", "evict": "evicted"}[action])
    return budget - left


@dataclasses.dataclass(frozen=True)
class PassPlan:
    """The scored decisions of one pass, before any contract is consulted."""

    decisions: List[Decision]
    keywords: List[str]
    current_turn: int
    params: Params
    header: Dict[str, object] = dataclasses.field(default_factory=dict)  # the history's other fields
    tokens_before: int = 0              # the history as it arrived (stubs at their own size)
    tokens_after: Optional[int] = None  # kept verbatim plus stubs, when a budget was fitted

    def pressure(self) -> Optional[Tuple[float, float]]:
        """Return context pressure (tokens / budget) before and after the pass, or None."""
        if self.params.budget is None or self.tokens_after is None:
            return None
        return self.tokens_before / self.params.budget, self.tokens_after / self.params.budget

    def budget_values(self) -> Dict[str, object]:
        """Return the contract's budget values for this pass (empty without a budget)."""
        rho = self.pressure()
        if rho is None:
            return {}
        return {"token-budget": self.params.budget, "tokens-before": self.tokens_before,
                "tokens-after": self.tokens_after, "pressure-before": round(rho[0], 4),
                "pressure-after": round(rho[1], 4)}

    def counts(self) -> Dict[str, int]:
        """Return the number of blocks per directive."""
        counts = dict.fromkeys(ACTIONS, 0)
        for d in self.decisions:
            counts[d.action] += 1
        return counts


def _header_keywords(header: Mapping[str, object]) -> List[str]:
    if "intent_ir" not in header:
        raise PagerError("intent_ir is missing (a list of intent keywords)")
    intent = header["intent_ir"]
    if not isinstance(intent, list):
        raise PagerError(f"intent_ir must be a list of strings (got {_show(intent)})")
    for i, item in enumerate(intent):
        if not isinstance(item, str):
            raise PagerError(f"intent_ir[{i}] must be a string (got {_show(item)})")
    return intent_keywords(intent)


def _header_current_turn(header: Mapping[str, object]) -> Optional[int]:
    value = header.get("current_turn")
    if value is None:
        return None
    if not _is_int(value):
        raise PagerError(f"current_turn must be an integer (got {_show(value)})")
    if value < 0:
        raise PagerError(f"current_turn must not be negative (got {value})")
    return value


def plan_pass(history: Mapping[str, object], params: Params = Params(),
              pages: Optional[Mapping[str, "StoredPage"]] = None) -> PassPlan:
    """Return the PassPlan for a history dict in the pager's own schema. No I/O.

    ``pages`` maps a block id to its stored original (StoredPage); blocks that
    arrive as stubs (``"stub": true``) are scored on it.

    Example:
        >>> plan = plan_pass({"intent_ir": ["pager"], "blocks": [
        ...     {"id": "b1", "turn": 1, "role": "user", "text": "Tune the pager."}]})
        >>> [(d.block, d.action) for d in plan.decisions]
        [('b1', 'retain')]
    """
    if not isinstance(history, Mapping):
        raise PagerError("the history must be a JSON object with a blocks list")
    params.validate()
    scorer = Scorer(_header_keywords(history), params, pages.get if pages is not None else None)
    blocks = history.get("blocks")
    if not isinstance(blocks, list):
        raise PagerError(f"blocks must be a list (got {_show(blocks)})" if "blocks" in history
                         else "blocks is missing")
    for index, raw in enumerate(blocks):
        scorer.add(index, raw)
    current = _header_current_turn(history)
    decisions = scorer.finish(current)
    header = {key: value for key, value in history.items() if key != "blocks"}
    return PassPlan(decisions, scorer.keywords, current if current is not None else (scorer.max_turn or 0),
                    params, header, scorer.tokens_before, scorer.tokens_after)


# --- core: stubs and the page index ---

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")


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


def stub_summary(text: str, keywords: Iterable[str], words: int = DEFAULT_STUB_WORDS,
                 matcher: Optional[Callable[[str, List[str]], Tuple[str, ...]]] = None) -> str:
    """Return up to ``words`` words of ``text``: its best-matching sentence onward, else its start.

    The best sentence holds the most distinct intent keywords (the earliest wins a
    tie), found by ``matcher(lowered_sentence, keywords)`` (block_hits for stems;
    by default whole tokens equal to a keyword); with no match the text's first
    words stand for it. Whitespace is collapsed; a cut summary ends with "...".

    Example:
        >>> stub_summary("Setup done. The off-by-one in the index helper is fixed now.", ["index"], 6)
        'The off-by-one in the index helper...'
    """
    wanted = list(keywords)
    if wanted:
        sentences = _SENTENCE_END.split(text)
        if len(sentences) > 1:
            best, start = 0, 0
            for position, sentence in enumerate(sentences):
                lowered = sentence.lower()
                if matcher is not None:
                    hits = len(matcher(lowered, wanted))
                else:
                    hits = sum(1 for k in wanted if k in lowered and _has_token(lowered, k))
                if hits > best:
                    best, start = hits, position
                    if hits == len(wanted):
                        break  # no sentence can hold more
            text = " ".join(sentences[start:])
    chosen = text.split(None, words)
    if not chosen:
        return "(empty)"
    if len(chosen) > words:
        return " ".join(chosen[:words]) + "..."
    return " ".join(chosen)


def recall_hint(block: str, contract: str, store: Optional[str]) -> str:
    """Return the command that recalls ``block``."""
    hint = f"{RECALL_COMMAND} {_shell_word(block)} --contract {_shell_word(contract)}"
    return hint + (f" --store {_shell_word(store)}" if store else "")


def _shell_word(text: str) -> str:
    return text if re.fullmatch(r"[\w@%+=:,./-]+", text, re.ASCII) else "'" + text.replace("'", "'\\''") + "'"


def make_stub(page: "StoredPage", hint: str) -> str:
    """Return the one-line stub that stands in for a paged block.

    Example:
        >>> page = StoredPage("b4", 8, "assistant", None, 19, (), "", "", "Fixed the index helper.", "")
        >>> make_stub(page, "python3 scripts/pager.py recall b4 --contract C.limn")
        '[paged b4 | turn 8 | assistant | 19 tokens] Fixed the index helper. (recall: python3 scripts/pager.py recall b4 --contract C.limn)'
    """
    return f"[paged {page.block} | turn {page.turn} | {page.role} | {page.tokens} tokens] {page.summary} (recall: {hint})"


def index_lines(pages: Iterable["StoredPage"]) -> List[str]:
    """Return one compact line per paged block: id, turn, tokens and the start of its summary."""
    lines = []
    for page in pages:
        words = page.summary.split(" ")
        short = page.summary if len(words) <= INDEX_SUMMARY_WORDS else " ".join(words[:INDEX_SUMMARY_WORDS]) + "..."
        lines.append(f"{page.block} | turn {page.turn} | {page.tokens} tokens | {short}")
    return lines


# --- core: statements and the contract state ---

def format_number(value: float) -> str:
    """Return ``value`` as a plain decimal the interpreter stores as a number (no exponent).

    Example:
        >>> format_number(0.7), format_number(3), format_number(0.1 + 0.2)
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


def _quoted_values(statement: str) -> List[str]:
    return statement.split('"')[1::2]


def _unquoted_words(statement: str) -> List[str]:
    return " ".join(statement.split('"')[0::2]).split()


@dataclasses.dataclass
class ContractState:
    """What the pager's own statements in a contract say, as replay would leave it."""

    directives: Dict[str, str] = dataclasses.field(default_factory=dict)  # block id -> action
    declared: set = dataclasses.field(default_factory=set)                # list names declared
    values: Dict[str, object] = dataclasses.field(default_factory=dict)   # named values
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
            else:
                if current != action:
                    raise PagerError(f"block {_show(block)} is not in {name}")
                del self.directives[block]
        elif form == "text":
            self.values[words[4]] = quoted[0]
        elif form == "number":
            self.values[words[4]] = _parse_number(words[6])


def _parse_number(text: str) -> float:
    return int(text) if "." not in text else float(text)


def statement_add(block: str, action: str, because: str) -> str:
    """Return the statement adding ``block`` to the list of ``action``."""
    return f'add "{block}" to {LIST_OF_ACTION[action]} because "{because}"'


def statement_remove(block: str, action: str, because: str) -> str:
    """Return the statement removing ``block`` from the list of ``action``."""
    return f'remove "{block}" from {LIST_OF_ACTION[action]} because "{because}"'


def statement_value(name: str, value: object) -> str:
    """Return the statement remembering a named text or number value."""
    if name in NUMBER_VALUES:
        return f"remember a number called {name} with {format_number(value)}"  # type: ignore[arg-type]
    return f'remember a value called {name} with "{value}"'


def iter_statements(plan: PassPlan, state: ContractState, now: str,
                    extra_values: Mapping[str, object] = {}) -> Iterator[str]:
    """Yield the checked statements that bring ``state`` to ``plan``'s directives.

    New blocks get an ``add``; a block whose directive changed gets a ``remove``
    and an ``add``; an unchanged block gets nothing. Settings that differ from
    the contract's are remembered again; the pass marker comes last. Each
    statement passes check_statement before it is yielded.
    """
    check = check_statement
    if state.empty:
        statement = f'about "{CONTRACT_TOPIC}"'
        check(statement)
        yield statement
    for name in LIST_OF_ACTION.values():
        if name not in state.declared:
            statement = f"remember a list called {name}"
            check(statement)
            yield statement
    known = state.directives
    for d in plan.decisions:
        previous = known.get(d.block)
        if previous == d.action:
            continue
        if d.reason == "score":  # Decision.rationale, inlined on the hot path
            because = _RATIONALE % (d.R, d.similarity, d.own, d.neighbour, d.recency, d.delta_t)
        else:
            because = d.rationale()
        if previous is not None:
            statement = statement_remove(d.block, previous, because)
            check(statement)
            yield statement
        statement = statement_add(d.block, d.action, because)
        check(statement)
        yield statement
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
    for name, value in settings.items():
        if name in NUMBER_VALUES:
            value = _parse_number(format_number(value))  # compare as the contract will store it
        if state.values.get(name) != value:
            statement = statement_value(name, value)
            check(statement)
            yield statement
    statement = statement_value(PASS_MARKER, now)
    check(statement)
    yield statement


def render_pass(plan: PassPlan, state: ContractState, now: str,
                extra_values: Mapping[str, object] = {}) -> List[str]:
    """Return the checked statements of a pass as a list (see iter_statements).

    Example:
        >>> plan = plan_pass({"intent_ir": ["pager"], "blocks": [
        ...     {"id": "b1", "turn": 1, "role": "user", "text": "Tune the pager."}]})
        >>> render_pass(plan, ContractState(), now="2026-05-17T03:08:12+00:00")[4]
        'add "b1" to retained-blocks because "recent; R=1.000 sim=1.000 own=1.000 nb=0.000 rec=1.000 dt=0"'
    """
    return list(iter_statements(plan, state, now, extra_values))


def encode_statements(state: ContractState, statements: Iterable[str]) -> bytearray:
    """Return the bytes to append: one line per statement, after a line end if the file lacks one."""
    out = bytearray(b"\n" if state.needs_newline else b"")
    batch: List[str] = []
    for statement in statements:
        batch.append(statement)
        if len(batch) == 4096:  # encode in slices: never hold every statement as a str at once
            out += ("\n".join(batch) + "\n").encode("utf-8")
            batch = []
    if batch:
        out += ("\n".join(batch) + "\n").encode("utf-8")
    return out


def count_changes(plan: PassPlan, state: ContractState) -> Dict[str, int]:
    """Return how many blocks are new, moved and unchanged relative to ``state``."""
    counts = {"new": 0, "moved": 0, "unchanged": 0}
    for d in plan.decisions:
        previous = state.directives.get(d.block)
        counts["new" if previous is None else "unchanged" if previous == d.action else "moved"] += 1
    return counts


def _looks_cut_from_pager_name(words: List[str]) -> bool:
    return any(w not in LIMN_VOCAB and any(n.startswith(w) for n in PAGER_NAMES) for w in words)


def read_contract_state(text: str) -> ContractState:
    """Return the ContractState that the pager's own statements in ``text`` describe.

    Lines that are not the pager's (other tools' Liminate) are skipped. A pager
    statement that does not parse, or that replay would reject, raises PagerError
    naming its line.
    """
    state = ContractState()
    lines = text.split("\n")
    last_index = len(lines) - 1
    if lines[-1] == "":
        lines.pop()
    elif text:
        state.needs_newline = True
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r").strip()
        if not line:
            continue
        state.empty = False
        words = _unquoted_words(line)
        unterminated = number - 1 == last_index
        verb = words[0] if words else ""
        ours = verb in ("add", "remove", "remember") and any(w in PAGER_NAMES for w in words)
        if not ours:
            if unterminated and (line.count('"') % 2 == 1 or _looks_cut_from_pager_name(words)):
                raise PagerError(f"line {number} looks cut short (no line end): {_show(line, 80)}")
            continue
        try:
            state.apply(line)
        except PagerError as exc:
            cut = " (no line end: cut short?)" if unterminated else ""
            raise PagerError(f"line {number}: can't read back pager statement{cut}: {exc}") from None
    return state


# --- edges: history loading ---

_JSON_WS = re.compile(r"[ \t\n\r]*")
_ARRAY_SEP = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class _JsonStream:
    """Reads one JSON document from a text stream value by value, in bounded memory."""

    def __init__(self, fp: io.TextIOBase, name: str, chunk: int = 1 << 20) -> None:
        self.fp, self.name, self.chunk = fp, name, chunk
        self.buf, self.pos, self.eof = "", 0, False
        self.lines_before = 0  # line ends in text already dropped from buf
        self.col_before = 0    # characters after the last dropped line end
        self.dropped = 0       # characters dropped from buf: buf[i] is character dropped + i

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
                    # The buffer holds only this unfinished value: it outgrew a chunk. Read
                    # bigger chunks so a huge value costs near-linear, not quadratic, time.
                    self.chunk = min(self.chunk * 2, 1 << 26)
                if self._more():
                    continue
                self.fail(exc.msg, exc.pos)
            # A number at the very end of the buffer may continue in the next chunk.
            if end < len(self.buf) or not self._more():
                self.pos = end
                return obj


def _stream_history(fp: io.TextIOBase, name: str,
                    on_blocks: Callable[[Dict[str, object]], Optional[Callable[[int, object], None]]],
                    chunk: int = 1 << 20, spans: Optional["array.array[int]"] = None
                    ) -> Tuple[Dict[str, object], bool]:
    """Read a pager history object, handing blocks one by one to the callback ``on_blocks`` returns.

    ``on_blocks(header_so_far)`` is called when the ``blocks`` list starts; if it
    returns None the blocks are skipped. With ``spans``, the start and end
    character offsets of every handed block are appended to it, so a later read
    can pick single blocks out without parsing the rest. Returns the header
    fields and whether the blocks were handed over.
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
                index = 0
                if js.peek() == "]":
                    js.pos += 1
                else:
                    record = spans.append if spans is not None and sink is not None else None
                    while True:
                        if record is not None:
                            record(js.dropped + js.pos)
                        item = js.value()
                        if record is not None:
                            record(js.dropped + js.pos)
                        if sink is not None:
                            sink(index, item)
                        index += 1
                        # Fast path: the separator and the next value's start are in the buffer.
                        sep = _ARRAY_SEP.match(js.buf, js.pos)
                        if sep is not None and sep.end() < len(js.buf):
                            js.pos = sep.end()
                            if sep.group(1) == "]":
                                break
                            continue
                        c = js.peek()
                        if c == "]":
                            js.pos += 1
                            break
                        js.take(",")
            else:
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


class HistorySource:
    """A history file (or standard input, held in memory) that can be streamed more than once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = "<stdin>" if path == "-" else path
        self.spans: "array.array[int]" = array.array("q")  # start, end of each block, last full stream
        self.skipped: List[int] = []  # block positions the scorer skipped (page-index blocks)
        self._stdin: Optional[str] = None
        if path == "-":
            data = sys.stdin.buffer.read()
            try:
                self._stdin = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise PagerError(f"<stdin>: not valid UTF-8 text ({exc.reason})") from None

    def open(self) -> io.TextIOBase:
        """Return a fresh text stream over the history."""
        if self._stdin is not None:
            return io.StringIO(self._stdin)
        try:
            return open(self.path, encoding="utf-8", newline="")
        except FileNotFoundError:
            raise PagerError(f"{self.path}: no such file") from None
        except IsADirectoryError:
            raise PagerError(f"{self.path}: is a directory, not a history file") from None
        except OSError as exc:
            raise PagerError(f"{self.path}: can't read ({exc.strerror})") from None

    def stream(self, on_blocks: Callable[[Dict[str, object]], Optional[Callable[[int, object], None]]]
               ) -> Tuple[Dict[str, object], bool]:
        """Stream the history once (see _stream_history), noting where each block lies."""
        spans = array.array("q")
        try:
            with self.open() as fp:
                header, handed = _stream_history(fp, self.name, on_blocks, spans=spans)
                if handed:
                    self.spans = spans
                return header, handed
        except PagerError as exc:
            message = str(exc)
            raise PagerError(message if message.startswith(self.name + ":") else f"{self.name}: {message}") from None
        except OSError as exc:
            raise PagerError(f"{self.name}: can't read ({exc.strerror})") from None


    def blocks_at(self, items: Iterable[int]) -> Iterator[Tuple[int, object]]:
        """Yield ``(item, block)`` for the given ascending block positions, parsing only those.

        Reads the history again and slices each block out by the offsets the last
        full stream noted; the file must not have changed in between.
        """
        spans = self.spans
        changed = f"{self.name}: the history changed while the pass was reading it"
        with self.open() as fp:
            buf, base = "", 0  # buf holds characters base .. base + len(buf) of the file
            for item in items:
                start, end = spans[2 * item], spans[2 * item + 1]
                if end > base + len(buf):  # refill: keep from the block's start, read on to its end
                    skip = start - base - len(buf)
                    while skip > 0:  # the block starts beyond what is read: pass over the gap
                        data = fp.read(min(skip, 1 << 20))
                        if not data:
                            raise PagerError(changed)
                        skip -= len(data)
                    buf, base = buf[max(0, start - base):], max(start, base)
                    while base + len(buf) < end:
                        data = fp.read(max(1 << 20, end - base - len(buf)))
                        if not data:
                            raise PagerError(changed)
                        buf += data
                try:
                    yield item, json.loads(buf[start - base: end - base])
                except json.JSONDecodeError:
                    raise PagerError(changed) from None


def load_and_plan(source, params: Params,
                  pages: Optional[Callable[[str], Optional[StoredPage]]] = None,
                  stub_text: Optional[Callable[[StoredPage], str]] = None,
                  with_index: bool = False,
                  reserve: Optional[Callable[[Mapping[str, int]], int]] = None) -> PassPlan:
    """Stream a history (a path, '-' for stdin, or a HistorySource) and return its PassPlan."""
    params.validate()
    if not isinstance(source, HistorySource):
        source = HistorySource(source)
    scorer: Optional[Scorer] = None

    def on_blocks(header: Dict[str, object]) -> Optional[Callable[[int, object], None]]:
        nonlocal scorer
        if "intent_ir" not in header:
            return None  # the intent comes after the blocks: read them on a second pass
        scorer = Scorer(_header_keywords(header), params, pages, stub_text, with_index, reserve)
        return scorer.add

    header, handed = source.stream(on_blocks)
    try:
        if not handed:
            scorer = Scorer(_header_keywords(header), params, pages, stub_text, with_index, reserve)
            source.stream(lambda _header: scorer.add)  # type: ignore[union-attr]
        current = _header_current_turn(header)
        decisions = scorer.finish(current)  # type: ignore[union-attr]
        source.skipped = scorer.skipped  # type: ignore[union-attr]
    except PagerError as exc:
        message = str(exc)
        raise PagerError(message if message.startswith(source.name + ":") else f"{source.name}: {message}") from None
    return PassPlan(decisions, scorer.keywords,  # type: ignore[union-attr]
                    current if current is not None else (scorer.max_turn or 0), params, header,  # type: ignore[union-attr]
                    scorer.tokens_before, scorer.tokens_after)  # type: ignore[union-attr]


# --- edges: the page store ---

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
    summary   TEXT NOT NULL,
    text      TEXT NOT NULL
);
"""


def default_store_path(contract: str) -> str:
    """Return the page store's default path: beside the contract, ``C.limn`` -> ``C.pages.sqlite3``."""
    base = contract[:-5] if contract.endswith(".limn") else contract
    return base + STORE_SUFFIX


def text_sha256(text: str) -> str:
    """Return the hex SHA-256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class PageStore:
    """The SQLite file holding paged blocks' original text; owner-only, deleted rows zeroed."""

    def __init__(self, path: str, connection: sqlite3.Connection) -> None:
        self.path, self._db = path, connection

    @classmethod
    def open(cls, path: str, create: bool) -> Optional["PageStore"]:
        """Open the store at ``path``; create it (mode 0600) if ``create``, else return None if absent."""
        if not os.path.exists(path):
            if not create:
                return None
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                pass  # another pass created it first
            except OSError as exc:
                raise PagerError(f"{path}: can't create the page store ({exc.strerror})") from None
        elif os.path.isdir(path):
            raise PagerError(f"{path}: is a directory, not a page store")
        try:
            db = sqlite3.connect(path, isolation_level=None, timeout=30)
            db.execute("PRAGMA secure_delete = ON")  # evicted text must not linger in free pages
            db.execute("PRAGMA synchronous = FULL")
            db.executescript(_STORE_SCHEMA)
            db.execute("SELECT block, turn, role, kind, tokens, keywords, sha256, paged_at, summary, text "
                       "FROM pages LIMIT 0")
        except sqlite3.Error as exc:
            raise PagerError(f"{path}: not a usable page store ({exc})") from None
        return cls(path, db)

    def get(self, block: str) -> Optional[StoredPage]:
        """Return the stored page of ``block``, or None."""
        row = self._db.execute("SELECT block, turn, role, kind, tokens, keywords, sha256, paged_at, summary, "
                               "text FROM pages WHERE block = ?", (block,)).fetchone()
        if row is None:
            return None
        return StoredPage(row[0], row[1], row[2], row[3], row[4], tuple(json.loads(row[5])), *row[6:])

    def shas(self) -> Dict[str, str]:
        """Return block id -> SHA-256 of every stored page."""
        return dict(self._db.execute("SELECT block, sha256 FROM pages"))

    def begin(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def put(self, pages: Iterable[StoredPage]) -> None:
        """Insert or replace pages (inside the caller's transaction)."""
        self._db.executemany(
            "INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(p.block, p.turn, p.role, p.kind, p.tokens, json.dumps(list(p.keywords)), p.sha256,
              p.paged_at, p.summary, p.text) for p in pages])

    def commit(self) -> None:
        self._db.execute("COMMIT")

    def rollback(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    def keep_only(self, keep: Iterable[str]) -> int:
        """Delete every page whose block is not in ``keep``; return how many went."""
        keep = set(keep)
        gone = [b for (b,) in self._db.execute("SELECT block FROM pages") if b not in keep]
        if gone:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("DELETE FROM pages WHERE block = ?", [(b,) for b in gone])
            self._db.execute("COMMIT")
        return len(gone)

    def close(self) -> None:
        self._db.close()


def verified_text(page: StoredPage, store: str) -> str:
    """Return ``page``'s text after checking it against its stored SHA-256."""
    if text_sha256(page.text) != page.sha256:
        raise PagerError(f"{store}: the text of {_show(page.block)} fails its SHA-256 check (the store was altered)")
    return page.text


# --- edges: the contract file ---

def _read_contract_bytes(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as fh:
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


def contract_state(path: str) -> ContractState:
    """Read the contract at ``path`` (missing means empty) and return its state."""
    return _state_of(path, _decode_contract(path, _read_contract_bytes(path)))


def _state_of(path: str, text: str) -> ContractState:
    try:
        return read_contract_state(text)
    except PagerError as exc:
        raise PagerError(f"{path}: {exc}") from None


class LockedContract:
    """The contract held under an exclusive lock for one append.

    Entering creates the file if missing, locks it (``flock``, where the
    platform has it), and reads its state. ``append`` writes the payload with one
    write, then fsync; a failed write is truncated back. Leaving without an
    append removes a file that entering created, so an error leaves no trace.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.state = ContractState()
        self._fd = -1
        self._created = False
        self._appended = False
        self._size = 0

    def __enter__(self) -> "LockedContract":
        if os.path.isdir(self.path):
            raise PagerError(f"{self.path}: is a directory, not a contract file")
        existed = os.path.exists(self.path)
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise PagerError(f"{self.path}: can't open for writing ({exc.strerror})") from None
        try:
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            self._size = os.fstat(self._fd).st_size
            self._created = not existed and self._size == 0
            self.state = _state_of(self.path, _decode_contract(self.path, _read_fd(self._fd, self._size)))
        except BaseException:
            self._release(failed=True)
            raise
        return self

    def append(self, payload: bytearray) -> None:
        """Append ``payload`` with one write, flush and fsync."""
        _write_all(self._fd, payload, self._size, self.path)
        os.fsync(self._fd)
        if self._created:
            _fsync_dir(self.path)
        self._appended = True

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


def append_to_contract(path: str, render: Callable[[ContractState], bytearray]) -> Tuple[ContractState, bytearray]:
    """Lock the contract, render the payload from its current state, and append it atomically.

    On any failure the file is left byte-identical (or absent, if it was absent).
    Returns the state the payload was rendered against, and the payload.
    """
    with LockedContract(path) as contract:
        payload = render(contract.state)
        contract.append(payload)
    return contract.state, payload


def _read_fd(fd: int, size: int) -> bytes:
    chunks, offset = [], 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, payload: bytearray, size: int, path: str) -> None:
    view, written = memoryview(payload), 0
    try:
        while written < len(payload):
            written += os.write(fd, view[written:])
    except OSError as exc:
        os.ftruncate(fd, size)  # never leave half a pass behind
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


# --- edges: time ---

def normalize_now(text: Optional[str]) -> str:
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
        moment = moment.astimezone(datetime.timezone.utc)
    return moment.isoformat()


# --- edges: compacted history ---

def final_directives(state: ContractState, plan: PassPlan) -> Dict[str, str]:
    """Return every known block's directive once this pass is recorded."""
    final = dict(state.directives)
    final.update((d.block, d.action) for d in plan.decisions)
    return final


class _Materializer:
    """The second read of a history: stores new pages' text and writes the compacted history.

    It parses only the blocks it needs (new pages, and with --emit the retained
    ones), picking them out by the offsets the first read noted.
    """

    def __init__(self, plan: PassPlan, store: Optional[PageStore], now: str, stub_words: int,
                 hint: Callable[[str], str], emit: Optional[io.TextIOBase]) -> None:
        self.plan, self.store, self.now, self.stub_words = plan, store, now, stub_words
        self.hint, self.emit = hint, emit
        self.known = store.shas() if store is not None else {}
        self.matcher = block_hits if plan.params.similarity == "weighted" else None
        self.pending: List[StoredPage] = []
        self.stored = 0
        self.first = True

    def run(self, source: HistorySource) -> None:
        """Store new pages' text, and write every surviving block if emitting."""
        decisions = self.plan.decisions
        emit = self.emit is not None
        wanted = [k for k, d in enumerate(decisions)
                  if (d.action == "page" and not d.stub) or (emit and d.action == "retain")]
        items = _decision_items(len(decisions), source.skipped)
        raws = source.blocks_at(items[k] for k in wanted)
        next_raw = iter(raws)
        pending_k = iter(wanted)
        k_raw = next(pending_k, None)
        for k, d in enumerate(decisions):
            raw = None
            if k == k_raw:
                item, raw = next(next_raw)
                if type(raw) is not dict or raw.get("id") != d.block:
                    raise PagerError(f"{source.name}: blocks[{item}] changed while the pass was reading the history")
                k_raw = next(pending_k, None)
            elif not (emit and d.action == "page"):
                continue
            page = self._page(d, raw)
            if emit:
                self._write(self._emitted(d, raw, page))
        self.flush()

    def _page(self, d: Decision, raw: Optional[Dict[str, object]]) -> Optional[StoredPage]:
        """Return the stored page of a paged or stub block, storing a newly paged one's text."""
        if d.stub:
            return self.store.get(d.block) if self.store is not None else None
        if d.action != "page":
            return None
        text = raw["text"]  # type: ignore[index]
        sha = text_sha256(text)  # type: ignore[arg-type]
        if self.known.get(d.block) == sha and self.store is not None:
            return self.store.get(d.block) if self.emit is not None else None
        page = StoredPage(d.block, d.turn, d.role, d.kind, d.tokens, d.matched, sha, self.now,
                          stub_summary(text, d.matched, self.stub_words, self.matcher), text)  # type: ignore[arg-type]
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
            restored["text"] = verified_text(page, self.store.path)  # type: ignore[arg-type,union-attr]
            if page.tokens != estimate_tokens(page.text):  # type: ignore[union-attr]
                restored["tokens"] = page.tokens  # type: ignore[union-attr]
            return restored
        stub: Dict[str, object] = {"id": d.block, "turn": d.turn, "role": d.role}
        if d.kind is not None:
            stub["kind"] = d.kind
        stub["text"] = make_stub(page, self.hint(d.block))  # type: ignore[arg-type]
        stub["stub"] = True
        return stub

    def _write(self, block: Dict[str, object]) -> None:
        self.emit.write(("" if self.first else ",\n") + json.dumps(block, ensure_ascii=False))  # type: ignore[union-attr]
        self.first = False


def _decision_items(count: int, skipped: List[int]) -> List[int]:
    """Return the block position of each of ``count`` decisions, stepping over skipped positions."""
    skip, items, item = set(skipped), [], 0
    for _ in range(count):
        while item in skip:
            item += 1
        items.append(item)
        item += 1
    return items


def _index_block(pages: List[StoredPage], contract_hint: str) -> Dict[str, object]:
    text = "\n".join([_index_header(len(pages), contract_hint)] + index_lines(pages))
    return {"id": "pager-index", "turn": 0, "role": "system", "text": text, INDEX_FLAG: True}


def _index_header(count: int, contract_hint: str) -> str:
    return f"Paged blocks: {count} (recall one with: {contract_hint})"


def _index_reserve(args: argparse.Namespace, store: Optional[PageStore], seen: Mapping[str, int]) -> int:
    """Return the tokens the emitted page index takes beyond this history's own pages.

    Its header, plus the lines of blocks that earlier passes paged and this history
    does not hold (as the contract reads now); each page of this history prices its
    own line. Read before the pass takes its lock: a concurrent pass may shift it.
    """
    if not args.with_index:
        return 0
    header = _index_header(10 ** 6, recall_hint("ID", args.contract, args.store))
    earlier = [b for b, a in contract_state(args.contract).directives.items() if a == "page" and b not in seen]
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


def _write_emitted(path: str, header: Mapping[str, object], blocks_file: io.TextIOBase,
                   index: Optional[Dict[str, object]]) -> str:
    """Write the compacted history to a temporary file beside ``path``; return its name."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".pager-emit-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
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
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


# --- main ---

HELP_EPILOG = """\
commands:
  pager.py --history H.json --contract C.limn [flags]   run a paging pass (below)
  pager.py recall ID [ID ...] --contract C.limn        print paged blocks' original text, page them in
  pager.py index --contract C.limn                     list the paged blocks, one line each

example:
  python3 scripts/pager.py --history assets/test-history.json \\
      --contract /tmp/session.limn --now 2026-05-17T03:08:12+00:00 --emit /tmp/compact.json

output:
  stdout  one summary line (or JSON with --json); with --dry-run, the statements first
  stderr  one JSON record per block, in input order

exit codes:
  0  the pass was recorded (or printed, with --dry-run)
  1  an unexpected bug (with a traceback)
  2  bad input: a flag, the history, the contract or the page store; nothing was written
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise PagerError(message)


def _number_flag(flag: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a number (got {_show(text)})") from None
    return parse


def _count_flag(flag: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be a positive integer (got {_show(text)})")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of a paging pass."""
    parser = _Parser(prog="pager.py", description=__doc__.split("\n\n")[0],
                     epilog=HELP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", required=True, metavar="H.json",
                        help="history in the pager's JSON schema; '-' reads standard input")
    parser.add_argument("--contract", required=True, metavar="C.limn",
                        help="session contract to append to (created if missing)")
    parser.add_argument("--alpha", type=_number_flag("--alpha"), default=DEFAULT_ALPHA,
                        help=f"weight of intent similarity (default {DEFAULT_ALPHA})")
    parser.add_argument("--beta", type=_number_flag("--beta"), default=DEFAULT_BETA,
                        help=f"weight of recency (default {DEFAULT_BETA})")
    parser.add_argument("--retain-cut", type=_number_flag("--retain-cut"), default=DEFAULT_RETAIN_CUT,
                        help=f"R at or above this retains (default {DEFAULT_RETAIN_CUT})")
    parser.add_argument("--evict-cut", type=_number_flag("--evict-cut"), default=DEFAULT_EVICT_CUT,
                        help=f"R below this evicts (default {DEFAULT_EVICT_CUT})")
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
                        help="print the statements the pass would append; write nothing")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def _store_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--contract", required=True, metavar="C.limn", help="the session contract")
    parser.add_argument("--store", metavar="PATH",
                        help="page store (default: the contract's pager-store value, else beside the contract)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def build_recall_parser() -> argparse.ArgumentParser:
    """Return the parser of ``pager.py recall``."""
    parser = _Parser(prog="pager.py recall", description="Print paged blocks' exact original text "
                     "(checked against its SHA-256) and record the page-in in the contract.")
    parser.add_argument("ids", nargs="+", metavar="ID", help="block ids the contract lists as paged")
    _store_flags(parser)
    parser.add_argument("--now", metavar="ISO-8601", help="recall timestamp (default: the clock, UTC)")
    return parser


def build_index_parser() -> argparse.ArgumentParser:
    """Return the parser of ``pager.py index``."""
    parser = _Parser(prog="pager.py index", description="List every paged block, one line each.")
    _store_flags(parser)
    return parser


_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]


def record_line(d: Decision) -> str:
    """Return ``d``'s JSON record as one line; ``json.loads`` of it equals ``d.to_dict()``.

    Formatted by hand because a pass writes one per block and json.dumps of a
    dict costs several times more.
    """
    enc = _encode_str
    block, turn, role, kind, tokens, matched, sim, own, near, rec, delta_t, r, action, reason, stub = d
    return _RECORD % (enc(block), "null" if kind is None else enc(kind), enc(role), turn, tokens,
                      ", ".join([enc(k) for k in matched]) if matched else "",
                      sim, own, near, rec, delta_t, r, action, enc(reason), "true" if stub else "false")


# Numbers carry six decimals, as Decision.to_dict rounds them.
_RECORD = ('{"block": %s, "kind": %s, "role": %s, "turn": %d, "tokens": %d, "matched": [%s], '
           '"similarity": %.6f, "own": %.6f, "neighbour": %.6f, "recency": %.6f, "delta_t": %d, "R": %.6f, "action": "%s", "reason": %s, "stub": %s}')


def _write_records(stream, decisions: List[Decision]) -> None:
    write = stream.write
    batch: List[str] = []
    for d in decisions:
        batch.append(record_line(d))
        if len(batch) == 4096:
            write("\n".join(batch) + "\n")
            batch = []
    if batch:
        write("\n".join(batch) + "\n")
    stream.flush()


def run_pass(args: argparse.Namespace, stdout, stderr) -> int:
    """Run one paging pass as the flags say; return the exit code."""
    params = Params(args.alpha, args.beta, args.retain_cut, args.evict_cut, args.similarity,
                    args.budget, args.stub_words).validate()
    now = normalize_now(args.now)
    if args.with_index and not args.emit:
        raise PagerError("--with-index needs --emit")
    store_path = args.store or default_store_path(args.contract)
    source = HistorySource(args.history)
    store = PageStore.open(store_path, create=False)
    try:
        plan = load_and_plan(source, params, store.get if store is not None else None,
                             lambda page: make_stub(page, recall_hint(page.block, args.contract, args.store)),
                             args.with_index, lambda seen: _index_reserve(args, store, seen))
        # The store's path is recorded when it was chosen, so recall and index find it; the
        # default is derived from the contract's path and is left out to keep contracts portable.
        settings: Dict[str, object] = {"pager-stub-words": params.stub_words}
        if args.store:
            settings["pager-store"] = args.store

        def render(state: ContractState) -> bytearray:
            return encode_statements(state, iter_statements(plan, state, now, settings))

        if args.dry_run:
            state = contract_state(args.contract)
            payload = render(state)
            stored = 0
        else:
            state, payload, stored, store = _record_pass(args, plan, source, store, store_path, now, render)
    finally:
        if store is not None:
            store.close()
    lead = 1 if state.needs_newline else 0  # the line end owed to an unterminated last line
    changes = count_changes(plan, state)
    _write_records(stderr, plan.decisions)
    counts = plan.counts()
    if args.dry_run:
        stdout.write(payload[lead:].decode("utf-8"))
    n_statements = payload.count(b"\n") - lead
    summary = {"blocks": len(plan.decisions), **counts, **changes,
               "statements": n_statements, "contract": args.contract,
               "written": not args.dry_run, "pass": now, "stored": stored, "store": store_path,
               "emitted": args.emit if args.emit and not args.dry_run else None}
    rho = plan.pressure()
    if rho is not None:
        summary.update({"budget": params.budget, "tokens_before": plan.tokens_before,
                        "tokens_after": plan.tokens_after, "pressure_before": round(rho[0], 4),
                        "pressure_after": round(rho[1], 4), "over_budget": rho[1] > 1.0})
        if rho[1] > 1.0:
            stderr.write(f"pager: warning: protected blocks alone take {plan.tokens_after} tokens, over the "
                         f"budget of {params.budget}; everything else was paged or evicted\n")
    if args.json:
        stdout.write(json.dumps(summary, ensure_ascii=False) + "\n")
    else:
        verb = "would append" if args.dry_run else "appended"
        extra = ""
        if rho is not None:
            extra += (f"; pressure {rho[0]:.2f} -> {rho[1]:.2f} of {params.budget} tokens "
                      f"({plan.tokens_before} -> {plan.tokens_after})")
        extra += f"; stored {stored} pages in {store_path}" if stored else ""
        extra += f"; wrote {args.emit}" if summary["emitted"] else ""
        stdout.write(f"pager: {summary['blocks']} blocks: retain {counts['retain']}, page {counts['page']}, "
                     f"evict {counts['evict']} ({changes['new']} new, {changes['moved']} moved, "
                     f"{changes['unchanged']} unchanged); {verb} {n_statements} statement"
                     f"{'' if n_statements == 1 else 's'} to {args.contract}{extra}\n")
    return EXIT_OK


def _record_pass(args: argparse.Namespace, plan: PassPlan, source: HistorySource, store: Optional[PageStore],
                 store_path: str, now: str, render: Callable[[ContractState], bytearray]):
    """Store new pages, append the contract, write the compacted history: in that order, under the lock.

    The store commits before the contract append, so a block the contract lists as
    paged is always recallable; rows the contract does not list as paged are
    deleted after the append (a crash in between leaves harmless rows, which the
    next pass removes).
    """
    blocks_file = None
    emitted = None
    with LockedContract(args.contract) as locked:
        state = locked.state
        needs_text = any(d.action == "page" and not d.stub for d in plan.decisions)
        if store is None and needs_text:
            store = PageStore.open(store_path, create=True)
        stored = 0
        try:
            if store is not None:
                store.begin()
            if needs_text or args.emit:
                blocks_file = tempfile.TemporaryFile("w+", encoding="utf-8") if args.emit else None
                work = _Materializer(plan, store, now, args.stub_words,
                                     lambda block: recall_hint(block, args.contract, args.store), blocks_file)
                work.run(source)
                stored = work.stored
            final = final_directives(state, plan)
            if args.emit:
                index = None
                if args.with_index:
                    hint = recall_hint("ID", args.contract, args.store)
                    index = _index_block(_paged_pages(final, store, store_path), hint)
                emitted = _write_emitted(args.emit, plan.header, blocks_file, index)  # type: ignore[arg-type]
            payload = render(state)
            if store is not None:
                store.commit()
            locked.append(payload)
        except BaseException:
            if store is not None:
                store.rollback()
            if emitted is not None:
                os.unlink(emitted)
            raise
        finally:
            if blocks_file is not None:
                blocks_file.close()
        if emitted is not None:
            os.replace(emitted, args.emit)
        if store is not None:
            store.keep_only(b for b, a in final.items() if a == "page")
    return state, payload, stored, store


def _resolve_store(args: argparse.Namespace, state: ContractState) -> str:
    recorded = state.values.get("pager-store")
    return args.store or (recorded if isinstance(recorded, str) else default_store_path(args.contract))


def run_recall(args: argparse.Namespace, stdout, stderr) -> int:
    """Print paged blocks' original text and record the page-in; return the exit code."""
    now = normalize_now(args.now)
    ids = list(dict.fromkeys(args.ids))
    for i, block in enumerate(ids):
        check_quotable(block, f"recall id {_show(block)}")
    if not os.path.exists(args.contract):
        raise PagerError(f"{args.contract}: no such contract")
    with LockedContract(args.contract) as locked:
        state = locked.state
        for block in ids:
            action = state.directives.get(block)
            if action != "page":
                where = "was never seen by the pager" if action is None else f"is {LIST_OF_ACTION[action].split('-')[0]}"
                raise PagerError(f"{args.contract}: block {_show(block)} is not paged (it {where})")
        store_path = _resolve_store(args, state)
        store = PageStore.open(store_path, create=False)
        if store is None:
            raise PagerError(f"{store_path}: the page store does not exist")
        try:
            pages = _paged_pages({block: "page" for block in ids}, store, store_path)
            texts = [verified_text(page, store_path) for page in pages]
        finally:
            store.close()
        statements = []
        for block in ids:
            statements.append(statement_remove(block, "page", "recalled"))
            statements.append(statement_add(block, "retain", "recalled"))
        statements.append(statement_value("last-recall", now))
        for statement in statements:
            check_statement(statement)
        locked.append(encode_statements(state, statements))
    if args.json:
        stdout.write(json.dumps({"contract": args.contract, "store": store_path, "recalled": [
            {"block": p.block, "turn": p.turn, "role": p.role, "tokens": p.tokens, "sha256": p.sha256,
             "text": text} for p, text in zip(pages, texts)]}, ensure_ascii=False) + "\n")
    elif len(texts) == 1:
        stdout.write(texts[0])
    else:
        stdout.write("\n".join(f"==> {p.block} <==\n{text}" for p, text in zip(pages, texts)) + "\n")
    return EXIT_OK


def run_index(args: argparse.Namespace, stdout, stderr) -> int:
    """Print the page index of a contract; return the exit code."""
    if not os.path.exists(args.contract):
        raise PagerError(f"{args.contract}: no such contract")
    state = contract_state(args.contract)
    store_path = _resolve_store(args, state)
    store = PageStore.open(store_path, create=False)
    try:
        pages = _paged_pages(state.directives, store, store_path)
    finally:
        if store is not None:
            store.close()
    if args.json:
        stdout.write(json.dumps({"contract": args.contract, "store": store_path, "paged": [
            {"block": p.block, "turn": p.turn, "role": p.role, "tokens": p.tokens, "summary": p.summary,
             "recall": recall_hint(p.block, args.contract, args.store)} for p in pages]},
            ensure_ascii=False) + "\n")
    else:
        stdout.write(f"Paged blocks: {len(pages)} (recall one with: "
                     f"{recall_hint('ID', args.contract, args.store)})\n")
        for line in index_lines(pages):
            stdout.write(line + "\n")
    return EXIT_OK


COMMANDS = {"recall": (build_recall_parser, run_recall), "index": (build_index_parser, run_index)}


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; return the exit code (0 ok, 1 bug, 2 bad input)."""
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    stdout, stderr = sys.stdout, sys.stderr
    try:
        if argv and argv[0] in COMMANDS:
            build, run = COMMANDS[argv[0]]
            return run(build().parse_args(argv[1:]), stdout, stderr)
        return run_pass(build_parser().parse_args(argv), stdout, stderr)
    except PagerError as exc:
        stderr.write(f"pager: error: {exc}\n")
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
