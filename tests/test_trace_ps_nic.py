"""The PS NIC trace's bookkeeping, on segments laid out by hand (the capture itself needs root and a lab run)."""

import pytest

from benchmark_scripts import load


def _overlap():
    return load("trace_ps_nic").overlap


RATE_BPS = 1e6  # 1 MB/s, so a 10 ms bin carries 10 kB and a worker is active from 2 kB in a bin
BIN_S = 0.010


def _segments(peer: str, out: bool, first_bin: int, last_bin: int, per_bin: int = 5_000) -> list:
    """One segment in the middle of each bin from ``first_bin`` to ``last_bin``."""
    return [[(b + 0.5) * BIN_S, out, peer, per_bin] for b in range(first_bin, last_bin + 1)]


def _trace(*segments: list) -> list:
    """The rows, in time order, after a bare acknowledgement at t=0 that starts bin 0 (the tool bins from
    the first row)."""
    return [[0.0, False, "A", 0]] + sorted(row for rows in segments for row in rows)


def test_turns_share_no_bin_and_each_worker_idles_where_it_moves_nothing():
    # 20 bins: A pulls in 0-4 and pushes in 5-9; B pulls in 5-9 and pushes in 10-14; nobody moves in 15-19.
    rows = _trace(_segments("A", True, 0, 4), _segments("A", False, 5, 9), _segments("B", True, 5, 9),
                  _segments("B", False, 10, 14), _segments("A", True, 19, 19, per_bin=1))
    report = _overlap()(rows, RATE_BPS, BIN_S)
    assert report["PS to workers (pulls)"] == {"busy_bins": 10, "shared_bins": 0, "shared_fraction": 0.0}
    assert report["workers to PS (pushes)"]["shared_bins"] == 0
    # A is active in 10 of 20 bins, B in 10 (A's 1-byte segment in bin 19 is below the threshold).
    assert report["idle share per worker"] == {"A": pytest.approx(0.5), "B": pytest.approx(0.5)}


def test_transfers_in_one_direction_at_once_count_as_shared_and_small_traffic_does_not():
    # 4 bins: A pulls in all four, B in the last two; B's 1 kB per bin before that is a trickle, below 2 kB.
    rows = _trace(_segments("A", True, 0, 3), _segments("B", True, 2, 3), _segments("B", True, 0, 1, per_bin=1_000))
    report = _overlap()(rows, RATE_BPS, BIN_S)
    assert report["PS to workers (pulls)"] == {"busy_bins": 4, "shared_bins": 2, "shared_fraction": 0.5}
    assert report["idle share per worker"] == {"A": pytest.approx(0.0), "B": pytest.approx(0.5)}
