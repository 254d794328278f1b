"""Macros and project files of the ``streamjoin`` dbt adapter."""

import os

PACKAGE_PATH = os.path.dirname(__file__)
