{{ config(materialized='streaming_join') }}
-- Stock lines (which may repeat) against orders (which may be cancelled): every pair counts.
select s.warehouse, s.product_id, s.on_hand, o.order_id, o.qty
from {{ source('shop', 'stock') }} as s
join {{ source('shop', 'orders') }} as o on s.product_id = o.product_id
