{{ config(materialized='streaming_join') }}
-- Orders shipped within four hours of being placed (an interval join on event time).
{{ streamjoin.interval_join(
    left={'relation': source('shop', 'order_placements'), 'alias': 'o'},
    right={'relation': source('shop', 'shipments'), 'alias': 's'},
    on='order_id',
    left_time='placed_at',
    right_time='shipped_at',
    lower='0 hours',
    upper='4 hours',
    columns=['o.order_id', 'o.placed_at', 's.shipment_id', 's.shipped_at'],
) }}
