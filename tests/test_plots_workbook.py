"""The figures moved out of the notebooks: what a reader relies on (series, axes, positions), on real inputs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from distsim.datasets import mnist_subset
from distsim.engines import pipeline
from distsim.numerics import SoftmaxRegression, loss_scaling_lab, train_sync
from distsim.scenario import make_scenario
from distsim.validation import InputError
from distsim.views.plots import (plot_loss_lab, plot_microbatch_sweep, plot_mistake_by_replicas,
                                 plot_pipeline_schedules, plot_resumed_run)


@pytest.fixture(scope="module")
def lab():
    data = mnist_subset(512, 1)
    return loss_scaling_lab(SoftmaxRegression(l2=1e-3), data.x_train, data.y_train, num_replicas=4, global_batch=128,
                            learning_rate=0.1, steps=3, seed=0)


def test_loss_lab_has_one_bar_per_mistake_with_its_ratio(lab):
    fig = plot_loss_lab(lab)
    ax_ratio, ax_div, ax_loss = fig.axes
    widths = [p.get_width() for p in ax_ratio.patches]
    assert widths == pytest.approx([m.update_norm_ratio for m in lab.mistakes])
    assert len(ax_div.get_lines()) == len(lab.mistakes)
    # the correct run, plus every mistake whose update differs (the metric mistake trains correctly)
    assert len(ax_loss.get_lines()) == 1 + sum(m.name != "metric_mean_of_replicas" for m in lab.mistakes)


def test_mistake_by_replicas_draws_the_correct_run_once(lab):
    runs = {4: lab["mean_then_sum"], 8: lab["mean_then_sum"]}
    ax = plot_mistake_by_replicas(runs, global_batch=128).axes[0]
    assert [ln.get_label() for ln in ax.get_lines()] == ["correct (any number of replicas)",
                                                         "mean_then_sum, 4 replicas", "mean_then_sum, 8 replicas"]
    with pytest.raises(InputError, match="^runs="):
        plot_mistake_by_replicas({}, global_batch=128)


def test_resumed_run_sits_on_the_reference_steps():
    data = mnist_subset(256, 1)
    ref = train_sync(SoftmaxRegression(), data.x_train, data.y_train, num_replicas=2, global_batch=64, epochs=2,
                     seed=0).result
    ax = plot_resumed_run(ref, ref, resumed_from_step=4, failed_after_step=6).axes[0]
    line, dots = ax.get_lines()
    np.testing.assert_array_equal(dots.get_xdata(), 4 + ref.curve.step)   # shifted by the restored steps
    shaded = ax.patches[0]
    assert (shaded.get_x(), shaded.get_x() + shaded.get_width()) == (4.5, 6.5)   # steps 5..6 were lost
    with pytest.raises(InputError, match="^failed_after_step="):
        plot_resumed_run(ref, ref, resumed_from_step=4, failed_after_step=3)


@pytest.fixture(scope="module")
def base():
    v100 = make_scenario("v100", "mnist_mlp", "mirrored", devices_per_worker=4, intra_link="nvlink2").cluster
    model = pipeline.dense_model([256] * 5)
    return pipeline.config_for_hardware(model, (1, 1, 1, 1), 64, 8, v100.device, v100.intra_link)


def test_pipeline_schedules_share_one_time_axis(base):
    runs = {s: pipeline.simulate_pipeline(dataclasses.replace(base, schedule=s)) for s in ("naive", "gpipe")}
    fig = plot_pipeline_schedules(runs)
    assert len(fig.axes) == 2
    assert fig.axes[0].get_xlim() == fig.axes[1].get_xlim()


def test_microbatch_sweep_draws_the_closed_form_by_hand(base):
    ms = [1, 2, 8]
    runs = {"gpipe": [pipeline.simulate_pipeline(dataclasses.replace(base, num_microbatches=m)) for m in ms]}
    ax_bubble = plot_microbatch_sweep(ms, runs, num_stages=4).axes[0]
    closed = ax_bubble.get_lines()[0].get_ydata()
    np.testing.assert_allclose(closed, [3 / 4, 3 / 5, 3 / 11])   # (p-1)/(m+p-1), p = 4, by hand
    with pytest.raises(InputError, match=r"^runs\['gpipe'\]="):
        plot_microbatch_sweep([1, 2], runs, num_stages=4)
