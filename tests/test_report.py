"""pager.py report: the HTML page (escaping, determinism, its parts), the text summary, bad input, and
one real headless-Chromium run of the page."""

import html.parser
import json
import os
import re
import sqlite3

import pytest

from browser import Browser, find_chromium
from conftest import ASSET, NOW

LATER = "2026-05-17T04:10:00+00:00"
RECALLED = "2026-05-17T04:20:00+00:00"
# Text that would run script if the report wrote it as markup; each line tries another way out.
HOSTILE = ('Render this: </script><script>window.__pwned = "script"</script>\n'
           '<img src=x onerror="window.__pwned = \'img\'"> and a comment <!-- opener\n'
           "quotes \" ' and a line separator \u2028 here; the report must show all of it as text")
SESSION = "9b2f6c1e-0000-4000-8000-00000000a1a1"
RANGE = re.compile(r"r-[0-9a-f]{12}\Z")  # a range page's id: a page for a run of blocks, not a block itself


def claude_session(rounds, hostile_round=1):
    """Return the lines of a Claude Code session log: ``rounds`` human requests, each answered with
    thinking, a sentence and a tool call whose result follows (the layout Claude Code 2.x writes)."""
    lines, parent, n = [], None, 0

    def line(kind, message):
        nonlocal parent, n
        n += 1
        uid = f"00000000-0000-4000-8000-{n:012d}"
        lines.append(json.dumps({"parentUuid": parent, "isSidechain": False, "userType": "external",
                                 "cwd": "/home/dev/shop", "sessionId": SESSION, "version": "2.1.30",
                                 "type": kind, "message": message, "uuid": uid,
                                 "timestamp": f"2026-05-17T02:{n // 60:02d}:{n % 60:02d}.000Z"}))
        parent = uid

    topics = ["checkout totals", "coupon codes", "stock levels", "shipping rates", "refund emails",
              "search ranking", "cart expiry", "invoice numbers", "tax rounding", "login throttling",
              "image resizing", "order export"]
    for r in range(rounds):
        topic = topics[r % len(topics)]
        ask = f"Next: fix {topic} in src/{topic.split()[0]}.py, the tests for {topic} fail."
        line("user", {"role": "user", "content": HOSTILE if r == hostile_round else ask})
        call = f"toolu_{r:04d}{'x' * 20}"
        line("assistant", {"id": f"msg_{r:04d}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                           "content": [{"type": "thinking", "thinking": f"Read the {topic} module before editing it.",
                                        "signature": f"sig{r:04d}=="},
                                       {"type": "text", "text": f"Let me look at how {topic} work now."},
                                       {"type": "tool_use", "id": call, "name": "Read",
                                        "input": {"file_path": f"/home/dev/shop/src/{topic.split()[0]}.py"}}],
                           "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 60}})
        body = "\n".join(f"{i:4d}  def {topic.split()[0]}_{i}(value): return value * {i}  # {topic}"
                         for i in range(1, 40))
        if r == hostile_round:
            body = HOSTILE + "\n" + body
        line("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": body}]})
        line("assistant", {"id": f"msg_{r:04d}b", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                           "content": [{"type": "text", "text": f"Fixed {topic}: the helper now rounds once."}],
                           "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 20}})
    return lines


@pytest.fixture
def session(cli, pager, tmp_path):
    """A recorded session: two passes over a growing Claude Code log (the second moves blocks), then a recall."""
    lines = claude_session(12)
    early, full = tmp_path / "early.jsonl", tmp_path / "session.jsonl"
    early.write_text("\n".join(lines[:28]) + "\n", encoding="utf-8")
    full.write_text("\n".join(lines) + "\n", encoding="utf-8")
    contract = tmp_path / "session.limn"
    assert cli("--history", early, "--contract", contract, "--now", NOW, "--budget", "1500").code == 0
    assert cli("--history", full, "--contract", contract, "--now", LATER, "--budget", "1200").code == 0
    recalled = next(b for b, d in pager.contract_state(str(contract)).directives.items()
                    if d == "page" and b.endswith(":result"))
    assert cli("recall", recalled, "--contract", contract, "--now", RECALLED).code == 0
    return {"contract": contract, "history": full, "recalled": recalled, "dir": tmp_path}


def directives(pager, contract):
    """Return block id -> directive of the conversation's blocks, as the contract reads now (the engine's
    own reader); range pages are left out: they are pages standing for blocks, not blocks."""
    return {b: d for b, d in pager.contract_state(str(contract)).directives.items() if not RANGE.match(b)}


def block_order(contract):
    """Return the conversation's blocks in the order the contract first lists them (range pages left out)."""
    return list(dict.fromkeys(b for b in (line.split('"')[1] for line in contract.read_text().splitlines()
                                          if line.startswith("add ")) if not RANGE.match(b)))


def range_pages(pager, contract):
    """Return range page id -> its members, for the range pages the contract lists as paged (from the store)."""
    store = pager.PageStore.open(str(contract).replace(".limn", ".pages.sqlite3"), create=False)
    try:
        return {b: store.range_members(b) for b, d in pager.contract_state(str(contract)).directives.items()
                if d == "page" and RANGE.match(b)}
    finally:
        store.close()


def report(cli, session, out=None, history=True):
    args = ["report", "--contract", session["contract"]]
    if history:
        args += ["--history", session["history"]]
    if out is not None:
        args += ["--out", out]
    return cli(*args)


class _Markup(html.parser.HTMLParser):
    """Collects the elements (tag, attributes) and the script elements' text of an HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements, self.scripts, self._in_script = [], [], False
        self.frames, self._spans = [], []  # frames: (range id, [data-i of the cells inside]), in page order

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")
        if tag == "span":
            self._spans.append("range" in attrs.get("class", "").split())
            if self._spans[-1]:
                self.frames.append((attrs.get("data-range"), []))
        if tag == "i" and "data-i" in attrs and any(self._spans):
            self.frames[-1][1].append(int(attrs["data-i"]))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False
        if tag == "span" and self._spans:
            self._spans.pop()

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def parse(page):
    markup = _Markup()
    markup.feed(page)
    markup.close()
    return markup


# ----- the page


def test_report_is_one_self_contained_page_with_a_cell_per_block(cli, pager, session):
    out = session["dir"] / "report.html"
    result = report(cli, session, out)
    assert result.code == 0, result.err
    listed = directives(pager, session["contract"])
    assert result.out == (f"report: wrote {out} ({len(listed):,} blocks, 3 events, "
                          f"{out.stat().st_size:,} bytes)\n")
    page = out.read_text(encoding="utf-8")
    markup = parse(page)
    # Nothing is fetched: no external script, style, font, image or link.
    for tag, attrs in markup.elements:
        assert "src" not in attrs and not (tag == "link"), (tag, attrs)
    assert not re.search(r"(?i)url\(|@import|https?://", page)
    cells = [(attrs["data-i"], attrs["class"]) for tag, attrs in markup.elements
             if tag == "i" and "b" in attrs.get("class", "").split()]
    # One cell per block the contract lists, in the order it first listed them, classed by directive;
    # a range page is no cell of its own.
    order = block_order(session["contract"])
    assert [int(i) for i, _ in cells] == list(range(len(order)))
    assert [re.search(r"\bd-(\w+)", css).group(1) for _, css in cells] == [listed[b] for b in order]
    data = json.loads(markup.scripts[0])
    assert [row[0] for row in data["blocks"]] == order
    # Each range page's frames hold exactly its members (as the store records them), in order.
    ranges = range_pages(pager, session["contract"])
    assert ranges and all(ranges.values())  # the budgets above make range pages
    framed = {}
    for rid, inside in markup.frames:
        framed.setdefault(rid, []).extend(inside)
    assert {rid: [order[i] for i in inside] for rid, inside in framed.items()} == ranges
    assert {row[0]: row[9] for row in data["blocks"] if row[9]} == {m: r for r, ms in ranges.items() for m in ms}
    kinds = {row[5] for row in data["blocks"]}
    assert {"human request", "tool call", "tool result", "thinking", "assistant text"} <= kinds


def test_passes_and_moves_come_from_the_contract(cli, pager, session):
    text = session["contract"].read_text()
    state = pager.read_contract_state(text)
    got = pager._session_report(text, state, str(session["contract"]), {})
    assert [(p.number, p.event, p.time) for p in got.passes] == [(1, "pass", NOW), (2, "pass", LATER),
                                                                  (3, "recall", RECALLED)]
    assert got.passes[2].moved == ((session["recalled"], "page", "retain"),)
    assert got.passes[0].values["token-budget"] == 1500 and got.passes[1].values["token-budget"] == 1200
    assert "token-budget" in got.passes[1].written and "pager-alpha" not in got.passes[1].written
    # What each pass moved, replayed, gives the contract's final directives.
    replay = {}
    for p in got.passes:
        for block, _, to in p.moved:
            replay[block] = to
    first = {}
    for line in text.splitlines():
        if line.startswith("add ") and not RANGE.match(line.split('"')[1]):
            first.setdefault(line.split('"')[1], line.split(" to ")[1].split(" ")[0])
    assert sum(sum(p.new.values()) for p in got.passes) == len(first)
    assert any(p.moved for p in got.passes[:2])  # the second pass, under a smaller budget, moved blocks
    assert {b: replay.get(b, pager.ACTION_OF_LIST[first[b]]) for b in first} == directives(pager, session["contract"])
    # Range pages are made and ended, never moved: an ended range is no block gone.
    assert not any(RANGE.match(block) for p in got.passes for block, _, _ in p.moved)
    made = [line for line in text.splitlines() if line.startswith('add "r-')]
    ended = [line for line in text.splitlines() if line.startswith('remove "r-') and line.endswith('"range ended"')]
    assert made and ended  # the second pass ends the first pass's ranges and makes a coarser one
    assert (sum(p.ranges[0] for p in got.passes), sum(p.ranges[1] for p in got.passes)) == (len(made), len(ended))


def test_same_contract_gives_the_same_bytes(cli, session):
    first, second = session["dir"] / "a.html", session["dir"] / "b.html"
    assert report(cli, session, first).code == 0
    assert report(cli, session, second).code == 0
    assert first.read_bytes() == second.read_bytes()
    summary = [report(cli, session).out for _ in range(2)]
    assert summary[0] == summary[1]


def test_hostile_text_is_escaped_in_the_html(cli, session):
    out = session["dir"] / "report.html"
    assert report(cli, session, out).code == 0
    page = out.read_text(encoding="utf-8")
    markup = parse(page)
    # Exactly the report's own two script elements, and no element the text could have made.
    assert [tag for tag, _ in markup.elements].count("script") == 2
    assert not any(tag == "img" or any(name.startswith("on") for name in attrs) for tag, attrs in markup.elements)
    assert "window.__pwned" not in markup.scripts[1]  # the report's own script holds none of it
    assert "</script><script>" not in page and "<!--" not in page and "\u2028" not in page
    assert "<img" not in page and "onerror=\"" not in page
    # Outside the data, the text shows as text (escaped), e.g. in the page index; a topic name
    # such as ``__pwned`` taken from it is a word shown as text, harmless.
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned = &quot;script&quot;&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;window.__pwned = &#x27;img&#x27;&quot;&gt;" in page
    # The data still holds the text exactly: escaped, not altered.
    rows = json.loads(markup.scripts[0])["blocks"]
    heads = [row[7] for row in rows if "__pwned" in row[7]]
    assert heads and all(h.startswith(HOSTILE.split("\n")[0][:40]) for h in heads)
    assert any("\u2028" in h for h in heads)


def test_escaper_and_script_json(pager):
    assert pager._h("<b a=\"1\" b='2'>&</b>") == "&lt;b a=&quot;1&quot; b=&#x27;2&#x27;&gt;&amp;&lt;/b&gt;"
    text = "</script><!--\u2028\u2029&"
    encoded = pager._script_json({"t": text})
    assert not re.search("[<>&\u2028\u2029]", encoded)
    assert json.loads(encoded) == {"t": text}


def test_report_without_history_shows_pages_from_the_store(cli, pager, session):
    out = session["dir"] / "plain.html"
    assert report(cli, session, out, history=False).code == 0
    rows = json.loads(parse(out.read_text(encoding="utf-8")).scripts[0])["blocks"]
    for block, directive, _, turn, _, _, tokens, head, recall, _ in rows:
        if directive == "page":
            assert turn is not None and tokens > 0 and head and recall.endswith(
                f"recall {block} --contract {session['contract']}")
        else:
            assert (turn, tokens, head, recall) == (None, None, "", "")
    assert "give --history for their size and text" in out.read_text(encoding="utf-8")


# ----- the text summary


def test_summary_on_stdout_without_out(cli, pager, session):
    result = report(cli, session)
    assert result.code == 0 and result.err == ""
    listed = directives(pager, session["contract"])
    lines = result.out.splitlines()
    count = {a: sum(1 for d in listed.values() if d == a) for a in ("retain", "page", "evict")}
    ranges = range_pages(pager, session["contract"])
    stored = count["page"] + len(ranges)  # the page index: the paged blocks and the range pages
    assert lines[0] == (f"report: {session['contract']}: {len(listed)} blocks (retain {count['retain']}, page "
                        f"{count['page']}, evict {count['evict']}); {len(ranges)} range page; 2 passes, 1 recall; "
                        f"{stored} pages stored")
    assert lines[1].startswith(f"  pass 1 at {NOW}; alpha 0.7 beta 0.3; budget 1,500, pressure ")
    assert lines[2].startswith(f"  pass 2 at {LATER}; alpha 0.7 beta 0.3; budget 1,200, pressure ")
    assert lines[3] == f"  recall 3 at {RECALLED}; new: none; moved: page -> retain 1"
    # Pages stored: what the store holds from each pass (its paged_at), among the blocks still paged.
    store = sqlite3.connect(str(session["contract"]).replace(".limn", ".pages.sqlite3"))
    paged_at = dict(store.execute("SELECT block, paged_at FROM pages"))
    store.close()
    paged = [b for b, d in listed.items() if d == "page"] + list(ranges)
    for line, when in ((lines[1], NOW), (lines[2], LATER)):
        held = sum(1 for b in paged if paged_at.get(b) == when)
        assert line.endswith(f"; pages stored: {held}")
    # The second pass ends the first pass's range pages and makes a coarser one: the contract says how many.
    second = session["contract"].read_text().split("called last-pager-pass")[1].splitlines()
    made = sum(1 for line in second if line.startswith('add "r-'))
    ended = sum(1 for line in second if line.startswith('remove "r-') and line.endswith('"range ended"'))
    assert made and ended and f"; range pages: made {made}, ended {ended}; " in lines[2]
    assert lines[4] == f"pages (recall one with: python3 scripts/pager.py recall ID --contract {session['contract']}):"
    assert len(lines) == 5 + min(stored, 20) + (stored > 20)
    assert all(re.match(r"  \S+ \| turn \d+ \| \d+ tokens \| ", line) for line in lines[5:5 + min(stored, 20)])


def test_summary_of_the_bundled_asset(cli, tmp_path):
    contract = tmp_path / "c.limn"
    assert cli("--history", ASSET, "--contract", contract, "--now", NOW).code == 0
    result = cli("report", "--contract", contract)
    assert result.code == 0
    assert result.out.splitlines()[:2] == [
        f"report: {contract}: 12 blocks (retain 3, page 5, evict 4); 1 pass, 0 recalls; 5 pages stored",
        f"  pass 1 at {NOW}; alpha 0.7 beta 0.3; new: retain 3, page 5, evict 4; moved: none; pages stored: 5"]


# ----- bad input: one line, exit 2, nothing written


@pytest.mark.parametrize("make, message", [
    (lambda d: None, "{c}: no such contract"),
    (lambda d: (d / "c.limn").write_text("just some notes\n"),
     "{c}: not a Liminate contract: line 1 is not a Liminate statement"),
    (lambda d: (d / "c.limn").write_text('{"blocks": []}\n'),
     "{c}: not a Liminate contract: line 1 is not a Liminate statement"),
    (lambda d: (d / "c.limn").write_text("remember a list called notes\n"), "{c}: not a pager contract: it records no pass"),
    (lambda d: (d / "c.limn").write_text("add \"b1\" to paged-blocks because \"x\"\n"),
     "{c}: line 1: can't read back pager statement: adds to paged-blocks before it is declared"),
    (lambda d: (d / "c.limn").mkdir(), "{c}: is a directory, not a contract file"),
])
def test_bad_contract_is_one_line_and_exit_2(cli, tmp_path, make, message):
    make(tmp_path)
    contract, out = tmp_path / "c.limn", tmp_path / "r.html"
    before = sorted(os.listdir(tmp_path))
    result = cli("report", "--contract", contract, "--out", out)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith("pager: error: " + message.format(c=contract)) and result.err.count("\n") == 1
    assert sorted(os.listdir(tmp_path)) == before


def test_bad_out_path_leaves_the_old_report(cli, session):
    out = session["dir"] / "report.html"
    out.write_text("old report")
    missing = session["dir"] / "no-such-folder" / "r.html"
    result = report(cli, session, missing)
    assert result.code == 2 and result.err.startswith(f"pager: error: {missing}: --out's folder ")
    assert result.err.endswith(" does not exist\n") and result.err.count("\n") == 1
    result = report(cli, session, session["contract"])
    assert result.code == 2 and "--out and --contract name the same file" in result.err
    bad = session["dir"] / "bad.jsonl"
    bad.write_text("not json\n")
    result = cli("report", "--contract", session["contract"], "--history", bad, "--out", out)
    assert result.code == 2 and result.err.startswith(f"pager: error: {bad}: ") and result.err.count("\n") == 1
    assert out.read_text() == "old report"


# ----- the real browser


def test_report_in_headless_chromium(cli, pager, session, tmp_path_factory):
    """The page loads in Debian's chromium without an error, has a cell per block with its directive's
    class, a click shows a paged block's recall command, and the hostile text runs nothing."""
    executable = find_chromium()
    if executable is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; .ci/run installs it (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium); the real-browser check is skipped")
    out = session["dir"] / "report.html"
    assert report(cli, session, out).code == 0
    listed = directives(pager, session["contract"])
    order = block_order(session["contract"])
    shots = tmp_path_factory.mktemp("report-screenshots")
    with Browser(executable) as page:
        page.open(out.as_uri())
        assert page.evaluate("document.documentElement.getAttribute('data-ready')") == "1"
        classes = page.evaluate("Array.from(document.querySelectorAll('#timeline .b'), e => e.className)")
        assert len(classes) == len(order)
        assert [re.search(r"\bd-(\w+)", c).group(1) for c in classes] == [listed[b] for b in order]
        # Colours come from the directive classes.
        colours = page.evaluate("['retain','page','evict'].map(d => { var e = document.querySelector('#timeline .d-' + d);"
                                " return e ? getComputedStyle(e).backgroundColor : null; })")
        assert len({c for c in colours if c}) == len([c for c in colours if c]) >= 2
        # Hovering shows a block's details; a click on a paged block pins them, with its recall command.
        page.click('#timeline [data-i="0"]', hover_only=True)
        assert page.evaluate("document.querySelector('#details h3').textContent") == order[0]
        paged = next(i for i, b in enumerate(order) if listed[b] == "page")
        page.click(f'#timeline [data-i="{paged}"]')
        shown = page.evaluate("document.getElementById('details').innerText")
        assert f"python3 scripts/pager.py recall {order[paged]} --contract {session['contract']}" in shown
        assert "score R" in shown and "recency" in shown
        # Hovering elsewhere does not replace pinned details; the hostile block shows its text as text.
        hostile = next(i for i, b in enumerate(order)
                       if "__pwned" in page.evaluate(f"JSON.parse(document.getElementById('report-data')"
                                                     f".textContent).blocks[{i}][7]"))
        page.click(f'#timeline [data-i="{paged}"]')  # unpin
        page.click(f'#timeline [data-i="{hostile}"]')
        text = page.evaluate("document.querySelector('#details pre:last-of-type').textContent")
        assert "</script><script>window.__pwned" in text and "<img src=x onerror=" in text
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.evaluate("document.images.length") == 0
        # The filter box narrows the page index.
        rows = page.evaluate("Array.from(document.querySelectorAll('#pages tbody tr'), r => r.textContent.toLowerCase())")
        word = page.evaluate("document.querySelector('#pages tbody tr:last-child td').textContent").lower()
        page.evaluate(f"(function(){{var f=document.getElementById('filter');f.value={json.dumps(word.upper())};"
                      "f.dispatchEvent(new Event('input'));})()")
        page.send("Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 300))", "awaitPromise": True})
        visible = page.evaluate("Array.from(document.querySelectorAll('#pages tbody tr')).filter(r => !r.hidden)"
                                ".map(r => r.textContent.toLowerCase())")
        assert 0 < len(visible) < len(rows) and visible == [row for row in rows if word in row]
        assert page.evaluate("document.getElementById('shown').textContent") == str(len(visible))
        page.screenshot(shots / "report.png")
        assert (shots / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert page.problems == [], page.problems
        # The driver does see a page's errors (so the empty list above means something).
        page.evaluate("console.error('probe')")
        page.send("Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 50))", "awaitPromise": True})
        assert page.problems == ["console.error: probe"]


def test_json_summary_holds_every_event_and_page(cli, pager, session):
    result = cli("report", "--contract", session["contract"], "--json")
    assert result.code == 0
    got = json.loads(result.out)
    listed = directives(pager, session["contract"])
    assert got["blocks"] == len(listed) and got["page"] == sum(1 for d in listed.values() if d == "page")
    assert [e["event"] for e in got["events"]] == ["pass", "pass", "recall"]
    assert got["events"][2]["moved"] == [[session["recalled"], "page", "retain"]]
    ranges = range_pages(pager, session["contract"])
    assert [(r["id"], r["members"]) for r in got["ranges"]] == [(r, len(m)) for r, m in ranges.items()]
    everything = pager.contract_state(str(session["contract"])).directives  # the page index holds range pages too
    assert [p["block"] for p in got["pages"]] == [b for b, d in everything.items() if d == "page"]
    assert all(p["recall"] == f"python3 scripts/pager.py recall {p['block']} --contract {session['contract']}"
               for p in got["pages"])
    out = session["dir"] / "r.html"
    written = json.loads(cli("report", "--contract", session["contract"], "--out", out, "--json").out)
    assert written == {"out": str(out), "blocks": len(listed), "events": 3, "bytes": out.stat().st_size}


def test_range_pages_group_their_members(pager):
    """A range page (r-<12 hex>) is no cell: the members the store reports for it are drawn in its frame."""
    text = ("remember a list called retained-blocks\nremember a list called paged-blocks\n"
            "remember a list called evicted-blocks\n"
            'add "b1" to retained-blocks because "R=0.700 sim=0.571 rec=1.000 dt=0"\n'
            'add "b2" to paged-blocks because "R=0.300 sim=0.100 rec=0.591 dt=1"\n'
            'add "b3" to paged-blocks because "R=0.300 sim=0.100 rec=0.591 dt=1"\n'
            'add "r-0123456789ab" to paged-blocks because "R=0.300 sim=0.100 rec=0.591 dt=1"\n'
            'add "b4" to retained-blocks because "R=0.700 sim=0.571 rec=1.000 dt=0"\n'
            'remember a value called last-pager-pass with "2026-05-17T03:08:12+00:00"\n')
    state = pager.read_contract_state(text)
    ranges = {"r-0123456789ab": ["b2", "b3"]}
    got = pager._session_report(text, state, "C.limn", {}, ranges=ranges)
    assert [(b.block, b.group) for b in got.blocks] == [("b1", None), ("b2", "r-0123456789ab"),
                                                        ("b3", "r-0123456789ab"), ("b4", None)]
    assert got.passes[0].ranges == (1, 0) and got.passes[0].new == {"retain": 2, "page": 2, "evict": 0}
    page = pager._render_report(got)
    assert parse(page).frames == [("r-0123456789ab", [1, 2])]
    # Without ranges from the store, nothing is grouped, and the range page still is no cell.
    plain = pager._render_report(pager._session_report(text, state, "C.limn", {}))
    assert 'class="range"' not in plain and len(re.findall(r'<i class="b ', plain)) == 4


def test_an_ended_range_page_is_no_block_gone(pager):
    """A range page a later pass ends (its members re-ranged) counts as ended, never as a block moved to 'gone'."""
    head = ("remember a list called retained-blocks\nremember a list called paged-blocks\n"
            "remember a list called evicted-blocks\n"
            'add "b1" to paged-blocks because "budget-ranged; R=0.300 sim=0.100 rec=0.591 dt=1"\n'
            'add "r-0123456789ab" to paged-blocks because "range; turns 1-1; 1 blocks; 9 tokens; first b1; last b1"\n'
            'remember a value called last-pager-pass with "2026-05-17T03:08:12+00:00"\n'
            'add "b2" to paged-blocks because "budget-ranged; R=0.300 sim=0.100 rec=0.591 dt=1"\n'
            'remove "r-0123456789ab" from paged-blocks because "range ended"\n'
            'add "r-ba9876543210" to paged-blocks because "range; turns 1-2; 2 blocks; 18 tokens; first b1; last b2"\n'
            'remember a value called last-pager-pass with "2026-05-17T04:10:00+00:00"\n')
    got = pager._session_report(head, pager.read_contract_state(head), "C.limn", {},
                                ranges={"r-ba9876543210": ["b1", "b2"]})
    assert [(p.ranges, p.moved) for p in got.passes] == [((1, 0), ()), ((1, 1), ())]
    assert [(b.block, b.group) for b in got.blocks] == [("b1", "r-ba9876543210"), ("b2", "r-ba9876543210")]
    assert [r[0] for r in got.ranges] == ["r-ba9876543210"]
    assert "range pages made 1<br>range pages ended 1" in pager._render_report(got)
    assert "gone" not in pager._report_summary(got)
