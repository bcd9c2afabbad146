"""`mamba-tune data import`: users' own bars (CSV or Parquet of any layout) into the canonical Parquet every other
command reads. columns.py finds each field's column, source.py streams the columns needed, times.py turns the
timestamp column into instants and a zone, canonical.py validates and writes, with the import's provenance."""
