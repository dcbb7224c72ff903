"""Gold stage + report on a small hand-made lakehouse: tables written, html references every chart,
and the summary numbers in the html are the gold table's."""

from __future__ import annotations

import datetime as dt
import html
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ackreplay.config import AppConfig, parse_config
from ackreplay.gold.report import (
    CHARTS,
    build_report,
    fault_marks,
    latency_by_partition,
    latency_over_time,
    slot_seconds,
)
from ackreplay.gold.stage import GOLD_TABLES, SUMMARY_COLUMNS, check_contract, run_gold, summary_cell
from ackreplay.schemas.gold import POLICY_SUMMARY, RISK_EXPOSURE
from ackreplay.schemas.replay import PRODUCE_REPLAY
from ackreplay.storage.lakehouse import read_table, replace_rows
from ackreplay.transforms.common import conform
from tests.unit.test_gold import INF, T10, T11, _row, isr_frame, many_acked, partitions_frame, replay_frame

MINUTE = dt.timedelta(minutes=1)


PLOTLY_JS = re.compile(r'<script type="text/javascript" id="plotly-js">.*?</script>', re.S)


class _ReportParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.charts: list[tuple[str, str]] = []  # (data-chart, the Plotly div's id)
        self._chart: str | None = None
        self.rows: list[dict[str, tuple[str, str]]] = []  # key -> (data-value, text)
        self._cell: tuple[str, str] | None = None
        self._text = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and a.get("class") == "chart":
            self._chart = a["data-chart"]
        elif tag == "div" and self._chart and "id" in a:
            self.charts.append((self._chart, a["id"]))
            self._chart = None
        elif tag == "tr" and "data-policy" in a:
            self.rows.append({})
        elif tag == "td" and "data-key" in a:
            self._cell, self._text = (a["data-key"], a["data-value"]), ""

    def handle_data(self, data):
        if self._cell:
            self._text += data

    def handle_endtag(self, tag):
        if tag == "td" and self._cell:
            key, value = self._cell
            self.rows[-1][key] = (value, self._text)
            self._cell = None


@pytest.fixture(scope="module")
def lakehouse(spark, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("gold_lh"))
    replay = (
        many_acked(spark, "acks=all", 1200)
        .unionByName(many_acked(spark, "quorum=2", 1100, scale=0.5))
        .unionByName(
            replay_frame(
                spark,
                [
                    _row(policy="acks=1", latency=0.8, copies=1, exposure=3.0, nbytes=500, loss_k=True, full=12.5),
                    _row(
                        policy="acks=1", t=T11, latency=0.9, copies=1, exposure=INF, loss_k=True, loss_l=True, full=INF
                    ),
                    _row(policy="min.insync", outcome="not_enough_replicas"),
                    _row(policy="min.insync", t=T11, outcome="timeout"),
                ],
            )
        )
    )
    replace_rows(conform(replay, PRODUCE_REPLAY), root, "produce_replay", "cluster IN ('c1')", "test")
    replace_rows(partitions_frame(spark, [("c1", "orders", 0, 2)]), root, "partitions", "cluster IN ('c1')", "test")
    # orders/0 below min ISR 2 from 10:30 to 10:45, then full until the last produce (11:00)
    isr = isr_frame(spark, [("orders", 0, 1, [1], T10 + 30 * MINUTE), ("orders", 0, 1, [1, 2, 3], T10 + 45 * MINUTE)])
    replace_rows(isr, root, "isr_changes", "cluster IN ('c1')", "test")
    return root


