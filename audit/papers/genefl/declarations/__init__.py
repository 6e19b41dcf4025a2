"""What the GENE-FL claims declare, apart from their code: one module per claim module of
``audit/papers/genefl/``, of the same name, literals only (see :mod:`audit.papers`)."""
