"""``memsim data fetch|list``: the benchmark files, downloaded and verified (``memsim.static_benchmarks.data``)."""

from __future__ import annotations

import argparse

__all__ = ["data_arguments", "data_main"]


def data_arguments(parser: argparse.ArgumentParser) -> None:
    """``fetch NAME...`` and ``list``."""
    from memsim.static_benchmarks.data import DATASETS

    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = sub.add_parser("fetch", help="download official files into the data folder and verify their sha256")
    p.add_argument("names", nargs="+", metavar="NAME", choices=sorted(DATASETS), help=", ".join(DATASETS))
    p.add_argument("--mirror", default=None, metavar="URL",
                   help="serve <URL>/<name>/<file> instead of the official home (default $MEMSIM_DATA_MIRROR)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p = sub.add_parser("list", help="what the data folder holds")
    p.add_argument("--verify", action="store_true", help="re-hash present files against their expected sha256")


def data_main(args: argparse.Namespace) -> int:
    """Fetch or list; a refused or failed download raises ``UserError``."""
    from memsim.static_benchmarks.data import data_dir, fetch, status

    if args.action == "fetch":
        for name in args.names:
            got = fetch(name, mirror=args.mirror, progress=not args.no_progress)
            print(f"{name}: {got.path}")
            print(f"  from    {got.url}")
            if got.first_use:
                print(f"  sha256  {got.sha256} (no published hash: recorded now; later fetches must match)")
            else:
                print(f"  sha256  {got.sha256} (verified)")
            print(f"  licence {got.licence}")
        return 0
    print(f"data folder: {data_dir()}")
    for row in status(verify=args.verify):
        state = "present" if row.present else "absent"
        if row.verified is not None:
            state += ", sha256 ok" if row.verified else ", SHA256 MISMATCH"
        size = f"{row.size / 1e6:.1f} MB" if row.present else ""
        print(f"  {row.name:<27} {state:<20} {size:>10}  {row.description}")
        if row.present:
            print(f"  {'':<27} {row.path}")
    return 0