def test_gold_tables_and_report(spark, lakehouse, tmp_path):
    config = parse_config({"report": {"target": {"p999_ms": 2000, "max_lost_acks": 0}}})
    report = run_gold(spark, config, lakehouse, ["c1"], "gold-test", window="hour")
    # windows: acks=all, quorum=2 at 10:00; acks=1, min.insync at 10:00 and 11:00 (one partition)
    assert report.rows == {
        "latency_percentiles": 6, "risk_exposure": 6, "availability": 6, "routing": 4, "policy_summary": 4
    }  # fmt: skip
    assert [r["policy"] for r in report.summary] == ["acks=all", "min.insync", "quorum=2", "acks=1"]
    lines = report.summary_lines()
    assert lines[0].startswith("gold run gold-test (hour windows)")
    # the hand-made produces have no send time: the summary says their latency is the broker's reading
    assert lines[2].startswith("    send times (CreateTime or a client log) for 0 of the ")
    assert "acked produces (0.0%) under acks=all: the others' latency starts when the broker read" in lines[2]
    assert [line.split()[0] for line in lines[4:8]] == ["acks=all", "min.insync", "quorum=2", "acks=1"]
    # acks=all and quorum=2 have the 1,000 records a P999 needs (ackreplay/gold/decision.py); quorum=2's is the
    # lower at no more risk, so it alone is on the frontier
    assert report.summary[2]["p999_ms"] < report.summary[0]["p999_ms"]
    decision = [
        "decision for the target P999 <= 2,000 ms, lost acks <= 0: quorum=2 meets it on 1 of 1 topic",
        "  c1 / orders: frontier quorum=2 (P999 from too few records: acks=1) (no produce acked, not a candidate:"
        " min.insync);"
        " meets the target: quorum=2, acks=all; recommended: quorum=2; caution: only 0.0% of the acked produces"
        " had a send time, so P999 is mostly the broker's view and producers saw more (give the records'"
        ' CreateTime: README "What the producer sees")',
    ]
    assert lines[8:] == decision

    html_path = build_report(spark, lakehouse, tmp_path / "out", config.report.target)
    assert html_path == str(tmp_path / "out" / "report.html")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.html"]  # nothing left beside it
    page = Path(html_path).read_text(encoding="utf-8")
    parser = _ReportParser()
    parser.feed(PLOTLY_JS.sub("", page))
    # every chart once, in the order of CHARTS, each a Plotly div drawn by the page's one copy of plotly.js
    assert parser.charts == [(name, f"{name}-c1__orders") for name, _ in CHARTS]
    assert len(PLOTLY_JS.findall(page)) == 1 and page.count("Plotly.newPlot(") == len(CHARTS)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.html"]  # one file to mail

    gold = {r["policy"]: r.asDict() for r in read_table(spark, lakehouse, "policy_summary").collect()}
    assert [row["policy"][0] for row in parser.rows] == ["acks=all", "min.insync", "quorum=2", "acks=1"]
    for row in parser.rows:
        expected = gold[row["policy"][0]]
        for _, key, fmt in SUMMARY_COLUMNS:
            value, text = row[key]
            want = expected[key]
            assert text == summary_cell(expected, key, fmt)
            if want is None:
                assert value == ""
            elif isinstance(want, str):
                assert value == want
            elif isinstance(want, float) and math.isinf(want):
                assert value == "inf"
            else:
                assert float(value) == want, (row["policy"], key)
    # hand-checked figures of the summary: acks=all p999 of 1..1200 (h = 1199 * 0.999 = 1197.801 -> 1198.801)
    assert gold["acks=all"]["p999_ms"] == pytest.approx(1198.801)
    assert gold["acks=1"]["never_min_isr_acks"] == 1 and gold["acks=1"]["exposure_byte_ms"] == 1500.0
    assert gold["min.insync"]["not_enough_replicas"] == 1 and gold["min.insync"]["timeouts"] == 1
    assert gold["acks=1"]["full_replication_p99_ms"] == 12.5 and gold["acks=1"]["never_full_replication_acks"] == 1
    # no send-time input shows keys (`partitioning: auto` -> keyed), no request lines show a leader's pause
    assert {(r["partitioning"], r["leader_silence_ms"]) for r in gold.values()} == {("keyed", None)}
    # 15 minutes under min ISR, the same recorded ISR for every policy
    assert {p: (r["under_min_isr_ms"], r["under_min_isr_source"]) for p, r in gold.items()} == {
        p: (900_000.0, "isr_changes") for p in ("acks=all", "min.insync", "quorum=2", "acks=1")
    }
    availability = {
        (r["policy"], r["window_start"]): (r["produces"], r["isr_known_ms"], r["under_min_isr_ms"])
        for r in read_table(spark, lakehouse, "availability").collect()
    }
    assert availability == {
        ("acks=all", T10): (1200, 1_800_000.0, 900_000.0),
        ("quorum=2", T10): (1100, 1_800_000.0, 900_000.0),
        ("acks=1", T10): (1, 1_800_000.0, 900_000.0),
        ("acks=1", T11): (1, 0.0, None),  # nothing known of the ISR after the last event: no figure
        ("min.insync", T10): (1, 1_800_000.0, 900_000.0),
        ("min.insync", T11): (1, 0.0, None),
    }
    # KIP-637: the min.insync rejection at 10:00 has no other partition to go to (keyed, the default, could not
    # move anyway); orders/0 is writable again at 10:45, so it is held 45 minutes; of the 30 minutes of known ISR
    # in the 10:00 window none of the topic's partitions was writable from 10:30 to 10:45
    routing = {
        (r["policy"], r["window_start"]): (
            r["partitioning"],
            r["rejections"],
            r["held"],
            r["wait_today_ms"],
            r["isr_known_ms"],
            r["no_writable_ms"],
        )
        for r in read_table(spark, lakehouse, "routing").collect()
    }
    assert routing == {
        ("acks=all", T10): ("keyed", 0, 0, 0.0, 1_800_000.0, 900_000.0),
        ("acks=all", T11): ("keyed", 0, 0, 0.0, None, None),
        ("min.insync", T10): ("keyed", 1, 1, 2_700_000.0, 1_800_000.0, 900_000.0),
        ("min.insync", T11): ("keyed", 0, 0, 0.0, None, None),
    }
    html_text = PLOTLY_JS.sub("", page)
    assert "<summary>Routing around partitions below min ISR (KIP-637)</summary>" in html_text
    assert '<td class="left">min.insync</td><td class="right">1 (0)</td>' in html_text
    # one self-contained file: nothing fetched from elsewhere (every src or href outside plotly.js an embedded data:
    # URI; the browser test checks that the page requests nothing)
    assert re.findall(r'(?:src|href)="(?!data:)[^"]*"', html_text) == []
    assert html_text.index('<section class="decision"') < html_text.index(
        "<section data-cluster"
    )  # it opens the report
    assert (
        f"<p>{html.escape(decision[0])}</p>" in html_text
        and f"<li>{html.escape(decision[1].strip())}</li>" in html_text
    )
    for name, caption in CHARTS:  # every chart under its caption
        assert f"<h3>{caption}</h3>" in html_text.replace("&lt;", "<").replace("&gt;", ">"), name
    assert '<section id="provenance">' in html_text and "policies: acks=all, min.insync, quorum=2, acks=1;" in html_text
    assert 'id="accuracy"' not in html_text  # no replay here, so no self-check to show
    # the drill-down: orders-0 per policy (min.insync acked nothing there), 15 minutes below its replicas, no leader
    # change
    drill = html.unescape(re.sub(r"<[^>]+>", "|", html_text[html_text.index("<details>") :]))
    assert "|0||1,200||1,188.0 / 1,198.8||-||544.5 / 549.5||- / -||900.0||0|" in drill.replace("\n", "")


