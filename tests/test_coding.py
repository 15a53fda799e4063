"""Coding sessions: identifiers as a programmer reads them, intent from the work, masking in a unit."""

import pytest


def _matched(pager, intent_text, block_text):
    """Return the intent keywords a lone block holds when the intent is ``intent_text``."""
    keywords = pager.intent_keywords([intent_text])
    history = {"intent_ir": keywords, "blocks": [
        {"id": "old", "turn": 1, "role": "tool", "text": block_text},
        {"id": "now", "turn": 2, "role": "user", "text": "go on"}]}
    return pager.plan_pass(history).decisions[0].matched


@pytest.mark.parametrize("intent, text", [
    ("line_total", "def test_line_total():"),        # a test of the name
    ("line_total", "x = line_total_v2(order)"),       # a variant of the name
    ("test_line_total", "def line_total(order):"),    # the name a test is about
    ("lineTotal", "def line_total(order):"),          # camelCase meets snake_case
    ("line_total", "const lineTotal = 3;"),           # and back
    ("LineTotal", "class LineTotal:"),
    ("src/billing/totals.py", "edited totals.py"),    # a path meets its file name
    ("src/billing/totals.py", "the totals module"),   # and its stem
    ("Foo.bar", "bar() raised"),                      # a dotted name meets its last part
])
def test_an_identifier_meets_the_ways_a_programmer_writes_it(pager, intent, text):
    assert _matched(pager, intent, text)


@pytest.mark.parametrize("intent, text", [
    ("line_total", "line_totals = []"),   # another name
    ("line_total", "totally_different"),
    ("total", "line_total = 0"),          # a plain word does not reach inside an identifier
    ("line_total", "line total"),         # two words are not the identifier
])
def test_an_identifier_does_not_meet_other_names(pager, intent, text):
    assert not _matched(pager, intent, text)


def test_camel_case_intent_keywords_become_snake_case(pager):
    assert pager.intent_keywords(["Fix lineTotal and HTTPServer in Foo.bar"]) == [
        "fix", "line_total", "http_server", "foo", "bar"]
