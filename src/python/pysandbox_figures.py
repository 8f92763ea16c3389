"""pysandbox's matplotlib backend: plt.show() has no screen to go to, so it saves each open
figure as figure-N.png in the run's work directory (an artifact) and closes it; in a session it
hands each figure to the driver instead, which returns it with the cell's result. Everything else
is matplotlib's own Agg backend. MPLBACKEND=module://pysandbox_figures selects it; the work
directory comes from PYSANDBOX_WORK_DIR, set by pysandbox (plan.cpp).
"""
import os
import sys

from matplotlib._pylab_helpers import Gcf
from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas  # noqa: F401
from matplotlib.backends.backend_agg import FigureManager  # noqa: F401

# What matplotlib looks up in a backend module.
__all__ = ["FigureCanvas", "FigureManager", "show"]

_WORK = os.environ.get("PYSANDBOX_WORK_DIR") or os.getcwd()


def next_path() -> str:
    """The work directory's first free figure-N.png (the cell driver's, for a REPL, too)."""
    n = 1
    while os.path.exists(os.path.join(_WORK, "figure-%d.png" % n)):
        n += 1
    return os.path.join(_WORK, "figure-%d.png" % n)


def show(*args: object, **kwargs: object) -> None:
    driver = sys.modules.get("pysandbox_driver")
    for manager in Gcf.get_all_fig_managers():
        figure = manager.canvas.figure
        if driver is None or not driver.keep_figure(figure):
            figure.savefig(next_path())
    Gcf.destroy_all()
