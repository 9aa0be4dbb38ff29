"""The words every human-readable output shares, at the bottom layer so that every layer
(the decomposer's ``repr`` included) says the same thing."""

NOT_MEASURED = "not measured"  # a value the trace cannot give: never shown as 0


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 trace``, ``2 traces``: the count and the word in the form the count needs."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"
