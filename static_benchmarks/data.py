"""The benchmark files memsim can fetch, verify and find: LoCoMo and LongMemEval.

``fetch(name)`` downloads one official file from its public home (LoCoMo's
GitHub repository at a fixed commit, LongMemEval's Hugging Face dataset
repositories) with pooch into memsim's data folder, checks its sha256 and
refuses a file whose hash differs. Where a dataset declares no hash, the
first fetch records the file's hash in ``hashes.json`` (trust on first use)
and every later fetch must match it. ``locate`` is how ``--data`` options
and scenario configs find a file when none is named.

Each kind of file (``register_kind``: its environment variable, its default
datasets, its ``../shared`` path) and each fetchable file (``register_dataset``)
is one registration call: LoCoMo's and LongMemEval's are below, and a new
benchmark's module makes its own.

Where files are looked for, in order: the path given (or a dataset name
given instead of a path, e.g. ``--data longmemeval-m``), the environment
variable (``$MEMSIM_LOCOMO`` / ``$MEMSIM_LONGMEMEVAL``), the data folder
(``$MEMSIM_DATA_DIR``, else ``<cache>/data`` under ``$MEMSIM_CACHE_DIR`` or
``~/.cache/memsim``), and for LoCoMo ``../shared/data/locomo/locomo10.json``
next to the repository.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from memsim.core.errors import UserError
from memsim.core.files import write_text_atomic

__all__ = [
    "Dataset",
    "DATASETS",
    "DataKind",
    "KINDS",
    "register_kind",
    "register_dataset",
    "unregister_kind",
    "FetchResult",
    "data_dir",
    "cached_path",
    "recorded_hashes",
    "fetch",
    "locate",
    "locate_oracle",
    "shared_file",
    "env_path",
    "resolve_given",
    "fetch_hint",
    "sha256_file",
    "status",
    "NestingGuard",
    "check_data_file",
    "check_year",
    "is_unicode",
    "YEARS",
    "LOCOMO_DEPTH",
    "LONGMEMEVAL_DEPTH",
]

_LOCOMO_COMMIT = "3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376"
_HF = "https://huggingface.co/datasets"
_LOCOMO_LICENCE = "CC BY-NC 4.0 (Creative Commons Attribution-NonCommercial 4.0; snap-research/LoCoMo)"
_LME_LICENCE = "MIT (the LongMemEval repository's licence, xiaowu0162/LongMemEval)"


Kind = str
"""A kind of benchmark file: which loader reads it (``locomo``, ``longmemeval``; ``register_kind`` adds one)."""


@dataclass(frozen=True, slots=True)
class Dataset:
    """One fetchable benchmark file."""

    name: str
    """Name on the command line (``memsim data fetch NAME``)."""
    kind: Kind
    """Which loader reads it."""
    url: str
    """The official download address."""
    filename: str
    """File name in the data folder (and under ``<mirror>/<name>/``)."""
    sha256: str | None
    """Known sha256; None: recorded at first fetch."""
    licence: str
    """The licence printed at fetch."""
    description: str
    """One line for ``memsim data list``."""


@dataclass(frozen=True, slots=True)
class DataKind:
    """Where ``locate`` looks for the file of one kind when none is named."""

    name: str
    env: str
    """The environment variable that names the file (``MEMSIM_LOCOMO``)."""
    defaults: tuple[str, ...]
    """Datasets whose fetched copy stands in, first present wins; the first is the one the hint fetches."""
    shared: tuple[str, ...] = ()
    """The file's path under ``../shared/data`` beside the repository, looked at last (empty: not looked for)."""


DATASETS: dict[str, Dataset] = {}
"""Every fetchable file, by name, in the order registered (``register_dataset``)."""

KINDS: dict[str, DataKind] = {}
"""Every kind of file, by name (``register_kind``)."""