def test_latency_over_time_and_its_fault_marks(spark, lakehouse):
    """The chart's data: P99/P999 per slot (a slot length giving at most ~60 slots), and the spans while a
    partition's ISR was smaller than its largest (here topics.txt gives no replicas), leader changes none."""
    assert [slot_seconds(s) for s in (0, 59, 61, 150, 3_600, 10**7)] == [1, 1, 2, 5, 60, 86_400]
    replay = read_table(spark, lakehouse, "produce_replay")
    rows = {(r["policy"], r["slot_start"]): (r["p99_ms"], r["p999_ms"]) for r in latency_over_time(
        spark, replay, None, {("c1", "orders"): 60}
    )}  # fmt: skip
    # acks=all: latencies 1..1200 at 10:00 (p999 as in gold, h = 1197.801); quorum=2: 0.5..550; acks=1 has one
    # record a slot (too few for either figure); min.insync acked nothing
    assert rows == {
        ("acks=all", T10): (pytest.approx(1188.01), pytest.approx(1198.801)),
        ("quorum=2", T10): (pytest.approx(544.505), pytest.approx(549.4505)),
        ("acks=1", T10): (None, None),
        ("acks=1", T11): (None, None),
    }
    by_partition = {
        (r["partition"], r["policy"]): (r["records"], r["p999_ms"]) for r in latency_by_partition(replay, None)
    }
    assert by_partition == {
        (0, "acks=all"): (1200, pytest.approx(1198.801)),
        (0, "quorum=2"): (1100, pytest.approx(549.4505)),
        (0, "acks=1"): (2, None),
    }
    assert fault_marks(spark, lakehouse, replay, ["c1"]) == (
        [{"cluster": "c1", "topic": "orders", "partition": 0, "start": T10 + 30 * MINUTE, "end": T10 + 45 * MINUTE}],
        [],
    )


