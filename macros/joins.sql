{#-- Join queries from a declarative description. Each macro renders one standard Spark SQL
     SELECT, the same a model could spell out by hand (both compile to the same join plan).

     An input is a relation (`ref(...)`, `source(...)`; its alias is its identifier) or
     {'relation': ..., 'alias': ...}. `on` is a column name shared by both sides, a list of
     them, or a list of [left_column, right_column] pairs. `columns` are SELECT expressions
     over the aliases (default `*`); `where` is an optional filter; `extra_on` lists more
     conditions AND-ed to the join's ON. --#}

{% macro regular_join(left, right, on, join_type='inner', columns=none, where=none, extra_on=[]) -%}
  {%- set l = streamjoin._join_input(left) -%}
  {%- set r = streamjoin._join_input(right) -%}
select {{ streamjoin._select_list(columns) }}
from {{ l.relation }} as {{ l.alias }}
{{ streamjoin._join_keyword(join_type) }} {{ r.relation }} as {{ r.alias }}
  {{ streamjoin._on_and_where(l, r, on, extra_on, where) }}
{%- endmacro %}


{#-- interval_join: a regular join whose ON also bounds the right input's time against the
     left's: left.left_time + lower <= right.right_time <= left.left_time + upper, with
     `lower`/`upper` durations such as '0 hours', '4 hours', '-10 minutes'. --#}
{% macro interval_join(left, right, on, left_time, right_time, lower, upper, join_type='inner', columns=none, where=none) -%}
  {%- set l = streamjoin._join_input(left) -%}
  {%- set r = streamjoin._join_input(right) -%}
  {%- set bounds = [
      r.alias ~ '.' ~ right_time ~ ' >= ' ~ l.alias ~ '.' ~ left_time ~ ' ' ~ streamjoin._interval(lower),
      r.alias ~ '.' ~ right_time ~ ' <= ' ~ l.alias ~ '.' ~ left_time ~ ' ' ~ streamjoin._interval(upper)] -%}
{{ streamjoin.regular_join(left, right, on, join_type=join_type, columns=columns, where=where, extra_on=bounds) }}
{%- endmacro %}


{#-- temporal_join: an event-time temporal join, as Flink writes it. Each row of `left` (the probe,
     with an event_time; an update or deletion retracts what its row joined) joins the version of `right` (the versioned input: it declares
     a unique_key and an event_time) valid at the probe's `left_time`, once the watermark passes
     it; `on` must cover the versioned input's unique key. join_type 'inner' or 'left'. --#}
{% macro temporal_join(left, right, on, left_time, join_type='inner', columns=none, where=none, extra_on=[]) -%}
  {%- set l = streamjoin._join_input(left) -%}
  {%- set r = streamjoin._join_input(right) -%}
  {%- if join_type | lower not in ('inner', 'left') -%}
    {%- do exceptions.raise_compiler_error("streamjoin.temporal_join: join_type '" ~ join_type ~ "' is not 'inner' or 'left' (Flink has no other temporal joins)") -%}
  {%- endif -%}
select {{ streamjoin._select_list(columns) }}
from {{ l.relation }} as {{ l.alias }}
{{ streamjoin._join_keyword(join_type) }} {{ r.relation }} for system_time as of {{ l.alias }}.{{ left_time }} as {{ r.alias }}
  {{ streamjoin._on_and_where(l, r, on, extra_on, where) }}
{%- endmacro %}


{#-- window_join: a window join, as Flink writes it. Both inputs (append-only, each with an
     event_time) go through the same window table function — `window` 'tumble', 'hop' or
     'cumulate' over `time` (one column name, or a list of the left's and the right's), of `size`
     (a duration such as '5 minutes'), with `slide` (hop: the slide; cumulate: the step) and an
     optional `offset` (which may be negative, '-1 minute') — and join on `on` within each window,
     once the watermark passes the window's end. join_type 'inner', 'left', 'right', 'full',
     'semi' or 'anti'. `columns` may name L/R aliases' window_start, window_end and window_time. --#}
{% macro window_join(left, right, on, time, window, size, slide=none, offset=none, join_type='inner', columns=none, where=none, extra_on=[]) -%}
  {%- set l = streamjoin._join_input(left) -%}
  {%- set r = streamjoin._join_input(right) -%}
  {%- set times = [time, time] if time is string else time -%}
  {%- set bounds = [l.alias ~ '.window_start = ' ~ r.alias ~ '.window_start',
                    l.alias ~ '.window_end = ' ~ r.alias ~ '.window_end'] -%}
select {{ streamjoin._select_list(columns) }}
from {{ streamjoin._window_table(l.relation, times[0], window, size, slide, offset) }} as {{ l.alias }}
{{ streamjoin._join_keyword(join_type) }} {{ streamjoin._window_table(r.relation, times[1], window, size, slide, offset) }} as {{ r.alias }}
  {{ streamjoin._on_and_where(l, r, on, bounds + extra_on, where) }}
{%- endmacro %}


{#-- asof_join: each row of `left` with the one row of `right` of its key (`on`) nearest in time:
     `match` '>=' (the latest right row with right_time <= left_time), '>', '<=' or '<'. join_type
     'inner' (a left row without one is dropped) or 'left' (null-padded). --#}
{% macro asof_join(left, right, on, left_time, right_time, match='>=', join_type='inner', columns=none, where=none) -%}
  {%- set l = streamjoin._join_input(left) -%}
  {%- set r = streamjoin._join_input(right) -%}
  {%- if join_type | lower not in ('inner', 'left') -%}
    {%- do exceptions.raise_compiler_error("streamjoin.asof_join: join_type '" ~ join_type ~ "' is not 'inner' or 'left'") -%}
  {%- endif -%}
  {%- if match not in ('>=', '>', '<=', '<') -%}
    {%- do exceptions.raise_compiler_error("streamjoin.asof_join: match '" ~ match ~ "' is not one of >=, >, <=, <") -%}
  {%- endif -%}
select {{ streamjoin._select_list(columns) }}
from {{ l.relation }} as {{ l.alias }}
{{ 'left ' if join_type | lower == 'left' else '' }}asof join {{ r.relation }} as {{ r.alias }}
  match_condition({{ l.alias }}.{{ left_time }} {{ match }} {{ r.alias }}.{{ right_time }})
  {{ streamjoin._on_and_where(l, r, on, [], where) }}
{%- endmacro %}


{#-- multi_join: several inputs joined on one shared key, each to the first input.
     `key` is the column name every input shares, or a list with one name per input;
     `join_types` has one entry per input after the first ('inner' or 'left'). --#}
{% macro multi_join(inputs, key, join_types=none, columns=none, where=none) -%}
  {%- set items = [] -%}
  {%- for item in inputs -%}{%- do items.append(streamjoin._join_input(item)) -%}{%- endfor -%}
  {%- set keys = [key] * (items | length) if key is string else key -%}
  {%- if keys | length != items | length -%}
    {%- do exceptions.raise_compiler_error("streamjoin.multi_join: `key` lists " ~ (keys | length) ~ " columns for " ~ (items | length) ~ " inputs; give one per input or one shared name") -%}
  {%- endif -%}
  {%- set types = join_types or (['inner'] * (items | length - 1)) -%}
  {%- if types | length != items | length - 1 -%}
    {%- do exceptions.raise_compiler_error("streamjoin.multi_join: `join_types` needs " ~ (items | length - 1) ~ " entries, one per input after the first") -%}
  {%- endif -%}
  {%- set first = items[0] -%}
select {{ streamjoin._select_list(columns) }}
from {{ first.relation }} as {{ first.alias }}
{%- for item in items[1:] %}
{{ streamjoin._join_keyword(types[loop.index0]) }} {{ item.relation }} as {{ item.alias }}
  on {{ first.alias }}.{{ keys[0] }} = {{ item.alias }}.{{ keys[loop.index] }}
{%- endfor %}
{%- if where %}
where {{ where }}
{%- endif %}
{%- endmacro %}


{#-- helpers --#}

{% macro _join_input(item) -%}
  {%- if item is mapping and 'relation' in item -%}
    {%- set relation = item['relation'] -%}
    {%- set alias = item.get('alias') -%}
  {%- else -%}
    {%- set relation = item -%}
    {%- set alias = none -%}
  {%- endif -%}
  {%- if not alias -%}
    {%- set alias = relation.identifier if relation.identifier is defined else (relation | string).split('.')[-1] | replace('`', '') -%}
  {%- endif -%}
  {{ return({'relation': relation, 'alias': alias}) }}
{%- endmacro %}


{#-- The ON clause (equi-condition, then extra conditions) and the WHERE of a binary join. --#}
{% macro _on_and_where(l, r, on, extra_on, where) -%}
on {{ streamjoin._equi_condition(l.alias, r.alias, on) }}
{%- for condition in extra_on %}
  and {{ condition }}
{%- endfor %}
{%- if where %}
where {{ where }}
{%- endif %}
{%- endmacro %}

{% macro _select_list(columns) -%}
  {{ return('*' if not columns else (columns | join(',\n       '))) }}
{%- endmacro %}


{% macro _join_keyword(join_type) -%}
  {%- set kinds = {'inner': 'join', 'left': 'left join', 'right': 'right join', 'full': 'full join',
                   'semi': 'left semi join', 'anti': 'left anti join'} -%}
  {%- if join_type | lower not in kinds -%}
    {%- do exceptions.raise_compiler_error("streamjoin: join_type '" ~ join_type ~ "' is not one of " ~ (kinds.keys() | list | join(', '))) -%}
  {%- endif -%}
  {{ return(kinds[join_type | lower]) }}
{%- endmacro %}


{% macro _equi_condition(left_alias, right_alias, on) -%}
  {%- set pairs = [] -%}
  {%- for item in ([on] if on is string else on) -%}
    {%- set lc, rc = (item, item) if item is string else (item[0], item[1]) -%}
    {%- do pairs.append(left_alias ~ '.' ~ lc ~ ' = ' ~ right_alias ~ '.' ~ rc) -%}
  {%- endfor -%}
  {{ return(pairs | join(' and ')) }}
{%- endmacro %}


{#-- TABLE(TUMBLE|HOP|CUMULATE(TABLE relation, DESCRIPTOR(time), [slide,] size [, offset])) --#}
{% macro _window_table(relation, time, window, size, slide, offset) -%}
  {%- set kind = window | upper -%}
  {%- if kind not in ('TUMBLE', 'HOP', 'CUMULATE') -%}
    {%- do exceptions.raise_compiler_error("streamjoin.window_join: window '" ~ window ~ "' is not 'tumble', 'hop' or 'cumulate'") -%}
  {%- endif -%}
  {%- if (kind == 'TUMBLE') != (slide is none) -%}
    {%- do exceptions.raise_compiler_error("streamjoin.window_join: " ~ ("a tumble window takes no `slide`" if kind == 'TUMBLE' else "a " ~ window ~ " window needs `slide` (hop: the slide; cumulate: the step)")) -%}
  {%- endif -%}
  {%- set sizes = ([slide] if slide is not none else []) + [size] + ([offset] if offset is not none else []) -%}
  {%- set args = [] -%}
  {#-- a negative duration keeps its sign inside the literal (an offset may be negative, as in Flink) --#}
  {%- for duration in sizes -%}
    {%- set interval = streamjoin._interval(duration) -%}
    {%- do args.append(interval[2:] if interval[0] == '+' else interval[2:].replace("INTERVAL '", "INTERVAL '-", 1)) -%}
  {%- endfor -%}
  {{ return('table(' ~ kind | lower ~ '(table ' ~ relation ~ ', descriptor(' ~ time ~ '), ' ~ (args | join(', ')) ~ '))') }}
{%- endmacro %}


{% macro _interval(duration) -%}
  {%- set parts = (duration | string | trim).split() -%}
  {%- set amount = parts[0] -%}
  {%- set unit = parts[1] | upper -%}
  {%- set unit = unit[:-1] if unit.endswith('S') else unit -%}
  {%- set sign = '-' if amount.startswith('-') else '+' -%}
  {{ return(sign ~ " INTERVAL '" ~ amount.lstrip('+-') ~ "' " ~ unit) }}
{%- endmacro %}
