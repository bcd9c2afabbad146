"""The cluster: doctor, node probe, the nodes its autoscaler may launch, the shared-storage check."""
