"""Attention transforms: each variant's definition, exact masks, empty supports, float64
gradients, the score std at initialization, the config keys and the signature label."""

import math

import pytest
import torch
import torch.nn.functional as F

from arelu_cli.model import attention as A
from arelu_cli.model import checkpoint
from arelu_cli.config import ModelConfig, from_dict
from arelu_cli.util.errors import UserError
from arelu_cli.model.transformer import Transformer
from arelu_cli.transforms.tau import analytic_tau, entmax_threshold

SIGMA = 0.5
# (registry name, alpha-ReLU variant, tau): every transform the attention accepts, by family.
CASES = [("softmax", "raw", 0.0), ("sparsemax", "raw", 0.0), ("1.5-entmax", "raw", 0.0),
         ("1.25-entmax-bisect", "raw", 0.0), ("1.5-relu", "raw", 0.0), ("2-relu", "raw", 0.1),
         ("1.5-relu", "estimated", 0.0), ("1.5-relu", "renormalized", 0.0),
         ("1.5-relu", "renormalized", 0.2)]
IDS = [f"{n}-{v}-{t:g}" for n, v, t in CASES]


def _transform(name, variant="raw", tau=0.0):
    return A.attention_transform(name, variant, tau, SIGMA)


def _scores_and_mask(dtype=torch.float32, seed=0):
    """Scores (2, 2, 4, 6) and a key mask (2, 1, 1, 6) with 6 and 3 visible keys."""
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(2, 2, 4, 6, generator=gen, dtype=dtype) * 2
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 3:] = False
    return scores, mask


def _shift(n, alpha=1.5):
    return torch.tensor([A.estimated_tau(int(k), alpha, SIGMA) for k in n.flatten()]).view(n.shape)


@pytest.mark.parametrize("name,variant,tau", CASES, ids=IDS)
def test_a_masked_key_gets_exactly_zero_and_changes_nothing(name, variant, tau):
    t = _transform(name, variant, tau)
    scores, mask = _scores_and_mask()
    weights = t.weights(scores, mask)
    assert torch.all(weights.masked_select(~mask.expand_as(weights)) == 0)
    moved = scores.masked_fill(~mask, 1e4)  # huge scores at masked keys: still nothing
    assert torch.equal(t.weights(moved, mask), weights)
    alone = t.weights(scores[1:, ..., :3])  # the same rows with only their visible keys
    assert torch.allclose(weights[1:, ..., :3], alone, atol=1e-6)


@pytest.mark.parametrize("name", ["softmax", "sparsemax", "1.5-entmax", "1.25-entmax-bisect"])
def test_normalizing_transforms_sum_to_one_over_visible_keys(name):
    scores, mask = _scores_and_mask()
    weights = _transform(name).weights(scores, mask)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 2, 4), atol=1e-5)


def test_raw_is_alpha_relu_with_a_constant_tau():
    scores, _ = _scores_and_mask()
    for alpha, tau in ((1.5, 0.0), (2.0, 0.1), (1.25, -0.2)):
        expected = torch.clamp((alpha - 1) * scores - tau, min=0) ** (1 / (alpha - 1))
        got = _transform(f"{alpha:g}-relu", "raw", tau).weights(scores)
        assert torch.allclose(got, expected, rtol=1e-5, atol=1e-7)


def test_estimated_takes_tau_of_the_number_of_visible_keys():
    scores, mask = _scores_and_mask()
    visible = mask & torch.ones(4, 6, dtype=torch.bool).tril(2)  # 3..6 keys, or 3 in row 1
    n = visible.sum(-1, keepdim=True)
    expected = torch.clamp(0.5 * scores - _shift(n), min=0) ** 2 * visible
    got = _transform("1.5-relu", "estimated").weights(scores, visible)
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-7)
    # Unmasked, every row has all 6 keys: the same as raw with tau_hat(6).
    raw6 = _transform("1.5-relu", "raw", A.estimated_tau(6, 1.5, SIGMA)).weights(scores)
    assert torch.allclose(_transform("1.5-relu", "estimated").weights(scores), raw6)


