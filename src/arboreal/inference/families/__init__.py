"""Tree families beyond the built-in two, one module each.

Every module here is imported on the first use of the family registry
(:func:`arboreal.inference.structure.family_names`, ``tree_structure``): a module that
defines a :class:`~arboreal.inference.structure.TreeStructure` subclass decorated with
:func:`~arboreal.inference.structure.register_family` makes ``arboreal train --decoder
NAME`` and model files of that name work, with nothing edited elsewhere.
:mod:`~arboreal.inference.families.vine` is the worked example.
"""
