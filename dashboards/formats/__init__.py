"""A comparison (or one run's report) written for people and machines: one module per format."""
