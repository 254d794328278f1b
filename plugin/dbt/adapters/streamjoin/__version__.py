"""Adapter version, as dbt's adapter factory reads it: the ``streamjoin`` distribution's."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

try:
    version = _distribution_version("streamjoin")
except PackageNotFoundError:  # running from a source tree that was never installed
    version = "0.0.0"
