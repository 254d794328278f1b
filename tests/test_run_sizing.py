"""A run sizes its plans from the bytes it reads: shuffle partitions, and whether its stages and
expressions compile to Java (whole-stage and expression codegen cost more than they save on a run of a
few rows). The sizes hold for the run's write pass only: the session's own settings are back after it."""
from __future__ import annotations

import pytest
from scenario import Scenario, delete, insert

from streamjoin.runtime import sizing
from streamjoin.storage import writes

SQL = "SELECT l.k, l.v, r.w FROM l LEFT JOIN r ON l.k = r.k"
INPUTS = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}
CODEGEN = "spark.sql.codegen.wholeStage"
FACTORY = "spark.sql.codegen.factoryMode"


def test_shuffles_and_codegen_grow_with_the_bytes_read():
    mb = sizing.MIN_BYTES
    assert [sizing.shuffle_partitions(n, 2) for n in (10_000, mb, 5 * mb, 10 * sizing.TARGET_BYTES)] == [1, 1, 2, 10]
    # compiled once the changes, or all the run reads, are large enough (changes, bytes read)
    change, read = sizing.CODEGEN_MIN_CHANGE_BYTES, sizing.CODEGEN_MIN_BYTES
    assert [sizing.compiled_to_java(c, r) for c, r in ((0, 0), (10_000, 10_000), (10_000, read - 1), (10_000, read),
                                                       (change - 1, change - 1), (change, change))] == \
        [False, False, False, True, False, True]


def runs(spark, tmp_path) -> tuple[dict, list[tuple[str, str]]]:
    """A left join's result over three runs with retractions, and the codegen settings of each write pass."""
    seen: list[tuple[str, str]] = []
    original = writes.RunWriter.run

    def recording(self):
        seen.append((spark.conf.get(CODEGEN), spark.conf.get(FACTORY)))
        return original(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writes.RunWriter, "run", recording)
        m = Scenario(spark, tmp_path, SQL, **INPUTS)
        m.run(l=[insert(1, 10), insert(2, 20), insert(None, 5)], r=[insert(1, 100), insert(1, 100)])
        m.run(l=[delete(1, 10), insert(3, 30)], r=[insert(2, 200), delete(1, 100)])
        m.run(l=[insert(1, 11)], r=[delete(2, 200), insert(3, 300)])
    return m.result, seen


@pytest.mark.parametrize("user_setting", ["true", "false"])
def test_a_small_run_writes_interpreted_a_large_one_compiled_with_the_same_result(spark, tmp_path, monkeypatch,
                                                                                   user_setting):
    spark.conf.set(CODEGEN, user_setting)
    spark.conf.set(FACTORY, "CODEGEN_ONLY")
    try:
        small, small_settings = runs(spark, tmp_path / "small")
        monkeypatch.setattr(sizing, "CODEGEN_MIN_BYTES", 0)  # every run counts as large
        large, large_settings = runs(spark, tmp_path / "large")
        # the session's settings are back after each run
        assert (spark.conf.get(CODEGEN), spark.conf.get(FACTORY)) == (user_setting, "CODEGEN_ONLY")
    finally:
        spark.conf.unset(CODEGEN)
        spark.conf.unset(FACTORY)
    assert small_settings == [("false", "NO_CODEGEN")] * 3 and large_settings == [("true", "FALLBACK")] * 3
    assert small == large == {(2, 20, None): 1, (None, 5, None): 1, (3, 30, 300): 1, (1, 11, 100): 1}
