"""Synthetic traces: planted-component traces (``planted``) written as Kineto
JSON (``write_kineto``) or Nsight SQLite (``write_nsys``), and benchmark-sized
traces (``bigtrace``)."""
