"""The search spaces shipped with mamba-tune: each YAML here goes in the wheel, and `--space NAME` (sweep, data check,
data import) and `mamba-tune space show NAME` find it by name (tuning/search/shipped_spaces.py). A space of your own
is any YAML file, given by its path."""
