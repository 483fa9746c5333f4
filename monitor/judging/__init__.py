"""Running the LLM judges (SCORING.md §4) against Anthropic's API: the adapter around the pure judges of
:mod:`monitor.scoring.judges`."""
