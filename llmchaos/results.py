"""Run results on disk (the contract between load tests, A/B comparison and the regression gate).

`DIR/<run_id>/run.json`, `histograms/` (one HDR histogram per key, base64 V2
encoding, exactly mergeable) with `histograms/index.json`, and `requests.jsonl`.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

from llmchaos import __version__
from llmchaos.errors import UsageError
from llmchaos.histogram import HistogramSet

SCHEMA_VERSION = 1


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


def host_info() -> dict:
    return {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]}


def summaries(hist: HistogramSet) -> list[dict]:
    rows = []
    for key, h in sorted(hist, key=lambda kv: kv[0]):
        rows.append({**key._asdict(), "unit": "tokens" if key.metric == "output_tokens" else "seconds",
                     **h.summary()})
    return rows


def write(run_dir: Path, run: dict, hist: HistogramSet) -> Path:
    """Write run.json and the histograms; `run` holds everything but the summaries."""
    hdir = run_dir / "histograms"
    hdir.mkdir(parents=True, exist_ok=True)
    index = []
    for i, item in enumerate(hist.encode()):
        name = f"{i:04d}.hdr"
        (hdir / name).write_text(item.pop("hdr") + "\n", encoding="ascii")
        index.append({"file": name, **item})
    (hdir / "index.json").write_text(json.dumps(index, indent=1), encoding="utf-8")
    body = {"schema_version": SCHEMA_VERSION, "harness_version": __version__, **run,
            "summaries": summaries(hist)}
    (run_dir / "run.json").write_text(json.dumps(body, indent=1, ensure_ascii=False), encoding="utf-8")
    return run_dir


def load(run_dir: str | Path) -> tuple[dict, HistogramSet]:
    """Read a run directory back; a bad one is a UsageError naming the file and field."""
    run_dir = Path(run_dir)
    path = run_dir / "run.json"
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(e.strerror or str(e), file=str(path)) from None
    except json.JSONDecodeError as e:
        raise UsageError(f"invalid JSON: {e.msg}", file=str(path), line=e.lineno) from None
    if run.get("schema_version") != SCHEMA_VERSION:
        raise UsageError(f"unsupported schema_version {run.get('schema_version')!r}", file=str(path),
                         field="schema_version")
    index_path = run_dir / "histograms" / "index.json"
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
        items = [{**entry, "hdr": (index_path.parent / entry["file"]).read_text(encoding="ascii").strip()}
                 for entry in index]
        return run, HistogramSet.decode(items)
    except OSError as e:
        raise UsageError(e.strerror or str(e), file=str(index_path)) from None
    except (json.JSONDecodeError, KeyError, ValueError) as e:
        raise UsageError(f"bad histogram index: {e}", file=str(index_path)) from None

