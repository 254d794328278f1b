{{ config(materialized='streaming_join') }}
-- Orders and prices side by side: orders without a price and prices without an order too.
select o.order_id, o.product_id as order_product_id, p.product_id as price_product_id, p.price_cents
from {{ source('shop', 'orders') }} as o
full join {{ source('shop', 'prices') }} as p on o.product_id = p.product_id
