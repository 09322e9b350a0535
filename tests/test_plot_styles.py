"""Figures: a system keeps its colour from one report to the next; curves start past their first questions."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

from memsim.analysis.plots import BURN_IN, PALETTE, accuracy_figure, system_styles


def test_a_system_keeps_its_colour_whatever_the_other_systems_and_their_order() -> None:
    one = system_styles(["naive", "bm25", "neuroplastic", "neuroplastic~twin"])
    two = system_styles(["hybrid", "neuroplastic", "naive", "neuroplastic~placebo", "control-learner"])
    three = system_styles(["naive"])
    assert one["naive"]["color"] == two["naive"]["color"] == three["naive"]["color"]
    assert one["neuroplastic"]["color"] == two["neuroplastic"]["color"] == one["neuroplastic~twin"]["color"]
    # Order does not matter, only the set of systems.
    assert system_styles(["bm25", "naive"]) == {k: v for k, v in system_styles(["naive", "bm25"]).items()}
    # Within one run, colour+style pairs stay distinct however many systems want the same colour.
    labels = [f"s{i}" for i in range(25)] + ["s1~twin", "s1~placebo", "s1~always_false", "s1~always_true"]
    arms = {lab: (lab.split("~")[0], lab.split("~")[1] if "~" in lab else "system") for lab in labels}
    styles = system_styles(labels, arms)
    assert len({(s["color"], str(s["linestyle"])) for s in styles.values()}) == len(labels)
    assert {s["color"] for s in styles.values()} <= set(PALETTE)
    # Two systems whose names want the same colour: the same colour, told apart by the line.
    both = system_styles(["neuroplastic", "bm25"])
    assert both["bm25"]["color"] == both["neuroplastic"]["color"] == one["neuroplastic"]["color"]
    assert both["bm25"]["linestyle"] == "solid" != both["neuroplastic"]["linestyle"]


def test_constant_arms_and_unknown_arms_get_a_line_of_their_own() -> None:
    arms = {"x": ("x", "system"), "x·f": ("x", "always_false"), "x·t": ("x", "always_true"), "x·n": ("x", "new_arm")}
    styles = system_styles(list(arms), arms)
    assert len({str(s["linestyle"]) for s in styles.values()}) == 4
    assert len({s["color"] for s in styles.values()}) == 1


def test_curves_start_at_the_burn_in_question(monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.axes import Axes

    drawn: list[np.ndarray] = []
    original = Axes.plot

    def record(self: Axes, *args: Any, **kwargs: Any) -> Any:
        drawn.append(np.asarray(args[0]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Axes, "plot", record)
    n = 30
    curves = pl.DataFrame({"system": ["a"] * n, "q_index": list(range(n)), "t_days": [float(i) for i in range(n)],
                           "n": list(range(1, n + 1)), "value": [0.0] + [1.0] * (n - 1),
                           "windowed": [0.5] * n, "windowed_days": [0.5] * n, "cumulative": [0.5] * n,
                           "fading": [0.5] * n})
    accuracy_figure(curves, metric="recall_all@10", window=10, fading=0.98)
    series = [x for x in drawn if x.size]
    assert len(series) == 3 and all(x[0] == BURN_IN - 1 and x.size == n - BURN_IN + 1 for x in series)
