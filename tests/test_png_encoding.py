"""distsim writes its figures' PNGs itself (rows unfiltered, zlib level 1): an independent decoder must read back
exactly the canvas's pixels."""

from __future__ import annotations

import io

import numpy as np
import PIL.Image
from matplotlib.backends.backend_agg import FigureCanvasAgg

from distsim.views.plots.style import OKABE_ITO, figure_png, new_figure


def test_pillow_decodes_the_canvas_pixels_exactly():
    fig, ax = new_figure(3.1, 2.3)  # odd pixel sizes at dpi 71: rows are not a multiple of any word
    ax.plot([0, 1, 2], [2, 0, 1], color=OKABE_ITO["vermillion"])
    ax.set_title("antialiased text and lines")
    png = figure_png(fig, dpi=71)
    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)
    image = PIL.Image.open(io.BytesIO(png))
    assert image.mode == "RGB" and image.size == canvas.get_width_height(physical=True)
    np.testing.assert_array_equal(np.asarray(image), np.asarray(canvas.buffer_rgba())[..., :3])
