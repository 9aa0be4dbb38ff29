"""The words every human-readable output shares."""

NOT_MEASURED = "not measured"  # a value the trace cannot give: never shown as 0