def register_kind(kind: str, *, env: str, defaults: tuple[str, ...], shared: tuple[str, ...] = ()) -> None:
    """Declare a kind of benchmark file: its environment variable, its default datasets and its ``../shared`` path.

    The datasets in ``defaults`` are registered after it (``register_dataset``); a duplicate is a ``ValueError``.
    """
    if kind in KINDS:
        raise ValueError(f"data kind {kind!r} is already registered")
    if not defaults:
        raise ValueError(f"data kind {kind!r} needs at least one default dataset (the one its hint fetches)")
    KINDS[kind] = DataKind(kind, env, tuple(defaults), tuple(shared))


def register_dataset(dataset: Dataset) -> None:
    """Add a fetchable file of a registered kind; a duplicate name or an unknown kind is a ``ValueError``."""
    if dataset.name in DATASETS:
        raise ValueError(f"dataset {dataset.name!r} is already registered")
    if dataset.kind not in KINDS:
        raise ValueError(f"dataset {dataset.name!r}: unknown data kind {dataset.kind!r}; register_kind it first")
    DATASETS[dataset.name] = dataset


def unregister_kind(kind: str) -> None:
    """Remove a kind and its datasets (a test undoes its registration with it)."""
    del KINDS[kind]
    for name in [n for n, d in DATASETS.items() if d.kind == kind]:
        del DATASETS[name]


def _kind(kind: Kind) -> DataKind:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown data kind {kind!r}; known: {', '.join(KINDS)}") from None


register_kind("locomo", env="MEMSIM_LOCOMO", defaults=("locomo",), shared=("locomo", "locomo10.json"))
register_dataset(Dataset(
    "locomo", "locomo", f"https://raw.githubusercontent.com/snap-research/LoCoMo/{_LOCOMO_COMMIT}/data/locomo10.json",
    "locomo10.json", "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4", _LOCOMO_LICENCE,
    "LoCoMo: 10 conversations with QA (snap-research/LoCoMo at 3eb6f2c)",
))
# Which fetched files stand in when no file is named: the cleaned S release, else the paper's.
register_kind("longmemeval", env="MEMSIM_LONGMEMEVAL", defaults=("longmemeval-s-cleaned", "longmemeval-s"))
# The LongMemEval files on Hugging Face: no published hash, so the first fetch records it.


def _lme(name: str, path: str, filename: str, description: str) -> Dataset:
    return Dataset(name, "longmemeval", f"{_HF}/xiaowu0162/{path}", filename, None, _LME_LICENCE, description)


register_dataset(_lme("longmemeval-s", "longmemeval/resolve/main/longmemeval_s", "longmemeval_s.json",
                      "LongMemEval_S as in the paper (~40 sessions per instance)"))
register_dataset(_lme("longmemeval-m", "longmemeval/resolve/main/longmemeval_m", "longmemeval_m.json",
                      "LongMemEval_M as in the paper (~500 sessions per instance, 2.7 GB)"))
register_dataset(_lme("longmemeval-oracle", "longmemeval/resolve/main/longmemeval_oracle", "longmemeval_oracle.json",
                      "LongMemEval with only the evidence sessions"))
register_dataset(_lme("longmemeval-s-cleaned", "longmemeval-cleaned/resolve/main/longmemeval_s_cleaned.json",
                      "longmemeval_s_cleaned.json", "LongMemEval_S, cleaned release (2025-09)"))
register_dataset(_lme("longmemeval-m-cleaned", "longmemeval-cleaned/resolve/main/longmemeval_m_cleaned.json",
                      "longmemeval_m_cleaned.json", "LongMemEval_M, cleaned release (2025-09)"))
register_dataset(_lme("longmemeval-oracle-cleaned", "longmemeval-cleaned/resolve/main/longmemeval_oracle.json",
                      "longmemeval_oracle_cleaned.json", "LongMemEval oracle, cleaned release (2025-09)"))

_HASHES = "hashes.json"


def data_dir() -> Path:
    """The data folder: ``$MEMSIM_DATA_DIR``, else ``data/`` in memsim's cache folder."""
    env = os.environ.get("MEMSIM_DATA_DIR")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("MEMSIM_CACHE_DIR")
    return (Path(cache).expanduser() if cache else Path.home() / ".cache" / "memsim") / "data"


