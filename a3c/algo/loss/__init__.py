"""loss: the actor-critic loss of a segment: advantage estimation (``returns``), the loss terms (``losses``)
and the segment's buffers and targets (``segment``)."""
