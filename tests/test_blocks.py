"""Named parameter blocks (``bulkem.models.base``): every model's parameter vector, its
free-parameter count, its named arrays and its canonical order follow from its blocks."""

from __future__ import annotations

import numpy as np
import pytest

from bulkem.models.base import Axis, Block, Layout
from bulkem.models.hmm.emissions import EMISSIONS
from bulkem.models.hmm.model import HMMModel
from bulkem.models.mixture.gaussian import FAMILY as GAUSSIAN
from bulkem.models.mixture.invgauss import FAMILY as INVGAUSS
from bulkem.models.mixture.model import MixtureModel
from bulkem.models.ssm.model import SSMModel
from bulkem.models.tmap.model import TMAPModel


def _models():
    for M in (1, 2, 3):
        yield MixtureModel(INVGAUSS, M, 1)
        for D in (1, 3):
            yield MixtureModel(GAUSSIAN, M, D)
    for em in EMISSIONS.values():
        for N, K in ((1, 1), (3, 2), (4, 5)):
            for update in ("ste", "st", "e"):
                yield HMMModel(em, N, K, update)
    yield TMAPModel.of((1, 2, 3))
    yield TMAPModel.of((2, 2))
    yield SSMModel("ar", 1)
    yield SSMModel("ar", 3)
    yield SSMModel("local_level", 1)


def test_a_layout_interleaves_the_blocks_of_a_group_record_by_record():
    c, d = Axis("component", 2), Axis("dim", 3)
    lay = Layout([(Block("w", (c,), "simplex"), Block("m", (c, d)), Block("v", (c, d), "positive")),
                  (Block("s"),)], exchangeable="component")
    assert lay.size == 2 * 7 + 1
    assert [lay.offset(n) for n in "wmvs"] == [0, 1, 4, 14]
    assert lay.n_free() == 1 + 6 + 6 + 1
    p = np.arange(2 * lay.size, dtype=float).reshape(2, lay.size)
    b = lay.split(p)
    assert b["w"].tolist() == [[0, 7], [15, 22]]
    assert b["m"][1].tolist() == [[16, 17, 18], [23, 24, 25]]
    assert b["s"].tolist() == [14, 29]
    assert np.array_equal(lay.join(b), p)
    swapped = lay.permute(p, np.array([[1, 0], [0, 1]]))
    assert swapped[0].tolist() == [7, 8, 9, 10, 11, 12, 13, 0, 1, 2, 3, 4, 5, 6, 14]
    assert np.array_equal(swapped[1], p[1])
    cols = lay.record_columns(p, ["w", "m"])
    assert list(cols) == ["w", "m_1", "m_2", "m_3"] and cols["m_3"].tolist() == [3, 10, 18, 25]


def test_a_permutation_reorders_every_axis_of_the_exchangeable_name():
    s = Axis("state", 3)
    lay = Layout([(Block("start", (s,), "simplex"),), (Block("trans", (s, s), "simplex"),)],
                 exchangeable="state")
    p = np.arange(12, dtype=float)[None]
    out = lay.split(lay.permute(p, np.array([[2, 0, 1]])))
    assert out["start"][0].tolist() == [2, 0, 1]
    trans = p[0, 3:].reshape(3, 3)
    assert np.array_equal(out["trans"][0], trans[[2, 0, 1]][:, [2, 0, 1]])


def test_blocks_reject_an_unknown_constraint_and_groups_of_different_first_axes():
    with pytest.raises(ValueError, match="constraint 'unit'"):
        Layout([(Block("x", (Axis("a", 2),), "unit"),)])
    with pytest.raises(ValueError, match="share their first axis"):
        Layout([(Block("x", (Axis("a", 2),)), Block("y", (Axis("a", 3),)))])


@pytest.mark.parametrize("model", list(_models()), ids=lambda m: repr(m.key[:4]))
def test_every_model_takes_its_sizes_and_names_from_its_blocks(model):
    """The parameter vector the kernels use (their own size functions) has the blocks'
    length; the free parameters are the hand-counted ones; as_dict and init_shapes agree."""
    lay = model.params_layout
    assert model.n_params == lay.size == model.sizes().params
    if isinstance(model, MixtureModel):
        M, D = model.n_components, model.n_dims
        assert model.family.per_component(D) * M == lay.size
        per = {"invgauss": 3, "gaussian": 1 + 2 * D}[model.name]
        assert model.n_free == per * M - 1
    elif isinstance(model, TMAPModel):
        R = model.n_states
        assert model.n_free == R - 1 + R * R + R  # the exits are free: Pi is sub-stochastic
        assert (model.layout.p_trans, model.layout.p_emit) == (R, R + R * R)
    elif isinstance(model, HMMModel):
        N, K = model.n_states, model.K
        per_state = {"categorical": K - 1, "gaussian": 2 * K, "poisson": 1}[model.emission.name]
        expect = ((N - 1) * ("s" in model.update) + N * (N - 1) * ("t" in model.update)
                  + N * per_state * ("e" in model.update))
        assert model.n_free == expect
        assert (model.layout.p_trans, model.layout.p_emit) == (N, N + N * N)
    else:
        assert model.n_free == model.order + 2
        assert model.layout.n_params == lay.size
    p = np.random.default_rng(0).random(lay.size)
    d = model.as_dict(p)
    assert list(d) == list(model.init_shapes())
    assert all(np.shape(v) == model.init_shapes()[k] for k, v in d.items())
    assert np.array_equal(lay.join({k: np.asarray(v)[None] for k, v in d.items()})[0], p)


@pytest.mark.parametrize("model", [MixtureModel(GAUSSIAN, 3, 2), HMMModel(EMISSIONS["categorical"],
                                   3, 4, "ste"), TMAPModel.of((1, 2, 3)), SSMModel("ar", 2)],
                         ids=lambda m: m.name)
def test_unconstrained_coordinates_invert_and_their_jacobian_is_the_numerical_one(model):
    """to_free / from_free are inverses on valid parameters, and free_jacobian is the
    central difference of from_free in the free coordinates."""
    rng = np.random.default_rng(1)
    lay, names = model.params_layout, model.free_blocks()
    blocks = {}
    for name, b in lay.blocks.items():
        if b.constraint == "real":
            blocks[name] = rng.normal(0, 0.3, (2,) + b.shape)
        elif b.constraint == "positive":
            blocks[name] = rng.uniform(0.5, 2.0, (2,) + b.shape)
        else:
            rows = rng.uniform(0.2, 1.0, (2,) + b.shape)
            total = rows.sum(axis=-1, keepdims=True)
            blocks[name] = rows / total * (1.0 if b.constraint == "simplex" else 0.8)
    p = lay.join(blocks)
    theta = lay.to_free(p, names)
    assert theta.shape == (2, lay.n_free(names)) and np.isfinite(theta).all()
    back, J = lay.from_free(theta, p, names), lay.free_jacobian(p, names)
    assert np.allclose(back, p, rtol=1e-12, atol=1e-15)
    h = 1e-6
    for j in range(theta.shape[1]):
        up = lay.from_free(theta + h * np.eye(theta.shape[1])[j], p, names)
        down = lay.from_free(theta - h * np.eye(theta.shape[1])[j], p, names)
        assert np.allclose(J[:, :, j], (up - down) / (2 * h), rtol=1e-6, atol=1e-9)
    assert [lay.names()[lay.offset(n)] for n in lay.blocks] == [
        b.columns(skip=0)[0] for b in lay.blocks.values()]
