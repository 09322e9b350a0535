"""``memsim data fetch|list``: the benchmark files, downloaded and verified (``memsim.static_benchmarks.data``)."""

from __future__ import annotations

import argparse

__all__ = ["data_arguments", "data_main"]


def _registered() -> None:
    """Import every static benchmark, so that the datasets a benchmark's module registers are known."""
    from memsim.scenarios.registry import load_protocols

    load_protocols()


def data_arguments(parser: argparse.ArgumentParser) -> None:
    """``fetch NAME...`` and ``list``."""
    from memsim.static_benchmarks.data import DATASETS

    _registered()
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
    from memsim.static_benchmarks.data import DATASETS, data_dir, env_path, fetch, fetch_hint, locate, sha256_file, status

    _registered()
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
    # What a run reads when no --data is given ($MEMSIM_LOCOMO, $MEMSIM_LONGMEMEVAL, the data folder, ../shared).
    in_use = {kind: locate(kind) for kind in sorted({ds.kind for ds in DATASETS.values()})}
    from memsim.core.table import text_table

    rows: list[list[str]] = []
    for row in status(verify=args.verify):
        present, path, size, verified = row.present, row.path, row.size, row.verified
        found = env_path(DATASETS[row.name].kind)
        if not present and found is not None and found.is_file() and found.name == row.path.name:
            # the same file where the environment points a run ($MEMSIM_LOCOMO), hashed as a fetched copy is
            present, path, size = True, found, found.stat().st_size
            verified = (sha256_file(found) == row.expected) if (args.verify and row.expected) else None
        state = "present" if present else "absent"
        if verified is not None:
            state += ", sha256 ok" if verified else ", SHA256 MISMATCH"
        shown = f"{size / 1e6:.1f} MB" if present else ""
        rows.append([row.name, state, shown, row.description])
        if present:
            rows.append(["", str(path), "", ""])
    print(text_table(["dataset", "state", "size", "what it is"], rows, align="llrl"))
    print("read when no --data is given:")
    for kind, found in in_use.items():
        print(f"  {kind + ':':<27} {found if found is not None else 'none: ' + fetch_hint(kind)}")
    return 0
