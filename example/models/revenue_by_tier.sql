{{ config(materialized='view') }}
-- An ordinary SQL model reading a streaming_join result by name.
select tier, count(*) as orders, sum(amount_cents) as revenue_cents
from {{ ref('customer_orders') }}
group by tier
