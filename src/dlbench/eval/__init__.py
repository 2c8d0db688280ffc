"""Quality metrics computed outside the frameworks, on numpy outputs, so all three are scored by the
same code (one module per task family: classification, detection, translation, ranking)."""
