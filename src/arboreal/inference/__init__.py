"""Tree inference: exact decoding, partition functions, marginals.

Conventions (stated once, used by every routine here):

* ``scores[h, m]`` scores the arc h -> m; h in 0..n (0 = root), m in 1..n.
  Column 0 and the diagonal are ignored. Labeled scores: ``scores[h, m, l]``.
* A tree is an int array ``heads`` of shape (n+1,) with ``heads[0] = -1``.
* ``single_root=True`` (default): exactly one word attaches to the root.
* Every routine also takes a batch: scores (B, N+1, N+1) (labeled
  (B, N+1, N+1, L)) with ``lengths=`` (B,); padding is ignored and batched
  heads carry -1 in padding.
"""
from arboreal.inference.eisner import eisner, eisner_kbest
from arboreal.inference.kbest import kbest
from arboreal.inference.mbr import mbr_decode
from arboreal.inference.mst import chu_liu_edmonds, cle_kbest
from arboreal.inference.partition import log_partition, log_partition_and_marginals, marginals

__all__ = [
    "chu_liu_edmonds",
    "cle_kbest",
    "eisner",
    "eisner_kbest",
    "kbest",
    "log_partition",
    "log_partition_and_marginals",
    "marginals",
    "mbr_decode",
]
