"""Property: after every run, the result equals Spark's batch evaluation of the same SQL over the
inputs' snapshots, and the run's changelog equals the net difference of consecutive batch results.

Random changelogs carry duplicates, NULL keys, -U/+U updates (also of the key) and deletes, cut
into random runs. The oracle is independent of the operators: it is Spark SQL over plain rows.
"""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamjoin.storage import state

from oracle import batch_result
from scenario import Scenario, compacting_at

INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}
CONDITIONS = ["l.k = r.k", "l.k <=> r.k", "l.k = r.k AND l.v > r.w", "r.k = l.k AND l.v + r.w < 4",
              "(l.k = r.k OR (l.k IS NULL AND r.k IS NULL)) AND l.v >= r.w"]
PAIR_JOINS = {
    "inner": "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l JOIN r ON {c}",
    "left": "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l LEFT JOIN r ON {c}",
    "right": "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l RIGHT JOIN r ON {c}",
    "full": "SELECT l.k AS lk, l.v, r.k AS rk, r.w FROM l FULL OUTER JOIN r ON {c}",
    "left+where": "SELECT l.k AS lk, l.v, r.w FROM l LEFT JOIN r ON {c} WHERE l.v < 3 AND (r.w IS NULL OR r.w > 0)",
}
GATED_JOINS = {
    "semi": "SELECT l.k, l.v FROM l LEFT SEMI JOIN r ON {c}",
    "anti": "SELECT l.k, l.v FROM l LEFT ANTI JOIN r ON {c}",
    "exists": "SELECT l.k, l.v FROM l WHERE EXISTS (SELECT 1 FROM r WHERE {c})",
    "not exists": "SELECT l.k, l.v FROM l WHERE NOT EXISTS (SELECT 1 FROM r WHERE {c})",
    "in": "SELECT l.k, l.v FROM l WHERE l.k IN (SELECT r.k FROM r WHERE r.w > 0)",
    "not in": "SELECT k, v FROM l WHERE k NOT IN (SELECT r.k FROM r)",
}

