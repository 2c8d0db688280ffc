"""Hand-written loops that import nothing from dlbench, and the page that pairs them with the harness."""
