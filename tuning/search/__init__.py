"""The search: the space, the gate, GatedASHA, the Optuna searcher, the ledger and the best configuration."""
