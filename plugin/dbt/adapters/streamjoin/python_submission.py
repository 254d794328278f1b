"""Run a compiled Python model inside dbt's own process, on the shared SparkSession.

dbt-spark ships Python models to Databricks; here the compiled code (the user's
``model(dbt, session)`` plus dbt's ``dbtObj`` glue plus the footer from
``streamjoin__py_write_table``) is executed in-process on a dbt worker thread, with
``spark`` bound to the session. A failure becomes a :class:`PythonModelError` whose
message carries the model's traceback; a streamjoin error (a model that does not compile,
an invalid input) becomes a :class:`StreamjoinModelError` with streamjoin's message alone.
This is the one place where streamjoin's errors turn into dbt errors.
"""

from __future__ import annotations

import linecache
import traceback
from typing import Any, Dict, Optional

from dbt.adapters.base import PythonJobHelper
from dbt.adapters.contracts.connection import Credentials
from dbt_common.exceptions import DbtRuntimeError

#: The submission method name models may set as ``submission_method``.
SUBMISSION_METHOD = "session"


class PythonModelError(DbtRuntimeError):
    """Raised when a Python model's code raises; the message holds its traceback."""

    MESSAGE = "Python model error"

    def __init__(self, model_id: str, formatted_traceback: str) -> None:
        self.model_id = model_id
        self.formatted_traceback = formatted_traceback
        super().__init__(f"Python model {model_id} failed:\n{formatted_traceback}")


class StreamjoinModelError(DbtRuntimeError):
    """Raised when streamjoin rejects a model or its inputs; the message says what to fix."""

    MESSAGE = "streamjoin error"

    def __init__(self, model_id: str, error: Exception) -> None:
        self.model_id = model_id
        super().__init__(f"streamjoin model {model_id} failed: {type(error).__name__}: {error}")


class PythonModelResultError(TypeError):
    """Raised when ``model()`` returns something that is not a DataFrame."""


class SessionPythonJobHelper(PythonJobHelper):
    """Submission helper for ``submission_method: session`` (the default)."""

    def __init__(self, parsed_model: Dict[str, Any], credential: Credentials) -> None:
        self.model_id: str = parsed_model.get("unique_id") or parsed_model["alias"]

    def submit(self, compiled_code: str) -> Optional[str]:
        """Run the code; the run's summary when it is a ``streaming_join`` model."""
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()
        namespace = run_model_code(compiled_code, model_id=self.model_id, spark=spark)
        report = namespace.get(REPORT_NAME)
        return report.summary() if report is not None else None


#: The name generated ``streaming_join`` code binds its ``RunReport`` to.
REPORT_NAME = "streamjoin_report"


def run_model_code(compiled_code: str, *, model_id: str, spark: Any) -> Dict[str, Any]:
    """Execute compiled Python model code with ``spark`` in scope; returns its globals.

    The code is registered under a pseudo file name so tracebacks show its lines.

    Raises:
        StreamjoinModelError: streamjoin rejected the model or its inputs.
        PythonModelError: the code raised anything else; the message holds the
            traceback, starting at the model's own frames.
    """
    from streamjoin.errors import StreamJoinError

    source = _strip_leading_indent(compiled_code)
    filename = f"<dbt python model {model_id}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: Dict[str, Any] = {"__name__": "dbt_python_model", "spark": spark}
    try:
        exec(compile(source, filename, "exec"), namespace)
    except StreamJoinError as exc:
        raise StreamjoinModelError(model_id, exc) from exc
    except Exception as exc:
        # Drop this function's own frame: the traceback starts in the model's code.
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        formatted = "".join(traceback.format_exception(type(exc), exc, tb))
        raise PythonModelError(model_id, formatted) from exc
    finally:
        linecache.cache.pop(filename, None)
    return namespace


def _strip_leading_indent(compiled_code: str) -> str:
    """Drop the indentation dbt's jinja wrappers put before the first line.

    Leading blank lines are kept so line numbers match ``target/run/<model>.py``.

    >>> _strip_leading_indent("\\n    import os\\nx = 1\\n")
    '\\nimport os\\nx = 1\\n'
    """
    body = compiled_code.lstrip()
    leading_newlines = compiled_code[: len(compiled_code) - len(body)].count("\n")
    return "\n" * leading_newlines + body


def save_as_table(df: Any, *, relation: str, file_format: Optional[str], spark: Any) -> None:
    """Write what ``model()`` returned to ``relation``, replacing it.

    Args:
        df: A Spark DataFrame, a pandas-on-Spark DataFrame (``pyspark.pandas``, taken as the
            Spark DataFrame it wraps), or a pandas DataFrame (converted with the session), as
            dbt-spark's Python models accept.
        relation: The rendered target relation, e.g. ```default`.`orders` ``.
        file_format: The model's ``file_format`` config; falsy means the session's
            ``spark.sql.sources.default``, as for SQL models without ``file_format``.
        spark: The SparkSession.
    """
    from pyspark.sql import DataFrame

    module = type(df).__module__
    if not isinstance(df, DataFrame) and module.startswith("pyspark.pandas"):
        df = df.to_spark()
    elif not isinstance(df, DataFrame) and module.startswith("pandas"):
        df = spark.createDataFrame(df)
    if not isinstance(df, DataFrame):
        raise PythonModelResultError(
            f"model() returned {module}.{type(df).__qualname__}; return a "
            "pyspark.sql.DataFrame (or a pandas or pandas-on-Spark DataFrame)."
        )
    fmt = file_format or spark.conf.get("spark.sql.sources.default")
    writer = df.write.mode("overwrite").option("overwriteSchema", "true").format(fmt)
    writer.saveAsTable(relation)
