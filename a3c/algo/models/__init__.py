"""models: the actor-critic networks (the MLP in torch and its numpy forward, the Atari conv net), action
distributions, the acting side of a model (``policy``) and the greedy graph that ``a3c export`` writes
(``export_graph``)."""
