"""Hildreth's algorithm (Censor & Zenios 1997) for the MIRA quadratic program.

Solves  min_w ||w - w0||^2 / 2  s.t.  a_i . w >= b_i'  (i = 1..k)  in its dual:
with the Gram matrix G_ij = a_i . a_j and b_i = b_i' - a_i . w0,

    max_alpha  sum_i alpha_i b_i - 1/2 alpha^T G alpha,   0 <= alpha_i <= C,

by coordinate ascent on the most violated KKT condition (the form used by
MSTParser); the update is then w = w0 + sum_i alpha_i a_i.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _hildreth(G, b, C, max_iter, eps):
    k = b.shape[0]
    alpha = np.zeros(k)
    F = b.copy()
    kkt = F.copy()
    for _ in range(max_iter):
        i = 0
        for j in range(1, k):
            if kkt[j] > kkt[i]:
                i = j
        if kkt[i] < eps:
            break
        gii = G[i, i]
        diff = F[i] / gii if gii > 1e-12 else 0.0
        new = alpha[i] + diff
        if new < 0.0:
            new = 0.0
        elif new > C:
            new = C
        add = new - alpha[i]
        if add == 0.0:
            kkt[i] = 0.0
            continue
        alpha[i] = new
        for j in range(k):
            F[j] -= add * G[j, i]
            if alpha[j] <= 0.0:
                kkt[j] = F[j]
            elif alpha[j] >= C:
                kkt[j] = -F[j]
            else:
                kkt[j] = abs(F[j])
        if gii <= 1e-12:
            kkt[i] = 0.0
    return alpha


def hildreth(G: np.ndarray, b: np.ndarray, C: float = np.inf, max_iter: int = 10000,
             eps: float = 1e-8) -> np.ndarray:
    """Dual variables alpha (k,) of the MIRA QP for Gram matrix G (k, k) and margins b (k,).

    O(max_iter * k). Constraints with a zero vector (G_ii = 0) get alpha_i = 0.
    """
    G = np.ascontiguousarray(G, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    if b.size == 0:
        return np.zeros(0)
    return _hildreth(G, b, float(C), int(max_iter), float(eps))
