{#-- streaming_join: one incremental run of a join model per dbt invocation.

     The model's SQL and its inputs' declarations become Python code that calls
     streamjoin.api.run_model (written to target/run/ like any model's code); the adapter
     runs it in-process. The result is published as the view `this` (plus
     `<this>__changelog` and `<this>__batch`) over the last complete run's files.
     --full-refresh drops the model's state, offsets and outputs and replays its inputs. --#}

{% materialization streaming_join, adapter='streamjoin' %}
  {%- set target_relation = this.incorporate(type='view') -%}
  {%- set code = adapter.streamjoin_model_code(model, streamjoin.model_inputs(model), target_relation | string, should_full_refresh()) -%}

  {{ run_hooks(pre_hooks) }}

  {%- call statement('main', language='python') -%}
{{ code }}
  {%- endcall -%}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
