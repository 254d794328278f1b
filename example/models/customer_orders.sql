{{ config(materialized='streaming_join') }}
-- A join over another streaming_join model: its changelog is this model's input.
select op.order_id, op.amount_cents, c.customer_id, c.name as customer_name, c.tier
from {{ ref('orders_prices_inner') }} as op
join {{ source('shop', 'customers') }} as c on op.customer_id = c.customer_id