def _gold_rows(spark, lakehouse):
    out = {}
    for name in GOLD_TABLES:
        df = read_table(spark, lakehouse, name).drop("gold_run_id")
        out[name] = df.orderBy(*df.columns).collect()
    return out


def test_gold_rerun_is_idempotent(spark, lakehouse):
    run_gold(spark, AppConfig(), lakehouse, ["c1"], "gold-rerun-1", window="hour")
    first = _gold_rows(spark, lakehouse)
    run_gold(spark, AppConfig(), lakehouse, ["c1"], "gold-rerun-2", window="hour")
    assert _gold_rows(spark, lakehouse) == first


def test_gold_table_of_an_older_contract_is_a_clear_error(spark, tmp_path):
    root = str(tmp_path / "lh")
    old = spark.createDataFrame([("c1", "orders", "acks=all")], "cluster string, topic string, policy string")
    replace_rows(old, root, "policy_summary", "cluster IN ('c1')", "old-version")
    with pytest.raises(
        ValueError, match=r"policy_summary .*\(missing: policy_rank, self_check, produces.*delete that folder"
    ):
        check_contract(spark, root, "policy_summary", POLICY_SUMMARY)
    check_contract(spark, root, "risk_exposure", RISK_EXPOSURE)  # no table yet: nothing to check


def _chromium() -> str | None:
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="no Chromium on this machine (make test installs Debian's chromium)")
def test_the_report_renders_in_a_browser(spark, lakehouse, tmp_path):
    """Headless Chromium opens report.html as a user would (a file, no server): no console or page error, no
    request for anything but the file itself, every chart drawn by plotly.js (its SVG in each chart's div), the
    decision above everything else, the drill-down opens, a screenshot of a chart shows a drawing (hundreds of
    colours), not an empty box, and hovering a CDF line shows its values."""
    import io

    from PIL import Image
    from playwright.sync_api import sync_playwright

    config = parse_config({"report": {"target": {"p999_ms": 2000, "max_lost_acks": 0}}})
    run_gold(spark, config, lakehouse, ["c1"], "gold-browser", window="hour")
    page_path = Path(build_report(spark, lakehouse, tmp_path / "out", config.report.target))
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("request", lambda request: requests.append(request.url))
            page.goto(page_path.as_uri())
            drawn = page.evaluate(
                "Array.from(document.querySelectorAll('div.chart')).map(c => [c.dataset.chart, "
                "c.querySelectorAll('svg.main-svg').length > 0, c.querySelectorAll('.scatterlayer .trace').length])"
            )
            tops = page.evaluate(
                "['section.decision', '#provenance', 'section[data-cluster]']"
                ".map(s => document.querySelector(s).getBoundingClientRect().top)"
            )
            folded = page.locator("details table")
            assert folded.count() == 2 and not any(table.is_visible() for table in folded.all())
            page.locator("details summary").first.click()  # per partition
            page.get_by_text("Routing around partitions below min ISR (KIP-637)").click()
            assert all(table.is_visible() for table in folded.all())
            chart = Image.open(io.BytesIO(page.locator("div.chart").first.screenshot())).convert("RGB")
            page.evaluate(  # what a pointer over the acks=all line's 150th point shows
                "Plotly.Fx.hover(document.querySelector('div.chart[data-chart=\"latency_cdf\"] .js-plotly-plot'),"
                " [{curveNumber: 0, pointNumber: 149}])"
            )
            hover = page.locator('div.chart[data-chart="latency_cdf"] .hoverlayer').text_content(timeout=5000)
        finally:
            browser.close()
    assert errors == []
    assert requests == [page_path.as_uri()]
    # each chart drawn, with a trace per policy that has something to plot (the CDF: acks=all and quorum=2 acked
    # 1,200 and 1,100 records, acks=1 two; min.insync none)
    assert [name for name, _, _ in drawn] == [name for name, _ in CHARTS]
    assert all(svg and traces > 0 for _, svg, traces in drawn), drawn
    assert dict((name, traces) for name, _, traces in drawn)["latency_cdf"] == 3
    assert re.search(r"of records ≤ [\d,.]+ ms", hover), hover
    decision, provenance, topic = tops
    assert decision < topic < provenance  # the decision first, how it was made last
    assert chart.width > 600 and len(chart.getcolors(maxcolors=1 << 16) or []) > 200
