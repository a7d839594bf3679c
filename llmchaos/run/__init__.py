"""Run results: the contract between the load tests, A/B comparison, the regression gate and the
dashboards. Every reader and writer of a results directory goes through this package."""

from llmchaos.run.model import (
    SCHEMA_VERSION,
    FaultWindow,
    Fidelity,
    Lag,
    Minute,
    MirrorPairs,
    OutcomeCount,
    OutputLength,
    Replay,
    RequestsFile,
    Run,
    SloCheck,
    SloResult,
    Summary,
    Validity,
    outcome_rows,
    summarize,
)
from llmchaos.run.requests import ReplayFields, RequestLine, RequestsWriter
from llmchaos.run.store import RunResults, host_info, iso, load, new_run_id, write

__all__ = [
    "SCHEMA_VERSION",
    "FaultWindow",
    "Fidelity",
    "Lag",
    "Minute",
    "MirrorPairs",
    "OutcomeCount",
    "OutputLength",
    "Replay",
    "ReplayFields",
    "RequestLine",
    "RequestsFile",
    "RequestsWriter",
    "Run",
    "RunResults",
    "SloCheck",
    "SloResult",
    "Summary",
    "Validity",
    "host_info",
    "iso",
    "load",
    "new_run_id",
    "outcome_rows",
    "summarize",
    "write",
]