# Subquery forms (and derived tables in FROM), each run on every test session; NOT IN compares the
# nullable k (its NULL rule differs from EXISTS)
SUBQUERY_FORMS = {
    "correlated not in": "SELECT l.k, l.v FROM l WHERE l.k NOT IN (SELECT r.k FROM r WHERE r.w = l.v)",
    "row in": "SELECT l.k, l.v FROM l WHERE (l.k, l.v) IN (SELECT r.k, r.w FROM r)",
    "not in over its own input": "SELECT k, v FROM l WHERE k NOT IN (SELECT k FROM l WHERE v > 1)",
    "nested in": "SELECT l.k, l.v FROM l WHERE l.v IN (SELECT r.w FROM r WHERE r.k NOT IN (SELECT k FROM l WHERE v = 2))",
    "derived tables": "SELECT a.k, a.v2, b.w FROM (SELECT IF(k = 3, CAST(NULL AS INT), k) AS k, v * 2 AS v2 FROM l WHERE v > 0) a "
                      "FULL JOIN (SELECT k, w FROM r WHERE w < 3) b ON a.k = b.k",
    "common table expressions": "WITH a AS (SELECT IF(k = 3, CAST(NULL AS INT), k) AS k, v FROM l WHERE v > 0), "
                                "b AS (SELECT * FROM r), c AS (SELECT k, w * 2 AS w2 FROM b) "
                                "SELECT a.k, a.v, c.w2 FROM a LEFT JOIN c ON a.k = c.k WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.w > a.v)",
    "dbt's import, joined and final CTEs": "WITH a AS (SELECT * FROM l), b AS (SELECT * FROM r), "
                                          "joined AS (SELECT a.*, b.w, b.k AS rk FROM a LEFT JOIN b ON a.k = b.k AND b.w < 3 "
                                          "WHERE a.v > 0), "
                                          "final AS (SELECT k, v * 10 + COALESCE(w, 9) AS vw, rk FROM joined WHERE rk IS NULL OR w <> v) "
                                          "SELECT * FROM final WHERE k IS NOT NULL OR vw > 20",
    "using": "SELECT *, k * 10 AS k10 FROM l FULL JOIN r USING (k) WHERE k IS NULL OR k <> 2",
    "a joined CTE joined again": "WITH j AS (SELECT l.k, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k WHERE r.w IS NULL OR r.w < 3) "
                                 "SELECT j.k, j.v * 10 + COALESCE(j.w, 9) AS vw, r2.w AS w2 FROM j "
                                 "LEFT JOIN r AS r2 ON j.v = r2.k AND j.w IS NULL WHERE r2.w IS NULL OR r2.w <> j.v",
    "a joined CTE's unqualified columns beside a table that has them too":
        "WITH j AS (SELECT l.k, v, w FROM l JOIN r ON l.k = r.k WHERE w <> v) "
        "SELECT j.k, j.v, j.w, r2.w AS w2 FROM j LEFT JOIN r AS r2 ON j.w = r2.k",
    "a joined CTE inner-joined on the right": "WITH j AS (SELECT r1.k AS rk, w, v AS lv FROM r AS r1 JOIN l AS l1 ON r1.k = l1.k "
                                              "WHERE v > 0) "
                                              "SELECT * FROM l JOIN j ON l.v = j.w AND j.lv <> l.k WHERE j.rk IS NOT NULL OR l.v > 1",
    "a joined CTE left-joined": "WITH j AS (SELECT r1.k, r1.w, l2.v AS lv FROM r AS r1 JOIN l AS l2 ON r1.w = l2.k "
                                "WHERE l2.v > 0) "
                                "SELECT l.k, l.v, j.w, j.lv FROM l LEFT JOIN j ON l.k = j.k AND j.lv <> l.v "
                                "WHERE j.w IS NULL OR j.w < 3",
    "a joined subquery full-joined": "SELECT l.k AS lk, l.v, j.* FROM l FULL JOIN (SELECT r1.k, r1.w, l2.v AS lv FROM r r1, "
                                     "l l2 WHERE r1.w = l2.v AND r1.k IS NOT NULL) j ON l.k = j.k",
    "a joined subquery right-joined": "SELECT l.k AS lk, j.rk, j.n FROM l RIGHT JOIN (SELECT r1.k AS rk, r1.w * 2 + r2.w AS n "
                                      "FROM r r1 JOIN r r2 ON r1.k = r2.w) j ON l.v = j.rk WHERE j.n > 1 OR l.k IS NULL",
    "a CTE with a left join, left-joined": "WITH j AS (SELECT r1.k, r1.w, l2.v AS lv FROM r r1 LEFT JOIN l l2 ON r1.w = l2.k) "
                                           "SELECT l.k, l.v, j.w, j.lv FROM l LEFT JOIN j ON l.k = j.k "
                                           "WHERE j.lv IS NULL OR j.lv <> l.v",
    "a CTE with a left join and a WHERE, left-joined": "WITH j AS (SELECT r1.k, r1.w, l2.v AS lv FROM r r1 LEFT JOIN l l2 "
                                                       "ON r1.w = l2.k WHERE l2.v IS NULL OR l2.v > r1.k) "
                                                       "SELECT l.k, l.v, j.w, j.lv FROM l LEFT JOIN j ON l.k = j.k",
    "a subquery with a full join, right-joined": "SELECT l.k AS lk, j.n FROM l RIGHT JOIN (SELECT r1.k AS rk, "
                                                 "COALESCE(r2.w, -1) AS n FROM r r1 FULL JOIN r r2 ON r1.w = r2.k) j "
                                                 "ON l.v = j.rk",
    "a joined CTE first, full-joined": "WITH j AS (SELECT r1.k, r1.w, l2.v AS lv FROM r r1 JOIN l l2 ON r1.w = l2.k "
                                       "WHERE r1.k IS NOT NULL) SELECT j.k, j.w, j.lv, l.k AS lk, l.v FROM j FULL JOIN l "
                                       "ON j.k = l.k",
    "a joined subquery first, right-joined": "SELECT j.k, j.w, l.k AS lk, r3.w AS w3 FROM (SELECT r1.k, r1.w FROM r r1 "
                                             "LEFT JOIN r r2 ON r1.w = r2.k) j RIGHT JOIN l ON j.k = l.v JOIN r r3 "
                                             "ON l.k = r3.k",
    "a joined subquery semi- and anti-joined": "SELECT l.k, l.v FROM l LEFT SEMI JOIN (SELECT r1.k, r1.w + r2.w AS ww "
                                               "FROM r r1 JOIN r r2 ON r1.w = r2.k) j ON l.k = j.k AND j.ww > l.v "
                                               "LEFT ANTI JOIN (SELECT r3.w FROM r r3 JOIN l l3 ON r3.k = l3.v "
                                               "WHERE l3.k = 2) x ON l.v = x.w",
    "two joined subqueries left-joined, one without an equality": "SELECT l.k, j.w, x.w2 FROM l LEFT JOIN (SELECT r1.k, r1.w "
                                                                  "FROM r r1 JOIN l l2 ON r1.w < l2.v) j ON l.k = j.k LEFT JOIN "
                                                                  "(SELECT r3.k AS k3, r4.w AS w2 FROM r r3 JOIN r r4 "
                                                                  "ON r3.w = r4.k) x ON x.k3 = j.w",
    "in over a joined subquery": "SELECT l.k, l.v FROM l WHERE l.v IN (SELECT r1.w FROM r r1 JOIN l l2 ON r1.k = l2.k "
                                 "WHERE l2.v > 0)",
    "correlated not exists over a joined subquery": "SELECT l.k, l.v FROM l WHERE NOT EXISTS (SELECT 1 FROM r r1, r r2 "
                                                    "WHERE r1.w = r2.k AND r1.k = l.k AND r2.w <> l.v)",
    "not in over a joined subquery": "SELECT l.k, l.v FROM l WHERE l.v NOT IN (SELECT r1.w FROM r r1 JOIN r r2 "
                                     "ON r1.k = r2.w)",
    "a parenthesized join left-joined": "SELECT l.k, l.v, r1.w, r2.w AS w2 FROM l LEFT JOIN (r AS r1 JOIN r AS r2 "
                                        "ON r1.w = r2.k) ON l.k = r1.k AND r2.w <> l.v",
}

