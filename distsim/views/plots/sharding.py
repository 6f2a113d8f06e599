"""How a global batch is cut into per-worker and per-replica batches."""

from __future__ import annotations

import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.collections import PatchCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from distsim.mechanics import sharding
from distsim.validation import InputError, Integer
from distsim.views.plots.style import IDLE_COLOR, new_figure

#: Most steps drawn; longer epochs show their first and last steps.
MAX_PANELS = 6
#: Cells per row up to which every cell carries its example index.
MAX_NUMBERED = 24


def _panel_steps(num_steps: int, steps) -> list[int]:
    if steps is not None:
        step = Integer(0, num_steps - 1, f"this epoch has {num_steps} steps")
        if isinstance(steps, (str, bytes)) or not np.iterable(steps) or not len(steps := list(steps)):
            raise InputError("steps", steps, f"a non-empty list of step numbers from 0 to {num_steps - 1}")
        return sorted({step(f"steps[{i}]", s) for i, s in enumerate(steps)})
    if num_steps <= MAX_PANELS:
        return list(range(num_steps))
    half = MAX_PANELS // 2
    return list(range(half)) + list(range(num_steps - half, num_steps))


def plot_sharding(
    num_examples: int,
    global_batch: int,
    num_workers: int = 1,
    replicas_per_worker: int = 1,
    drop_remainder: bool = False,
    policy: str = "DATA",
    num_files: int | None = None,
    steps=None,
) -> Figure:
    """Which example lands on which replica, step by step.

    One panel per step. In each panel the top row is what the input pipeline
    reads for that step across all workers, then each worker's share, then
    that worker's replicas. Every cell is one example, coloured by its index
    in the dataset (numbered when there is room); an empty replica batch is a
    dashed grey box. The split itself is :func:`distsim.mechanics.sharding.step_assignments`,
    the rule ``tf.distribute`` applies (arguments as there).

    Args:
        steps: step numbers to draw; default all when at most
            :data:`MAX_PANELS`, else the first and last three (where partial
            and empty batches appear).
    """
    assignment = sharding.step_assignments(
        num_examples, global_batch, num_workers, replicas_per_worker, drop_remainder, policy, num_files
    )
    if not assignment:
        raise InputError("global_batch", global_batch, f"at most num_examples={num_examples} with "
                         "drop_remainder=True (else no step is left to draw)")
    chosen = _panel_steps(len(assignment), steps)
    width = max(max(sum(len(a) for a in step) for step in assignment), 2)
    rows = 1 + num_workers * (1 + replicas_per_worker)
    fig, axes = new_figure(
        min(3.0 + 0.32 * width * len(chosen), 18.0), 1.2 + 0.3 * rows, ncols=len(chosen), squeeze=False
    )
    norm = Normalize(vmin=0, vmax=max(num_examples - 1, 1))
    gap = 0.05 if width <= MAX_NUMBERED else 0.0  # gaps between hundreds of cells only make moire
    any_empty = False
    cmap = "viridis"
    for panel, (ax, s) in enumerate(zip(axes[0], chosen)):
        replica_rows = assignment[s]
        worker_rows = [np.concatenate(replica_rows[w * replicas_per_worker:(w + 1) * replicas_per_worker])
                       for w in range(num_workers)]
        ordered = [("global batch (all workers)", np.concatenate(worker_rows))]
        for w in range(num_workers):
            ordered.append((f"worker {w}", worker_rows[w]))
            for r in range(replicas_per_worker):
                g = w * replicas_per_worker + r
                ordered.append((f"↳ replica {g} (w{w}/r{r})", replica_rows[g]))
        cells, values, empties = [], [], []
        for y, (_, idx) in enumerate(ordered):
            if len(idx) == 0:
                any_empty = True
                empties.append(Rectangle((0.05, y - 0.35), 1.9, 0.7))
                ax.text(1.0, y, "empty", ha="center", va="center", fontsize="x-small", color="0.3")
            for x, example in enumerate(idx):
                cells.append(Rectangle((x + gap, y - 0.4), 1 - 2 * gap, 0.8))
                values.append(example)
                if width <= MAX_NUMBERED:
                    ax.text(x + 0.5, y, str(example), ha="center", va="center", fontsize="x-small",
                            color="white" if norm(example) < 0.6 else "black")
        coll = PatchCollection(cells, cmap=cmap, norm=norm, linewidth=0)
        coll.set_array(np.asarray(values, dtype=float))
        ax.add_collection(coll)
        ax.add_collection(PatchCollection(empties, facecolor="none", edgecolor=IDLE_COLOR, linestyle="--",
                                          linewidth=1.2))
        ax.set_xlim(0, width)
        ax.set_ylim(len(ordered) - 0.5, -0.5)
        ax.set_yticks(range(len(ordered)), [name for name, _ in ordered] if panel == 0 else [],
                      fontsize="small")
        sizes = [len(a) for a in replica_rows]
        ax.set_title(f"step {s}: {sum(sizes)} examples\nper replica {sizes}", fontsize="small")
        ax.xaxis.get_major_locator().set_params(integer=True)
        for y in range(1, len(ordered)):
            if not ordered[y][0].startswith("↳"):
                ax.axhline(y - 0.5, color="0.6", linewidth=0.6)
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=axes[0, -1], label="example index in the dataset")
    fig.supxlabel("position in the batch (examples)", fontsize="medium")
    if any_empty:
        fig.legend(handles=[Patch(facecolor="none", edgecolor=IDLE_COLOR, linestyle="--", label="empty batch")],
                   loc="outside lower right", fontsize="small", frameon=False)
    fig.suptitle(f"{num_examples} examples, global batch {global_batch}, {num_workers} worker(s) × "
                 f"{replicas_per_worker} replica(s), policy {policy}"
                 + (", drop_remainder" if drop_remainder else ""), fontsize="medium")
    return fig
