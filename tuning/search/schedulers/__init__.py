"""The stopping rules a sweep's `scheduler.kind` names, each a Ray Tune scheduler with the gate in front of it.

  gated.py      what every kind shares: the gate, the non-finite and invalid stops, and the rebuild of its state
                from the sweep's recorded curves when a Tune experiment starts or is restored
  asha.py       asha: Ray's AsyncHyperBandScheduler, one bracket
  hyperband.py  hyperband: the same with several brackets, a trial's bracket a hash of its id
  brackets.py   Hyperband's brackets as Ray lays them out, and a trial's chance of each, without Ray (eta.py too)
  median.py     median: Ray's MedianStoppingRule
  fifo.py       none: Ray's FIFOScheduler, every trial the gate lets through runs to max_epochs
tuning/search/scheduler.py's make_scheduler picks one.
"""
