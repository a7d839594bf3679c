"""A results directory, `DIR/<run_id>/`: the only reader and writer of its layout.

- `run.json`: the run (`model.Run`);
- `histograms/index.json` and one `NNNN.hdr` per key: HDR histograms (base64 V2 encoding) with
  their exact sums, so merging runs or workers adds them exactly;
- `requests.jsonl`: one line per request (`requests.RequestLine`), possibly sampled.
"""

from __future__ import annotations

import json
import os
import platform
import stat
import sys
import uuid
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hdrh.codec import HdrCookieException, HdrHistogramSettingsException, HdrLengthException
from pydantic import ValidationError

from llmchaos.errors import UsageError
from llmchaos.histogram import Histogram, HistogramSet, Key
from llmchaos.run import requests
from llmchaos.run.schema import (
    SCHEMA_VERSION,
    CanaryCount,
    Ending,
    KvEnding,
    OutcomeCount,
    ReplicaEnding,
    Run,
    Summary,
)

RUN_JSON, HISTOGRAMS, INDEX = "run.json", "histograms", "index.json"
NOT_OURS = (TypeError, ValueError, zlib.error, HdrCookieException, HdrLengthException, HdrHistogramSettingsException)
MAX_BYTES = {RUN_JSON: 64 * 2**20, INDEX: 16 * 2**20}  # more than any run writes; a .hdr file: MAX_HDR_BYTES
MAX_HDR_BYTES = 2**20


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def iso(t: float) -> str:
    """A unix time as RFC 3339 in UTC, to the millisecond."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def host_info() -> dict[str, Any]:
    return {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]}


@dataclass(frozen=True)
class RunResults:
    """A results directory read back: the run, its merged histograms, its requests (streamed)."""

    path: Path
    run: Run
    histograms: HistogramSet

    def summaries(self) -> dict[Key, Summary]:
        return {s.key: s for s in self.run.summaries}

    def histogram(self, key: Key) -> Histogram | None:
        return self.histograms.get(key)

    def requests(self) -> Iterator[requests.RequestLine]:
        return requests.read(self.path / self.run.requests.file)


def write(run_dir: Path, run: Run, hist: HistogramSet) -> Path:
    """Write run.json and the histograms (requests.jsonl is written as the run goes)."""
    hdir = run_dir / HISTOGRAMS
    hdir.mkdir(parents=True, exist_ok=True)
    index = []
    for i, item in enumerate(hist.encode()):
        name = f"{i:04d}.hdr"
        (hdir / name).write_text(item.pop("hdr") + "\n", encoding="ascii")
        index.append({"file": name, **item})
    (hdir / INDEX).write_text(json.dumps(index, indent=1), encoding="utf-8")
    (run_dir / RUN_JSON).write_text(json.dumps(run.to_json(), indent=1, ensure_ascii=False), encoding="utf-8")
    return run_dir


def load(run_dir: str | Path) -> RunResults:
    """Read a results directory; anything missing, truncated, invalid or of a newer schema is a
    UsageError naming the file (and line or field). Only regular files inside the directory are read
    (a link to a device or out of it, a FIFO, a file larger than any run writes: refused)."""
    run_dir = Path(run_dir)
    run = _run(run_dir / RUN_JSON, run_dir)
    hist = _histograms(run_dir / HISTOGRAMS / INDEX, run_dir)
    req = run_dir / run.requests.file
    inside(req, run_dir, "run.json's requests.file names it")
    if not req.is_file():
        raise UsageError("missing (run.json's requests.file names it)", file=str(req))
    return RunResults(run_dir, run, hist)


def inside(path: Path, root: Path, named: str = "") -> None:
    """A UsageError unless `path` (links followed) lies within `root`."""
    try:
        ok = path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError) as e:  # a link loop
        raise UsageError(f"cannot resolve: {e}", file=str(path)) from None
    if not ok:
        raise UsageError("outside the results directory" + (f" ({named})" if named else ""), file=str(path))


def read_bytes(path: Path, root: Path, limit: int) -> bytes:
    """A regular file inside `root`, at most `limit` bytes; anything else a UsageError naming it
    (opened without blocking: a FIFO is refused, not waited on)."""
    inside(path, root)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise UsageError(e.strerror or str(e), file=str(path)) from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError("not a regular file", file=str(path))
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UsageError(f"larger than a results directory's file may be ({limit} bytes)", file=str(path))
    return data


def _json(path: Path, root: Path, limit: int) -> object:
    try:
        return json.loads(read_bytes(path, root, limit).decode("utf-8"))
    except json.JSONDecodeError as e:
        raise UsageError(f"invalid JSON (truncated?): {e.msg}", file=str(path), line=e.lineno) from None
    except UnicodeDecodeError as e:
        raise UsageError(f"not UTF-8: {e.reason}", file=str(path)) from None
    except RecursionError:
        raise UsageError("invalid JSON: nested too deep", file=str(path)) from None


def _run(path: Path, root: Path) -> Run:
    data = _json(path, root, MAX_BYTES[RUN_JSON])
    if not isinstance(data, dict):
        raise UsageError("must be a JSON object", file=str(path), line=1)
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UsageError(f"not a schema version: {version!r}", file=str(path), field="schema_version")
    if version > SCHEMA_VERSION:
        raise UsageError(
            f"schema_version {version} is newer than this llmchaos reads ({SCHEMA_VERSION}); upgrade llmchaos",
            file=str(path),
            field="schema_version",
        )
    try:
        return Run.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise UsageError(err["msg"], file=str(path), field=".".join(map(str, err["loc"]))) from None


def _histograms(index_path: Path, root: Path) -> HistogramSet:
    index = _json(index_path, root, MAX_BYTES[INDEX])
    if not isinstance(index, list):
        raise UsageError("bad histogram index: not a list of histograms", file=str(index_path))
    out = HistogramSet()
    for i, entry in enumerate(index):
        where = f"[{i}]"
        if not isinstance(entry, dict):
            raise UsageError("bad entry: not an object", file=str(index_path), field=where)
        name = entry.get("file")
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise UsageError(f"not a file of histograms/: {name!r}", file=str(index_path), field=f"{where}.file")
        path = index_path.parent / name
        text = read_bytes(path, root, MAX_HDR_BYTES).decode("ascii", "replace").strip()
        try:
            one = HistogramSet.decode([{**entry, "hdr": text}])
        except KeyError as e:
            raise UsageError(f"bad entry: no {e}", file=str(index_path), field=where) from None
        except (
            TypeError,
            ValueError,
            zlib.error,
            HdrCookieException,
            HdrLengthException,
            HdrHistogramSettingsException,
        ) as e:
            raise UsageError(f"not an HDR histogram of ours: {e}", file=str(path)) from None
        for key, _ in one:
            if out.get(key) is not None:
                raise UsageError(f"a second histogram for {'/'.join(key)}", file=str(index_path), field=where)
        out.merge(one)
    return out


def summarize(hist: HistogramSet) -> list[Summary]:
    """One summary per histogram, in key order."""
    return [Summary.of(key, h) for key, h in sorted(hist, key=lambda kv: kv[0])]


def outcome_rows(
    counts: Mapping[tuple[str, ...], int], at_stop: Mapping[tuple[str, ...], int] | None = None
) -> list[OutcomeCount]:
    """Counts keyed (target, lang, api, phase, outcome) as rows, in key order; `at_stop` (keyed
    (target, lang, api, phase)) says how many of each phase's cancelled ones the end of the test cut."""
    fields = ("target", "lang", "api", "phase", "outcome")
    return [
        OutcomeCount(
            **dict(zip(fields, k, strict=True)),
            count=n,
            at_stop=at_stop.get(k[:4], 0) if at_stop is not None and k[4] == "cancelled" else None,
        )
        for k, n in sorted(counts.items())
    ]


