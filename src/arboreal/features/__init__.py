"""Feature engines: token codes computed once per sentence, arc features by hashing.

See :mod:`arboreal.features.first_order` for the first-order feature set and
:mod:`arboreal.features.hashing` for the template kernel.
"""
from arboreal.features.first_order import EncodedSentence, FeatureSet, TEMPLATE_SETS

__all__ = ["EncodedSentence", "FeatureSet", "TEMPLATE_SETS"]