def test_estimated_tau_is_the_analytic_estimate_with_n_keys():
    for n in (2, 7, 40):
        expected = analytic_tau(n, sigma=SIGMA, alpha=1.5, rule="tail").tau
        assert A.estimated_tau(n, 1.5, SIGMA) == expected
    assert A.estimated_tau(1, 1.5, SIGMA) == -1.0  # the mean threshold of a single score


@pytest.mark.parametrize("n", [5, 40])
def test_estimated_tau_is_the_mean_entmax_threshold_and_weights_sum_to_one(n):
    """At its own sigma: tau_hat is close to the mean exact 1.5-entmax threshold of Gaussian
    scores, and the alpha-ReLU weights sum to one on average (the ``paper`` rule's sum to more)."""
    scores = torch.randn(4000, n, generator=torch.Generator().manual_seed(0)) * SIGMA
    assert A.estimated_tau(n, 1.5, SIGMA) == pytest.approx(
        float(entmax_threshold(scores).mean()), abs=0.03)
    sums = _transform("1.5-relu", "estimated").weights(scores).sum(-1)
    assert float(sums.mean()) == pytest.approx(1.0, abs=0.05)


def test_renormalized_divides_by_the_sum_plus_eps_and_keeps_a_zero_row_zero():
    scores, mask = _scores_and_mask()
    raw = _transform("1.5-relu", "raw", 0.2).weights(scores, mask)
    got = _transform("1.5-relu", "renormalized", 0.2).weights(scores, mask)
    assert torch.allclose(got, raw / (raw.sum(-1, keepdim=True) + A.RENORM_EPS))
    total = raw.sum(-1)  # a row sums to S / (S + eps): about 1 where S >> eps
    assert torch.allclose(got.sum(-1), total / (total + A.RENORM_EPS))
    large = total > 100 * A.RENORM_EPS
    assert bool(large.any()) and bool(torch.all(got.sum(-1)[large] > 0.99))
    empty = _transform("1.5-relu", "renormalized").weights(-torch.rand(1, 1, 2, 5) - 0.1)
    assert torch.equal(empty, torch.zeros(1, 1, 2, 5))


def test_attention_eps_is_the_constant_of_the_sum_and_its_label():
    scores, mask = _scores_and_mask()
    raw = _transform("1.5-relu", "raw", 0.2).weights(scores, mask)
    soft = A.attention_transform("1.5-relu", "renormalized", 0.2, SIGMA, eps=0.01)
    assert torch.allclose(soft.weights(scores, mask), raw / (raw.sum(-1, keepdim=True) + 0.01))
    assert soft.label == "1.5-relu/renormalized/tau=0.2/eps=0.01"
    assert (_transform("1.5-relu", "renormalized", 0.2).label
            == "1.5-relu/renormalized/tau=0.2/eps=0.01")  # the default is named too
    cfg = _cfg(attention="1.5-relu", attention_relu="renormalized", attention_eps=0.01)
    assert A.describe(cfg) == "1.5-relu/renormalized/tau=0/eps=0.01"
    assert Transformer(cfg, 20, 20).decoder[0].cross_attn.transform.eps == 0.01


def test_a_lone_key_near_the_threshold_has_the_slope_of_the_eps_docstring():
    """x^2 / (x^2 + eps) at alpha 1.5 is steepest at x^2 = eps / 3, with slope
    (3 sqrt(3) / 8) / sqrt(eps): the gradient a query sends as its support empties."""
    for eps in (1e-6, 1e-2):
        t = A.attention_transform("1.5-relu", "renormalized", 0.0, eps=eps)
        x = torch.tensor(math.sqrt(eps / 3), dtype=torch.float64, requires_grad=True)
        # one visible key at score s = x / (alpha - 1), the other far below the threshold
        scores = torch.stack([x / 0.5, torch.tensor(-5.0, dtype=torch.float64)])
        weight = t.weights(scores.view(1, 1, 1, 2))[0, 0, 0, 0]
        (slope,) = torch.autograd.grad(weight, x)
        assert float(slope) == pytest.approx(3 * math.sqrt(3) / 8 / math.sqrt(eps), rel=1e-6)


