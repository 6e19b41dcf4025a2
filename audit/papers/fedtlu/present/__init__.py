"""The presentation of each FedTLU claim, one module per claim module: what the report
shows, built from the evidence the claim's code returns."""
