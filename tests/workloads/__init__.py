"""Workloads that exist only for the tests, registered from here (no edit of src/)."""
