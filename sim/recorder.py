"""The one recorder: every run folder is written here, durably, while the run goes on.

Processes append rows (plain dicts) to the recorder; the runner commits them
as a **part** after each static episode or each simulated day of a
longitudinal run: ``parts/<key>.probes.parquet``, ``parts/<key>.timeline.parquet``
and, last, ``parts/<key>.json`` (what the part holds, failures, the systems'
own reports). A part counts once its JSON exists; every file is written to a
temporary name and renamed, so ``kill -9`` loses at most the part in flight.

Rerunning into the same folder resumes: a part already on disk is not written
again (static runs skip its episode; longitudinal runs replay it from the
caches and drop the rows, and skip a pass of arms whose parts are all on
disk, reading its outcome from its ``end`` part, ``part_info``). A later pass
reads an earlier one's rows with ``committed_probes``. ``finish`` joins the parts, in key order, into
``probes.parquet`` and ``timeline.parquet``, so a resumed run's rows equal an
uninterrupted run's. A folder made for another spec is refused.

A run folder has one writer: ``open`` takes an exclusive lock
(``.lock``, holding the writer's pid); a second writer is refused with one
line, and a lock left by a process that died is taken over (the operating
system drops the lock of a dead process).

A system that fails mid-run (an outside endpoint that stops answering) is
marked, in every part it is missing from and in ``run.json``'s
``failed_systems``; the run is then not complete, and rerunning the same
command plays those parts again for that system only, its rows taking the
place of those it made before it failed.

Deleted text leaves the run folder too: when a user asks to forget turns,
``redact`` replaces, in every row recorded so far (committed parts
included) and every row recorded later, the retrieved text of memories
derived from those turns, and the gold answer and the reader's answer of
rows whose evidence or retrieved memories came from them, with
``REDACTED``. Provenance is not trusted alone: a retrieved text, gold
answer or reader's answer that holds a deleted turn's text (whole, or a run
of shared words: ``memsim.sim.erasure.CopyFinder``) is replaced with
``REDACTED_COPY`` whatever its memory names as its source. A spec with
``keep_deleted_text`` keeps them (for debugging), and ``run.json`` says
which was done.

Every file the recorder writes or reads is named in its error: a full disk
or a damaged part says which file (``memsim.core.errors.naming_file``).

Rows become frames in ``memsim.sim.row_frames``; the redaction of a row or a
frame is ``memsim.sim.redaction``'s.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from memsim.core.errors import UserError, naming_file
from memsim.core.files import write_atomic, write_text_atomic
from memsim.sim.erasure import CopyFinder
from memsim.sim.redaction import REDACTED, frame_ids, frame_texts, redact_frame, redact_row, redacted_rows
from memsim.sim.row_frames import concat_frames, rows_frame
from memsim.sim.spec import RunSpec, spec_diff

__all__ = ["Recorder", "RunFolderRefused", "PROBE_SCHEMA", "TIMELINE_SCHEMA", "RUN_FILES", "REDACTED"]


class RunFolderRefused(UserError):
    """The run folder cannot be written by this run (another writer, another spec, not a folder): nothing was played."""

PROBE_SCHEMA: dict[str, Any] = {
    "system": pl.Utf8,
    "episode": pl.Utf8,
    "user_id": pl.Utf8,
    "question_id": pl.Utf8,
    "q_index": pl.Int64,
    "time": pl.Datetime("us", "UTC"),
    "t_days": pl.Float64,
    "kind": pl.Utf8,
    "topic": pl.Utf8,
    "reask": pl.Boolean,
    "thread_id": pl.Utf8,
    "question": pl.Utf8,
    "gold": pl.Utf8,
    "evidence_ids": pl.List(pl.Utf8),
    "superseded_ids": pl.List(pl.Utf8),
    "excluded": pl.Utf8,
    "first_rank": pl.Int64,
    "retrieve_ms": pl.Float64,
    "embed_ms": pl.Float64,
    "n_retrieved": pl.Int64,
    "retrieved_ids": pl.List(pl.Utf8),
    "retrieved_sources": pl.List(pl.List(pl.Utf8)),
    "retrieved_scores": pl.List(pl.Float64),
    "retrieved_text": pl.List(pl.Utf8),
    "evidence_text": pl.List(pl.Utf8),
    "isolation_failures": pl.Int64,
    "deleted_leaks": pl.Int64,
    "forgotten_turns": pl.Int64,
    "forgotten_leaks": pl.Int64,
    "error": pl.Utf8,
    "told": pl.Boolean,
    "restated": pl.List(pl.Utf8),
}
"""Columns every probe row has; scorer columns (``recall_all@k`` ...) and answer columns follow.

