{#-- matches_batch: the model's result against a batch evaluation of the model's own SQL over its
     inputs' snapshots (every changelog consolidated) as its last complete run read them.
     Interval joins follow Flink: a row that arrives behind the watermark (minus allowed_lateness)
     joins only the rows still in state, so the result lies between two batch evaluations:
     `__batch_on_time`, over the inputs minus the late rows the runs recorded (the model must hold
     all of it), and `__batch`, over every row (the model may hold nothing else). Without late
     rows the two are one view, evaluated once, and the test is equality. Returned rows say on
     which side a row has more copies (a row per extra copy). One aggregation counts every row's
     copies on each side (as Spark computes EXCEPT ALL, without a second pass per direction). --#}
{% test matches_batch(model) %}
  {%- set batch = api.Relation.create(schema=model.schema, identifier=model.identifier ~ '__batch') -%}
  {%- set on_time = api.Relation.create(schema=model.schema, identifier=model.identifier ~ '__batch_on_time') -%}
  {%- set one_batch = execute and adapter.streamjoin_batch_views_agree(model) -%}
  {%- set cols = streamjoin.quoted_columns(model) -%}
with sides as (
  select *, 0 as `__side` from {{ model }}
  union all
  select *, 1 from {{ batch }}
  {%- if not one_batch %}
  union all
  select *, 2 from {{ on_time }}
  {%- endif %}
),
counted as (
  select {{ cols }}, count_if(`__side` = 0) as `__model`, count_if(`__side` = 1) as `__batch`,
         count_if(`__side` = {{ 1 if one_batch else 2 }}) as `__on_time`
  from sides
  group by {{ cols }}
)
select difference, {{ cols }} from counted
lateral view stack(2, 'only in the streaming result', `__model` - `__batch`,
                      'only in the batch evaluation', `__on_time` - `__model`) `__directions` as difference, `__copies`
lateral view explode(array_repeat(1, cast(`__copies` as int))) `__repeat` as `__copy`
where `__model` <> `__batch` or `__on_time` <> `__model`
{% endtest %}


{#-- The model's columns, quoted and comma-separated. --#}
{% macro quoted_columns(model) %}
  {%- set names = [] -%}
  {%- for column in adapter.get_columns_in_relation(model) -%}
    {%- do names.append(adapter.quote(column.name)) -%}
  {%- endfor -%}
  {{- return(names | join(', ')) -}}
{% endmacro %}


{#-- changelog_consistent: replaying the model's changelog reproduces its result table (and never
     retracts a row more often than it was added). The replay is exact after retention too
     (`maintain --changelog-keep-runs`): the changelog's oldest rows are then the net change of
     the runs it trimmed, i.e. the result as of the retention boundary. --#}
{% test changelog_consistent(model) %}
  {%- set changelog = api.Relation.create(schema=model.schema, identifier=model.identifier ~ '__changelog') -%}
  {%- set cols = streamjoin.quoted_columns(model) -%}
with counted as (
  select {{ cols }},
         sum(case when `__kind` in ('+I', '+U') then 1 when `__kind` in ('-U', '-D') then -1 else 0 end) as `__weight`,
         count_if(`__kind` is null) as `__result`
  from (
    select {{ cols }}, _row_kind as `__kind` from {{ changelog }}
    union all
    select {{ cols }}, null from {{ model }}
  )
  group by {{ cols }}
)
select difference, {{ cols }} from counted
lateral view stack(3, 'only in the replayed changelog', greatest(`__weight`, 0) - `__result`,
                      'only in the result', `__result` - greatest(`__weight`, 0),
                      'retracted more often than added', if(`__weight` < 0, 1L, 0L)) `__checks` as difference, `__copies`
lateral view explode(array_repeat(1, cast(`__copies` as int))) `__repeat` as `__copy`
where `__weight` <> `__result`
{% endtest %}
