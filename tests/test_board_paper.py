"""The board fit for a paper: ticks and units on the axes, no text over text or past the edge, one row per
distinct run, instruments and oracle-fed systems apart; ``memsim compare`` counts a copied run once."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from memsim.analysis.board import BoardRow, _svg, nice_ticks, spread, text_box, tick_text, write_board
from memsim.analysis.cli import main

SVG = "{http://www.w3.org/2000/svg}"


def test_nice_ticks_cover_the_values_with_round_steps() -> None:
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(43.1, 57.9, most=5) == [40.0, 45.0, 50.0, 55.0, 60.0]
    ticks = nice_ticks(0.00012, 0.00047, most=5)
    assert ticks[0] <= 0.00012 and ticks[-1] >= 0.00047 and len(ticks) <= 6
    assert [tick_text(t, ticks) for t in ticks] == ["0.0001", "0.0002", "0.0003", "0.0004", "0.0005"]
    assert [tick_text(t, [0.0, 2.5, 5.0]) for t in (0.0, 2.5, 5.0)] == ["0.0", "2.5", "5.0"]
    one = nice_ticks(12.0, 12.0)  # one value still gets a scale around it
    assert one[0] < 12.0 < one[-1]
    with pytest.raises(ValueError, match="finite"):
        nice_ticks(0.0, float("nan"))


def test_spread_keeps_order_and_gap_within_bounds() -> None:
    ys = spread([50.0, 50.0, 51.0, 200.0, 10.0], top=0.0, bottom=200.0, gap=15.0)
    order = sorted(range(5), key=lambda i: [50.0, 50.0, 51.0, 200.0, 10.0][i])
    placed = [ys[i] for i in order]
    assert all(b - a >= 15.0 - 1e-9 for a, b in zip(placed, placed[1:]))
    assert 0.0 <= min(ys) and max(ys) <= 200.0
    assert ys[4] == 10.0  # a label with room stays at its point's height


def _texts(svg: str) -> tuple[ET.Element, list[tuple[str, tuple[float, float, float, float]]]]:
    """The SVG's root and (text, reserved box) of every horizontal text."""
    root = ET.fromstring(svg)
    out = []
    for t in root.iter(f"{SVG}text"):
        if "rotate" in (t.get("transform") or ""):
            continue  # the y axis title: checked apart
        box = text_box(float(t.get("x")), float(t.get("y")), t.text or "", anchor=t.get("text-anchor", "start"))
        out.append((t.text or "", box))
    return root, out


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _check_plot(svg: str, names: list[str], unit: str) -> None:
    root, texts = _texts(svg)
    w, h = float(root.get("width")), float(root.get("height"))
    ticks = [t for t in root.iter(f"{SVG}text") if t.get("class") == "tick"]
    values = [t.text for t in ticks]
    assert len(values) >= 6 and all(re.fullmatch(r"-?\d+(\.\d+)?", v) for v in values), values
    axes = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "axis"]
    assert any(unit in a for a in axes) and any(a.endswith("(%)") for a in axes), axes
    labels = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "point-label"]
    assert sorted(labels) == sorted(names)  # every name whole, none cut
    for (ta, a), (tb, b) in itertools.combinations(texts, 2):
        assert not _overlap(a, b), f"{ta!r} overlaps {tb!r}"
    for text, (x0, y0, x1, y1) in texts:
        assert 0 <= x0 and x1 <= w and 0 <= y0 and y1 <= h, f"{text!r} runs past the edge ({x0}, {y0}, {x1}, {y1}) of {w}x{h}"


def _row(system: str, headline: float, p95: float, usd: float, mark: str = "", run: str = "runs/a") -> BoardRow:
    return BoardRow(("longitudinal", "life", "", "recall_all@10", "10"), run, system, "recall_all@10", headline,
                    headline - 0.02, headline + 0.02, None, usd, p95, mark=mark)


def test_a_crowded_plot_has_ticks_units_and_no_text_over_text() -> None:
    # Twelve systems, most on nearly the same spot, names as long as real ones.
    names = ["naive", "control-learner", "control-le", "node-overlap", "node-overlap-with-a-long-name", "bm25",
             "hybrid", "neuroplastic", "neuroplastic-no-ltp", "naive+recency", "surprise-adaptive-window",
             "http[url=http://127.0.0.1:8000,label=mine]"]
    rows = [_row(n, 0.62 + 0.0001 * (i % 3), 1.0 + 0.001 * i, 0.0002 * (i % 2), mark="instrument" if i == 1 else "")
            for i, n in enumerate(names)]
    svg = _svg(rows, "retrieve_p95_ms", "retrieval p95 (ms)", "t")
    _check_plot(svg, [n + (" [instrument]" if i == 1 else "") for i, n in enumerate(names)], "(ms)")
    assert svg.count("<rect") == 1  # the instrument is drawn apart, never on the frontier
    _check_plot(_svg(rows, "usd_user_month", "USD per user-month", "c"),
                [n + (" [instrument]" if i == 1 else "") for i, n in enumerate(names)], "USD per user-month")


