"""``memsim cost``: cost per user per simulated month of a run folder (``memsim.analysis.cost``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

__all__ = ["cost_arguments", "cost_main"]


def cost_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``memsim cost``."""
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a finished run folder")
    parser.add_argument("--prices", type=Path, default=None, help="price table overrides (JSON or TOML, USD per million tokens)")
    from memsim.analysis.cost import CostAssumptions

    d = CostAssumptions()
    parser.add_argument("--reader-model", default=None, help=f"model the reader's tokens are priced at (default {d.reader_model})")
    parser.add_argument("--ingest-model", default=d.ingest_model, help=f"model a system's own ingest tokens are priced at (default {d.ingest_model})")
    parser.add_argument("--embed-usd-per-million", type=float, default=d.embed_usd_per_million, help="embedding price")
    parser.add_argument("--storage-usd-per-gb-month", type=float, default=d.storage_usd_per_gb_month, help="storage price")
    parser.add_argument("--plot", type=Path, default=None, metavar="PNG", help="also write the timeline figure")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the rows as JSON")


def cost_main(args: argparse.Namespace) -> int:
    """Print the cost table of a run folder."""
    from memsim.analysis.cost import CostAssumptions, cost_figure, cost_table, format_cost
    from memsim.sim.answer.meter import PriceTable
    from memsim.analysis.load import read_run

    run = read_run(args.run_dir, require=("timeline.parquet",))
    reader = args.reader_model or CostAssumptions().reader_model
    a = CostAssumptions(reader, args.ingest_model, args.embed_usd_per_million, args.storage_usd_per_gb_month)
    prices = PriceTable.load(args.prices) if args.prices else PriceTable()
    rows = cost_table(run.probes, run.timeline, prices=prices, assumptions=a)
    print(format_cost(rows, a))
    if args.plot is not None:
        cost_figure(rows, args.plot)
        print(f"figure: {args.plot}")
    if args.json is not None:
        args.json.write_text(json.dumps({"assumptions": asdict(a), "rows": rows}, indent=2) + "\n")
    return 0

