"""How the ONNX backends cut texts into batches."""

from __future__ import annotations

from memsim.memory.embed import _token_batches


def test_token_batches_are_longest_first_within_the_budget() -> None:
    lengths = [3, 10, 7, 7, 2, 30, 5]
    batches = _token_batches(lengths, 20)
    flat = [int(i) for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    # Longest first; ties keep their order.
    assert flat == [5, 1, 2, 3, 6, 0, 4]
    # The 30-token text is alone although it is over the budget; every other batch fits.
    assert [len(b) for b in batches] == [1, 2, 2, 2]
    assert all(len(b) * max(lengths[i] for i in b) <= 20 for b in batches[1:])