@pytest.mark.parametrize("variant", A.VARIANTS)
def test_an_empty_support_gives_the_zero_vector(variant):
    """Every score below the threshold: the query's attention output is exactly zero."""
    q = torch.ones(1, 1, 1, 4)
    k = -10.0 * q.expand(1, 1, 5, 4)  # every score is -20
    v = torch.randn(1, 1, 5, 4)
    y, weights = A.attend(q, k, v, _transform("1.5-relu", variant), need_weights=True)
    assert torch.equal(weights, torch.zeros(1, 1, 1, 5)) and torch.equal(y, torch.zeros(1, 1, 1, 4))


def test_no_visible_key_gives_zero_weights_for_every_transform():
    scores = torch.randn(1, 1, 2, 4)
    mask = torch.zeros(1, 1, 1, 4, dtype=torch.bool)
    for name, variant, tau in CASES:
        weights = _transform(name, variant, tau).weights(scores, mask)
        assert torch.equal(weights, torch.zeros(1, 1, 2, 4)), name


@pytest.mark.parametrize("causal", [False, True])
def test_explicit_softmax_equals_the_fused_kernel(causal):
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=gen) for _ in range(3))
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    mask[0, ..., 4:] = False
    softmax = _transform("softmax")
    fused, none = A.attend(q, k, v, softmax, visible=mask, causal=causal)
    explicit, weights = A.attend(q, k, v, softmax, visible=mask, causal=causal, need_weights=True)
    assert none is None and torch.allclose(fused, explicit, atol=1e-6)
    if causal:
        assert torch.all(weights.triu(1) == 0)


@pytest.mark.parametrize("name,variant,tau", CASES, ids=IDS)
def test_gradients_in_float64(name, variant, tau):
    """Through the whole attention (queries, keys, values), with a padding mask and the
    causal one."""
    t = _transform(name, variant, tau)
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 2, 4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    mask = torch.tensor([True, True, True, True, True, False, True, False]).view(2, 1, 1, 4)

    def run(q, k, v):
        return A.attend(q, k, v, t, visible=mask, causal=True, need_weights=True)[0]

    assert torch.autograd.gradcheck(run, (q, k, v), eps=1e-6, atol=1e-5, fast_mode=True)


def _untrained(seed=0, d_model=64):
    torch.manual_seed(seed)
    cfg = ModelConfig(d_model=d_model, encoder_layers=1, decoder_layers=1, heads=4, d_ff=64,
                      dropout=0.0, attention_dropout=0.0, max_positions=64)
    return Transformer(cfg, 300, 300).eval()


