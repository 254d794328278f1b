{{ config(materialized='streaming_join', join_strategy='multi') }}
-- Orders with their payments and shipments: three inputs on one key, one multi-way join.
{{ streamjoin.multi_join(
    inputs=[
        {'relation': source('shop', 'orders'), 'alias': 'o'},
        {'relation': source('shop', 'payments'), 'alias': 'p'},
        {'relation': source('shop', 'shipments'), 'alias': 's'},
    ],
    key='order_id',
    join_types=['inner', 'left'],
    columns=['o.order_id', 'o.qty', 'p.payment_id', 'p.amount_cents', 's.shipment_id'],
) }}
