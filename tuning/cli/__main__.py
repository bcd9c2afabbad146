"""`python -m tuning.cli ...`: the same as `mamba-tune ...`."""

from tuning.cli.main import main

raise SystemExit(main())