def _runs(tmp_path: Path) -> list[Path]:
    from test_report import SYSTEMS, make_run

    a = make_run(tmp_path / "seed0", seed=0, reader=False, systems=SYSTEMS + (("gated~twin", 0.3, 0.3),))
    b = make_run(tmp_path / "seed1", seed=1, reader=False)
    return [a, b]


def test_the_board_page_shows_a_copied_run_once_and_marks_the_oracle_fed(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    copy = tmp_path / "elsewhere" / "seed0-copy"
    shutil.copytree(a, copy)
    page = write_board([a, b, copy], tmp_path / "board")
    data = json.loads((tmp_path / "board" / "board.json").read_text(encoding="utf-8"))
    (group,) = data
    rows = group["ranking"] + group["ranked_apart"]
    assert len(rows) == 6  # 3 systems x 2 distinct runs, not 9
    assert all(r["run"] != str(copy) for r in rows)
    assert {tuple(r["copies"]) for r in rows if r["run"] == str(a)} == {(str(copy),)}
    (gated,) = group["ranked_apart"]
    assert gated["system"] == "gated" and gated["mark"] == "oracle-fed"
    html = page.read_text(encoding="utf-8")
    assert f"{copy} holds the same run of decay, gated, naive as {a}" in html
    assert "no other system ranked here has both a higher recall_all@10 and a lower retrieval p95 (ms)" in html
    svgs = re.findall(r"<svg.*?</svg>", html, re.S)
    assert len(svgs) == 2
    names = ["naive (seed0)", "naive (seed1)", "decay (seed0)", "decay (seed1)", "gated (seed0) [oracle-fed]",
             "gated (seed1)"]
    _check_plot(svgs[0], names, "(ms)")
    # Tables scroll instead of clipping.
    assert html.count('<div class="scroll"><table class="ranking">') == 2


def test_compare_counts_a_copied_run_once_and_refuses_a_partial_repeat(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from test_report import SYSTEMS, make_run

    a, b = _runs(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    assert main(["compare", str(a), str(b), str(copy)]) == 0
    out = capsys.readouterr().out
    assert f"compare: {copy} is the same run as {a} (same spec, seed and systems): counted once" in out
    md = (tmp_path / "compare" / "compare.md").read_text(encoding="utf-8")  # beside the runs, not in ./runs
    assert str(copy) not in md
    # Two distinct seeds: n = 2; the copy did not make it 3.
    assert "n=3" not in md.replace(" ", "") and "62.9 [62.9, 62.9]" not in md
    more = make_run(tmp_path / "more", seed=0, reader=False,
                    systems=SYSTEMS + (("gated~twin", 0.3, 0.3), ("bm25", 0.5, 0.5)))
    assert main(["compare", str(a), str(more)]) == 2
    err = capsys.readouterr().err
    assert f"{more}: repeats the run of naive (also in {a})" in err and "counted twice" in err


CHROMIUM = "/usr/bin/chromium"

_MEASURE = """
<script>
window.addEventListener("load", () => {
  const boxes = [...document.querySelectorAll("svg.frontier text")].map(t => [t.textContent, t.getBoundingClientRect()]);
  const svgs = [...document.querySelectorAll("svg.frontier")].map(s => s.getBoundingClientRect());
  const clash = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [ta, a] = boxes[i], [tb, b] = boxes[j];
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) clash.push(ta + " / " + tb);
  }
  const out = boxes.filter(([t, r]) => !svgs.some(s => r.left >= s.left - 0.5 && r.right <= s.right + 0.5
                                                    && r.top >= s.top - 0.5 && r.bottom <= s.bottom + 0.5)).map(([t]) => t);
  document.body.setAttribute("data-texts", String(boxes.length));
  document.body.setAttribute("data-ticks", String(document.querySelectorAll("svg.frontier text.tick").length));
  document.body.setAttribute("data-clash", JSON.stringify(clash));
  document.body.setAttribute("data-outside", JSON.stringify(out));
});
</script>
"""


@pytest.mark.slow
def test_the_board_in_headless_chromium_has_ticks_and_no_text_over_text(tmp_path: Path) -> None:
    """Chromium's own text boxes (real fonts), not the layout's estimate, and a PNG screenshot of the page."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install -y chromium)")
    from test_report import SYSTEMS, make_run

    runs = _runs(tmp_path)
    runs.append(make_run(tmp_path / "instr", seed=2, reader=False,
                         systems=SYSTEMS + (("control-learner", 0.5, 0.6), ("control-learner-long-label", 0.5, 0.5))))
    page = write_board(runs, tmp_path / "board")
    probe = page.with_name("measure.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                           "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    body = re.search(r"<body[^>]*>", proc.stdout)
    assert body is not None, proc.stderr[-2000:]
    attrs = dict(re.findall(r'data-([a-z]+)="([^"]*)"', body.group(0)))
    assert int(attrs["ticks"]) >= 12 and int(attrs["texts"]) > int(attrs["ticks"])
    assert json.loads(attrs["clash"].replace("&quot;", '"')) == []
    assert json.loads(attrs["outside"].replace("&quot;", '"')) == []
    shot = tmp_path / "board.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1300,1800", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120, check=False)
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
