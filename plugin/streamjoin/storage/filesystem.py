"""Every file operation on table data, for any table location: a plain path, a `file://` URI or
an object store (`s3://`, `gs://`, `abfss://`, ...), through pyarrow's filesystem for that URI.

Tables are Delta tables, so most operations go through delta-rs; what remains (the JSON log of a
version, a small bookkeeping file, a model's folders and markers) goes through here, never
through `os`, `open` or `shutil`, so the driver works on an object store as on a local disk.

Credentials and endpoints are *storage options*, delta-rs's names for them (`AWS_ENDPOINT_URL`,
`AWS_ACCESS_KEY_ID`, `AWS_REGION`, `AWS_ALLOW_HTTP`, `conditional_put`, ...). They are registered
per location prefix (`register`) by whoever knows them (a profile, an input declaration), looked up
for each URI (`options_for`), and travel with the work to the executors (`filesystem` takes them
explicitly). Unregistered locations use the environment, as both delta-rs and pyarrow do.

>>> join("s3://lake/models", "m", "state")
's3://lake/models/m/state'
>>> relative("file:///data/t/data/f.parquet", "file:///data/t")
'data/f.parquet'
"""
from __future__ import annotations

import os
import posixpath
import uuid
from typing import Mapping
from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs

#: Storage options per location prefix (see `register`).
_OPTIONS: dict[str, dict[str, str]] = {}


def register(prefix: str, options: Mapping[str, str] | None) -> None:
    """Use `options` for every location under `prefix` (the longest registered prefix wins)."""
    if options:
        _OPTIONS[prefix.rstrip("/")] = {str(k): str(v) for k, v in options.items()}


def options_for(uri: str) -> dict[str, str]:
    """The storage options registered for the location `uri` is in (empty: use the environment)."""
    best = max((p for p in _OPTIONS if uri == p or uri.startswith(p + "/")), key=len, default=None)
    return dict(_OPTIONS[best]) if best is not None else {}


def is_local(uri: str) -> bool:
    """True for a plain path or a `file:` URI."""
    return "://" not in uri or uri.startswith("file:")


def local_path(uri: str) -> str:
    """The path of a plain path or `file:` URI on this machine's filesystem (other URIs unchanged)."""
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def join(uri: str, *parts: str) -> str:
    """`uri` with path parts appended (with `/`, for paths and URIs alike)."""
    return posixpath.join(uri, *parts)


def relative(uri: str, root: str) -> str:
    """The path of `uri` relative to `root` (both as a table's files and root name them)."""
    path, base = local_path(uri), local_path(root).rstrip("/")
    if not path.startswith(base + "/"):
        raise ValueError(f"{uri} is not under {root}")
    return path[len(base) + 1:]


def filesystem(uri: str, options: Mapping[str, str] | None = None) -> tuple[pafs.FileSystem, str]:
    """pyarrow's filesystem for `uri` and the path on it; `options` as `options_for` gives them
    (executors get them passed, since the registry lives on the driver)."""
    if is_local(uri):
        return pafs.LocalFileSystem(), local_path(uri)
    parsed = urlparse(uri)
    opts = {k.lower(): v for k, v in (options if options is not None else options_for(uri)).items()}
    if parsed.scheme in ("s3", "s3a") and opts:
        endpoint = opts.get("aws_endpoint_url") or opts.get("aws_endpoint") or opts.get("endpoint")
        scheme = "https"
        if endpoint and "://" in endpoint:
            scheme, endpoint = endpoint.split("://", 1)
        fs = pafs.S3FileSystem(access_key=opts.get("aws_access_key_id"), secret_key=opts.get("aws_secret_access_key"),
                               session_token=opts.get("aws_session_token"),
                               region=opts.get("aws_region") or opts.get("region"),
                               endpoint_override=endpoint, scheme=scheme)
        return fs, f"{parsed.netloc}{parsed.path}".rstrip("/")
    return pafs.FileSystem.from_uri(uri)


def exists(uri: str) -> bool:
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def is_dir(uri: str) -> bool:
    """True for a folder (on an object store: a prefix that holds objects)."""
    fs, path = filesystem(uri)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        return True
    return not is_local(uri) and bool(fs.get_file_info(pafs.FileSelector(path, allow_not_found=True)))


def list_names(uri: str) -> list[str]:
    """The names of the entries of a folder, sorted (none when it does not exist)."""
    fs, path = filesystem(uri)
    entries = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(posixpath.basename(e.path.rstrip("/")) for e in entries)


def read_bytes(uri: str) -> bytes:
    fs, path = filesystem(uri)
    with fs.open_input_stream(path) as stream:
        return stream.read()


def write_bytes(uri: str, data: bytes) -> None:
    """Write a whole file (its folder is created if needed)."""
    fs, path = filesystem(uri)
    fs.create_dir(posixpath.dirname(path), recursive=True)
    with fs.open_output_stream(path) as out:
        out.write(data)


#: The storage option by which a user states that one writer at a time writes the tables of a
#: location, as delta-rs's own S3 writer takes it when no lock or conditional put guards commits.
SINGLE_WRITER_OPTION = "AWS_S3_ALLOW_UNSAFE_RENAME"


def can_create_new(uri: str) -> bool:
    """Whether `create_new` works at `uri`: on a filesystem with atomic create-if-absent (a local or
    mounted path); on an object store, whose conditional put pyarrow does not offer, only where its
    storage options state a single writer (`SINGLE_WRITER_OPTION`)."""
    options = {k.upper(): v for k, v in options_for(uri).items()}
    return is_local(uri) or options.get(SINGLE_WRITER_OPTION, "").lower() == "true"


def create_new(uri: str, data: bytes) -> bool:
    """Write a whole file only if none exists at `uri`; False when one exists. Atomic on a filesystem
    (a temporary file hard-linked into place, as Delta writers commit there); on an object store
    with a single writer, a check then a put. Only where `can_create_new`."""
    if not can_create_new(uri):
        raise ValueError(f"{uri}: no atomic create-if-absent on this storage")
    if not is_local(uri):
        if exists(uri):
            return False
        write_bytes(uri, data)
        return True
    path = local_path(uri)
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    write_bytes(temporary, data)
    try:
        os.link(temporary, path)  # the one local call here: pyarrow has no exclusive create or link
        return True
    except FileExistsError:
        return False
    finally:
        delete_file(temporary)


def copy(source: str, target: str) -> None:
    """Copy a file within one filesystem (its folder is created if needed): the filesystem copies
    it (a local copy, an object store's server-side copy), no bytes pass through this process."""
    fs, src = filesystem(source)
    _, dst = filesystem(target)
    fs.create_dir(posixpath.dirname(dst), recursive=True)
    fs.copy_file(src, dst)


def size(uri: str) -> int:
    fs, path = filesystem(uri)
    return fs.get_file_info(path).size


def make_dirs(uri: str) -> None:
    """Create a folder and its parents (on an object store, an empty marker object)."""
    fs, path = filesystem(uri)
    fs.create_dir(path, recursive=True)


def delete_file(uri: str) -> None:
    """Delete a file; one already gone is fine."""
    fs, path = filesystem(uri)
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass


def delete_dir(uri: str) -> None:
    """Delete a folder and everything under it; one already gone is fine."""
    fs, path = filesystem(uri)
    try:
        fs.delete_dir(path)
    except FileNotFoundError:
        pass
