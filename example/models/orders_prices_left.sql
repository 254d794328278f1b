{{ config(materialized='streaming_join', output_unique_key='order_id', change_data_feed=true) }}
-- Every order; price is NULL until its product has one. Its result is also a Delta change data feed.
select o.order_id, o.product_id, o.qty, p.price_cents
from {{ source('shop', 'orders') }} as o
left join {{ source('shop', 'prices') }} as p on o.product_id = p.product_id
