"""Dependency-tree utilities: well-formedness, roots, projectivity (projectivization, which
decodes, is :mod:`arboreal.inference.projective`).

See :mod:`arboreal.trees.properties` for the definitions used.
"""
from arboreal.trees.properties import (
    is_projective,
    is_tree,
    nonprojective_arcs,
    nonprojective_mask,
    root_count,
    tree_properties,
)

__all__ = [
    "is_projective",
    "is_tree",
    "nonprojective_arcs",
    "nonprojective_mask",
    "root_count",
    "tree_properties",
]
