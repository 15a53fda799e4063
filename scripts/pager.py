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
import dataclasses
import datetime
import io
import json
import math
import os
import re
import sys
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
    """Return the intent keywords: tokens of ``items``, first occurrence order, no duplicates.

    Example:
        >>> intent_keywords(["Pager", "retention score", "pager"])
        ['pager', 'retention', 'score']
    """
    seen: Dict[str, None] = {}
    for item in items:
        for token in tokenize(item):
            seen.setdefault(token, None)
    return list(seen)


def recency(delta_t: int) -> float:
    """Return the recency term ``1 / (1 + ln(1 + delta_t))``: 1 now, falling slowly with age."""
    return 1.0 / (1.0 + math.log1p(delta_t))


def estimate_tokens(text: str) -> int:
    """Return a tokenizer-free token estimate: about four characters per token."""
    return (len(text) + 3) // 4


@dataclasses.dataclass(frozen=True)
class Params:
    """Weights and cuts of one pass."""

    alpha: float = DEFAULT_ALPHA
    beta: float = DEFAULT_BETA
    retain_cut: float = DEFAULT_RETAIN_CUT
    evict_cut: float = DEFAULT_EVICT_CUT

    def validate(self) -> "Params":
        """Return self, or raise PagerError naming the first bad value."""
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
    matched: Tuple[str, ...]
    similarity: float
    recency: float
    delta_t: int
    R: float
    action: str
    reason: str  # "score", or the protection that forced retain ("pinned")

    def rationale(self) -> str:
        """Return the score parts, as written after ``because`` in the contract."""
        parts = "R=%.3f sim=%.3f rec=%.3f dt=%d" % (self.R, self.similarity, self.recency, self.delta_t)
        return parts if self.reason == "score" else f"{self.reason}; {parts}"

    def to_dict(self) -> Dict[str, object]:
        """Return the JSON record of this decision."""
        return {"block": self.block, "kind": self.kind, "role": self.role, "turn": self.turn,
                "tokens": self.tokens, "matched": list(self.matched),
                "similarity": round(self.similarity, 6), "recency": round(self.recency, 6),
                "delta_t": self.delta_t, "R": round(self.R, 6), "action": self.action,
                "reason": self.reason}


class _Features(NamedTuple):
    block: str
    turn: int
    role: str
    kind: Optional[str]
    tokens: int
    matched: Tuple[str, ...]
    pinned: bool


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
    """Scores blocks one at a time, then classifies them once the current turn is known.

    Blocks go in through ``add`` (which validates each), decisions come out of
    ``finish``; only small per-block features are kept in between, so a caller
    streaming a large history never holds its text.
    """

    def __init__(self, keywords: List[str], params: Params) -> None:
        self.keywords = list(keywords)
        self.params = params
        self._features: List[tuple] = []  # _Features-shaped plain tuples: cheaper to build
        self._seen: Dict[str, int] = {}
        self._shared: Dict[object, object] = {}  # one copy of each role, kind and match tuple
        self.max_turn: Optional[int] = None

    def add(self, index: int, raw: object) -> None:
        """Validate ``raw`` (the block at ``blocks[index]``) and record its features."""
        if type(raw) is not dict:
            raise PagerError(f"blocks[{index}] must be an object (got {_show(raw)})")
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
            tokens = (len(text) + 3) // 4  # estimate_tokens, inlined on the hot path
        elif tokens < 0:
            raise PagerError(f"blocks[{index}].tokens must be a non-negative integer (got {tokens})")
        if not block_id or not block_id.isascii() or _FORBIDDEN_RE.search(block_id):
            check_quotable(block_id, f"blocks[{index}].id")
        first = self._seen.setdefault(block_id, index)
        if first != index:
            raise PagerError(f"blocks[{index}].id {_show(block_id)} duplicates blocks[{first}].id")
        matched: Tuple[str, ...] = ()
        if self.keywords:
            lowered = text.lower()
            found = tuple([k for k in self.keywords if k in lowered and _has_token(lowered, k)])
            if found:
                matched = self._shared.setdefault(found, found)  # type: ignore[assignment]
        shared = self._shared
        role = shared.setdefault(role, role)  # type: ignore[assignment]
        if kind is not None:
            kind = shared.setdefault(kind, kind)  # type: ignore[assignment]
        self._features.append((block_id, turn, role, kind, tokens, matched, pinned))  # _Features order
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

    def finish(self, current_turn: Optional[int]) -> List["Decision"]:
        """Return one Decision per block, in input order."""
        if current_turn is None:
            current_turn = self.max_turn if self.max_turn is not None else 0
        n_keywords = len(self.keywords)
        # Similarity takes n + 1 values and recency one per distinct age: share the floats.
        sims = [k / n_keywords for k in range(n_keywords + 1)] if n_keywords else [0.0]
        recencies: Dict[int, Tuple[int, float]] = {}
        alpha, beta = self.params.alpha, self.params.beta
        retain_cut, evict_cut = self.params.retain_cut, self.params.evict_cut
        new_tuple = tuple.__new__  # builds a Decision without NamedTuple's Python-level __new__
        features, self._features = self._features, []
        decisions = []
        append = decisions.append
        for index, f in enumerate(features):
            block, turn, role, kind, tokens, matched, pinned = f
            if turn > current_turn:
                raise PagerError(f"blocks[{index}].turn ({turn}) lies after current_turn ({current_turn})")
            aged = recencies.get(turn)
            if aged is None:
                aged = recencies[turn] = (current_turn - turn, recency(current_turn - turn))
            delta_t, rec = aged
            sim = sims[len(matched)]
            r = alpha * sim + beta * rec
            if pinned:
                action, reason = "retain", "pinned"
            else:  # Params.classify, inlined on the hot path
                action = "retain" if r >= retain_cut else "evict" if r < evict_cut else "page"
                reason = "score"
            append(new_tuple(Decision, (block, turn, role, kind, tokens, matched, sim, rec, delta_t, r,
                                        action, reason)))
            features[index] = None  # type: ignore[call-overload]  # free as we go
        return decisions


