{#-- streamjoin_explain: what a streaming_join model computes and keeps, printed. Run by
     `python -m streamjoin explain <project dir> --select <model>`, or directly:
     dbt run-operation streamjoin_explain --args '{model: orders_prices_left}' --quiet --#}

{% macro streamjoin_explain(model) %}
  {%- set found = graph.nodes.values() | selectattr('resource_type', 'equalto', 'model')
                  | selectattr('name', 'equalto', model) | list -%}
  {%- if not found -%}
    {{ exceptions.raise_compiler_error("streamjoin explain: the project has no model named '" ~ model ~ "'") }}
  {%- endif -%}
  {%- set node = found[0] -%}
  {%- if node.config.materialized != 'streaming_join' -%}
    {{ exceptions.raise_compiler_error("streamjoin explain: model '" ~ model ~ "' is materialized as '"
                                       ~ node.config.materialized ~ "', not 'streaming_join'") }}
  {%- endif -%}
  {%- set relation = api.Relation.create(schema=node.schema, identifier=node.alias) -%}
  {%- do print(adapter.streamjoin_explain(node, streamjoin.model_inputs(node), relation | string)) -%}
{% endmacro %}


{#-- The relations a model reads, each with its graph node: what streamjoin needs to know of them. --#}
{% macro model_inputs(node) %}
  {%- set inputs = [] -%}
  {%- for unique_id in node.depends_on.nodes -%}
    {%- set input = graph.sources.get(unique_id) or graph.nodes.get(unique_id) -%}
    {%- set identifier = input.identifier if input.resource_type == 'source' else input.alias -%}
    {%- set relation = api.Relation.create(schema=input.schema, identifier=identifier) -%}
    {%- do inputs.append({'node': input, 'relation': relation | string}) -%}
  {%- endfor -%}
  {{ return(inputs) }}
{% endmacro %}
