{{ config(materialized='streaming_join') }}
-- Each invoice with the rate of its currency valid when it was issued (an event-time temporal
-- join, as Flink's FOR SYSTEM_TIME AS OF): emitted once the watermark passes the invoice's time,
-- and final from then on; null-padded when no rate was valid yet.
{{ streamjoin.temporal_join(
    left={'relation': source('shop', 'invoices'), 'alias': 'i'},
    right={'relation': source('shop', 'fx_rates'), 'alias': 'r'},
    on='currency',
    left_time='issued_at',
    join_type='left',
    columns=['i.invoice_id', 'i.currency', 'i.amount_cents', 'r.eur_milli'],
) }}
