"""End-to-end smoke: the hand-written two-layer example trains."""
from varlens.examples import two_layer


def test_two_layer_loss_falls():
    losses = two_layer.main(steps=200, verbose=False)
    assert losses[-1] < 0.5 * losses[0]
