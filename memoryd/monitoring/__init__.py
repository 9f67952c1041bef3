"""What operators look at: batches, dead letters, the health panel, metric figures."""
