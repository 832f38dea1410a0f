"""Learning algorithms: pure update functions over a batch."""
