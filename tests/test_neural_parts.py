"""Second-order neural parts: potentials, their loss against brute-force enumeration and
finite differences, the triaffine scorer's layout, and `arboreal train --scorer neural
--order 2` end to end."""
from __future__ import annotations

import numpy as np
import pytest

from arboreal.inference.potentials import Potentials, tree_parts
from arboreal.inference.structure import tree_structure
from test_higher_order_decoders import projective_trees, reference_scores
from test_higher_order_decoders import tree_parts as reference_parts

torch = pytest.importorskip("torch")

from arboreal.learn.tree_loss import parts_tree_loss  # noqa: E402

KINDS = {"sib": ("arc", "sib"), "grand": ("arc", "grand"), "sib+grand": ("arc", "sib", "grand")}


def random_potentials(rng, n, kinds, scale=1.0) -> dict:
    N = n + 1
    return {k: rng.normal(0.0, scale, (N, N) if k == "arc" else (N, N, N)) for k in kinds}


def test_tree_parts_are_the_reference_parts():
    for n in range(1, 6):
        for single_root in (True, False):
            for heads in projective_trees(n, single_root):
                sib, grand = tree_parts(heads)
                ref = reference_parts(list(heads))
                assert sorted(map(tuple, sib.tolist())) == sorted(ref["sib"])
                assert sorted(map(tuple, grand.tolist())) == sorted(ref["grand"])


@pytest.mark.parametrize("name", list(KINDS))
def test_tree_score_and_decoding_match_brute_force(name):
    rng = np.random.default_rng(3)
    structure = tree_structure("eisner", True)
    for n in range(1, 6):
        t = random_potentials(rng, n, KINDS[name], scale=2.0)
        trees, scores = reference_scores(n, True, t)
        p = Potentials(t["arc"], t.get("sib"), t.get("grand"))
        np.testing.assert_allclose([p.tree_score(h) for h in trees], scores, atol=1e-9)
        best = structure.decode_parts(p)
        assert p.tree_score(best) == pytest.approx(scores.max(), abs=1e-9)


def brute_loss_and_gradient(t: dict, gold: np.ndarray, allowed=None):
    """(log Z - score(gold), d/d scores) by enumerating every projective tree (that uses
    only ``allowed`` arcs) with torch's autograd."""
    n = len(gold) - 1
    trees = projective_trees(n, True)
    if allowed is not None:
        trees = trees[allowed[trees[:, 1:], np.arange(1, n + 1)].all(axis=1)]
    leaves = {k: torch.tensor(v, requires_grad=True) for k, v in t.items()}

    def score(heads):
        parts = reference_parts(list(heads))
        total = sum(leaves["arc"][h, m] for h, m in parts["arc"])
        for k in ("sib", "grand"):
            if k in leaves:
                total = total + sum((leaves[k][i] for i in parts[k]), torch.tensor(0.0,
                                    dtype=torch.float64))
        return total

    loss = torch.logsumexp(torch.stack([score(h) for h in trees]), 0) - score(gold)
    loss.backward()
    return float(loss.detach()), {k: np.zeros(v.shape) if v.grad is None else v.grad.numpy()
                                  for k, v in leaves.items()}


def batch_of(items: list[dict], golds: list[np.ndarray]):
    """Padded tensors (B, N+1, ...) and heads (B, N+1) of several sentences."""
    N = max(len(g) for g in golds)
    out = {}
    for k in items[0]:
        shape = (len(items),) + (N,) * items[0][k].ndim
        a = np.zeros(shape)
        for b, t in enumerate(items):
            a[(b,) + tuple(slice(0, s) for s in t[k].shape)] = t[k]
        out[k] = torch.tensor(a, requires_grad=True)
    heads = np.full((len(golds), N), -1, dtype=np.int64)
    for b, g in enumerate(golds):
        heads[b, : len(g)] = g
    return out, heads, np.array([len(g) - 1 for g in golds])


@pytest.mark.parametrize("name", list(KINDS))
@pytest.mark.parametrize("prune", [False, True])
def test_parts_loss_and_gradient_match_brute_force(name, prune):
    """A padded batch of sentences of 1-5 words: the loss is log Z - score(gold) over the
    projective trees (those the pruning keeps, with prune), and its gradient that of
    brute-force enumeration; padding gets no gradient."""
    rng = np.random.default_rng(11)
    structure = tree_structure("eisner", True)
    items, golds = [], []
    for n in (5, 3, 1, 4):
        items.append(random_potentials(rng, n, KINDS[name], scale=3.0))
        trees = projective_trees(n, True)
        golds.append(trees[rng.integers(len(trees))])
    tensors, heads, lengths = batch_of(items, golds)
    parts = {k: v for k, v in tensors.items() if k != "arc"}
    loss = parts_tree_loss(tensors["arc"], parts, heads, lengths, structure, prune=prune)
    loss.backward()
    total, pruned = 0.0, 0
    for b, (t, g) in enumerate(zip(items, golds)):
        n = len(g) - 1
        allowed = None
        if prune:
            mu = structure.marginals(t["arc"])
            allowed = structure.prune(mu, keep=g)
            pruned += n * n - int(allowed.sum())
        ref_loss, ref_grad = brute_loss_and_gradient(t, g, allowed)
        total += ref_loss
        for k, v in tensors.items():
            got = v.grad.numpy()[b]
            inside = tuple(slice(0, n + 1) for _ in range(got.ndim))
            np.testing.assert_allclose(got[inside], ref_grad[k], atol=1e-8)
            rest = got.copy()
            rest[inside] = 0.0
            assert not rest.any()
    assert float(loss.detach()) == pytest.approx(total, abs=1e-8)
    assert pruned > 0 if prune else pruned == 0


