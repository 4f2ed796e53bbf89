"""KVSwitch server agent: serves the protocol in front of a backend store."""
