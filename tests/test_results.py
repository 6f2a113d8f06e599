"""distsim.results: the Result, Trace, Curve and Staleness records reject what
they cannot hold, in memory and in files, with the field path in the message."""

import numpy as np
import pytest
from input_errors import edited_json_file, raises_input

from distsim.results.result import RESULT_SCHEMA_VERSION, Curve, Result, Staleness, Summary
from distsim.results.trace import EVENT_KINDS, Event, Trace


def _trace(**change) -> Trace:
    columns = dict(devices=["gpu0", "gpu1"], labels=["", "forward"], device=np.array([0, 1], np.int32),
                   kind=np.array([1, 2], np.int8), start_s=np.array([0.0, 0.5]), end_s=np.array([1.0, 0.75]),
                   step=np.array([0, 0], np.int64), label=np.array([1, 0], np.int32))
    return Trace(**{**columns, **change})


def _result(**change) -> Result:
    fields = dict(source="measured", strategy="mirrored", num_replicas=2, global_batch=64,
                  summary=Summary(0.01, 6400.0), trace=_trace(),
                  curve=Curve(np.array([1, 2]), np.array([0.01, 0.02]), np.array([2.3, 2.1]), np.array([0.1, 0.2])),
                  staleness=Staleness(np.array([0, 1]), np.array([0, 1])), meta={"device": "cpu"})
    return Result(**{**fields, **change})


def test_a_full_result_round_trips_through_json(tmp_path):
    r = _result()
    back = Result.load(r.save(tmp_path / "r.json"))
    assert (back.source, back.num_replicas, back.summary, back.meta) == (r.source, 2, r.summary, r.meta)
    assert len(back.trace) == 2 and back.trace.labels == ["", "forward"]
    np.testing.assert_array_equal(back.curve.loss, r.curve.loss)
    np.testing.assert_array_equal(back.staleness.worker, r.staleness.worker)


@pytest.mark.parametrize(
    "change, path, value, allowed",
    [
        (dict(source="guessed"), "source", "'guessed'", "one of ('predicted', 'simulated', 'measured')"),
        (dict(strategy=None), "strategy", "None", "a string"),
        (dict(num_replicas=0), "num_replicas", "0", "an integer >= 1"),
        (dict(global_batch=64.0), "global_batch", "64.0", "an integer >= 1"),
        (dict(summary={"step_time_s": 0.01}), "summary", "{'step_time_s': 0.01}", "a Summary"),
        (dict(trace="trace.json"), "trace", "'trace.json'", "a Trace"),
        (dict(meta={1: "x"}), "meta", "{1: 'x'}", "an object with string keys"),
    ],
)
def test_result_fields_are_checked(change, path, value, allowed):
    with raises_input(f"Result.{path}", value, allowed):
        _result(**change)


def test_numpy_counts_are_stored_as_ints():
    r = _result(num_replicas=np.int64(4), global_batch=np.int32(256))
    assert type(r.num_replicas) is int and type(r.global_batch) is int


@pytest.mark.parametrize(
    "change, path, value, allowed, problem",
    [
        (dict(end_s=np.array([1.0])), "Trace.end_s", None, "one entry per entry of Trace.start_s (2)", "1 entries"),
        (dict(step=np.zeros((2, 1))), "Trace.step", "array([[0.], [0.]])", "a 1-D array", None),
        (dict(end_s=np.array([1.0, 0.25])), "Trace.end_s[1]", "0.25",
         ">= Trace.start_s[1]=np.float64(0.5) (an event ends after it starts)", None),
        (dict(device=np.array([0, 2], np.int32)), "Trace.device[1]", "2", "an index into Trace.devices (0..1)", None),
        (dict(kind=np.array([-1, 2], np.int8)), "Trace.kind[0]", "-1", "an index into EVENT_KINDS (0..4)", None),
        (dict(label=np.array([0, 5], np.int32)), "Trace.label[1]", "5", "an index into Trace.labels (0..1)", None),
    ],
)
def test_trace_columns_are_checked(change, path, value, allowed, problem):
    with raises_input(path, value, allowed, problem=problem):
        _trace(**change)


def test_trace_from_events_names_the_bad_event():
    good = Event("gpu0", "compute", 0.0, 1.0, 0)
    with raises_input("Event.kind", "'sleep'", f"one of {EVENT_KINDS}"):  # an Event checks itself
        Event("gpu0", "sleep", 1.0, 2.0, 0)
    with raises_input("events[1]", "'sleep'", "an Event"):
        Trace.from_events([good, "sleep"])


def test_curve_and_staleness_columns_have_one_length():
    with raises_input("Curve.accuracy", None, "one entry per entry of Curve.step (2)", problem="3 entries"):
        Curve(np.arange(2), np.zeros(2), np.zeros(2), np.zeros(3))
    with raises_input("Staleness.worker", None, "one entry per entry of Staleness.staleness (3)",
                      problem="2 entries"):
        Staleness(np.zeros(3, np.int64), np.zeros(2, np.int64))


@pytest.mark.parametrize(
    "edit, path, value, allowed",
    [
        (lambda d: d.update(schema_version=99), "schema_version", "99", f"{RESULT_SCHEMA_VERSION} (the result format"),
        (lambda d: d.pop("summary"), "summary", "None", "a value (this field is required)"),
        (lambda d: d.update(colour="red"), "colour", "'red'", "no such field here"),
        (lambda d: d.update(num_replicas="2"), "num_replicas", "'2'", "an integer >= 1"),
        (lambda d: d["summary"].update(step_s=1.0), "summary.step_s", "1.0", "no such field here"),
        (lambda d: d["trace"]["kind"].__setitem__(1, "nap"), "trace.kind[1]", "'nap'", f"one of {EVENT_KINDS}"),
        (lambda d: d["trace"].update(device=[0, "gpu1"]), "trace.device", "[0, 'gpu1']", "a list of integers"),
        (lambda d: d["trace"].update(label=[0, 7]), "trace.label[1]", "7", "an index into Trace.labels (0..1)"),
        (lambda d: d["trace"].pop("step"), "trace.step", "None", "a value (this field is required)"),
        (lambda d: d["curve"].update(loss=[2.3]), "curve.loss", None, "one entry per entry of Curve.step (2)"),
        (lambda d: d["curve"].update(step=[1.5, 2]), "curve.step", "[1.5, 2]", "a list of integers"),
        (lambda d: d["staleness"].update(worker=["a", "b"]), "staleness.worker", "['a', 'b']", "a list of integers"),
        (lambda d: d.update(meta=[1, 2]), "meta", "[1, 2]", "an object with string keys"),
        (lambda d: d.update(scenario={"schema_version": 1}), "scenario.cluster", "None", "a value (this field is"),
    ],
)
def test_a_broken_result_file_names_the_file_and_field(tmp_path, edit, path, value, allowed):
    file = edited_json_file(tmp_path, _result().to_dict(), edit)
    problem = "1 entries" if value is None else None
    with raises_input(f"{file}.{path}", value, allowed, problem=problem):
        Result.load(file)