def _dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise UserError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}") from None


def cached_path(name: str, root: Path | None = None) -> Path:
    """Where ``name`` lives in the data folder (whether or not it is there)."""
    return (root or data_dir()) / name / _dataset(name).filename


def recorded_hashes(root: Path | None = None) -> dict[str, str]:
    """Hashes recorded at first fetch, by dataset name."""
    path = (root or data_dir()) / _HASHES
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc}); delete it to record hashes again") from exc
    return {str(k): str(v) for k, v in data.items()}


def _record_hash(name: str, digest: str, root: Path) -> None:
    hashes = recorded_hashes(root)
    hashes[name] = digest
    write_text_atomic(root / _HASHES, json.dumps(hashes, indent=2, sort_keys=True) + "\n")


def expected_hash(name: str, root: Path | None = None) -> str | None:
    """The hash a file must have: the table's, else the one recorded at first fetch, else None."""
    return _dataset(name).sha256 or recorded_hashes(root).get(name)


def sha256_file(path: Path) -> str:
    """sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class FetchResult:
    """What a fetch did."""

    name: str
    """Dataset name."""
    path: Path
    """The verified file."""
    sha256: str
    """Its hash."""
    url: str
    """Where it came from."""
    first_use: bool
    """True when no hash was known and this fetch recorded it."""
    licence: str
    """The file's licence."""


def fetch(name: str, *, mirror: str | None = None, root: Path | None = None, progress: bool = False) -> FetchResult:
    """Download ``name`` (or keep the verified copy already there) and check its sha256.

    Args:
        name: A key of ``DATASETS``.
        mirror: Base URL serving ``<mirror>/<name>/<filename>`` instead of the
            official home (default ``$MEMSIM_DATA_MIRROR``); the hash check is the same.
        root: Data folder (default ``data_dir()``).
        progress: Show a progress bar.

    Raises:
        UserError: unknown name, download failure, or a hash that differs from
            the table or from the one recorded at first fetch (the file is not kept).
    """
    ds = _dataset(name)
    root = root or data_dir()
    mirror = mirror if mirror is not None else os.environ.get("MEMSIM_DATA_MIRROR") or None
    url = f"{mirror.rstrip('/')}/{ds.name}/{ds.filename}" if mirror else ds.url
    known = expected_hash(name, root)
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import pooch
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise UserError("memsim data fetch needs pooch: pip install 'memsim[data]'") from exc
    import requests

    try:
        got = Path(
            pooch.retrieve(
                url,
                known_hash=f"sha256:{known}" if known else None,
                fname=ds.filename,
                path=folder,
                progressbar=progress,
                downloader=pooch.HTTPDownloader(progressbar=progress, timeout=60),
            )
        )
    except ValueError as exc:
        if "hash" in str(exc).lower():
            raise UserError(
                f"{name}: refused the file from {url}: its sha256 is not the expected {known} "
                f"({exc}); nothing was stored"
            ) from exc
        raise UserError(f"{name}: download from {url} failed: {exc}") from exc
    except (requests.RequestException, OSError) as exc:
        raise UserError(f"{name}: download from {url} failed: {exc}") from exc
    digest = sha256_file(got)
    if known is not None and digest != known:  # pooch checked it; this guards a changed pooch
        got.unlink(missing_ok=True)
        raise UserError(f"{name}: refused {url}: sha256 {digest} differs from the expected {known}")
    if known is None:
        _record_hash(name, digest, root)
    return FetchResult(name, got, digest, url, known is None, ds.licence)


def fetch_hint(kind: Kind) -> str:
    """The sentence an error about a missing file ends with."""
    declared = _kind(kind)
    return f"get it with `memsim data fetch {declared.defaults[0]}`, or set {declared.env}"