@dataclasses.dataclass(frozen=True)
class PassPlan:
    """The scored decisions of one pass, before any contract is consulted."""

    decisions: List[Decision]
    keywords: List[str]
    current_turn: int
    params: Params

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


def plan_pass(history: Mapping[str, object], params: Params = Params()) -> PassPlan:
    """Return the PassPlan for a history dict in the pager's own schema. No I/O.

    Example:
        >>> plan = plan_pass({"intent_ir": ["pager"], "blocks": [
        ...     {"id": "b1", "turn": 1, "role": "user", "text": "Tune the pager."}]})
        >>> [(d.block, d.action) for d in plan.decisions]
        [('b1', 'retain')]
    """
    if not isinstance(history, Mapping):
        raise PagerError("the history must be a JSON object with a blocks list")
    params.validate()
    scorer = Scorer(_header_keywords(history), params)
    blocks = history.get("blocks")
    if not isinstance(blocks, list):
        raise PagerError(f"blocks must be a list (got {_show(blocks)})" if "blocks" in history
                         else "blocks is missing")
    for index, raw in enumerate(blocks):
        scorer.add(index, raw)
    current = _header_current_turn(history)
    decisions = scorer.finish(current)
    return PassPlan(decisions, scorer.keywords, current if current is not None else (scorer.max_turn or 0), params)


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
            because = "R=%.3f sim=%.3f rec=%.3f dt=%d" % (d.R, d.similarity, d.recency, d.delta_t)
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
        'add "b1" to retained-blocks because "R=1.000 sim=1.000 rec=1.000 dt=0"'
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
                    chunk: int = 1 << 20) -> Tuple[Dict[str, object], bool]:
    """Read a pager history object, handing blocks one by one to the callback ``on_blocks`` returns.

    ``on_blocks(header_so_far)`` is called when the ``blocks`` list starts; if it
    returns None the blocks are skipped. Returns the header fields and whether
    the blocks were handed over.
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
                    while True:
                        item = js.value()
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


def _open_history(path: str) -> Tuple[io.TextIOBase, str]:
    if path == "-":
        data = sys.stdin.buffer.read()
        try:
            return io.StringIO(data.decode("utf-8")), "<stdin>"
        except UnicodeDecodeError as exc:
            raise PagerError(f"<stdin>: not valid UTF-8 text ({exc.reason})") from None
    try:
        return open(path, encoding="utf-8", newline=""), path
    except FileNotFoundError:
        raise PagerError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PagerError(f"{path}: is a directory, not a history file") from None
    except OSError as exc:
        raise PagerError(f"{path}: can't read ({exc.strerror})") from None


def load_and_plan(path: str, params: Params) -> PassPlan:
    """Stream the history at ``path`` ('-' for stdin) and return its PassPlan."""
    params.validate()
    fp, name = _open_history(path)
    scorer: Optional[Scorer] = None

    def on_blocks(header: Dict[str, object]) -> Optional[Callable[[int, object], None]]:
        nonlocal scorer
        if "intent_ir" not in header:
            return None  # the intent comes after the blocks: read them on a second pass
        scorer = Scorer(_header_keywords(header), params)
        return scorer.add

    try:
        with fp:
            try:
                header, handed = _stream_history(fp, name, on_blocks)
                if not handed:
                    keywords = _header_keywords(header)
                    fp.seek(0)
                    header, _ = _stream_history(fp, name, lambda _h: None)
                    scorer = Scorer(keywords, params)
                    fp.seek(0)
                    _stream_history(fp, name, lambda _h: scorer.add)  # type: ignore[union-attr]
                current = _header_current_turn(header)
                assert scorer is not None
                decisions = scorer.finish(current)
            except PagerError as exc:
                message = str(exc)
                raise PagerError(message if message.startswith(name + ":") else f"{name}: {message}") from None
    except OSError as exc:
        raise PagerError(f"{name}: can't read ({exc.strerror})") from None
    return PassPlan(decisions, scorer.keywords, current if current is not None else (scorer.max_turn or 0), params)


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


def append_to_contract(path: str, render: Callable[[ContractState], bytearray]) -> Tuple[ContractState, bytearray]:
    """Append the bytes ``render(state)`` returns to the contract, atomically.

    Renders once from an unlocked read (so bad input fails before any file is
    created), then takes an exclusive lock, re-reads, re-renders only if another
    writer got in between, and appends with one write, flush and fsync. On any
    failure the file is left byte-identical (or absent, if it was absent).
    Returns the state the payload was rendered against, and the payload.
    """
    before = _read_contract_bytes(path)
    state = _state_of(path, _decode_contract(path, before))
    payload = render(state)
    existed = before is not None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise PagerError(f"{path}: can't open for writing ({exc.strerror})") from None
    created = False
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        current = _read_fd(fd, size)
        created = not existed and size == 0
        if current != (before or b""):
            state = _state_of(path, _decode_contract(path, current))
            payload = render(state)
        _write_all(fd, payload, size, path)
        os.fsync(fd)
        if created:
            _fsync_dir(path)
        created = False  # written: nothing to undo
    except BaseException:
        if created:
            try:
                if os.fstat(fd).st_size == 0:
                    os.unlink(path)
            except OSError:
                pass
        raise
    finally:
        os.close(fd)  # closing releases the lock
    return state, payload


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


# --- main ---

HELP_EPILOG = """\
example:
  python3 scripts/pager.py --history assets/test-history.json \\
      --contract /tmp/session.limn --now 2026-05-17T03:08:12+00:00