``told`` is the bit the arm's feedback channel carried for the question (null: nothing; under ``correction``
False means a restatement was queued or owed); ``restated`` (``correction`` only) lists the questions whose
facts were queued for restatement after this one. ``memsim.sim.engine.Harness.finish_one`` sets both."""

TIMELINE_SCHEMA: dict[str, Any] = {
    "system": pl.Utf8,
    "episode": pl.Utf8,
    "user_id": pl.Utf8,
    "time": pl.Datetime("us", "UTC"),
    "t_days": pl.Float64,
    "event": pl.Utf8,
    "items": pl.Int64,
    "bytes": pl.Int64,
    "vector_bytes": pl.Int64,
    "text_bytes": pl.Int64,
    "metadata_bytes": pl.Int64,
    "llm_calls": pl.Int64,
    "tokens": pl.Int64,
    "ingest_ms": pl.Float64,
    "embed_ms": pl.Float64,
    "turns": pl.Int64,
    "leaked": pl.Int64,
    "error": pl.Utf8,
}
"""Columns of the timeline (one row per session, tick or deletion per system)."""

ARMS = {"given": "system", "withheld": "twin", "shuffled": "placebo", "false": "always_false", "true": "always_true"}
"""A system's arm by the feedback it gets: itself, its twin (told nothing), its placebo (told its system's bits
permuted within user and week), and its constant arms (told always False, always True)."""

RUN_FILES = ("spec.json", "probes.parquet", "timeline.parquet", "run.json")
"""What a finished run folder holds before analysis adds metrics and reports."""


class Recorder:
    """Collects rows and commits them as durable parts of one run folder.

    Args:
        out_dir: the run folder; None keeps everything in memory (benchmarks, unit tests).
    """

    def __init__(self, out_dir: Path | None = None) -> None:
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self._probes: list[dict[str, Any]] = []
        self._timeline: list[dict[str, Any]] = []
        self._failures: list[dict[str, Any]] = []
        self._memory_parts: dict[str, tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]] = {}
        self._arms: dict[str, dict[str, str]] = {}
        self._lock: int | None = None
        self._keep_text = False
        self._deleted: set[str] = set()
        self._copies = CopyFinder()
        """The deleted texts, searched for in every text a row carries (provenance is not trusted alone)."""
        self.defer_redaction = False
        """Redact the rows once, when ``take``n, of every deletion (a unit's in-memory recorder): a row is
        redacted of every deletion of the run whether it came before or after it, so one pass at the end
        gives the same rows as a pass at each deletion, at a fraction of the cost."""
        self._part_ids: dict[str, frozenset[str]] = {}
        self._part_texts: dict[str, frozenset[str]] = {}
        self.redacted = 0
        """Rows whose text was redacted after a deletion, in this process."""
        self.n_probes = 0
        """Probe rows recorded so far in this process (committed or not)."""

    # -- the run folder ---------------------------------------------------

    def open(self, spec: RunSpec) -> None:
        """Start or resume a run folder for ``spec``, as its one writer.

        Raises:
            UserError: the folder holds a run of another spec (the differing
                keys are named), is not a folder, is damaged, or another
                process is writing it.
        """
        self._keep_text = spec.keep_deleted_text
        if self.out_dir is None:
            return
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise RunFolderRefused(f"--out {self.out_dir}: is a file, not a run folder; choose another --out")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        try:
            self._check_spec(spec)
        except BaseException:
            self.release()
            raise
        (self.out_dir / "parts").mkdir(exist_ok=True)

    def _check_spec(self, spec: RunSpec) -> None:
        """Write ``spec.json``, or check that the one there is the same spec."""
        assert self.out_dir is not None
        path = self.out_dir / "spec.json"
        new = spec.to_json()
        if path.exists():
            old = _read_json(path, "run spec")
            if not isinstance(old, dict):
                raise RunFolderRefused(f"{path}: not a run spec (a JSON {type(old).__name__}); choose another --out")
            diff = spec_diff(old, new)
            if diff:
                raise RunFolderRefused(
                    f"{self.out_dir} holds a run of another spec (differs in {', '.join(diff[:8])}); "
                    "choose another --out, or rerun the same command to resume"
                )
        else:
            spec.write(path)
        summary = self.out_dir / "run.json"
        if summary.exists():
            try:
                _read_json(summary, "run summary")
            except UserError as exc:
                raise RunFolderRefused(str(exc)) from None

    def _take_lock(self) -> None:
        """Hold ``.lock`` (an advisory lock the kernel drops when its holder dies) or refuse with its holder's pid."""
        assert self.out_dir is not None
        path = self.out_dir / ".lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise RunFolderRefused(
                f"{self.out_dir} is being written by another process (pid {holder}, lock {path}); "
                "wait for it to finish or choose another --out"
            ) from None
        # A lock left by a dead process needs no cleaning: flock was released with it, the pid is overwritten.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock = fd

    def release(self) -> None:
        """Give up the run folder's lock (``finish`` does; a process that dies drops it too)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    @property
    def finished(self) -> bool:
        """Whether the folder already holds the joined rows of a finished run."""
        if self.out_dir is None or not all((self.out_dir / f).exists() for f in RUN_FILES):
            return False
        info = _read_json(self.out_dir / "run.json", "run summary")
        return bool(isinstance(info, dict) and info.get("complete"))

    def is_done(self, key: str) -> bool:
        """Whether part ``key`` is committed complete (resume skips or drops it)."""
        if self.out_dir is None:
            return key in self._memory_parts
        path = self.out_dir / "parts" / f"{key}.json"
        if not path.exists():
            return self.finished
        meta = _read_json(path, "run part")
        return bool(meta.get("complete", True)) and not self._missing(meta)

    def _missing(self, meta: Mapping[str, Any]) -> list[str]:
        """Systems still missing from a committed part: failed there, and not added by a resume."""
        added = {label for extra in meta.get("resumed", []) for label in extra["systems"]}
        return [label for label in meta.get("missing", []) if label not in added]

    # -- rows -------------------------------------------------------------

    def probe(self, row: Mapping[str, Any]) -> None:
        """Record one scored question for one system (its text redacted where it came from a deleted turn)."""
        row = dict(row)
        if self.defer_redaction:
            self._probes.append(row)  # redacted once, when taken
            self.n_probes += 1
            return
        if (self._deleted or self._copies) and redact_row(row, self._deleted, self._copies):
            self.redacted += 1
        self._probes.append(row)
        self.n_probes += 1

    def redact(self, turn_ids: Collection[str], texts: Collection[str] = ()) -> None:
        """Take the text derived from ``turn_ids`` out of every row recorded, on disk and in memory, now.

        ``texts`` are the deleted turns' texts: any text a row carries that
        holds one is redacted too, whatever provenance its memory names (a
        system may keep deleted text in a memory that lost its source).
        Kept when the spec says ``keep_deleted_text``.
        """
        if self._keep_text or not (turn_ids or texts):
            return
        gone = frozenset(turn_ids)
        self._deleted |= gone
        self._copies.add(texts)
        if self.defer_redaction:
            return  # every row is redacted of every deletion once, when taken: the same rows, one pass
        new = CopyFinder(texts)
        copies = new if new else None
        self.redacted += sum(redact_row(row, gone, copies) for row in self._probes)
        if self.out_dir is None:
            for key, (pf, tf, meta) in list(self._memory_parts.items()):
                changed, pf = redact_frame(pf, gone, copies)
                self.redacted += changed
                self._memory_parts[key] = (pf, tf, meta)
            return
        for path in sorted((self.out_dir / "parts").glob("*.probes.parquet")):
            stem = path.name.removesuffix(".probes.parquet")
            ids, held = self._part_ids.get(stem), self._part_texts.get(stem)
            if ids is None or held is None:  # a part committed by an earlier process
                frame = _read_parquet(path, "reading run part")
                ids, held = self._part_ids[stem], self._part_texts[stem] = frame_ids(frame), frame_texts(frame)
            if ids.isdisjoint(gone) and not (copies is not None and any(copies.holds(t) for t in held)):
                continue
            changed, frame = redact_frame(_read_parquet(path, "reading run part"), gone, copies)
            if changed:
                with naming_file(path, "writing run part"):
                    write_atomic(path, frame.write_parquet)
                self._part_texts[stem] = frame_texts(frame)
                self.redacted += changed

    def timeline(self, row: Mapping[str, Any]) -> None:
        """Record one session / tick / deletion outcome for one system."""
        self._timeline.append(dict(row))

    def arms(self, suts: Sequence[Any]) -> None:
        """Record the arms played: per label, its base system's label and its arm (``run.json``'s ``arms``).

        ``suts`` are the engine's ``SystemUnderTest``s; a twin names the system
        it is the twin of, so analysis never infers the relation from labels.
        """
        self._arms = {
            s.label: {"system": s.twin_of or s.label, "arm": ARMS[s.feedback], "name": s.name} for s in suts
        }

    def failure(self, system: str, time: Any, operation: str, error: str) -> None:
        """Record that ``system`` raised during ``operation``."""
        self._failures.append({"system": system, "time": str(time), "operation": operation, "error": error})

    def commit(
        self, key: str, info: Mapping[str, Any] | None = None, *, complete: bool = True, missing: Sequence[str] = ()
    ) -> None:
        """Write the rows recorded since the last commit as part ``key`` (dropped if it exists).

        ``info`` (JSON data: the episode's totals, the systems' reports) is kept with the part.
        ``complete=False`` keeps the rows of a part that was cut short (an
        endpoint failed) for inspection; a resumed run plays that part again.
        ``missing`` names the systems that had failed by the end of the part:
        their rows of this part are left out (a system that failed halfway
        through a day has half a day), and a resumed run adds them.
        """
        pf, tf, failures = self.take()
        self.commit_frames(key, pf, tf, failures, info, complete=complete, missing=missing)

    def take(self) -> tuple[pl.DataFrame, pl.DataFrame, list[dict[str, Any]]]:
        """The rows and failures recorded since the last commit, as frames; the recorder is left empty of them.

        A unit of a run played apart (``memsim.sim.workers``) records in memory and hands its rows over
        this way, to be committed by the run's one writer with ``commit_frames``.
        """
        probes, timeline, failures = self._probes, self._timeline, self._failures
        self._probes, self._timeline, self._failures = [], [], []
        if self.defer_redaction and (self._deleted or self._copies):
            gone, copies = frozenset(self._deleted), (self._copies if self._copies else None)
            self.redacted += sum(redact_row(row, gone, copies) for row in probes)
        return rows_frame(probes, PROBE_SCHEMA), rows_frame(timeline, TIMELINE_SCHEMA), failures

    def commit_frames(
        self, key: str, probes: pl.DataFrame, timeline: pl.DataFrame, failures: Sequence[Mapping[str, Any]] = (),
        info: Mapping[str, Any] | None = None, *, complete: bool = True, missing: Sequence[str] = (),
    ) -> None:
        """Commit rows already made into frames as part ``key`` (``commit``'s rules)."""
        failures = [dict(f) for f in failures]
        # The rows a failed system made before it failed are kept (in a run that stops there, they are what it
        # played); a rerun plays the part again for it and its rows from the rerun take their place (``_read_parts``).
        gone = set(missing)
        if self.out_dir is not None and (self.out_dir / "parts" / f"{key}.json").exists():
            meta = _read_json(self.out_dir / "parts" / f"{key}.json", "run part")
            if meta.get("complete", True):
                self._resume(key, meta, probes, timeline, failures, gone)
                return
            # A part cut short is played again whole.
        elif self.is_done(key):
            return
        meta = {
            "key": key,
            "complete": complete,
            "probes": probes.height,
            "timeline": timeline.height,
            "failures": failures,
            "missing": sorted(gone),
            **dict(info or {}),
        }
        pf, tf = probes, timeline
        if self.out_dir is None:
            self._memory_parts[key] = (pf, tf, meta)
            return
        self._write_part(key, pf, tf)
        _write_text(self.out_dir / "parts" / f"{key}.json", json.dumps(meta, default=str, sort_keys=True), "writing run part")

    def _write_part(self, stem: str, probes: pl.DataFrame, timeline: pl.DataFrame) -> None:
        assert self.out_dir is not None
        if probes.height:
            if not self._keep_text:
                self._part_ids[stem] = frame_ids(probes)
                self._part_texts[stem] = frame_texts(probes)
            _write_parquet(self.out_dir / "parts" / f"{stem}.probes.parquet", probes, "writing run part")
        if timeline.height:
            _write_parquet(self.out_dir / "parts" / f"{stem}.timeline.parquet", timeline, "writing run part")

    def _resume(
        self, key: str, meta: dict[str, Any], probes: pl.DataFrame, timeline: pl.DataFrame,
        failures: list[dict[str, Any]], gone: set[str],
    ) -> None:
        """A committed part played again: the rows of the systems it misses that now ran go beside it."""
        assert self.out_dir is not None
        now = [label for label in self._missing(meta) if label not in gone]
        if not now:
            return
        n = len(meta.get("resumed", []))
        if probes.height:
            probes = probes.filter(pl.col("system").is_in(now))
        if timeline.height:
            timeline = timeline.filter(pl.col("system").is_in(now))
        self._write_part(f"{key}.r{n}", probes, timeline)
        extra = {"systems": now, "probes": probes.height, "timeline": timeline.height, "failures": failures}
        meta["resumed"] = [*meta.get("resumed", []), extra]
        _write_text(self.out_dir / "parts" / f"{key}.json", json.dumps(meta, default=str, sort_keys=True), "writing run part")

    def part_info(self, key: str) -> dict[str, Any]:
        """The JSON kept with committed part ``key`` (empty when it is not committed, or the run is joined)."""
        if self.out_dir is None:
            got = self._memory_parts.get(key)
            return dict(got[2]) if got is not None else {}
        path = self.out_dir / "parts" / f"{key}.json"
        return _read_json(path, "run part") if path.exists() else {}

    def committed_probes(self, keys: Collection[str]) -> pl.DataFrame:
        """The probe rows of the committed parts named ``keys`` (and of their resumes), in key order.

        A later pass reads an earlier pass's rows here (the placebo's doses), whether this
        process played them or an earlier one did before it was stopped. A finished folder's
        parts are gone: its joined ``probes.parquet`` is returned whole.
        """
        wanted = set(keys)
        if self.out_dir is None:
            frames = [self._memory_parts[k][0] for k in sorted(self._memory_parts) if k in wanted]
            return concat_frames(frames, PROBE_SCHEMA)
        if self.finished:
            return _read_parquet(self.out_dir / "probes.parquet", "reading rows")
        metas = [m for m in self.parts() if m.get("key") in wanted]
        return concat_frames(_read_parts(self.out_dir / "parts", metas, "probes"), PROBE_SCHEMA)

    def parts(self) -> list[dict[str, Any]]:
        """The committed parts' JSON, in key order."""
        if self.out_dir is None:
            return [self._memory_parts[k][2] for k in sorted(self._memory_parts)]
        return [_read_json(p, "run part") for p in sorted((self.out_dir / "parts").glob("*.json"))]

    def finish(
        self, run_info: Mapping[str, Any], *, complete: bool = True
    ) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
        """Join the parts into the run's frames and ``run.json``; returns (probes, timeline, run info).

        ``run.json`` holds ``run_info``, every part's JSON and every failure.
        Parts are removed once a complete run's joined files are written; a
        run that stopped early (``complete=False``) keeps them, so that
        rerunning the command resumes it.
        """
        if self._arms:
            run_info = {**run_info, "arms": self._arms}
        run_info = {**run_info, "deleted_text": "kept (keep_deleted_text)" if self._keep_text else "redacted"}
        if self.out_dir is None:
            keys = sorted(self._memory_parts)
            probes = concat_frames([self._memory_parts[k][0] for k in keys], PROBE_SCHEMA)
            timeline = concat_frames([self._memory_parts[k][1] for k in keys], TIMELINE_SCHEMA)
            metas = [self._memory_parts[k][2] for k in keys]
            return probes, timeline, _run_info(run_info, metas, complete)
        if self.finished:
            self.release()
            return (
                _read_parquet(self.out_dir / "probes.parquet", "reading rows"),
                _read_parquet(self.out_dir / "timeline.parquet", "reading the timeline"),
                _read_json(self.out_dir / "run.json", "run summary"),
            )
        parts_dir = self.out_dir / "parts"
        metas = self.parts()
        probes = concat_frames(_read_parts(parts_dir, metas, "probes"), PROBE_SCHEMA)
        timeline = concat_frames(_read_parts(parts_dir, metas, "timeline"), TIMELINE_SCHEMA)
        info = _run_info(run_info, metas, complete)
        info["redacted_rows"] = redacted_rows(probes)
        complete = info["complete"]
        _write_parquet(self.out_dir / "probes.parquet", probes, "writing rows")
        _write_parquet(self.out_dir / "timeline.parquet", timeline, "writing the timeline")
        _write_text(self.out_dir / "run.json", json.dumps(info, indent=2, default=str, sort_keys=True) + "\n",
                    "writing the run summary")
        if complete:
            shutil.rmtree(parts_dir, ignore_errors=True)
        self.release()
        return probes, timeline, info


def _run_info(run_info: Mapping[str, Any], metas: list[dict[str, Any]], complete: bool) -> dict[str, Any]:
    failures = [f for m in metas for f in (*m["failures"], *(f for x in m.get("resumed", []) for f in x["failures"]))]
    parts = [{k: v for k, v in m.items() if k != "failures"} for m in metas]
    added = [{label for x in m.get("resumed", []) for label in x["systems"]} for m in metas]
    failed: dict[str, str] = {}
    for m, extra in zip(metas, added):
        for label in m.get("missing", []):
            if label not in extra and label not in failed:
                why = [f for f in failures if f["system"] == label]
                failed[label] = f"{why[-1]['operation']}: {why[-1]['error']}" if why else "failed"
    # A system with missing rows makes the run incomplete: its tables would compare halves of unequal questions.
    return {
        **dict(run_info), "complete": complete and not failed, "failures": failures,
        "failed_systems": failed, "parts": parts,
    }


def _read_parts(parts_dir: Path, metas: list[dict[str, Any]], kind: str) -> list[pl.DataFrame]:
    """The committed ``kind`` (probes, timeline) frames of every part and of every resume beside it, in key order."""
    stems = [m["key"] for m in metas if m[kind]]
    stems += [f"{m['key']}.r{n}" for m in metas for n, x in enumerate(m.get("resumed", [])) if x[kind]]
    # A system a resume played again: its rows in the part itself (those it made before it failed) give way.
    replaced = {m["key"]: sorted({label for x in m.get("resumed", []) for label in x["systems"]}) for m in metas}
    frames = []
    for stem in sorted(stems):
        path = parts_dir / f"{stem}.{kind}.parquet"
        try:
            frame = pl.read_parquet(path)
            if replaced.get(stem) and frame.height:
                frame = frame.filter(~pl.col("system").is_in(replaced[stem]))
            frames.append(frame)
        except (OSError, pl.exceptions.ComputeError, pl.exceptions.PolarsError) as exc:
            raise UserError(
                f"{path}: damaged run part ({type(exc).__name__}: {exc}); delete parts/{stem.split('.')[0]}.* "
                "in the run folder to play that part again"
            ) from None
    return frames


def _read_parquet(path: Path, doing: str) -> pl.DataFrame:
    """A parquet file of the run folder; a damaged or unreadable one is a ``UserError`` naming it."""
    with naming_file(path, doing):
        return pl.read_parquet(path)


def _write_parquet(path: Path, frame: pl.DataFrame, doing: str) -> None:
    """Write a parquet file of the run folder atomically; a full disk is a ``UserError`` naming it."""
    with naming_file(path, doing):
        write_atomic(path, frame.write_parquet)


def _write_text(path: Path, text: str, doing: str) -> None:
    """Write a text file of the run folder atomically; a full disk is a ``UserError`` naming it."""
    with naming_file(path, doing):
        write_text_atomic(path, text)


def _read_json(path: Path, what: str) -> Any:
    """A JSON file of the run folder; an unreadable or damaged one is a ``UserError`` naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: unreadable {what} ({exc}); delete or repair it, or choose another --out") from None
