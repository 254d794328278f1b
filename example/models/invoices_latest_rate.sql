{{ config(materialized='streaming_join', output_unique_key='invoice_id') }}
-- Each invoice with the latest rate of its currency at or before its time (an ASOF join):
-- emitted at once, and updated (-U/+U) when a rate arrives that is nearer to the invoice.
{{ streamjoin.asof_join(
    left={'relation': source('shop', 'invoices'), 'alias': 'i'},
    right={'relation': source('shop', 'fx_rates'), 'alias': 'r'},
    on='currency',
    left_time='issued_at',
    right_time='valid_from',
    join_type='left',
    columns=['i.invoice_id', 'i.currency', 'i.amount_cents', 'r.eur_milli'],
) }}
