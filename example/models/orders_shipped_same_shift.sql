{{ config(materialized='streaming_join') }}
-- Orders placed in each 4-hour shift, with the shipments of the same shift (a tumbling window
-- join): a shift's rows are emitted once the watermark passes its end; an order shipped in a
-- later shift is null-padded.
{{ streamjoin.window_join(
    left={'relation': source('shop', 'order_placements'), 'alias': 'o'},
    right={'relation': source('shop', 'shipments'), 'alias': 's'},
    on='order_id',
    time=['placed_at', 'shipped_at'],
    window='tumble',
    size='4 hours',
    join_type='left',
    columns=['o.order_id', 's.shipment_id', 'o.window_start'],
) }}
