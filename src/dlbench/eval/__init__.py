"""Quality metrics computed outside the frameworks, on numpy outputs, so that all three frameworks are
scored by the same code (one module per task family: classification.py top-1, ranking.py HR@10/NDCG@10,
...). No framework import here."""
