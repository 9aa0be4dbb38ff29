"""The words every human-readable output shares, at the bottom layer so that every layer
(the decomposer's ``repr`` included) says the same thing."""

NOT_MEASURED = "not measured"  # a value the trace cannot give: never shown as 0
