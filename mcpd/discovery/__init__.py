"""Discovery: which tools matter to a query, ranked, within a token budget."""
