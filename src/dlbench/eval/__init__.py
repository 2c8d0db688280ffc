"""Quality metrics computed outside the frameworks, on numpy outputs or text, so that all three frameworks
are scored by the same code (top-1 for classification, HR@10/NDCG@10 for recommendation, COCO mAP for
detection, BLEU for translation, ...). No framework import here."""
