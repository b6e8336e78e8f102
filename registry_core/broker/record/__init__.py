"""The audit log: one record per decision, and the file it goes to."""
