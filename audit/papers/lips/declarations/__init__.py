"""What the LIPS claims declare, apart from their code: one module per claim module of
``audit/papers/lips/``, of the same name, literals only (see :mod:`audit.papers`)."""
