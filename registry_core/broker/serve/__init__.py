"""The broker's socket server: listening, flood limits, one connection's requests."""
