"""Cross-run comparison reports: tables, trustworthy sentences and charts from an MLflow store.

Never imports a framework: it reads what the jobs logged (docs/architecture.md, "MLflow layout").
"""

from dlbench.report.build import CSV, HTML, MARKDOWN, Report, build_report
from dlbench.report.load import ReportInputError, describe_store, open_client

__all__ = [
    "CSV",
    "HTML",
    "MARKDOWN",
    "Report",
    "ReportInputError",
    "build_report",
    "describe_store",
    "open_client",
]
