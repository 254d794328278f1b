"""The Parquet files a run's write pass writes: text kept in dictionaries, numbers and times plain."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from streamjoin.storage.parquet_files import open_file, report
from streamjoin.storage.write_specs import TargetSpec


def test_a_written_file_keeps_dictionaries_for_its_text_and_binary_columns_alone(tmp_path):
    spec = TargetSpec(root=str(tmp_path), folder="data", wide=(), names=(), partition_by=(), partition=())
    rows = pa.table({"id": pa.array([1, 2, 1] * 100, pa.int64()), "name": ["a", "b", None] * 100,
                     "at": pa.array([1, 2, 3] * 100, pa.timestamp("us", tz="UTC")), "raw": [b"x", b"y", b"x"] * 100})
    written = open_file(spec, {}, rows.schema, task=0)
    written.writer.write_table(rows)
    (row,) = report([(0, written)], {}, []).to_pylist()
    stored = pq.ParquetFile(tmp_path / row["path"])
    assert stored.read().equals(rows)
    chunks = stored.metadata.row_group(0)
    dictionary = {chunks.column(i).path_in_schema: chunks.column(i).has_dictionary_page
                  for i in range(chunks.num_columns)}
    assert dictionary == {"id": False, "name": True, "at": False, "raw": True}