keys = st.sampled_from([None, 1, 2, 3])
values = st.integers(0, 3)


@st.composite
def changelog_runs(draw, runs: int = 3, rows: dict[str, st.SearchStrategy] | None = None):
    """Per run and input, a list of changes that only ever retract live rows; a third of them insert
    only (a side whose run only adds rows joins its stored fragments unsummed). `rows` draws an input's
    new rows (tuples; the first column is its key, which an update keeps half the time); by default
    `INPUTS`' (key, value) rows."""
    rows = rows or {name: st.tuples(keys, values) for name in ("l", "r")}
    live: dict[str, list[list]] = {"l": [], "r": []}
    out = []
    for _ in range(runs):
        run = {}
        for name in ("l", "r"):
            changes = []
            inserts_only = draw(st.integers(0, 2)) == 0
            for _ in range(draw(st.integers(0, 5))):
                held = live[name]
                mixed = held and not inserts_only
                op = draw(st.sampled_from(["insert", "insert", "delete", "update"]) if mixed else st.just("insert"))
                if op == "insert":
                    row = draw(st.sampled_from(held)) if held and draw(st.booleans()) else list(draw(rows[name]))
                    held.append(list(row))
                    changes.append(("+I", list(row)))
                else:
                    old = held.pop(draw(st.integers(0, len(held) - 1)))
                    if op == "delete":
                        changes.append(("-D", old))
                    else:
                        new = list(draw(rows[name]))
                        new[0] = old[0] if draw(st.booleans()) else new[0]
                        held.append(new)
                        changes += [("-U", old), ("+U", new)]
            if changes:
                run[name] = changes
        out.append(run)
    return out


