"""dbt sources in Spark's catalog, so every dbt command can read what a model's SQL names.

A source of a ``streaming_join`` model is a Delta changelog at a location, not a table of Spark's
catalog: without this, ``dbt show --select <model>``, a test over a source or
``dbt docs generate`` fail or miss it. Before a dbt command's first statement, each source that
declares ``meta.streamjoin`` or has a Delta table at its location is published as a view named
like the source (``<schema>.<identifier>``) over its rows as they are then: its changelog
consolidated, read as its ``changelog_format`` defines (what ``<model>__batch`` reads). A table of
the catalog's own with that name is left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, Mapping, Tuple

from dbt.adapters.events.logging import AdapterLogger
from pyspark.errors import PySparkException
from streamjoin.api import publish_input
from streamjoin.errors import StreamJoinError
from streamjoin.storage import delta_log

from dbt.adapters.streamjoin import model_code

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = AdapterLogger("Streamjoin")

def publish_sources(spark: "SparkSession", sources: Iterable[Tuple[Mapping[str, Any], str]], *,
                    state_root: str, project_root: str) -> Dict[str, str]:
    """Publish each ``(source node, relation)`` that streamjoin reads; returns the skipped ones and why.

    A source is skipped when it is not streamjoin's (no declaration and no Delta table at its
    location), when the catalog has a table of its own by that name, when it can not be read
    yet (no Delta table and no typed columns: loading it, or declaring column types, fixes that),
    or when Spark can not create its view (a warning names it).
    """
    skipped: Dict[str, str] = {}
    for node, relation in sources:
        declaration = model_code.input_declaration(node, relation, state_root=state_root,
                                                   project_root=project_root)
        if not model_code.streamjoin_meta(node) and not delta_log.exists(declaration["location"]):
            skipped[relation] = "not a streamjoin input (no meta.streamjoin, no Delta table at its location)"
            continue  # a table of the catalog's own, or nothing yet
        try:
            published = publish_input(spark, name=node["name"], declaration=declaration, relation=relation)
        except StreamJoinError as exc:
            skipped[relation] = str(exc)
            logger.debug(f"source {relation} not published in Spark's catalog: {exc}")
            continue
        except (PySparkException, OSError) as exc:  # e.g. its table lost a declared column: one source, not all
            skipped[relation] = str(exc).splitlines()[0]
            logger.warning(f"source {relation} could not be published in Spark's catalog ({skipped[relation]}); "
                           "fix its Delta table or its declaration: models reading it say what is wrong when they run")
            continue
        if not published:
            skipped[relation] = "the catalog has a table by that name"
    return skipped
