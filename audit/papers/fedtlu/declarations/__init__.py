"""What the FedTLU claims declare, apart from their code: one module per claim module of
``audit/papers/fedtlu/``, of the same name, literals only (see :mod:`audit.papers`)."""
