"""What the CSV traces of token counts share (Azure, BurstGPT): a timestamp and input and output token
counts per row, columns named through `cols`, and no users: each request is its own."""

from __future__ import annotations

from collections.abc import Iterator

from loadtests.logs import fields as f
from loadtests.logs.lines import Lines, Parsed, csv_rows
from loadtests.logs.log_record import LogRecord


def sniff(header: list[str], cols: dict[str, str]) -> bool:
    return cols["input_tokens"] in header and cols["output_tokens"] in header


def rows(lines: Lines, cols: dict[str, str]) -> Iterator[Parsed]:
    """`cols` names ts, input_tokens and output_tokens, and model where the trace has one."""
    ts, inp, out, model = cols["ts"], cols["input_tokens"], cols["output_tokens"], cols.get("model")

    def parse(row: dict[str, str], line: int) -> LogRecord:
        return LogRecord(
            line,
            f.timestamp(row[ts], ts),
            f"r{line}",
            model=(row.get(model) or None) if model else None,
            input_tokens=f.integer(row[inp], inp, 1),
            output_tokens=f.integer(row[out], out),
        )

    return csv_rows(lines, (ts, inp, out), parse)
