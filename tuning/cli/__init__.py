"""One module per `mamba-tune` command (main.py dispatches); the only code that prints."""
