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


def test_derived_generators_are_keyed_and_independent() -> None:
    from memsim.core.streams import keyed_random, labelled, seeded, spawn, spawn_random, substream

    assert np.array_equal(substream(5, "stats").random(3), streams(5)["stats"].random(3))
    child = substream(5, "stats", "mde x")
    assert not np.array_equal(child.random(3), substream(5, "stats", "mde y").random(3))
    assert np.array_equal(labelled(2, "naive").random(3), labelled(2, "naive").random(3))
    assert not np.array_equal(labelled(2, "naive").random(3), labelled(2, "cosine").random(3))
    assert not np.array_equal(labelled(2, "naive").random(3), labelled(3, "naive").random(3))
    a, b = seeded(9), seeded(9)
    assert np.array_equal(spawn(a).random(2), spawn(b).random(2))
    assert spawn_random(seeded(1)).random() == spawn_random(seeded(1)).random()
    assert keyed_random("u01:forget").random() == keyed_random("u01:forget").random() != keyed_random("u02:forget").random()
    assert np.array_equal(seeded(np.int64(4)).random(2), seeded(4).random(2))
    assert np.array_equal(seeded([4, 1]).random(2), seeded((4, 1)).random(2))
