"""dlbench report: `python src/report.py [--run ID | --experiment NAME] [--uri URI ...] [--out DIR] [--list]`.

The GPU results pages that pair the harness with the hand-written yardsticks (results/) are made by
`python yardsticks/page.py`, beside the yardsticks.

Hydra-style `run=ID experiment=NAME uri=URI out=DIR` work too. With neither --run nor --experiment the
report covers the latest sweep of the `dlbench` experiment. Several --uri combine stores (sittings kept
in a store each) into one report of one experiment (`dlbench` unless --experiment says); runs measured on
different machines are kept in tables of their own. Bad input (unknown run or experiment, no
database, nothing finished) prints one line to stderr and exits 2; --list shows what the store holds.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run from a checkout without installing

from mlflow.exceptions import MlflowException  # noqa: E402

from dlbench.core.masked_output import mask_output  # noqa: E402
from dlbench.report import Report, ReportInputError, build_report, describe_store, open_client  # noqa: E402
from dlbench.report.equivalence import RELATIVE_DELTA, Margins  # noqa: E402
from dlbench.tracking.store import resolve_uri  # noqa: E402

KEYS = ("run", "experiment", "uri", "out")


def parse(argv: list[str]) -> argparse.Namespace:
    """argparse, after turning Hydra-style key=value words into --key value."""
    words: list[str] = []
    for word in argv:
        key, eq, value = word.partition("=")
        words += [f"--{key}", value] if eq and key in KEYS else [word]
    p = argparse.ArgumentParser(prog="python src/report.py", description=__doc__.splitlines()[0])
    p.add_argument("--run", help="parent run id of a sweep (or a single job run); one store only")
    p.add_argument("--experiment", help="report every job run of this experiment (newest per configuration)")
    p.add_argument(
        "--uri",
        action="append",
        default=[],
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the project's sqlite); repeat it to "
        "report one experiment over several stores",
    )
    p.add_argument("--out", type=Path, help="output folder (default: reports/<run id or experiment>)")
    p.add_argument(
        "--list", action="store_true", help="list the experiments and sweeps in the store, then exit"
    )
    p.add_argument(
        "--delta",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="accuracy verdicts: the equivalence margin of one metric in its own units (repeatable)",
    )
    p.add_argument(
        "--equivalence",
        type=float,
        default=RELATIVE_DELTA,
        help=f"δ of a metric without --delta, as a fraction of fp32's mean (default {RELATIVE_DELTA})",
    )
    args = p.parse_args(words)
    if args.run and args.experiment:
        p.error("give --run or --experiment, not both")
    return args


def margins(args: argparse.Namespace) -> Margins:
    """The accuracy verdicts' δ from --equivalence and the METRIC=VALUE words of --delta; a bad one is a
    ReportInputError (one line)."""
    if not args.equivalence > 0:
        raise ReportInputError(f"--equivalence {args.equivalence:g}: an equivalence margin must be > 0")
    out = {}
    for word in args.delta:
        metric, _, value = word.partition("=")
        try:
            out[metric] = float(value)
        except ValueError:
            out[metric] = math.nan
        if not metric or not out[metric] > 0:
            raise ReportInputError(
                f"--delta {word}: give METRIC=VALUE with a value > 0, e.g. --delta accuracy=0.005"
            )
    return Margins(args.equivalence, out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["page"]:  # the harness-vs-yardstick page lives beside the yardsticks it pairs
        print("report: the GPU results page is made by `python yardsticks/page.py` now", file=sys.stderr)
        return 2
    args = parse(argv)
    mask_output()  # no credential of a store URI in what it prints, and `| head` ends it without a traceback
    logging.getLogger("alembic").setLevel(logging.WARNING)  # no migration chatter on stderr
    warnings.filterwarnings("ignore")
    # A report reads a few endpoints: fail within seconds on an unreachable server, not after
    # MLflow's default minutes of retries (an explicit setting in the environment still wins).
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    uris = list(dict.fromkeys(resolve_uri(u) for u in args.uri or [None]))  # a store named twice: once
    try:
        clients = {u: open_client(u) for u in uris}
        if args.list:
            print("\n".join(line for u, c in clients.items() for line in describe_store(c, u)))
            return 0
        experiment = args.experiment or ("dlbench" if len(clients) > 1 else None)
        out = args.out or Path("reports") / (args.run or experiment or "latest")
        first, *more = clients.items()
        report = build_report(
            first[1], first[0], out, run_id=args.run, experiment=experiment, margins=margins(args),
            also=dict(more),
        )  # fmt: skip
    except ReportInputError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    except MlflowException as exc:  # unreachable server, broken store: one line, not a traceback
        where = f"MLflow store {uris[0]}" if len(uris) == 1 else f"MLflow stores {', '.join(uris)}"
        print(f"report: {where}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    print(summary_line(report))
    for path in report.files:
        print(f"  {path}")
    return 0


def summary_line(report: Report) -> str:
    """The one line the CLI prints, counting finished jobs as the report's overview does."""
    a, accuracy = report.analysis, report.accuracy.runs
    latency = report.latency.runs if report.latency else []
    parts = [f"{report.finished} finished, {len(a.failed)} failed", f"{len(a.findings)} findings"]
    parts += [f"{len(accuracy)} accuracy runs"] if accuracy else []
    parts += [f"{len(latency)} serving runs"] if latency else []
    return f"report for {report.selection.title.removeprefix('dlbench report: ')}: " + "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
