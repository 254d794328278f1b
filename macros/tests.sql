{#-- matches_batch: the model's result against a batch evaluation of the model's own SQL over its
     inputs' snapshots (every changelog consolidated) as its last complete run read them.
     Interval joins follow Flink: a row that arrives behind the watermark (minus allowed_lateness)
     joins only the rows still in state, so the result lies between two batch evaluations:
     `__batch_on_time`, over the inputs minus the late rows the runs recorded (the model must hold
     all of it), and `__batch`, over every row (the model may hold nothing else). Without late
     rows the two are one and the test is equality. Returned rows say on which side a row has
     more copies. --#}
{% test matches_batch(model) %}
  {%- set batch = api.Relation.create(schema=model.schema, identifier=model.identifier ~ '__batch') -%}
  {%- set on_time = api.Relation.create(schema=model.schema, identifier=model.identifier ~ '__batch_on_time') -%}
select 'only in the streaming result' as difference, * from (
  select * from {{ model }} except all select * from {{ batch }}
)
union all
select 'only in the batch evaluation' as difference, * from (
  select * from {{ on_time }} except all select * from {{ model }}
)
{% endtest %}


{#-- changelog_consistent: replaying the model's changelog reproduces its result table (and never
     retracts a row more often than it was added). The replay is exact after retention too
     (`maintain --changelog-keep-runs`): the changelog's oldest rows are then the net change of
     the runs it trimmed, i.e. the result as of the retention boundary. --#}
{% test changelog_consistent(model) %}
  {%- set changelog = api.Relation.create(schema=model.schema, identifier=model.identifier ~ '__changelog') -%}
  {%- set names = [] -%}
  {%- for column in adapter.get_columns_in_relation(model) -%}
    {%- do names.append(adapter.quote(column.name)) -%}
  {%- endfor -%}
  {%- set cols = names | join(', ') -%}
with weighted as (
  select {{ cols }}, sum(case when _row_kind in ('+I', '+U') then 1 else -1 end) as `__weight`
  from {{ changelog }}
  group by {{ cols }}
),
replayed as (
  select {{ cols }} from weighted
  lateral view explode(array_repeat(1, cast(`__weight` as int))) `__copies` as `__copy`
)
select 'only in the replayed changelog' as difference, * from (
  select * from replayed except all select {{ cols }} from {{ model }}
)
union all
select 'only in the result' as difference, * from (
  select {{ cols }} from {{ model }} except all select * from replayed
)
union all
select 'retracted more often than added' as difference, {{ cols }} from weighted where `__weight` < 0
{% endtest %}
