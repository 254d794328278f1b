"""The ``streamjoin`` adapter: dbt-spark's SparkAdapter, in-process, plus streamjoin's API."""

from __future__ import annotations

import threading
from multiprocessing.context import SpawnContext
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple, Type

from dbt.adapters.base import BaseRelation, PythonJobHelper, available
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.spark.column import SparkColumn
from dbt.adapters.spark.impl import SparkAdapter
from dbt_common.exceptions import DbtConfigError
from streamjoin import StreamJoinError
from streamjoin.api import batch_views_agree, input_spec
from typing_extensions import TypeAlias

from dbt.adapters.streamjoin import model_code, relations, sources
from dbt.adapters.streamjoin.connections import StreamjoinConnectionManager
from dbt.adapters.streamjoin.python_submission import SUBMISSION_METHOD, SessionPythonJobHelper


class StreamjoinAdapter(SparkAdapter):
    """SparkAdapter whose Python models run in dbt's process on the shared SparkSession.

    Every dbt-spark macro and materialization applies (the plugin depends on ``spark``);
    the ``@available`` methods below are what streamjoin's macros call.
    """

    ConnectionManager: TypeAlias = StreamjoinConnectionManager
    connections: StreamjoinConnectionManager

    def __init__(self, config: Any, mp_context: SpawnContext) -> None:
        super().__init__(config, mp_context)
        self.connections.on_session_start = self._publish_sources
        self._deferred_cache: Optional[Tuple[List[Any], bool, Optional[Set[BaseRelation]]]] = None
        self._deferred_cache_lock = threading.RLock()

    # -- Spark only when a statement must run ----------------------------------------------------

    def set_relations_cache(self, relation_configs: Iterable[Any], clear: bool = False,
                            required_schemas: Optional[Set[BaseRelation]] = None) -> None:
        """Defer listing the catalog until dbt first reads or changes the relation cache.

        dbt fills the cache before every command; listing schemas needs Spark, which a command
        that runs no statement (``dbt compile`` of these models) then never starts.
        """
        with self._deferred_cache_lock:
            self._deferred_cache = (list(relation_configs), clear, required_schemas)

    def _populate_deferred_cache(self) -> None:
        with self._deferred_cache_lock:
            deferred, self._deferred_cache = self._deferred_cache, None
            if deferred is not None:
                super().set_relations_cache(deferred[0], clear=deferred[1], required_schemas=deferred[2])

    def _schema_is_cached(self, database: Optional[str], schema: str) -> bool:
        self._populate_deferred_cache()
        return super()._schema_is_cached(database, schema)

    @available
    def cache_added(self, relation: Optional[BaseRelation]) -> str:
        self._populate_deferred_cache()
        return super().cache_added(relation)

    @available
    def cache_dropped(self, relation: Optional[BaseRelation]) -> str:
        self._populate_deferred_cache()
        return super().cache_dropped(relation)

    @available
    def cache_renamed(self, from_relation: Optional[BaseRelation], to_relation: Optional[BaseRelation]) -> str:
        self._populate_deferred_cache()
        return super().cache_renamed(from_relation, to_relation)

    def _publish_sources(self, spark: Any) -> None:
        """Publish the project's streamjoin sources in Spark's catalog (see ``sources``)."""
        manifest = self.get_macro_resolver()
        nodes = getattr(manifest, "sources", None) or {}
        pairs = [(node.to_dict(), str(self.Relation.create(schema=node.schema, identifier=node.identifier)))
                 for node in nodes.values()]
        sources.publish_sources(spark, pairs, state_root=self.streamjoin_home(),
                                project_root=str(self.connections.project_root))

    @available
    def streamjoin_home(self) -> str:
        """Where streamjoin keeps its Delta state tables (profile field ``state_root``)."""
        return self.connections.session_plan.state_root

    @available
    def streamjoin_model_code(
        self,
        model: Mapping[str, Any],
        inputs: List[Mapping[str, Any]],
        relation: str,
        full_refresh: bool,
    ) -> str:
        """The Python code of one run of a ``streaming_join`` model (see ``model_code``).

        Args:
            model: The model node.
            inputs: Per node the model depends on: ``{"node": <graph node>, "relation": str}``.
            relation: The rendered relation the model's result is published as.
            full_refresh: Whether to drop the model's state and outputs and replay its inputs.
        """
        return model_code.model_code(
            model,
            inputs,
            state_root=self.streamjoin_home(),
            project_root=str(self.connections.project_root),
            relation=relation,
            full_refresh=full_refresh,
        )

    @available
    def streamjoin_explain(self, model: Mapping[str, Any], inputs: List[Mapping[str, Any]], relation: str) -> str:
        """What a ``streaming_join`` model computes and keeps (see ``model_code.explain``). The model's
        SQL is compiled here: ``dbt run-operation`` (which calls this) compiles no node itself."""
        from dbt.compilation import Compiler

        manifest = self.get_macro_resolver()
        node = manifest.nodes[model["unique_id"]]
        compiled = Compiler(self.config).compile_node(node, manifest, write=False)
        return model_code.explain({**model, "compiled_code": compiled.compiled_code}, inputs,
                                  state_root=self.streamjoin_home(), project_root=str(self.connections.project_root),
                                  relation=relation)

    @available
    def streamjoin_batch_views_agree(self, relation: BaseRelation) -> bool:
        """Whether ``relation`` is a ``streaming_join`` model whose two batch views are one (see
        ``streamjoin.api.batch_views_agree``); told by its Delta tables, so without Spark."""
        found = relations.model_tables(self.get_macro_resolver(), relation.schema, relation.identifier,
                                       state_root=self.streamjoin_home())
        return found is not None and batch_views_agree(found[0])

    def get_columns_in_relation(self, relation: BaseRelation) -> List[SparkColumn]:
        """The relation's columns, found without Spark where streamjoin knows them (see ``relations``):
        a source's as declared (or stored), a ``streaming_join`` model view's from its Delta table.
        Other relations' come from Spark's catalog; one that does not exist has none (an expected
        miss, so nothing is logged). dbt's unit tests and ``changelog_consistent`` read these."""
        manifest = self.get_macro_resolver()
        source = relations.find_source(manifest, relation.schema, relation.identifier)
        if source is not None:
            declaration = model_code.input_declaration(source, str(relation), state_root=self.streamjoin_home(),
                                                       project_root=str(self.connections.project_root))
            try:
                spec = input_spec(source["name"], source["name"], declaration)
                return [self.Column(column=c.name, dtype=c.type) for c in spec.columns]
            except StreamJoinError:
                pass  # neither declared nor stored yet: perhaps a table of the catalog's own
        table = relations.model_table(manifest, relation.schema, relation.identifier, state_root=self.streamjoin_home())
        if table is not None:
            return [self.Column(column=name, dtype=dtype) for name, dtype in relations.delta_columns(table)]
        if not self.connections.spark().catalog.tableExists(relation.render()):
            return []
        return super().get_columns_in_relation(relation)

    def generate_python_submission_response(self, submission_result: Any) -> AdapterResponse:
        return AdapterResponse(_message=str(submission_result or "OK"))

    @property
    def default_python_submission_method(self) -> str:
        return SUBMISSION_METHOD

    @property
    def python_submission_helpers(self) -> Dict[str, Type[PythonJobHelper]]:
        return {SUBMISSION_METHOD: SessionPythonJobHelper}

    def submit_python_job(self, parsed_model: dict, compiled_code: str) -> AdapterResponse:
        method = parsed_model["config"].get("submission_method", SUBMISSION_METHOD)
        if method != SUBMISSION_METHOD:
            raise DbtConfigError(
                f"submission_method: {method!r} in model {parsed_model.get('unique_id')} is "
                f"not supported by the streamjoin adapter; remove it or set "
                f"`submission_method: {SUBMISSION_METHOD}`."
            )
        # Model code calls SparkSession.builder.getOrCreate(): make sure it finds ours.
        self.connections.spark()
        return super().submit_python_job(parsed_model, compiled_code)

    @classmethod
    def _get_adapter_specific_run_info(cls, config: Any) -> Dict[str, Any]:
        return {**super()._get_adapter_specific_run_info(config), "adapter_type": "streamjoin"}
