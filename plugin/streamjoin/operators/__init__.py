"""Join operators: each computes one run's output change from its inputs' changes and state."""
