{{ config(materialized='streaming_join') }}
-- A join over another streaming_join model: its changelog is this model's input.
-- Written in dbt's import-CTE style: a CTE that passes an input through stands for that input.
with order_prices as (
    select * from {{ ref('orders_prices_inner') }}
),

customers as (
    select * from {{ source('shop', 'customers') }}
)

select op.order_id, op.amount_cents, c.customer_id, c.name as customer_name, c.tier
from order_prices as op
join customers as c on op.customer_id = c.customer_id
