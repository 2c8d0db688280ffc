"""Quality metrics computed outside the frameworks, on numpy outputs or text, so that all three
frameworks are scored by the same code."""
