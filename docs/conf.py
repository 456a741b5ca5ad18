"""Sphinx settings for mapwithstate's documentation: Markdown pages (MyST) and the API reference
generated from the package's docstrings. Built by ``dev/build-docs`` (warnings are errors)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "python"))

project = "mapwithstate"
author = "the mapwithstate developers"
extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "recipes/*.py"]
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "description"
html_theme = "alabaster"
html_title = "mapwithstate"
