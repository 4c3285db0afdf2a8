"""The aggregated catalogue of every live server's tools, under qualified names."""
