{{ config(materialized='streaming_join') }}
-- Every student with each of their scores, or one row with NULLs while they have none.
{{ streamjoin.regular_join(
    left={'relation': source('school', 'students'), 'alias': 'st'},
    right={'relation': source('school', 'scores'), 'alias': 'sc'},
    on='student_id',
    join_type='left',
    columns=['st.student_id', 'st.name', 'sc.course', 'sc.score'],
) }}
