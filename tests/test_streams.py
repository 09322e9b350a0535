"""Named random streams: derived from the seed and the name only."""

from __future__ import annotations

import numpy as np
import pytest

from memsim.core.streams import Streams, stream_key, streams


def test_a_stream_depends_on_seed_and_name_only() -> None:
    a, b = streams(3), streams(3)
    first = a["feedback"].random(4)
    b["scenario"].random(100)  # drawing from another stream first shifts nothing
    b["new-stream"].random(7)  # nor does adding a stream
    assert np.array_equal(b["feedback"].random(4), first)
    assert not np.array_equal(streams(4)["feedback"].random(4), first)
    assert not np.array_equal(streams(3)["systems"].random(4), first)


def test_a_stream_is_made_once_and_kept() -> None:
    s = Streams(0)
    assert s["stats"] is s["stats"]
    assert list(s) == ["stats"] and len(s) == 1
    assert stream_key("stats") == stream_key("stats") != stream_key("bootstrap")


def test_bad_seed_and_name() -> None:
    with pytest.raises(ValueError, match="seed"):
        Streams(-1)
    with pytest.raises(KeyError):
        streams(0)[""]
