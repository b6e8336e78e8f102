"""The broker core: registry facts, the question queue, grants, the sudo credential gate."""
