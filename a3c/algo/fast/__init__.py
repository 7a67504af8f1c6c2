"""fast: the numpy closed-form gradient of the default MLP path: the loss of a segment and its exact
gradient (``mlp_grad``), through the policy terms' derivative (``policy_grad``). Tested against autograd."""
