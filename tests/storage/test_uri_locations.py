"""Table locations given as `file://` URIs work as plain paths do, and table-data code reaches files
only through `storage.filesystem` (delta-rs and pyarrow's filesystem of the URI), never through
local file calls that an object store could not serve."""
from __future__ import annotations

import ast
from pathlib import Path

from scenario import Scenario, delete, insert

import streamjoin
from streamjoin.storage import delta_log

PACKAGE = Path(streamjoin.__file__).parent
#: Modules that touch table data: the run, its operators, storage, retention, maintenance and publishing.
TABLE_DATA = [*sorted(p for d in ("storage", "runtime", "operators") for p in (PACKAGE / d).glob("*.py")),
              PACKAGE / "retention.py", PACKAGE / "maintain.py", PACKAGE / "api.py"]
LOCAL_CALLS = {"open", "os.open", "os.makedirs", "os.mkdir", "os.listdir", "os.scandir", "os.walk", "os.remove",
               "os.unlink", "os.rmdir", "os.link", "os.rename", "os.replace", "os.stat", "Path"}


#: Local calls a function may make because it serves local paths only and says so: `create_new`'s
#: atomic create-if-absent (pyarrow has no exclusive create), refused for other URIs.
ALLOWED = {("create_new", "os.link")}


def _calls(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    allowed = {(id(node), call) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
               for node in ast.walk(f) for name, call in ALLOWED if f.name == name}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if (id(node), name) in allowed:
                continue
            if name in LOCAL_CALLS or name.startswith(("os.path.", "shutil.", "pathlib.", "glob.")):
                found.append((node.lineno, name))
    return found


def test_table_data_code_makes_no_local_file_calls():
    assert len(TABLE_DATA) > 30, TABLE_DATA
    offending = [f"{p.relative_to(PACKAGE)}:{line}: {name}" for p in TABLE_DATA
                 for line, name in _calls(ast.parse(p.read_text()))]
    assert not offending, "local file calls in table-data code (use storage.filesystem):\n" + "\n".join(offending)


def test_the_scan_finds_local_file_calls():
    found = _calls(ast.parse("import os, shutil\nopen('x')\nos.path.exists('y')\nshutil.rmtree('z')\nos.listdir('.')\n"
                             "def f():\n    os.link('a', 'b')\ndef create_new():\n    os.link('a', 'b')\n    open('c')"))
    assert sorted(found) == [(2, "open"), (3, "os.path.exists"), (4, "shutil.rmtree"), (5, "os.listdir"),
                             (7, "os.link"), (10, "open")]  # create_new's os.link alone is allowed


def test_a_file_uri_root_gives_what_a_plain_path_gives(spark, tmp_path):
    sql = "SELECT l.k, l.v, r.w FROM l FULL JOIN r ON l.k = r.k"
    inputs = {"l": [("k", "int"), ("v", "int")], "r": [("k", "int"), ("w", "int")]}
    by_uri = Scenario(spark, (tmp_path / "uri").as_uri(), sql, **inputs)
    by_path = Scenario(spark, tmp_path / "path", sql, **inputs)
    for changes in ({"l": [insert(1, 10), insert(2, 20)], "r": [insert(1, 100)]},
                    {"l": [delete(2, 20)], "r": [insert(2, 200), delete(1, 100), insert(3, 300)]}):
        by_uri.run(**changes)
        by_path.run(**changes)
        assert by_uri.changelog == by_path.changelog
    assert by_uri.result == by_path.result == {(1, 10, None): 1, (None, None, 200): 1, (None, None, 300): 1}
    assert by_uri.tables.home.startswith("file:///")
    assert delta_log.app_version(by_uri.tables.result, "streamjoin:m") == 2
