"""Step through a collective schedule: Play, step buttons and a slider."""

from __future__ import annotations

import ipywidgets as widgets

from distsim.mechanics.collectives import Schedule
from distsim.validation import Integer
from distsim.views.plots.schedule import ScheduleDrawing, holdings_colorbar
from distsim.views.plots.style import figure_png, freeze_layout, new_figure


class SchedulePlayer:
    """Step through a collective schedule with Play / step buttons and a
    slider. ``player.widget`` is what a notebook displays.

    Attributes:
        slider: the step shown, ``1..schedule.num_steps``.
        play: plays the steps in a loop (linked to the slider in the browser).
        image: the drawing of the current step.
    """

    def __init__(self, schedule: Schedule, interval_ms: int = 900, dpi: float = 100):
        self.dpi = dpi
        self.fig, ax = new_figure(7.2, 5.2)
        self.drawing = ScheduleDrawing(schedule, ax)
        holdings_colorbar(self.fig, ax, self.drawing)
        n = schedule.num_steps
        self.slider = widgets.IntSlider(value=1, min=1, max=n, description="step", continuous_update=True)
        self.play = widgets.Play(value=1, min=1, max=n, interval=interval_ms, description="play")
        widgets.jslink((self.play, "value"), (self.slider, "value"))
        self.image = widgets.Image(format="png")
        self.slider.observe(lambda change: self.show(change["new"]), names="value")
        freeze_layout(self.fig, lambda: self.drawing.show_step(0))
        self.show(1)
        self.widget = widgets.VBox([widgets.HBox([self.play, self.slider]), self.image])

    def show(self, step: int) -> None:
        """Draw step ``step`` (1-based, as on the slider)."""
        n = self.drawing.schedule.num_steps
        self.drawing.show_step(Integer(1, n, "1-based, as on the slider")("step", step) - 1)
        self.image.value = figure_png(self.fig, dpi=self.dpi)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
