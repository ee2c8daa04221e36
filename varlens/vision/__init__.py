"""varlens.vision: experiments on convolutional networks (seed 003 §5) that write PNGs.

* attacks:      FGSM and PGD adversarial examples, accuracy against epsilon (§5.4)
* degradation:  a deep plain CNN against the same depth with skips (§5.3.4, Figure 5.3.4)
* visualize:    first-layer filters, feature maps, the vertical-edge filter (§5.2.7,
                Example 5.2.3), 5x5 against two stacked 3x3 filters (Example 5.3.1)
* grid:         image grids

Run them from the shell with ``varlens cnn fgsm|degradation|filters|edge|params --out DIR`` (fgsm runs PGD too).
"""
from varlens.vision.attacks import accuracy_under_attack, fgsm, pgd  # noqa: F401
from varlens.vision.grid import save_image_grid  # noqa: F401
from varlens.vision.visualize import (apply_edge_filter, feature_maps, param_count_5x5_vs_3x3,  # noqa: F401
                                      save_feature_maps, save_filters, VERTICAL_EDGE)