def resolve_given(given: str, kind: Kind) -> Path:
    """A user-given ``--data`` value: a path, or the name of a fetched dataset.

    A name that is not an existing file but names a dataset of ``kind``
    resolves to its copy in the data folder (``longmemeval-oracle`` also to
    ``locate_oracle``'s); an absent copy is an error with the fetch command.
    """
    path = Path(given).expanduser()
    if path.exists() or given not in DATASETS:
        return path
    ds = DATASETS[given]
    if ds.kind != kind:
        raise UserError(f"--data {given}: that dataset is {ds.kind}, not {kind}")
    cached = cached_path(given)
    if given == "longmemeval-oracle" and not cached.is_file():
        # The oracle file is small enough to lie beside a checkout (``../shared``), where the tests read it.
        cached = locate_oracle() or cached
    if not cached.is_file():
        raise UserError(f"--data {given}: not fetched yet; get it with `memsim data fetch {given}`")
    return cached


def env_path(kind: Kind) -> Path | None:
    """The file the environment variable of ``kind`` names (``$MEMSIM_LOCOMO``), or None when unset."""
    env = os.environ.get(_kind(kind).env)
    return Path(env).expanduser() if env else None


def locate(kind: Kind) -> Path | None:
    """The file to read when none is named: the environment variable, the data folder, ../shared (where declared)."""
    declared = _kind(kind)
    env = os.environ.get(declared.env)
    if env:
        return Path(env).expanduser()
    for name in declared.defaults:
        cached = cached_path(name)
        if cached.is_file():
            return cached
    if declared.shared:
        shared = shared_file(*declared.shared)
        if shared.is_file():
            return shared
    return None


def shared_file(*parts: str) -> Path:
    """A file under the ``shared/data`` folder beside the repository (where the test data of a checkout lies)."""
    return Path(__file__).resolve().parents[2].joinpath("shared", "data", *parts)


def locate_oracle() -> Path | None:
    """LongMemEval's oracle file: ``$MEMSIM_LONGMEMEVAL_ORACLE``, the data folder, then ``../shared``; None when absent."""
    env = os.environ.get("MEMSIM_LONGMEMEVAL_ORACLE")
    if env:
        return Path(env).expanduser()
    cached = cached_path("longmemeval-oracle")
    if cached.is_file():
        return cached
    shared = shared_file("longmemeval", "longmemeval_oracle.json")
    return shared if shared.is_file() else None


@dataclass(frozen=True, slots=True)
class Status:
    """One row of ``memsim data list``."""

    name: str
    present: bool
    path: Path
    size: int
    expected: str | None
    verified: bool | None
    """True/False when hashed (``verify``), None when not checked."""
    description: str


def status(*, verify: bool = False, root: Path | None = None) -> Iterator[Status]:
    """What the data folder holds, one row per dataset; ``verify`` re-hashes present files."""
    root = root or data_dir()
    for ds in DATASETS.values():
        path = cached_path(ds.name, root)
        present = path.is_file()
        expected = expected_hash(ds.name, root)
        verified = (sha256_file(path) == expected) if (present and verify and expected) else None
        yield Status(ds.name, present, path, path.stat().st_size if present else 0, expected, verified, ds.description)


YEARS = (1900, 2999)
"""Years a benchmark date may fall in: later ones overflow the clock once a run adds its offsets."""

LOCOMO_DEPTH = 9
"""Deepest nesting of a LoCoMo file: 7 in ``locomo10.json`` (its observations), two spare for added fields."""
LONGMEMEVAL_DEPTH = 7
"""Deepest nesting of a LongMemEval file: 5 in its schema (array, instance, sessions, session, turn), two spare."""


def check_year(when: datetime) -> datetime:
    """``when`` if its year is in ``YEARS``; ``ValueError`` else."""
    if not YEARS[0] <= when.year <= YEARS[1]:
        raise ValueError(f"year {when.year} is outside {YEARS[0]}..{YEARS[1]}")
    return when


