{{ config(materialized='streaming_join') }}
-- A join over another streaming_join model: its changelog is this model's input.
-- Written in dbt's style: import CTEs (a CTE that passes an input through stands for that input),
-- a CTE that joins them, a final CTE that names the columns, and `select * from final`.
with order_prices as (
    select * from {{ ref('orders_prices_inner') }}
),

customers as (
    select * from {{ source('shop', 'customers') }}
),

joined as (
    select
        order_prices.order_id,
        order_prices.amount_cents,
        customers.customer_id,
        customers.name,
        customers.tier
    from order_prices
    join customers on order_prices.customer_id = customers.customer_id
),

final as (
    select order_id, amount_cents, customer_id, name as customer_name, tier
    from joined
)

select * from final
