"""Sweeps and what-if projections (a layer at the report level).

* :mod:`.sweep`, :mod:`.sweep_table`, :mod:`.sweep_report`  profile a (batch × sequence
  length) grid, and mixed steps, into one sweep directory; its table, plots and HTML page
* :mod:`.transition`  the host-bound → device-bound transition point over the grid
* :mod:`.projections` CUDA-graph and faster-host-CPU projections from a measured mean step
* :mod:`.cudagraph`   the graph-replay measurement beside the projection (CUDA only)
* :mod:`.fit`, :mod:`.calibration`, :mod:`.batching`, :mod:`.advisor`  the batching-policy
  cost model (arXiv 2606.00516): fits, θ* solver, EB–MB crossover Δ(N), memory-safe N̂*
* :mod:`.api`         ``what_if(path, options)``, the function behind ``taxbreak whatif``
* :mod:`.svg`, :mod:`.render`  SVG line charts and plain-text renderings

May import ``taxbreak.trace``, ``readers``, ``decompose`` and ``capture``; nothing below imports it.
Formulas and sources: docs/whatif.md; the sweep directory and the transition rule: docs/sweep.md.
"""
from __future__ import annotations
