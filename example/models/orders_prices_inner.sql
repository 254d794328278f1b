{{ config(materialized='streaming_join', output_unique_key='order_id') }}
-- Each order with its product's current price; an order whose price is missing is left out.
select o.order_id, o.customer_id, o.product_id, o.qty, p.price_cents, o.qty * p.price_cents as amount_cents
from {{ source('shop', 'orders') }} as o
join {{ source('shop', 'prices') }} as p on o.product_id = p.product_id