def canary_rows(counts: Mapping[tuple[str, ...], int], outcomes: Mapping[tuple[str, ...], int]) -> list[CanaryCount]:
    """Canaries sent per (target, lang, api, phase) (`counts` keyed with a last field `canary`, as
    the collector's SLO counts are) and how many of them `outcomes` counts `wrong`, in key order."""
    fields = ("target", "lang", "api", "phase")
    return [
        CanaryCount(**dict(zip(fields, k[:4], strict=True)), sent=n, wrong=outcomes.get((*k[:4], "wrong"), 0))
        for k, n in sorted(counts.items())
        if k[4] == "canary"
    ]


MARKS = ("stranded", "failed_over", "replica", "kv")  # a key with any of these counted has a row in `endings`


def ending_rows(
    counts: Mapping[tuple[str, ...], int],
    maxima: Mapping[tuple[str, ...], float],
    medians: Mapping[tuple[str, ...], float],
) -> list[Ending]:
    """run.json's `endings`, in key order, from tallies keyed (target, lang, api, phase, what, name):
    `counts` of requests, stranded, failed_over (name ""), replica and replica_failed (name: the
    replica), kv (name: the way); `maxima` of silent (name "": every request's, else a way's) and end
    (a way's); `medians` of a way's ttft and e2e (its end). A row only where a request was stranded,
    failed over, or named its replica or KV way."""
    named: dict[tuple[str, ...], dict[str, list[str]]] = {}
    for (*key, what, name), n in sorted(counts.items()):
        if n and what in MARKS:
            names = named.setdefault(tuple(key), {"replica": [], "kv": []})
            if what in names:
                names[what].append(name)
    return [_ending(key, names, counts, maxima, medians) for key, names in named.items()]


def _ending(
    key: tuple[str, ...],
    names: dict[str, list[str]],
    counts: Mapping[tuple[str, ...], int],
    maxima: Mapping[tuple[str, ...], float],
    medians: Mapping[tuple[str, ...], float],
) -> Ending:
    def count(what: str, name: str = "") -> int:
        return counts.get((*key, what, name), 0)

    return Ending(
        **dict(zip(("target", "lang", "api", "phase"), key, strict=True)),
        requests=count("requests"),
        stranded=count("stranded"),
        failed_over=count("failed_over"),
        silent_max_s=maxima.get((*key, "silent", ""), 0.0),
        replicas={
            r: ReplicaEnding(requests=count("replica", r), failed=count("replica_failed", r)) for r in names["replica"]
        },
        kv={
            way: KvEnding(
                requests=count("kv", way),
                ttft_p50_s=medians.get((*key, "ttft", way)),
                end_p50_s=medians.get((*key, "e2e", way)),
                end_max_s=maxima.get((*key, "end", way)),
                silent_max_s=maxima.get((*key, "silent", way), 0.0),
            )
            for way in names["kv"]
        },
    )