output:
  stdout  one summary line (or JSON with --json); with --dry-run, the statements first
  stderr  one JSON record per block, in input order

exit codes:
  0  the pass was recorded (or printed, with --dry-run)
  1  an unexpected bug (with a traceback)
  2  bad input: a flag, the history or the contract; nothing was written
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


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser."""
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
    parser.add_argument("--now", metavar="ISO-8601", help="pass timestamp (default: the clock, UTC)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the statements the pass would append; write nothing")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]


def record_line(d: Decision) -> str:
    """Return ``d``'s JSON record as one line; ``json.loads`` of it equals ``d.to_dict()``.

    Formatted by hand because a pass writes one per block and json.dumps of a
    dict costs several times more.
    """
    enc = _encode_str
    block, turn, role, kind, tokens, matched, sim, rec, delta_t, r, action, reason = d
    return _RECORD % (enc(block), "null" if kind is None else enc(kind), enc(role), turn, tokens,
                      ", ".join([enc(k) for k in matched]) if matched else "",
                      sim, rec, delta_t, r, action, enc(reason))


# Numbers carry six decimals, as Decision.to_dict rounds them.
_RECORD = ('{"block": %s, "kind": %s, "role": %s, "turn": %d, "tokens": %d, "matched": [%s], '
           '"similarity": %.6f, "recency": %.6f, "delta_t": %d, "R": %.6f, "action": "%s", "reason": %s}')


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
    params = Params(args.alpha, args.beta, args.retain_cut, args.evict_cut).validate()
    now = normalize_now(args.now)
    plan = load_and_plan(args.history, params)
    def render(state: ContractState) -> bytearray:
        return encode_statements(state, iter_statements(plan, state, now))

    if args.dry_run:
        state = contract_state(args.contract)
        payload = render(state)
    else:
        state, payload = append_to_contract(args.contract, render)
    lead = 1 if state.needs_newline else 0  # the line end owed to an unterminated last line
    changes = count_changes(plan, state)
    _write_records(stderr, plan.decisions)
    counts = plan.counts()
    if args.dry_run:
        stdout.write(payload[lead:].decode("utf-8"))
    n_statements = payload.count(b"\n") - lead
    summary = {"blocks": len(plan.decisions), **counts, **changes,
               "statements": n_statements, "contract": args.contract,
               "written": not args.dry_run, "pass": now}
    if args.json:
        stdout.write(json.dumps(summary, ensure_ascii=False) + "\n")
    else:
        verb = "would append" if args.dry_run else "appended"
        stdout.write(f"pager: {summary['blocks']} blocks: retain {counts['retain']}, page {counts['page']}, "
                     f"evict {counts['evict']} ({changes['new']} new, {changes['moved']} moved, "
                     f"{changes['unchanged']} unchanged); {verb} {n_statements} statement{'' if n_statements == 1 else 's'} "
                     f"to {args.contract}\n")
    return EXIT_OK


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; return the exit code (0 ok, 1 bug, 2 bad input)."""
    stdout, stderr = sys.stdout, sys.stderr
    try:
        args = build_parser().parse_args(argv)
        return run_pass(args, stdout, stderr)
    except PagerError as exc:
        stderr.write(f"pager: error: {exc}\n")
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
