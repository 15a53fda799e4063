"""Search by name (issue 32 item 3): ranked pages holding the words, names read as a programmer reads them."""

import json

import pytest

from conftest import NOW

# Blocks a pass pages (an intent about the weather, not about any of them), each naming things.
BLOCKS = [
    {"id": "t1", "turn": 1, "role": "assistant", "kind": "tool_result",
     "text": "collected 12 items\ntests/test_totals.py::test_line_total FAILED\nAssertionError: 7 != 8"},
    {"id": "t2", "turn": 2, "role": "assistant",
     "text": "I read src/billing/totals.py: lineTotal rounds each line before summing.\nThat is the bug."},
    {"id": "t3", "turn": 3, "role": "user",
     "text": "The families retained their scores after the migration, see db/migrate.py line 40."},
    {"id": "t4", "turn": 4, "role": "assistant",
     "text": "Ran `make lint`: no warnings. The cache keys look fine in src/cache/keys.py."},
    {"id": "t5", "turn": 5, "role": "assistant",
     "text": "Lunch options near the office: noodles, pizza, a salad bar. " * 3},
    {"id": "now", "turn": 9, "role": "user", "text": "What is the weather like in Lisbon today?"},
]


@pytest.fixture
def paged(tmp_path, cli):
    """A contract whose pass paged t1..t5 (every one: --evict-cut 0, --retain-cut 1)."""
    history = tmp_path / "h.json"
    history.write_text(json.dumps({"intent_ir": ["weather", "lisbon"], "blocks": BLOCKS}))
    contract = tmp_path / "s.limn"
    result = cli("--history", history, "--contract", contract, "--now", NOW, "--evict-cut", "0",
                 "--retain-cut", "1", "--keep-recent", "1", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["page"] == 5
    return contract


def _search(cli, contract, query, *flags):
    result = cli("search", query, "--contract", contract, "--json", *flags)
    assert result.code == 0, result.err
    return json.loads(result.out)


@pytest.mark.parametrize("query, first", [
    ("line_total", "t1"),                     # inside test_line_total, and t2's lineTotal
    ("src/billing/totals.py", "t2"),          # a path finds its file name
    ("totals.py", "t2"),
    ("retain", "t3"),                         # by stem: "retained"
    ("AssertionError", "t1"),
    ("make lint", "t4"),
    ("40", "t3"),
])
def test_search_finds_the_page_holding_the_name(cli, paged, query, first):
    hits = _search(cli, paged, query)
    assert hits and hits[0]["id"] == first
    assert set(hits[0]) == {"id", "turn", "kind", "role", "line", "score"}


def test_an_identifier_matches_as_a_programmer_reads_it(cli, paged):
    assert {h["id"] for h in _search(cli, paged, "line_total")} == {"t1", "t2"}
    assert {h["id"] for h in _search(cli, paged, "lineTotal")} == {"t1", "t2"}
    assert _search(cli, paged, "line_totals") == []  # not a part of line_total


def test_a_hit_carries_turn_kind_role_and_the_matching_line(cli, paged):
    hit = _search(cli, paged, "test_line_total")[0]
    assert (hit["id"], hit["turn"], hit["kind"], hit["role"]) == ("t1", 1, "tool_result", "assistant")
    assert hit["line"] == "tests/test_totals.py::test_line_total FAILED"


def test_more_matching_terms_rank_first_and_limit_cuts(cli, paged):
    hits = _search(cli, paged, "keys.py totals.py lint")
    assert hits[0]["id"] == "t4"  # holds two of the three
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert len(_search(cli, paged, "keys.py totals.py lint", "--limit", "1")) == 1


def test_no_match_is_an_empty_list_and_exit_0(cli, paged):
    assert _search(cli, paged, "zebra") == []
    result = cli("search", "zebra", "--contract", paged)
    assert result.code == 0 and result.out == 'no paged block holds "zebra"\n'


def test_the_text_output_is_one_line_a_hit_and_the_recall_command(cli, paged):
    result = cli("search", "totals.py", "--contract", paged)
    lines = result.out.splitlines()
    assert lines[0].startswith("t2 | turn 2 | assistant | text | I read src/billing/totals.py")
    assert lines[-1].startswith("(recall one with: ") and "recall ID --contract" in lines[-1]


def test_fts5_and_the_plain_scan_give_the_same_hits_in_the_same_order(pager, paged):
    store = pager.PageStore.open(str(paged).replace(".limn", ".pages.sqlite3"), create=False)
    try:
        for query in ("line_total", "totals.py src", "the office", "retain 40", "make lint keys", "zebra", "a"):
            assert store.search(query, 10, scan=True) == store.search(query, 10, scan=False), query
    finally:
        store.close()


def test_the_search_index_follows_the_pages_and_evicted_text_leaves_it(pager, tmp_path):
    path = str(tmp_path / "s.pages.sqlite3")
    store = pager.PageStore.open(path, create=True)
    secret = "sk-live-EVICTED-token-5309"
    rows = [pager.StoredPage(b, i, "user", None, 10, (), pager._text_sha256(t), NOW, "", t)
            for i, (b, t) in enumerate([("a", f"oops {secret} pasted"), ("b", "plain words about totals")])]
    store.begin()
    store.put(rows)
    store.commit()
    assert [h["id"] for h in store.search(secret)] == ["a"]  # builds the index
    store.keep_only(["b"])
    assert store.search(secret) == [] and store.search(secret, scan=True) == []
    store.close()
    assert b"EVICTED" not in open(path, "rb").read()  # not in the index's segments either
    store = pager.PageStore.open(path, create=False)  # a store with its index opens again
    assert store.indexed and [h["id"] for h in store.search("totals")] == ["b"]
    store.close()


def test_a_changed_page_is_found_by_its_new_text_only(pager, tmp_path):
    store = pager.PageStore.open(str(tmp_path / "s.pages.sqlite3"), create=True)
    page = pager.StoredPage("a", 1, "user", None, 10, (), pager._text_sha256("old words"), NOW, "", "old words")
    store.begin(), store.put([page]), store.commit()
    assert store.search("old")
    store.begin(), store.put([page._replace(text="new words", sha256=pager._text_sha256("new words"))])
    store.commit()
    assert store.search("old") == [] and [h["id"] for h in store.search("new")] == ["a"]
    store.close()


def test_a_recalled_block_is_no_longer_a_hit(cli, paged):
    assert cli("recall", "t4", "--contract", paged, "--now", NOW).code == 0
    assert "t4" not in {h["id"] for h in _search(cli, paged, "lint keys.py")}


def test_bad_search_input_is_one_error_line(cli, tmp_path, paged):
    result = cli("search", "x", "--contract", tmp_path / "none.limn")
    assert result.code == 2 and result.err == f"pager: error: {tmp_path / 'none.limn'}: no such contract\n"
    result = cli("search", "x", "--contract", paged, "--limit", "0")
    assert result.code == 2 and "--limit must be a positive integer" in result.err


def test_query_terms(pager):
    terms = pager._query_terms("Fix lineTotal in src/billing/totals.py, the TypeError; off-by-one")
    assert [(t.word, t.kind) for t in terms] == [("fix", "word"), ("line_total", "name"),
                                                 ("src/billing/totals.py", "file"), ("totals.py", "file"),
                                                 ("type_error", "name"), ("off-by-one", "file")]


def test_pager_search_in_memory_with_a_store_and_with_a_contract(pager, tmp_path):
    messages = [{"role": "user", "content": b["text"]} if b["role"] == "user" else
                {"role": "assistant", "content": b["text"]} for b in BLOCKS]
    for where in ({}, {"store": str(tmp_path / "p.sqlite3")}, {"contract": str(tmp_path / "c.limn"), "now": NOW}):
        engine = pager.Pager(evict_cut=0.0, retain_cut=1.0, keep_recent=1, keep_small=False, **where)
        engine.compact(messages)
        hits = engine.search("totals.py")
        assert hits and "src/billing/totals.py" in hits[0]["line"], where
        assert set(hits[0]) == {"id", "turn", "kind", "role", "line", "score"}
        assert engine.search("zebra") == []


def test_the_search_tool_answers_a_tool_call(pager):
    engine = pager.Pager(evict_cut=0.0, retain_cut=1.0, keep_recent=1, keep_small=False)
    engine.compact([{"role": "user" if b["role"] == "user" else "assistant", "content": b["text"]} for b in BLOCKS])
    assert [t["function"]["name"] for t in engine.tools()] == ["recall_pages", "search_pages"]
    result = engine.run_tool_call({"type": "tool_use", "id": "u1", "name": "search_pages",
                                   "input": {"query": "test_line_total", "limit": 1}})
    assert "is_error" not in result and "test_line_total FAILED" in result["content"]
    block = result["content"].split(" | ")[0]
    assert "AssertionError" in engine.recall([block])[block]
    bad = engine.run_tool_call({"type": "tool_use", "id": "u2", "name": "search_pages", "input": {}})
    assert bad["is_error"] is True


def test_a_name_itself_outranks_its_shorter_forms(pager, tmp_path):
    store = pager.PageStore.open(str(tmp_path / "s.pages.sqlite3"), create=True)
    texts = {"whole": "In ProfileListNotifier.switchProfile: check the state first, then the dialog.",
             "parts": "Read lib/profile_list_screen.dart: profile_list profile_list profile_list."}
    store.begin()
    store.put([pager.StoredPage(b, 1, "tool", None, 20, (), pager._text_sha256(t), NOW, "", t) for b, t in texts.items()])
    store.commit()
    for scan in (True, False):
        hits = store.search("ProfileListNotifier", scan=scan)
        assert [h["id"] for h in hits] == ["whole", "parts"], scan  # both hold it, the name itself first
    store.close()


def test_a_word_as_written_outranks_other_words_of_its_stem(pager, tmp_path):
    store = pager.PageStore.open(str(tmp_path / "s.pages.sqlite3"), create=True)
    texts = {"exact": "We are removing the old flag now.", "stem": "Removed it; removes them; remove all, removal."}
    store.begin()
    store.put([pager.StoredPage(b, 1, "tool", None, 12, (), pager._text_sha256(t), NOW, "", t) for b, t in texts.items()])
    store.commit()
    for scan in (True, False):
        assert [h["id"] for h in store.search("removing", scan=scan)] == ["exact", "stem"], scan
    store.close()
