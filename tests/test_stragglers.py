"""Synchronous and asynchronous timelines of the same compute times, against a hand derivation."""

from __future__ import annotations

import numpy as np
import pytest

from distsim.mechanics import stragglers


def _end(trace, device):
    return float(trace.end_s[np.asarray(trace.devices)[trace.device] == device].max())


def test_sync_waits_for_the_slowest_and_async_does_not():
    # Worked by hand: rounds [1, 2] and [3, 1] s, exchange 0.5 s.
    # Synchronous: round 1 ends at max(1, 2) + 0.5 = 2.5 s, round 2 at 2.5 + 3 + 0.5 = 6 s.
    # Asynchronous: worker 0 needs 1 + 0.5 + 3 + 0.5 = 5 s, worker 1 2 + 0.5 + 1 + 0.5 = 4 s.
    sync, asynchronous = stragglers.sync_and_async_traces(np.array([[1.0, 2.0], [3.0, 1.0]]), 0.5)
    assert _end(sync, "worker 0") == _end(sync, "worker 1") == 6.0
    assert (_end(asynchronous, "worker 0"), _end(asynchronous, "worker 1")) == (5.0, 4.0)
    waiting = sum(e.duration_s for e in sync.events() if e.kind == "idle")
    assert waiting == pytest.approx(1.0 + 2.0)  # worker 0 waits 1 s in round 1, worker 1 waits 2 s in round 2
    assert not any(e.kind == "idle" for e in asynchronous.events())


def test_bad_compute_times_are_rejected():
    with pytest.raises(ValueError, match="rounds, workers"):
        stragglers.sync_and_async_traces(np.array([1.0, 2.0]), 0.5)
    with pytest.raises(ValueError, match="exchange_s"):
        stragglers.sync_and_async_traces(np.ones((2, 2)), -1.0)
