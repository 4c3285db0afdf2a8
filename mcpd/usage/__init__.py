"""Usage: durable call records, the ranking prior learned from them, capability requests, the report."""
