"""The presentation of each FLAYER claim, one module per claim module: what the report
shows, built from the evidence the claim's code returns."""