# State compaction thresholds (files per bucket, level-0 files): the defaults, which three runs
# never reach, and small ones under which runs fold level 0 into buckets and compact buckets (at 3
# files a compaction may merge a bucket's two small files and keep its large one).
DEFAULT_COMPACTION = (state.COMPACT_AT, state.LEVEL0_FILES)
COMPACTION = st.sampled_from([DEFAULT_COMPACTION, (1, 1), (2, 1), (3, 1)])


def check_against_batch(spark, tmp_path, sql: str, runs: list[dict],
                        compaction: tuple[int, int] = DEFAULT_COMPACTION) -> None:
    with compacting_at(*compaction):
        model = Scenario(spark, tmp_path, sql, **INPUTS)
        seen: dict[str, list] = {"l": [], "r": []}
        before: Counter = Counter()
        for i, run in enumerate(runs):
            model.run(**run)
            for name, changes in run.items():
                seen[name] += changes
            after = batch_result(spark, sql, INPUTS, seen)
            assert model.result == after, f"run {i}: result differs from batch for {sql}"
            expected_change = Counter(after)
            expected_change.subtract(before)
            assert model.changelog == Counter({k: v for k, v in expected_change.items() if v}), f"run {i}: changelog"
            before = after


PROPERTY = settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)


@PROPERTY
@given(join=st.sampled_from(sorted(PAIR_JOINS)), cond=st.sampled_from(CONDITIONS), runs=changelog_runs(),
       compaction=COMPACTION)
def test_inner_and_outer_joins_match_batch(spark, tmp_path_factory, join, cond, runs, compaction):
    check_against_batch(spark, tmp_path_factory.mktemp("p"), PAIR_JOINS[join].format(c=cond), runs, compaction)


@PROPERTY
@given(join=st.sampled_from(sorted(GATED_JOINS)), cond=st.sampled_from(CONDITIONS), runs=changelog_runs(),
       compaction=COMPACTION)
def test_semi_anti_and_in_subqueries_match_batch(spark, tmp_path_factory, join, cond, runs, compaction):
    check_against_batch(spark, tmp_path_factory.mktemp("p"), GATED_JOINS[join].format(c=cond), runs, compaction)


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
@given(runs=changelog_runs())
def _subquery_form_matches_batch(spark, tmp_path_factory, form, runs):
    check_against_batch(spark, tmp_path_factory.mktemp("p"), SUBQUERY_FORMS[form], runs)


@pytest.mark.parametrize("form", sorted(SUBQUERY_FORMS))
def test_subquery_forms_match_batch(spark, tmp_path_factory, form):
    _subquery_form_matches_batch(spark, tmp_path_factory, form)


# A side whose run only inserts joins its stored fragments unsummed: here they hold a row inserted
# twice, and one inserted and deleted before (fragments that sum to nothing), under both join sides.
APPEND_ONLY_HISTORY = [
    {"l": [("+I", [1, 1]), ("+I", [1, 1]), ("+I", [2, 0])], "r": [("+I", [2, 3])]},
    {"l": [("-D", [2, 0]), ("-D", [1, 1])], "r": [("+I", [3, 1]), ("-D", [2, 3])]},
    {"l": [("+I", [3, 2]), ("+I", [None, 1])], "r": [("+I", [1, 0]), ("+I", [2, 3]), ("+I", [1, 0])]},
    {"l": [("+I", [2, 0])], "r": [("+I", [3, 1])]},
]


@pytest.mark.parametrize("join", ["inner", "left", "right"])
def test_insert_only_runs_match_batch(spark, tmp_path, join):
    check_against_batch(spark, tmp_path, PAIR_JOINS[join].format(c="l.k = r.k"), APPEND_ONLY_HISTORY)
