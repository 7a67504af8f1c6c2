"""learner: one worker's A3C loop: ``Learner`` (pull → roll out → gradient → shared step), the autograd
side of an update (``torch_update``), rollouts (``rollout``), greedy play (``greedy_play``) and learning-rate
schedules (``schedule``)."""
