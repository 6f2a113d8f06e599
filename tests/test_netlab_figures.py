"""Notebook 05b's two figures: every NIC's load from a simulated trace, and a PS run's phase (the phase
bookkeeping itself is tested in test_phase_ps.py)."""

import json
from pathlib import Path

import numpy as np
import pytest

import distsim
from distsim.real.netlab import TCP_PAYLOAD_FRACTION, lab_scenario
from distsim.validation import InputError
from distsim.views.plots import nic_load, plot_nic_load, plot_ps_phases

GRADIENT_BYTES = 101_770 * 4  # the MNIST MLP: 101,770 float32 parameters
STORED = Path(__file__).resolve().parents[1] / "data" / "measurements" / "phase_ps" / "runs.jsonl"


def _sent_bytes(strategy, workers, steps):
    result = distsim.predict(lab_scenario(strategy, workers, 50, steps=steps))
    t, load = nic_load(result, bin_s=1e-3)
    return {nic: float(v.sum() * 1e-3) for nic, v in load.items()}  # bytes/s x bin width, summed: bytes


def test_a_ring_worker_sends_2_p_minus_1_over_p_gradients_per_step_in_frames():
    # Hand derivation: a ring all-reduce of p workers has each send 2 (p-1)/p of the gradient, and the NIC
    # carries 1514 bytes of frame per 1448 of it. Relative 1e-9: the bins only re-slice the same bytes.
    sent = _sent_bytes("multi_worker_mirrored", 3, steps=5)
    assert set(sent) == {"w0", "w1", "w2"}
    for nic in sent:
        assert sent[nic] == pytest.approx(5 * 2 * 2 / 3 * GRADIENT_BYTES / TCP_PAYLOAD_FRACTION, rel=1e-9)


def test_a_parameter_server_sends_the_weights_once_per_update_and_each_worker_its_gradients():
    # 3 workers x 4 updates each: the server's NIC sends 12 copies of the weights (one per pull), each
    # worker's NIC 4 gradients (one per push), in frames.
    sent = _sent_bytes("parameter_server", 3, steps=4)
    frame = GRADIENT_BYTES / TCP_PAYLOAD_FRACTION
    assert sent["ps"] == pytest.approx(12 * frame, rel=1e-9)
    assert [sent[f"w{w}"] for w in range(3)] == pytest.approx([4 * frame] * 3, rel=1e-9)


def test_the_load_figure_has_one_row_per_nic_and_refuses_a_result_without_a_trace():
    results = {name: distsim.predict(lab_scenario(s, 2, 50, steps=4))
               for name, s in (("ring", "multi_worker_mirrored"), ("PS", "parameter_server"))}
    fig = plot_nic_load(results, (0.1, 0.4))
    assert [len(ax.get_yticks()) for ax in fig.axes] == [2, 3]
    with pytest.raises(InputError, match="^result="):
        nic_load(results["ring"].__class__(source="measured", strategy="x", num_replicas=1, global_batch=1,
                                           summary=results["ring"].summary))


def test_the_stored_phase_runs_carry_what_the_figure_reads():
    runs = [json.loads(line) for line in STORED.open()]
    assert runs and all(r["workers"] == 2 and len(r["apply_time_s"]) == len(r["apply_worker"]) for r in runs)
    fig = plot_ps_phases({str(i): (r["apply_time_s"], r["apply_worker"]) for i, r in enumerate(runs)})
    distance = fig.axes[0].lines[0].get_ydata()
    assert np.all((0 <= distance) & (distance <= 0.5))  # folded: 0 together, 0.5 half a cycle apart
