"""helpers.threads: a block runs on the asked thread count and gives the old one back, also after an error."""

import pytest
import torch

from helpers.threads import torch_threads


def test_the_block_runs_on_its_count_and_restores_the_old_one_even_after_an_error():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("inside")
    assert torch.get_num_threads() == before
    with torch_threads(None):  # None leaves the count alone
        assert torch.get_num_threads() == before
