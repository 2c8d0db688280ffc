"""Quality metrics computed outside the frameworks, on numpy outputs, so that all three frameworks are
scored by the same code (HR@10/NDCG@10 for recommendation, COCO mAP for detection, ...). No framework
import here."""