def test_parts_loss_gradient_matches_finite_differences():
    rng = np.random.default_rng(5)
    structure = tree_structure("eisner", False)
    n = 6
    t = random_potentials(rng, n, ("arc", "sib", "grand"))
    trees = projective_trees(n, False)
    gold = trees[rng.integers(len(trees))]
    heads, lengths = gold[None], np.array([n])

    def loss_of(arrays):
        ts = {k: torch.tensor(v[None], requires_grad=True) for k, v in arrays.items()}
        loss = parts_tree_loss(ts["arc"], {k: ts[k] for k in ("sib", "grand")}, heads,
                               lengths, structure, prune=False)
        return loss, ts

    loss, ts = loss_of(t)
    loss.backward()
    direction = {k: rng.normal(size=v.shape) for k, v in t.items()}
    eps = 1e-6
    plus = float(loss_of({k: t[k] + eps * direction[k] for k in t})[0].detach())
    minus = float(loss_of({k: t[k] - eps * direction[k] for k in t})[0].detach())
    numeric = (plus - minus) / (2 * eps)
    analytic = sum(float((ts[k].grad.numpy()[0] * direction[k]).sum()) for k in t)
    assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-7)


def test_parts_loss_is_finite_at_large_scores():
    rng = np.random.default_rng(2)
    structure = tree_structure("eisner", True)
    t = random_potentials(rng, 5, ("arc", "sib", "grand"), scale=1e4)
    gold = projective_trees(5, True)[0]
    ts = {k: torch.tensor(v[None], requires_grad=True) for k, v in t.items()}
    loss = parts_tree_loss(ts["arc"], {"sib": ts["sib"], "grand": ts["grand"]}, gold[None],
                           np.array([5]), structure, prune=True)
    loss.backward()
    assert np.isfinite(float(loss.detach())) and float(loss.detach()) >= -1e-6
    assert all(np.isfinite(v.grad.numpy()).all() for v in ts.values())


def test_triaffine_layout():
    """Triaffine(x, y, z)[b, k, i, j] = [x_i; 1]^T W_{:, :, ...} with z_k, written out."""
    from arboreal.neural.network import Triaffine

    torch.manual_seed(0)
    tri = Triaffine(3)
    with torch.no_grad():
        tri.weight.normal_()
    x, y, z = (torch.randn(2, 4, 3, dtype=torch.float32) for _ in range(3))
    out = tri(x, y, z)
    assert out.shape == (2, 4, 4, 4)
    W = tri.weight.detach().double().numpy()
    xs = np.concatenate([x.double().numpy(), np.ones((2, 4, 1))], -1)
    ys = np.concatenate([y.double().numpy(), np.ones((2, 4, 1))], -1)
    zs = z.double().numpy()
    b, k, i, j = 1, 2, 0, 3
    ref = sum(xs[b, i, p] * W[p, r, q] * ys[b, j, q] * zs[b, k, r]
              for p in range(4) for q in range(4) for r in range(3))
    assert float(out[b, k, i, j].detach()) == pytest.approx(ref, rel=1e-4)


def test_order_2_options_are_checked(small_trained):
    from arboreal.errors import ArborealError
    from arboreal.io.conllu import read_conllu
    from arboreal.models import Parser

    train = read_conllu(small_trained / "train.conllu")[:5]
    with pytest.raises(ArborealError, match="--order 2"):
        Parser.train(train, scorer="neural", scorer_options={"sib_dim": 8, "epochs": 1})
    with pytest.raises(ArborealError, match="projective"):
        Parser.train(train, scorer="neural", order=2, decoder="cle",
                     scorer_options={"epochs": 1})
    with pytest.raises(ArborealError, match="orders 1"):
        Parser.train(train, scorer="neural", order=3, scorer_options={"epochs": 1})


def test_train_order_2_through_the_cli(tmp_path, small_trained):
    """`arboreal train --scorer neural --order 2` trains sibling and grandparent scorers,
    the model file keeps them, and the loaded model parses as the trained one."""
    from arboreal.cli import main
    from arboreal.io.conllu import read_conllu
    from arboreal.models import Parser

    model = tmp_path / "o2.npz"
    sizes = ["lstm_dim=24", "arc_dim=24", "label_dim=16", "word_dim=16", "char_dim=12",
             "tag_hidden=16", "sib_dim=8", "grand_dim=8"]
    argv = ["train", str(small_trained / "train.conllu"), "-o", str(model), "--scorer", "neural",
            "--order", "2", "--epochs", "2", "--no-tokenizer", "--quiet"]
    for option in sizes:
        argv += ["--scorer-option", option]
    assert main(argv) == 0
    parser = Parser.load(model)
    assert parser.order == 2 and parser.decoder == "eisner"
    assert parser.scorer.part_kinds == ("sib", "grand")
    assert parser.meta["training"]["order"] == 2
    test = read_conllu(small_trained / "dev.conllu")
    heads, _ = parser.predict(test)
    # each tree is the best projective tree of the model's own potentials
    encoded = parser.scorer.encode(test)
    structure = parser.structure
    for k, p in parser.scorer.potentials(encoded, np.arange(len(test))):
        allowed = structure.prune(structure.marginals(p.arc))
        assert np.array_equal(heads[k], structure.decode_parts(p, allowed))
        assert np.abs(p.sib).sum() > 0 and np.abs(p.grand).sum() > 0
    with pytest.raises(Exception, match="first-order model"):
        parser.arc_marginals(test[:1])
