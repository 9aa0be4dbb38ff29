"""Name rules shared by the readers and the decomposer."""

# record_function scopes named like a dispatcher op (``namespace::name``) that are not one:
# profiler bookkeeping and FSDP's scopes (``FSDP::pre_forward``, ``FSDP::all_gather``). Kineto
# records them as ``user_annotation``; Nsight's emit_nvtx gives them the same ``, op_id = …``
# suffix as a custom op, so only the namespace tells them apart there.
RECORD_FUNCTION_NAMESPACES = ("profiler::", "FSDP::")