def is_unicode(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (JSON's ``\\ud800`` escapes decode to lone surrogates that cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_data_file(path: Path, what: str, hint: str) -> None:
    """Refuse a ``--data`` path that is missing, a folder, or not a regular file (``/dev/null``), each in its words.

    Args:
        path: the given path.
        what: the kind of file wanted (``"LongMemEval JSON file"``).
        hint: the sentence that says how to get one.
    """
    if path.is_file():
        return
    if path.is_dir():
        raise UserError(f"--data {path}: is a directory, expected the {what}")
    if path.exists():
        raise UserError(f"--data {path}: not a regular file (a device or pipe), expected the {what}")
    raise UserError(f"--data {path}: no such file; {hint}")


class NestingGuard:
    """A binary file that refuses, before handing it on, any block that nests deeper than ``most``.

    A parser reads through it as through the file. Each block is checked
    first (brackets outside strings, with the string and escape state
    carried across blocks), so a file nested 100,000 deep is refused at the
    first block past ``most``, before any parser builds one level of it, and
    memory stays that of one block.

    Args:
        f: the file, opened in binary mode.
        most: the deepest nesting the schema allows (the top-level array is 1).
        source: the file name for the message.
        what: what the file is (``"LongMemEval"``) for the message.
    """

    def __init__(self, f: BinaryIO, most: int, source: str, what: str) -> None:
        self._f = f
        self.most = most
        self.source = source
        self.what = what
        self._depth = 0
        self._in_string = False
        self._backslashes = 0
        self._offset = 0

    def __enter__(self) -> NestingGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()

    def read(self, size: int = -1) -> bytes:
        """The next block of the file, after checking it (``UserError`` past the allowed nesting)."""
        block = self._f.read(size)
        for start in range(0, len(block), _GUARD_BLOCK):
            self._check(block[start:start + _GUARD_BLOCK])
        return block

    def _check(self, block: bytes) -> None:
        import numpy as np

        a = np.frombuffer(block, np.uint8)
        n = a.size
        if n == 0:
            return
        # Only quotes, backslashes and brackets matter; work on their positions, not on every byte.
        bs = np.flatnonzero(a == 92)
        quotes = np.flatnonzero(a == 34)
        folded = a | 32  # "[" and "{" both become "{", "]" and "}" both "}"
        opens = folded == 123
        brackets = np.flatnonzero(opens | (folded == 125))
        # Runs of backslashes: where each ends and how long it is (a run at the start continues the last block's).
        if bs.size:
            starts = np.flatnonzero(np.diff(bs, prepend=-2) != 1)
            ends = np.append(starts[1:], bs.size) - 1
            lengths = ends - starts + 1
            if bs[0] == 0:
                lengths[0] += self._backslashes
            odd_ends = bs[ends[lengths % 2 == 1]]
        else:
            lengths = odd_ends = bs
        # A quote right after an odd run of backslashes is part of a string (both arrays are sorted).
        at = np.searchsorted(odd_ends, quotes - 1)
        escaped = odd_ends[np.minimum(at, odd_ends.size - 1)] == quotes - 1 if odd_ends.size else np.zeros(quotes.size, bool)
        if self._backslashes % 2 and quotes.size and quotes[0] == 0:
            escaped[0] = True  # the run ended the last block
        real = quotes[~escaped]
        inside = (np.searchsorted(real, brackets) + self._in_string) % 2 == 1
        moves = np.where(inside, 0, np.where(opens[brackets], 1, -1))
        levels = self._depth + np.cumsum(moves)
        over = np.flatnonzero(levels > self.most)
        if over.size:
            raise UserError(
                f"{self.source}: nested deeper than {self.most} levels at byte {self._offset + int(brackets[over[0]])}; "
                f"no {self.what} file nests deeper, so it is refused before parsing"
            )
        if levels.size:
            self._depth = int(levels[-1])
        self._in_string = bool((real.size + self._in_string) % 2)
        self._backslashes = int(lengths[-1]) if bs.size and bs[-1] == n - 1 else 0
        self._offset += n


_GUARD_BLOCK = 1 << 20
"""Bytes checked at a time (the arrays of one check are a few times this)."""