def test_score_sigma_is_the_std_of_an_untrained_models_scores():
    model = _untrained()
    src = torch.randint(4, 300, (16, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        x = model.encoder[0].norm1(model._embed(model.src_embed, src))
        q, k, _ = model.encoder[0].attn._qkv(x)
        self_scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        memory, _ = model.encode(src)
        layer = model.decoder[0]
        cq = layer.cross_attn.q(layer.norm2(x)).view(16, 40, 4, 16).transpose(1, 2)
        ck, _ = layer.cross_attn.memory_kv(memory)
        cross_scores = cq @ ck.transpose(-2, -1) / math.sqrt(16)
    assert A.score_sigma(64, 192, 192) == pytest.approx(0.5)
    assert A.score_sigma(64, 64, 128) == pytest.approx(math.sqrt(2 / 3))
    assert float(self_scores.std()) == pytest.approx(0.5, rel=0.15)
    assert float(cross_scores.std()) == pytest.approx(math.sqrt(2 / 3), rel=0.15)
    assert model.decoder[0].cross_attn.transform.sigma is None  # softmax keeps no sigma


def _cfg(**model):
    return ModelConfig(d_model=16, encoder_layers=1, decoder_layers=1, heads=2, d_ff=32,
                       max_positions=32, **model)


def test_each_kind_takes_its_own_key_or_the_common_one():
    cfg = _cfg(attention="1.5-entmax", attention_cross="1.5-relu", attention_relu="estimated")
    assert A.kind_names(cfg) == {"encoder": "1.5-entmax", "decoder": "1.5-entmax",
                                 "cross": "1.5-relu"}
    model = Transformer(cfg, 20, 20)
    cross = model.decoder[0].cross_attn.transform
    assert (cross.variant, cross.sigma) == ("estimated", pytest.approx(math.sqrt(2 / 3)))
    assert model.encoder[0].attn.transform.name == "1.5-entmax"
    assert A.describe(cfg) == ("encoder=1.5-entmax;decoder=1.5-entmax;"
                               "cross=1.5-relu/estimated")
    assert A.describe(_cfg()) is None  # softmax everywhere: signatures as before
    assert A.describe(_cfg(attention="1.5-relu", attention_tau=0.1)) == "1.5-relu/raw/tau=0.1"


@pytest.mark.parametrize("model,message", [
    ({"attention": "relu"}, r"\[model\] attention: unknown output transform"),
    ({"attention_cross": "3-entmax"}, r"\[model\] attention_cross: .*outside \[1.05, 2\]"),
    ({"attention": "1.5-relu", "attention_relu": "estimated", "attention_tau": 0.3},
     "estimated variant computes its own"),
    ({"attention_relu": "renormalized"}, "apply to alpha-ReLU attention"),
    ({"attention": "sparsemax", "attention_tau": 0.2}, "apply to alpha-ReLU attention"),
    ({"attention": "sparsemax", "attention_eps": 1e-3}, "apply to alpha-ReLU attention"),
    ({"attention": "1.5-relu", "attention_eps": 1e-3}, "set attention_relu = \"renormalized\""),
    ({"attention": "1.5-relu", "attention_relu": "renormalized", "attention_eps": 0.0},
     "attention_eps must be a finite number > 0"),
])
def test_bad_attention_settings_are_user_errors(model, message):
    with pytest.raises(UserError, match=message):
        Transformer(_cfg(**model), 20, 20)


def test_the_variant_must_be_known():
    with pytest.raises(UserError, match="attention_relu must be one of 'raw', 'estimated'"):
        from_dict({"model": {"attention": "1.5-relu", "attention_relu": "normalized"}})


def test_a_checkpoint_without_the_attention_keys_loads_as_softmax(tmp_path):
    """Checkpoints written before ``[model] attention`` existed hold no such key."""
    model = _untrained()
    config = from_dict({"model": {"d_model": 64, "encoder_layers": 1, "decoder_layers": 1,
                                  "heads": 4, "d_ff": 64, "max_positions": 64}}).to_dict()
    for key in [k for k in config["model"] if k.startswith("attention_") or k == "attention"]:
        if key != "attention_dropout":
            del config["model"][key]
    checkpoint.save({"kind": "best", "config": config, "transform": "softmax", "tau": None,
                     "vocab": {"checksum": "", "src_size": 300, "tgt_size": 300, "path": ""},
                     "model": model.state_dict(), "average": None}, tmp_path / "best.pt")
    loaded, cfg, _ = checkpoint.load_model(tmp_path / "best.pt")
    assert cfg.model.attention == "softmax" and A.describe(cfg.model) is None
    assert all(m.transform.is_softmax for m in (loaded.encoder[0].attn,
                                                loaded.decoder[0].self_attn,
                                                loaded.decoder[0].cross_attn))
    src, tgt = torch.randint(4, 300, (2, 6)), torch.randint(4, 300, (2, 5))
    with torch.no_grad():
        assert torch.equal(loaded(src, tgt), model(src, tgt))


def test_dropout_acts_on_the_weights_in_training_only():
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 1, 3, 4, generator=gen) for _ in range(3))
    t = _transform("1.5-entmax")
    plain, weights = A.attend(q, k, v, t)
    torch.manual_seed(0)
    dropped, _ = A.attend(q, k, v, t, dropout_p=0.5)
    torch.manual_seed(0)
    expected = F.dropout(weights, 0.5, training=True) @ v
    assert torch.equal(dropped, expected) and not torch.equal(dropped, plain)
