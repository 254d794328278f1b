"""Call the Flink oracle from the main venv: cases in, Flink's final results out.

PyFlink lives in its own venv (``.venv-flink``, made by ``make flink-setup``); this
module only pipes cases as JSON to ``run_cases.py`` (or, for lookup joins,
``run_lookup.py``) under that venv's interpreter and reads its JSON lines back.
Standard library only, and the tests' settings for a short-lived JVM (``jvm_options``), which
the oracle's gateway JVM runs with.

    from tests.flink_oracle.client import run_in_flink
    results = run_in_flink([case_a, case_b])   # {"case-a": [[...], ...], ...}
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from jvm_options import SHORT_LIVED

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SCRIPT = HERE / "run_cases.py"
LOOKUP_SCRIPT = HERE / "run_lookup.py"
FLINK_PYTHON = Path(os.environ.get("FLINK_ORACLE_PYTHON", REPO / ".venv-flink" / "bin" / "python"))
SETUP_HINT = "run `make flink-setup` in the repository root to create .venv-flink"


class FlinkOracleError(RuntimeError):
    """Raised when the Flink oracle cannot run or Flink fails a case; carries Flink's stderr."""


def flink_python() -> Path:
    """The Flink venv's interpreter; raises FlinkOracleError naming `make flink-setup` if absent."""
    if not FLINK_PYTHON.exists():
        raise FlinkOracleError(f"the Flink venv interpreter {FLINK_PYTHON} does not exist: {SETUP_HINT}")
    return FLINK_PYTHON


def run_reports(cases: list[dict[str, Any]], *, timeout: float | None = 1800) -> tuple[list[dict[str, Any]], str]:
    """Run `cases` in one Flink process; return (its report per case in order, its stderr).

    A report is ``{"case", "ok", "error", "result", "columns", "sql"}`` (see run_cases.py).
    Raises FlinkOracleError when the process itself fails (not for a failed case).
    """
    return _reports(SCRIPT, cases, timeout)


def run_lookup_reports(cases: list[dict[str, Any]], *, timeout: float | None = 1800) -> tuple[list[dict[str, Any]], str]:
    """Run lookup-join `cases` in one Flink process; return (its report per case in order, its stderr).

    A report is ``{"case", "ok", "error", "runs", "columns", "sql"}``, ``runs`` the rows Flink
    emitted in each run (see run_lookup.py). Raises FlinkOracleError when the process itself fails.
    """
    return _reports(LOOKUP_SCRIPT, cases, timeout)


def _reports(script: Path, cases: list[dict[str, Any]], timeout: float | None) -> tuple[list[dict[str, Any]], str]:
    try:
        proc = subprocess.run(
            [str(flink_python()), str(script), "-"],
            input=json.dumps(cases),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
            # PyFlink puts JVM_ARGS on its gateway JVM's command line; a caller's own replace these
            env={"JVM_ARGS": SHORT_LIVED, **os.environ},
        )
    except subprocess.TimeoutExpired as error:
        raise FlinkOracleError(f"the Flink oracle did not finish {len(cases)} cases in {timeout} s") from error
    reports = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if len(reports) != len(cases):
        raise FlinkOracleError(
            f"the Flink oracle exited {proc.returncode} after {len(reports)} of {len(cases)} cases; "
            f"stderr:\n{proc.stderr[-20000:]}"
        )
    return reports, proc.stderr


def run_in_flink(cases: list[dict[str, Any]]) -> dict[str, list[list[Any]]]:
    """Return Flink's final result of every case, keyed by case name.

    Raises FlinkOracleError with Flink's error and stderr when any case fails.
    """
    names = [c.get("name") for c in cases]
    if len(set(names)) != len(names):
        raise FlinkOracleError(f"case names must be unique to key the results: {names}")
    reports, stderr = run_reports(cases)
    failed = [r for r in reports if not r["ok"]]
    if failed:
        detail = "\n".join(f"{r['case']}: {r['error']}" for r in failed)
        raise FlinkOracleError(f"Flink failed {len(failed)} case(s):\n{detail}\nstderr:\n{stderr[-20000:]}")
    return {r["case"]: r["result"] for r in reports}
