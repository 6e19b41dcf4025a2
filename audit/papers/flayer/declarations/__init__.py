"""What the FLAYER claims declare, apart from their code: one module per claim module of
``audit/papers/flayer/``, of the same name, literals only (see :mod:`audit.papers`)."""
