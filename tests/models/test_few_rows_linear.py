"""The few-rows product gives F.linear's results, and loading uses it only where it should."""

import torch
from torch import nn

from assisted.models import loading, pairs


def test_few_rows_forward_matches_linear_for_every_row_count():
    torch.manual_seed(0)
    layer = nn.Linear(48, 80)
    reference = nn.Linear(48, 80)
    reference.load_state_dict(layer.state_dict())
    assert loading.use_few_rows_linear(layer) == 1
    for shape in [(1, 48), (1, 2, 48), (1, 5, 48), (3, 48), (1, 40, 48), (0, 48)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(layer(x), reference(x), rtol=1e-5, atol=1e-5)


def test_bias_free_layers_work_too():
    layer = nn.Linear(16, 8, bias=False)
    weight = layer.weight.detach().clone()
    loading.use_few_rows_linear(layer)
    x = torch.randn(1, 4, 16)
    torch.testing.assert_close(layer(x), x @ weight.t())


def test_fp32_cpu_pairs_use_it(tiny_dirs):
    pairs._loaded.entries.clear()
    pair = pairs.load_pair(pairs.custom_pair(str(tiny_dirs["target"]), None), "cpu", "float32")
    linears = [m for m in pair.target.modules() if type(m) is nn.Linear]
    assert linears and all("forward" in m.__dict__ for m in linears)
    pairs._loaded.entries.clear()
