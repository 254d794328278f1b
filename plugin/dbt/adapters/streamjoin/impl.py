"""The ``streamjoin`` adapter: dbt-spark's SparkAdapter, in-process, plus streamjoin's API."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Type

from dbt.adapters.base import BaseRelation, PythonJobHelper, available
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.spark.column import SparkColumn
from dbt.adapters.spark.impl import SparkAdapter
from dbt_common.exceptions import DbtConfigError
from streamjoin import StreamJoinError
from streamjoin.api import input_spec
from typing_extensions import TypeAlias

from dbt.adapters.streamjoin import model_code, session
from dbt.adapters.streamjoin.connections import StreamjoinConnectionManager
from dbt.adapters.streamjoin.python_submission import SUBMISSION_METHOD, SessionPythonJobHelper


class StreamjoinAdapter(SparkAdapter):
    """SparkAdapter whose Python models run in dbt's process on the shared SparkSession.

    Every dbt-spark macro and materialization applies (the plugin depends on ``spark``);
    the ``@available`` methods below are what streamjoin's macros call.
    """

    ConnectionManager: TypeAlias = StreamjoinConnectionManager
    connections: StreamjoinConnectionManager

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

    def get_columns_in_relation(self, relation: BaseRelation) -> List[SparkColumn]:
        """The relation's columns in Spark's catalog; for a source that is only a Delta changelog of
        a ``streaming_join`` model, the columns it is declared (or stored) with. dbt's unit tests
        read these to build their fixtures for the model's SQL."""
        columns = super().get_columns_in_relation(relation)
        if columns:
            return columns
        source = self._source_of(relation)
        if source is None:
            return columns
        declaration = model_code.input_declaration(source, str(relation), state_root=self.streamjoin_home(),
                                                   project_root=str(self.connections.project_root))
        try:
            spec = input_spec(source["name"], source["name"], declaration)
        except StreamJoinError:
            return columns  # neither declared nor stored yet: dbt says the relation does not exist
        return [self.Column(column=c.name, dtype=c.type) for c in spec.columns]

    def _source_of(self, relation: BaseRelation) -> Optional[Dict[str, Any]]:
        """The manifest's source node published as ``relation`` (schema and identifier), if any."""
        sources = getattr(self.get_macro_resolver(), "sources", None) or {}
        wanted = ((relation.schema or "").lower(), (relation.identifier or "").lower())
        for source in sources.values():
            if ((source.schema or "").lower(), (source.identifier or "").lower()) == wanted:
                return source.to_dict()
        return None

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
        session.get_or_create()
        return super().submit_python_job(parsed_model, compiled_code)

    @classmethod
    def _get_adapter_specific_run_info(cls, config: Any) -> Dict[str, Any]:
        return {**super()._get_adapter_specific_run_info(config), "adapter_type": "streamjoin"}
