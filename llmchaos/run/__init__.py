"""Run results: the contract between the load tests, A/B comparison, the regression gate and the
dashboards. Every reader and writer of a results directory goes through this package."""

from llmchaos.run.model import (
    SCHEMA_VERSION,
    FaultWindow,
    OutcomeCount,
    RequestsFile,
    Run,
    SloCheck,
    SloResult,
    Summary,
    Validity,
    outcome_rows,
    summarize,
)
from llmchaos.run.requests import RequestLine, RequestsWriter
from llmchaos.run.store import RunResults, host_info, iso, load, new_run_id, write

__all__ = [
    "SCHEMA_VERSION",
    "FaultWindow",
    "OutcomeCount",
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
