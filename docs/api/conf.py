"""Sphinx configuration for the dmftsolve API reference (built from the docstrings).

Build (warnings are errors, as in CI and ``tests/test_api_docs.py``)::

    python3 -m pip install ".[docs]"
    python3 -m sphinx -W --keep-going -b html docs/api build/apidocs

Every page documents whole modules with ``automodule :members:``, so a name added
to a module's ``__all__`` appears without editing these pages; the package
``__init__`` files re-export those names lazily and are documented without members
(each object is documented once, under the module that defines it).
"""

from __future__ import annotations

import os
import sys

# Document the checkout this file lives in, even if another copy is installed.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

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
]

root_doc = "index"
exclude_patterns = ["_build"]
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
