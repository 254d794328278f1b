"""The example project's results after each batch, worked out by hand, and the readers that compare
them with what a build wrote: the dbt end-to-end test (tests/cluster, one `dbt build` per batch) and the Airflow demo
(one DAG run per batch) check their tables against the same expectations."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

_LEFT = [  # orders_prices_left: order_id, product_id, qty, price_cents
    [(1, 10, 2, 999), (2, 11, 1, 2500), (3, 12, 5, None)],
    [(2, 11, 3, 2500), (3, 12, 5, None), (4, 10, 1, 899)],  # order 1 cancelled, 2 updated, price 10 changed
    [(2, 11, 3, None), (4, 10, 1, 899), (5, 13, 2, 1200), (6, 10, 4, 899)],  # price 11 deleted: 2 padded again
]
_FULL = [  # orders_prices_full: order_id, order_product_id, price_product_id, price_cents
    [(1, 10, 10, 999), (2, 11, 11, 2500), (3, 12, None, None)],
    [(2, 11, 11, 2500), (3, 12, None, None), (4, 10, 10, 899), (None, None, 14, 350)],
    [(2, 11, None, None), (4, 10, 10, 899), (5, 13, 13, 1200), (6, 10, 10, 899), (None, None, 14, 350)],
]
_STOCK = [  # stock_orders: warehouse, product_id, on_hand, order_id, qty (a duplicated stock line twice)
    [("north", 10, 5, 1, 2), ("north", 10, 5, 1, 2), ("south", 11, 2, 2, 1)],
    [("north", 10, 5, 4, 1), ("north", 12, 7, 3, 5), ("south", 11, 2, 2, 3)],
    [("north", 10, 5, 4, 1), ("north", 10, 5, 6, 4), ("south", 13, 1, 5, 2)],
]
_STUDENTS = [  # students_scores: student_id, name, course, score
    [(1, "Ada", "art", 75), (1, "Ada", "math", 90), (2, "Bo", "math", 60), (3, "Cy", None, None)],
    [(1, "Ada", "art", 80), (1, "Ada", "math", 90), (2, "Bob", "math", 60), (3, "Cy", "math", 88), (4, "Di", None, None)],
    [(1, "Ada", "art", 80), (1, "Ada", "math", 90), (2, "Bob", None, None), (4, "Di", "math", 70)],
]
_CHAINED = [  # customer_orders (over orders_prices_inner): order_id, amount_cents, customer_id, name, tier
    [(1, 1998, 100, "Acme", "gold"), (2, 2500, 101, "Beta", "silver")],
    [(2, 7500, 101, "Beta", "silver"), (4, 899, 102, "Core", "bronze")],
    [(4, 899, 102, "Core", "bronze"), (5, 2400, 101, "Beta", "gold"), (6, 3596, 100, "Acme", "gold")],
]
_INTERVAL = [  # orders_shipped_within_4h: order_id, placed_at, shipment_id, shipped_at
    [(1, "09:00", 900, "11:00"), (2, "09:30", 901, "11:30")],
    [(1, "09:00", 900, "11:00"), (2, "09:30", 901, "11:30"), (3, "10:00", 903, "13:59"), (4, "11:00", 902, "14:30")],
    [(1, "09:00", 900, "11:00"), (2, "09:30", 901, "11:30"), (3, "10:00", 903, "13:59"), (4, "11:00", 902, "14:30"),
     (5, "12:00", 904, "16:00"), (6, "13:00", 905, "16:30")],  # shipment 907 is 6 hours after order 1
]
_MULTI = [  # order_facts: order_id, qty, payment_id, amount_cents, shipment_id
    [(1, 2, 700, 1998, 900), (2, 1, 701, 2500, 901)],
    [(2, 3, 701, 2500, 901), (4, 1, 702, 899, 902)],
    [(2, 3, 701, 2500, 901), (2, 3, 703, 5000, 901), (4, 1, 702, 899, 902), (5, 2, 704, 2400, 904)],
]
_SHIFT = [  # orders_shipped_same_shift: order_id, shipment_id, window_start (4-hour shifts)
    [],  # watermark 09:30: the 08:00-12:00 shift is open
    [],  # watermark 11:00: still open
    [(1, 900, "08:00"), (2, 901, "08:00"), (3, None, "08:00"), (4, None, "08:00")],  # watermark 13:00: it fired
]
_AT_ISSUE = [  # invoices_in_eur: invoice_id, currency, amount_cents, eur_milli (the rate valid at issue)
    [],  # watermark 09:00: every invoice waits
    [(1, "USD", 1000, 920), (2, "GBP", 500, 1170), (3, "CHF", 200, None), (5, "USD", 700, 920)],  # watermark 11:00
    [(1, "USD", 1000, 920), (2, "GBP", 500, 1170), (3, "CHF", 200, None), (4, "USD", 300, 935), (5, "USD", 700, 920),
     (6, "GBP", 100, 1180), (7, "USD", 50, 935)],  # watermark 13:00; USD's 11:15 rate arrived in time for 4 and 7
]
_NEAREST = [  # invoices_latest_rate: invoice_id, currency, amount_cents, eur_milli (the latest rate at or before)
    [(1, "USD", 1000, 920), (2, "GBP", 500, 1170), (3, "CHF", 200, None)],
    [(1, "USD", 1000, 920), (2, "GBP", 500, 1170), (3, "CHF", 200, None), (4, "USD", 300, 930), (5, "USD", 700, 920)],
    [(1, "USD", 1000, 920), (2, "GBP", 500, 1170), (3, "CHF", 200, None), (4, "USD", 300, 935), (5, "USD", 700, 920),
     (6, "GBP", 100, 1180), (7, "USD", 50, 935)],  # invoice 4 corrected: USD's 11:15 rate is nearer than 11:00's
]

#: Per model, its result after batch 1, 2 and 3 (columns in the model's output order).
EXPECTED: dict[str, list[list[tuple]]] = {
    "orders_prices_left": _LEFT, "orders_prices_full": _FULL, "stock_orders": _STOCK,
    "students_scores": _STUDENTS, "customer_orders": _CHAINED, "orders_shipped_within_4h": _INTERVAL,
    "order_facts": _MULTI, "orders_shipped_same_shift": _SHIFT, "invoices_in_eur": _AT_ISSUE,
    "invoices_latest_rate": _NEAREST,
}


def rows(path: Path, *, drop: Sequence[str] = ("_bucket",)) -> list[tuple]:
    """A Delta table's rows (latest version) as sorted tuples, timestamps as 'HH:MM'."""
    if not DeltaTable.is_deltatable(str(path)):
        return []
    table = DeltaTable(str(path)).to_pyarrow_table()
    names = [n for n in table.column_names if n not in drop]
    out = [tuple(_plain(r[n]) for n in names) for r in table.select(names).to_pylist()]
    return sorted(out, key=repr)


def _plain(value: Any) -> Any:
    if hasattr(value, "strftime"):
        return value.strftime("%H:%M")
    return value


def replayed(changelog: Sequence[tuple], through_run: int) -> list[tuple]:
    """The result a changelog (rows ending in row kind and run id, as `rows` reads them) replays to
    after run `through_run`, sorted as `rows` sorts."""
    counts: Counter = Counter()
    for *row, kind, run_id in changelog:
        if run_id <= through_run:
            counts[tuple(row)] += 1 if kind in ("+I", "+U") else -1
    assert all(n >= 0 for n in counts.values()), f"the changelog retracts rows it never added: {counts}"
    return sorted(counts.elements(), key=repr)
