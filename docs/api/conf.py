"""Sphinx configuration of the dmftsolve site: the Markdown guides and the API reference.

Build from the repository's root, with this directory as the configuration
(warnings are errors, as in CI and ``tests/test_api_docs.py``)::

    python3 -m pip install ".[docs]"
    python3 -m sphinx -W --keep-going -b html -c docs/api . build/apidocs

The source directory is the repository's root, so that the guides (``README.md``
and ``docs/*.md``, read by ``myst-parser``) are rendered where they live: their
links to each other and their figures under ``validation/`` resolve as they do on
GitHub. Only the files of :data:`include_patterns` are read. A link to a file
that is not a page (a script, a JSON file) is kept as a link to the repository
path and not checked (``myst.xref_missing`` is not reported).

Every page of the API reference documents whole modules with ``automodule :members:``, so a name added
to a module's ``__all__`` appears without editing these pages; the package
``__init__`` files re-export those names lazily and are documented without members
(each object is documented once, under the module that defines it).
"""

from __future__ import annotations

import os
import sys

# Document the checkout this file lives in, even if another copy is installed.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

import dmftsolve  # noqa: E402

project = "dmftsolve"
author = "the dmftsolve authors"
copyright = "the dmftsolve authors, MIT licence"
release = dmftsolve.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
]

#: The guides (Markdown, paths from the repository's root) and the API pages.
GUIDES = ["README.md", "docs/tutorial.md", "docs/cli.md", "docs/tips.md", "docs/theory.md",
          "docs/findings.md", "docs/results.md", "docs/accuracy.md", "docs/figures.md",
          "docs/bad_inputs.md", "docs/investigations.md"]
include_patterns = [*GUIDES, "docs/api/*.rst", "validation/README.md", "validation/*/README.md"]
exclude_patterns = ["build", "_build", "**/.*"]
root_doc = "docs/api/index"
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}

# myst: "#section" links to headings of levels 1-4; "$" is text, not math (the guides write
# formulas in Unicode and code spans).
myst_heading_anchors = 4
suppress_warnings: list[str] = []
templates_path: list[str] = []
html_static_path: list[str] = []
html_theme = "alabaster"
html_title = f"dmftsolve {release} API reference"

# autodoc: members in source order; a module's __all__ decides what it documents.
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}
# Signatures show the seed alias by name, not its expansion (modules use postponed annotations).
autodoc_type_aliases = {"SeedLike": "dmftsolve.seeds.SeedLike"}
python_use_unqualified_type_names = True  # "SeedLike", "Problem" in signatures (still links)

# autosummary: the overview tables only (no stub pages are generated).
autosummary_generate = False

# numpydoc: autodoc already documents the members, so no member tables under each class.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = False


def _drop_uninformative_bases(app, name, obj, options, bases):
    """Show only informative base classes: not ``object``, not private mixins (``_Frozen``)."""
    bases[:] = [b for b in bases if b is not object and not b.__name__.startswith("_")]


def _resolve_short_name(app, env, node, contnode):
    """Resolve a short cross-reference (``:class:`SolverError``` in a module that imports it)
    to the one dmftsolve object whose full name ends with it.

    Sphinx looks a short name up only in the current module and class; docstrings name
    objects the way the code imports them. Ambiguous names, and bare attribute or method
    names, stay unresolved (rendered as code, without a link).
    """
    from sphinx.util.nodes import make_refnode

    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].removesuffix("()").lstrip(".~")
    if "." not in target and node["reftype"] in ("attr", "meth"):
        return None  # a bare member name means the referring class's own member: no guessing
    domain = env.get_domain("py")
    objtypes = domain.objtypes_for_role(node["reftype"]) or list(domain.object_types)
    found = [name for name, entry in domain.objects.items()
             if name.startswith("dmftsolve.") and name.endswith("." + target)
             and entry.objtype in objtypes and not entry.aliased]
    if len(found) > 1:  # prefer the objects nearest the referring module
        here = (node.get("py:module") or "").split(".")
        depth = {name: next((i for i, (a, b) in enumerate(zip(name.split("."), here, strict=False))
                             if a != b), len(here)) for name in found}
        best = max(depth.values())
        found = [name for name in found if depth[name] == best]
    if len(found) != 1:
        return None
    entry = domain.objects[found[0]]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, found[0])


def setup(app):
    app.connect("autodoc-process-bases", _drop_uninformative_bases)
    app.connect("missing-reference", _resolve_short_name)
